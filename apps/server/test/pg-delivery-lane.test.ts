/**
 * The webhooks lane on PostgreSQL, whose deliveries' rows are its queue (src/queue/pg-delivery-lane.ts, migration
 * 0009), on a real database: what the store-conformance suite does not reach through the JobQueue port — a claim's
 * lease on the claims' clock and what a lapsed one lets happen, the bound on claims that die before recording an
 * attempt, a release not counted against it, a redelivery taking over a claim, the wake-up sent at commit, and the
 * migration from a database whose deliveries had pg-boss jobs.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JOBS_CHANNEL, type PgBossQueue } from '../src/queue/pg-boss-queue.js';
import { PgDeliveryLane } from '../src/queue/pg-delivery-lane.js';
import type { Backend } from '../src/store/open.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import type { NewTask, StoredResponse } from '../src/store/store.js';
import { newTask } from './support.js';
import { backendKinds, type OpenedBackend } from './support/backends.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const later = (ms: number) => new Date(now.getTime() + ms);
const LEASE_MS = 1_000;
/** Claims in a row without an attempt recorded before a delivery fails (the service's default is 20). */
const MAX_CLAIMS = 3;
const respond = (task: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { requestId: task.id, creditsCharged: task.creditsCharged } });
const postgres = backendKinds.find((kind) => kind.name === 'PostgreSQL')!;

describe.skipIf(postgres.skip)('the webhooks lane on PostgreSQL: the deliveries are the queue', () => {
  let opened: OpenedBackend;
  let backend: Backend;
  let lane: PgDeliveryLane;
  const store = () => backend.store as PgStore;
  beforeAll(async () => {
    opened = await postgres.open({ leaseMs: LEASE_MS });
  });
  afterAll(async () => opened?.done());
  beforeEach(async () => {
    backend = await opened.fresh();
    lane = new PgDeliveryLane((text, values) => store().pool.query(text, values) as never, MAX_CLAIMS);
    await store().createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: 1_000, now });
  });

  /** A task with a webhook, cancelled at `at`: its delivery is written pending, due at `at`. */
  const delivered = async (at = now) => {
    const task: NewTask = newTask('acc_1', 10, at, { webhookUrl: 'https://hooks.example.com/v' });
    const outcome = await store().submitTask({ job: { maxAttempts: 3, provider: 'local' }, task, idempotency: null, now: at, respond });
    if (outcome.kind !== 'created') throw new Error(outcome.kind);
    await store().cancelTask({ accountId: 'acc_1', id: outcome.task.id, now: at });
    return (await store().getDeliveryForTask(outcome.task.id))!;
  };
  const claim = (at: Date, limit = 10) => lane.claim({ now: at, leaseMs: LEASE_MS, limit });
  const row = async (id: string) =>
    (await store().pool.query('SELECT status, lease_id, lease_until, unrecorded_claims, next_attempt_at FROM webhook_deliveries WHERE id = $1', [id])).rows[0];
  const attempt = (deliveryId: string, at: Date, statusCode: number, redeliveries = 0) =>
    store().recordDeliveryAttempt({ deliveryId, redeliveries, attempt: { attemptedAt: at, statusCode, error: null, durationMs: 1 }, status: 'pending', nextAttemptAt: later(60_000) });

  it('hands a due delivery to one claim, leased on the claims’ clock; due ones oldest first, not ones due later', async () => {
    const first = await delivered(later(1));
    const second = await delivered(later(2));
    const notYet = await delivered(later(10_000));
    const jobs = await claim(later(5));
    expect(jobs).toEqual([
      { id: `webhooks/${first.id}/1`, taskId: first.taskId, kind: 'deliver', provider: 'webhooks', attempts: 1, maxAttempts: MAX_CLAIMS },
      { id: `webhooks/${second.id}/1`, taskId: second.taskId, kind: 'deliver', provider: 'webhooks', attempts: 1, maxAttempts: MAX_CLAIMS },
    ]);
    expect(await row(first.id)).toMatchObject({ lease_id: 1, lease_until: later(5 + LEASE_MS), unrecorded_claims: 1 });
    expect(await claim(later(5))).toEqual([]);
    expect(await row(notYet.id)).toMatchObject({ lease_id: 0, lease_until: null });
  });

  it('claims a delivery again once its lease has run out, and the lapsed claim then completes, retries, releases and extends nothing', async () => {
    const { id, taskId } = await delivered();
    const [stale] = await claim(later(1));
    expect(await lane.extendLease({ jobId: stale!.id, now: later(900), leaseMs: LEASE_MS })).toBe(true);
    // Extended to 1,900: nobody else gets it before then.
    expect(await claim(later(1_899))).toEqual([]);
    const [holder] = await claim(later(1_900));
    expect(holder).toMatchObject({ id: `webhooks/${id}/2`, taskId, attempts: 2 });
    await lane.complete(stale!.id);
    await lane.retry({ jobId: stale!.id, runAt: later(2_000) });
    await lane.release({ jobId: stale!.id, now: later(2_000) });
    await lane.bury({ jobId: stale!.id, now: later(2_000) });
    expect(await lane.extendLease({ jobId: stale!.id, now: later(2_000), leaseMs: LEASE_MS })).toBe(false);
    expect(await row(id)).toMatchObject({ status: 'pending', lease_id: 2, lease_until: later(1_900 + LEASE_MS), unrecorded_claims: 2 });
    // The holder's retry ends its lease and makes the delivery due at the time asked.
    await lane.retry({ jobId: holder!.id, runAt: later(5_000) });
    expect(await row(id)).toMatchObject({ lease_until: null, next_attempt_at: later(5_000) });
    expect(await claim(later(4_999))).toEqual([]);
    expect(await claim(later(5_000))).toHaveLength(1);
  });

  it(`fails a delivery claimed ${MAX_CLAIMS} times in a row without an attempt recorded (its workers died), and counts again from an attempt`, async () => {
    const { id } = await delivered();
    let at = 0;
    const lapse = async () => {
      at += 2 * LEASE_MS;
      return claim(later(at));
    };
    expect(await lapse()).toHaveLength(1);
    expect(await lapse()).toHaveLength(1);
    // A recorded attempt shows its worker lived through it: the count starts again.
    await attempt(id, later(at), 500);
    expect(await row(id)).toMatchObject({ unrecorded_claims: 0 });
    await store().pool.query('UPDATE webhook_deliveries SET next_attempt_at = $2 WHERE id = $1', [id, later(at)]);
    for (let i = 0; i < MAX_CLAIMS; i++) expect(await lapse()).toHaveLength(1);
    expect(await lapse()).toEqual([]);
    expect(await row(id)).toMatchObject({ status: 'failed', lease_until: null, next_attempt_at: null });
    expect(await store().getDeliveryForTask((await store().getDelivery(id))!.taskId)).toMatchObject({ status: 'failed', attempts: 1 });
    expect(await lane.countJobs()).toEqual({ available: 0, leased: 0, done: 1 });
  });

  it('does not count a released claim against that bound, and makes the delivery due when the release asks', async () => {
    const { id } = await delivered();
    for (let i = 0; i < MAX_CLAIMS + 2; i++) {
      const [job] = await claim(later(10 * i));
      expect(job).toBeDefined();
      await lane.release({ jobId: job!.id, now: later(10 * i), runAt: later(10 * i + 5) });
    }
    expect(await row(id)).toMatchObject({ status: 'pending', lease_until: null, unrecorded_claims: 0, next_attempt_at: later(10 * (MAX_CLAIMS + 1) + 5) });
  });

  it('lets a redelivery take the delivery from a claim under way: due at once, the claim completing nothing', async () => {
    const { id } = await delivered();
    const [running] = await claim(later(1));
    expect(await store().redeliver({ deliveryId: id, now: later(2) })).toMatchObject({ status: 'pending', redeliveries: 1, nextAttemptAt: later(2) });
    expect(await row(id)).toMatchObject({ lease_id: 2, lease_until: null, unrecorded_claims: 0 });
    await lane.complete(running!.id);
    expect(await lane.extendLease({ jobId: running!.id, now: later(3), leaseMs: LEASE_MS })).toBe(false);
    const [next] = await claim(later(3));
    expect(next).toMatchObject({ id: `webhooks/${id}/3` });
  });

  it('wakes every listening process at the commit that writes a delivery, and at a redelivery', async () => {
    const listener = new pg.Client({ connectionString: (store().pool as unknown as { options: { connectionString: string } }).options.connectionString });
    await listener.connect();
    try {
      const notices: string[] = [];
      listener.on('notification', (message) => message.channel === JOBS_CHANNEL && notices.push(message.payload ?? ''));
      await listener.query(`LISTEN ${JOBS_CHANNEL}`);
      const { id } = await delivered();
      // The submission's generation job announced its lane too.
      await expect.poll(() => notices).toContain('webhooks');
      const before = notices.filter((notice) => notice === 'webhooks').length;
      await store().redeliver({ deliveryId: id, now: later(1) });
      await expect.poll(() => notices.filter((notice) => notice === 'webhooks').length).toBe(before + 1);
    } finally {
      await listener.end();
    }
  });

  it("cancels the previous release's waiting delivery jobs when it migrates a database to the deliveries as queue entries", async () => {
    const { boss } = backend.queue as PgBossQueue;
    // A database as the release before migration 0009 left it: a pg-boss queue for the webhooks lane, a job waiting in it.
    await boss.createQueue('vidgen-webhooks', { name: 'vidgen-webhooks', policy: 'standard' });
    const waiting = await boss.send('vidgen-webhooks', { taskId: 'gen_old', kind: 'deliver', maxAttempts: 20, attempt: 1 });
    await store().pool.query(`DROP INDEX webhook_deliveries_due;
      ALTER TABLE webhook_deliveries DROP COLUMN lease_id, DROP COLUMN lease_until, DROP COLUMN unrecorded_claims;
      DELETE FROM schema_migrations WHERE version = 9`);
    try {
      await store().migrate();
      expect((await store().pool.query('SELECT state FROM pgboss.job WHERE id = $1', [waiting])).rows).toEqual([{ state: 'cancelled' }]);
      const { id } = await delivered();
      expect(await claim(later(1))).toMatchObject([{ id: `webhooks/${id}/1` }]);
    } finally {
      await store().pool.query(`DELETE FROM pgboss.job WHERE name = 'vidgen-webhooks'`);
      await boss.deleteQueue('vidgen-webhooks');
    }
  });
});
