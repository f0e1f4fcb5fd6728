/**
 * The webhooks lane on PostgreSQL: the delivery rows are the queue (migration 0009). A task's ending writes its
 * delivery, pending and due at once, and wakes the workers at commit; a worker claims due deliveries with a lease,
 * extends it while it attempts, and the attempt's record settles the delivery or schedules the next attempt on the
 * row. A worker that dies stops extending, and the delivery is claimed again once the lease has run out. Each used
 * to have a pg-boss job beside it: a second row inserted, fetched and completed for every task with a webhook, the
 * largest single cost left on the PostgreSQL pipeline (BENCHMARKS.md, ninth and tenth passes).
 *
 * A claim is `webhooks/<delivery id>/<lease_id>` (the shape of pg-boss's job ids in PgBossQueue): every claim and
 * every redelivery counts lease_id up, so a run whose claim is no longer the row's completes, retries, releases
 * and extends nothing. Times are the app's clock, as the deliveries' next_attempt_at (and the upstream tasks'
 * leases) are.
 */
import { WEBHOOKS_LANE, type Job } from './queue.js';
import { kept } from '../store/postgres/kept-plans.js';

const CLAIM = kept(`
  WITH picked AS (
    SELECT id FROM webhook_deliveries
    WHERE status = 'pending' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)
    ORDER BY next_attempt_at LIMIT $3
    FOR UPDATE SKIP LOCKED),
  claimed AS (
    UPDATE webhook_deliveries d SET lease_id = d.lease_id + 1, unrecorded_claims = d.unrecorded_claims + 1,
           -- Claimed as often as allowed without an attempt recorded (its workers died each time): failed, not claimed for ever.
           status = CASE WHEN d.unrecorded_claims >= $4 THEN 'failed' ELSE d.status END,
           next_attempt_at = CASE WHEN d.unrecorded_claims >= $4 THEN NULL ELSE d.next_attempt_at END,
           lease_until = CASE WHEN d.unrecorded_claims >= $4 THEN NULL ELSE $2::timestamptz END,
           updated_at = CASE WHEN d.unrecorded_claims >= $4 THEN $1 ELSE d.updated_at END
    FROM picked WHERE d.id = picked.id
    RETURNING d.id, d.task_id, d.lease_id, d.attempts, d.unrecorded_claims, d.status, d.next_attempt_at)
  SELECT id, task_id, lease_id, attempts, unrecorded_claims, status FROM claimed ORDER BY next_attempt_at NULLS LAST, id`);
/** The claim still holds the row: its lease_id, and a lease not ended (completed, retried, released). */
const HELD = 'id = $1 AND lease_id = $2 AND lease_until IS NOT NULL';
const EXTEND = kept(`UPDATE webhook_deliveries SET lease_until = $3 WHERE ${HELD}`);
/** Ends the claim's lease (an attempt's record by the claim ends it itself: the store's recordClaimedAttempt). */
const COMPLETE = `UPDATE webhook_deliveries SET lease_until = NULL WHERE ${HELD}`;
const RETRY = `UPDATE webhook_deliveries SET lease_until = NULL, next_attempt_at = $3 WHERE ${HELD} AND status = 'pending'`;
/** Not counted as a claim: the crash bound counts claims that ended without an attempt recorded. */
const RELEASE = `UPDATE webhook_deliveries SET lease_until = NULL, unrecorded_claims = greatest(unrecorded_claims - 1, 0),
                                               next_attempt_at = CASE WHEN status = 'pending' THEN $3 ELSE next_attempt_at END
                 WHERE ${HELD}`;
const BURY = `UPDATE webhook_deliveries SET lease_until = NULL, status = 'failed', next_attempt_at = NULL, updated_at = $3 WHERE ${HELD} AND status = 'pending'`;
const COUNT = `SELECT count(*) FILTER (WHERE status = 'pending' AND (lease_until IS NULL OR lease_until <= now()))::int AS available,
                      count(*) FILTER (WHERE status = 'pending' AND lease_until > now())::int AS leased,
                      count(*) FILTER (WHERE status <> 'pending')::int AS done
               FROM webhook_deliveries`;

/** Runs one statement on its own (autocommit), its plan kept when marked. */
type Run = (text: string, values: unknown[]) => Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;

export const isDeliveryClaim = (jobId: string) => jobId.startsWith(`${WEBHOOKS_LANE}/`);
/** A claim's job id: the delivery and the lease_id the claim gave it. */
export const deliveryClaim = (deliveryId: string, leaseId: number) => `${WEBHOOKS_LANE}/${deliveryId}/${leaseId}`;

export function parseDeliveryClaim(jobId: string): { deliveryId: string; leaseId: number } {
  const [, deliveryId = '', leaseId = '-1'] = jobId.split('/');
  return { deliveryId, leaseId: Number(leaseId) };
}

export class PgDeliveryLane {
  constructor(
    private readonly run: Run,
    /** Claims a delivery may have in a row without an attempt recorded before it fails. */
    private readonly maxUnrecordedClaims: number,
  ) {}

  async claim(input: { now: Date; leaseMs: number; limit: number }): Promise<Job[]> {
    const { rows } = await this.run(CLAIM, [input.now, new Date(input.now.getTime() + input.leaseMs), input.limit, this.maxUnrecordedClaims]);
    return rows
      .filter((row) => row.status === 'pending')
      .map((row) => ({
        id: deliveryClaim(row.id as string, row.lease_id as number),
        taskId: row.task_id as string,
        kind: 'deliver' as const,
        provider: WEBHOOKS_LANE,
        // This claim's number in the delivery's chain: the attempts recorded, and the claims since (this one included).
        attempts: (row.attempts as number) + (row.unrecorded_claims as number),
        maxAttempts: this.maxUnrecordedClaims,
      }));
  }

  async extendLease(input: { jobId: string; now: Date; leaseMs: number }): Promise<boolean> {
    const { deliveryId, leaseId } = parseDeliveryClaim(input.jobId);
    const { rowCount } = await this.run(EXTEND, [deliveryId, leaseId, new Date(input.now.getTime() + input.leaseMs)]);
    return rowCount === 1;
  }

  async complete(jobId: string): Promise<void> {
    const { deliveryId, leaseId } = parseDeliveryClaim(jobId);
    await this.run(COMPLETE, [deliveryId, leaseId]);
  }

  async retry(input: { jobId: string; runAt: Date }): Promise<void> {
    const { deliveryId, leaseId } = parseDeliveryClaim(input.jobId);
    await this.run(RETRY, [deliveryId, leaseId, input.runAt]);
  }

  async release(input: { jobId: string; now: Date; runAt?: Date }): Promise<void> {
    const { deliveryId, leaseId } = parseDeliveryClaim(input.jobId);
    await this.run(RELEASE, [deliveryId, leaseId, input.runAt ?? input.now]);
  }

  async bury(input: { jobId: string; now: Date }): Promise<void> {
    const { deliveryId, leaseId } = parseDeliveryClaim(input.jobId);
    await this.run(BURY, [deliveryId, leaseId, input.now]);
  }

  async countJobs(): Promise<{ available: number; leased: number; done: number }> {
    const [row] = (await this.run(COUNT, [])).rows;
    return { available: row!.available as number, leased: row!.leased as number, done: row!.done as number };
  }
}
