/**
 * The generation jobs on PostgreSQL: a task's row is its own job's queue entry (migration 0011). The submission writes
 * the task with its job waiting in its provider's lane (`job_lane`, `job_state` 'waiting', due at `job_run_at`) and
 * wakes the workers at commit; a worker claims due tasks of its lane with a lease (`job_lease_until`, on the app's
 * clock) — and, asked to, starts each claimed task in the same statement, as Store.startTask would — extends the lease
 * while it works, and a task's move to a terminal status ends its job with it (the claims' index
 * holds only active tasks), so a completion writes nothing for its job. A worker that dies stops extending, and the
 * task is claimed again once the lease has run out. Each task used to have a pg-boss job beside it: a second row
 * inserted, fetched and completed for every task (BENCHMARKS.md, twelfth pass), as its webhook delivery had had
 * (pg-delivery-lane.ts).
 *
 * A claim is `task/<task id>/<job_lease_id>`: every claim counts job_lease_id up, so a run whose claim is no longer
 * the row's (its lease ran out and another claim took it) completes, retries, releases, buries and extends nothing.
 * `job_claims` counts the claims (attempts), a release not counted.
 */
import type { Job } from './queue.js';
import { kept } from '../store/postgres/kept-plans.js';
import { STARTED_COLUMNS, toStartedTask } from '../store/postgres/pg-store.js';

const ACTIVE = `status IN ('queued', 'processing')`;

/**
 * A claim of lane $3's due tasks at $1, at most $4, oldest first, each leased until $2 (SKIP LOCKED: a task another claim
 * is taking is left to it), setting `also` besides and answering `returning` with the job's columns.
 */
const claimStatement = (also: string, returning: string) =>
  kept(`
  WITH picked AS (
    SELECT id AS picked_id FROM tasks
    WHERE job_lane = $3 AND job_state = 'waiting' AND ${ACTIVE} AND job_run_at <= $1 AND (job_lease_until IS NULL OR job_lease_until <= $1)
    ORDER BY job_run_at LIMIT $4
    FOR NO KEY UPDATE SKIP LOCKED)
  UPDATE tasks SET job_lease_id = job_lease_id + 1, job_claims = job_claims + 1, job_lease_until = $2${also}
  FROM picked WHERE tasks.id = picked.picked_id
  RETURNING ${returning}, job_lease_id, job_claims, job_max_attempts, job_run_at`);
const CLAIM = claimStatement('', 'id');
/**
 * CLAIM that also starts each task it claims, as Store.startTask would (queued or processing → processing, updated_at the
 * claim's now): the start's own round trip and row version saved; the status trigger announces the move as the start's
 * did. Answers each task as the start answers it, with its job's columns.
 */
const CLAIM_AND_START = claimStatement(`, status = 'processing', updated_at = $1`, STARTED_COLUMNS);
/** The claim still holds the task's job: its lease_id, a lease not ended, the job waiting, the task active. */
const HELD = `id = $1 AND job_lease_id = $2 AND job_lease_until IS NOT NULL AND job_state = 'waiting' AND ${ACTIVE}`;
const EXTEND = kept(`UPDATE tasks SET job_lease_until = $3 WHERE ${HELD}`);
/** Nothing to write for a task that has ended (the usual case: its move ended the job): HELD finds no row. */
const COMPLETE = `UPDATE tasks SET job_state = 'done', job_lease_until = NULL WHERE ${HELD}`;
const RETRY = `UPDATE tasks SET job_lease_until = NULL, job_run_at = $3 WHERE ${HELD}`;
/** Not counted as an attempt. */
const RELEASE = `UPDATE tasks SET job_lease_until = NULL, job_run_at = $3, job_claims = greatest(job_claims - 1, 0) WHERE ${HELD}`;
const BURY = `UPDATE tasks SET job_state = 'dead', job_lease_until = NULL WHERE ${HELD}`;
const COUNT = `SELECT count(*) FILTER (WHERE job_state = 'waiting' AND ${ACTIVE} AND (job_lease_until IS NULL OR job_lease_until <= now()))::int AS available,
                      count(*) FILTER (WHERE job_state = 'waiting' AND ${ACTIVE} AND job_lease_until > now())::int AS leased,
                      count(*) FILTER (WHERE job_state = 'done' OR (job_state = 'waiting' AND NOT ${ACTIVE}))::int AS done,
                      count(*) FILTER (WHERE job_state = 'dead')::int AS dead
               FROM tasks WHERE job_state IS NOT NULL`;

/** Runs one statement on its own (autocommit), its plan kept when marked. */
type Run = (text: string, values: unknown[]) => Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;

const PREFIX = 'task/';
export const isTaskClaim = (jobId: string) => jobId.startsWith(PREFIX);
/** A claim's job id: the task and the job_lease_id the claim gave it. */
export const taskClaim = (taskId: string, leaseId: number) => `${PREFIX}${taskId}/${leaseId}`;

export function parseTaskClaim(jobId: string): { taskId: string; leaseId: number } {
  const [, taskId = '', leaseId = '-1'] = jobId.split('/');
  return { taskId, leaseId: Number(leaseId) };
}

export class PgGenerationLane {
  constructor(private readonly run: Run) {}

  /** `start`: each claimed task started by the claim itself (Job.started). */
  async claim(input: { now: Date; leaseMs: number; provider: string; limit: number; start?: boolean }): Promise<Job[]> {
    const { rows } = await this.run(input.start ? CLAIM_AND_START : CLAIM, [input.now, new Date(input.now.getTime() + input.leaseMs), input.provider, input.limit]);
    // Oldest first, as they were due.
    rows.sort((a, b) => (a.job_run_at as Date).getTime() - (b.job_run_at as Date).getTime());
    return rows.map((row) => ({
      id: taskClaim(row.id as string, row.job_lease_id as number),
      taskId: row.id as string,
      kind: 'generate' as const,
      provider: input.provider,
      attempts: row.job_claims as number,
      maxAttempts: row.job_max_attempts as number,
      ...(input.start ? { started: toStartedTask(row) } : {}),
    }));
  }

  async extendLease(input: { jobId: string; now: Date; leaseMs: number }): Promise<boolean> {
    const { taskId, leaseId } = parseTaskClaim(input.jobId);
    const { rowCount } = await this.run(EXTEND, [taskId, leaseId, new Date(input.now.getTime() + input.leaseMs)]);
    return rowCount === 1;
  }

  async complete(jobId: string): Promise<void> {
    const { taskId, leaseId } = parseTaskClaim(jobId);
    await this.run(COMPLETE, [taskId, leaseId]);
  }

  async retry(input: { jobId: string; runAt: Date }): Promise<void> {
    const { taskId, leaseId } = parseTaskClaim(input.jobId);
    await this.run(RETRY, [taskId, leaseId, input.runAt]);
  }

  async release(input: { jobId: string; now: Date; runAt?: Date }): Promise<void> {
    const { taskId, leaseId } = parseTaskClaim(input.jobId);
    await this.run(RELEASE, [taskId, leaseId, input.runAt ?? input.now]);
  }

  async bury(input: { jobId: string }): Promise<void> {
    const { taskId, leaseId } = parseTaskClaim(input.jobId);
    await this.run(BURY, [taskId, leaseId]);
  }

  async countJobs(): Promise<{ available: number; leased: number; done: number; dead: number }> {
    const [row] = (await this.run(COUNT, [])).rows;
    return { available: row!.available as number, leased: row!.leased as number, done: row!.done as number, dead: row!.dead as number };
  }
}
