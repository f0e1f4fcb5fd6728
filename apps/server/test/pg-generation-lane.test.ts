/**
 * The generation jobs on PostgreSQL, each its task row's (src/queue/pg-generation-lane.ts, migration 0011), on a real
 * database: what the store-conformance suite does not reach through the JobQueue port — which tasks a claim takes and
 * in what order, a retry due later, a release not counted as an attempt, a buried job, the wake-up sent at commit,
 * a previous release's jobs still in pg-boss (run, looked for at most once a second), and the migration from a
 * database whose tasks had pg-boss jobs.
 */
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { JOBS_CHANNEL, type PgBossQueue } from '../src/queue/pg-boss-queue.js';
import type { Job } from '../src/queue/queue.js';
import type { Backend } from '../src/store/open.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import type { StoredResponse } from '../src/store/store.js';
import { newTask } from './support.js';
import { backendKinds, type OpenedBackend } from './support/backends.js';

const LEASE_MS = 1_000;
const respond = (task: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { requestId: task.id, creditsCharged: task.creditsCharged } });
const postgres = backendKinds.find((kind) => kind.name === 'PostgreSQL')!;

describe.skipIf(postgres.skip)('the generation jobs on PostgreSQL: each is its task row', () => {
  let opened: OpenedBackend;
  let backend: Backend;
  const store = () => backend.store as PgStore;
  const queue = () => backend.queue as PgBossQueue;
  // The claims' clock on the real one's scale: countJobs tells leased from available by the database's now().
  const t0 = Date.now();
  const at = (ms: number) => new Date(t0 + ms);
  beforeAll(async () => {
    opened = await postgres.open({ leaseMs: LEASE_MS });
  });
  afterAll(async () => opened?.done());
  beforeEach(async () => {
    backend = await opened.fresh();
    await store().createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: 1_000, now: at(0) });
  });

  const submit = async (when: Date, provider = 'local') => {
    const outcome = await store().submitTask({ job: { maxAttempts: 3, provider }, task: newTask('acc_1', 10, when), idempotency: null, now: when, respond });
    if (outcome.kind !== 'created') throw new Error(outcome.kind);
    return outcome.task.id;
  };
  /** The latest claims' instant so far (the queue looks in pg-boss at most once a second of it, across the tests: one queue). */
  let lastClaim = 0;
  const claim = (when: Date, provider = 'local', limit = 10, leaseMs = LEASE_MS): Promise<Job[]> => {
    lastClaim = Math.max(lastClaim, when.getTime());
    return queue().claim({ workerId: 'worker_test', now: when, leaseMs, provider, limit });
  };
  const row = async (id: string) =>
    (await store().pool.query('SELECT job_lane, job_state, job_run_at, job_lease_until, job_lease_id, job_claims, job_max_attempts FROM tasks WHERE id = $1', [id]))
      .rows[0];

  it("claims its lane's due tasks oldest first, leased on the claims' clock: not another lane's, not an ended one's, not a claimed one's", async () => {
    const first = await submit(at(1));
    const second = await submit(at(2));
    const instant = await submit(at(3), 'instant');
    const cancelled = await submit(at(4));
    await store().cancelTask({ accountId: 'acc_1', id: cancelled, now: at(5) });
    expect(await row(first)).toEqual({ job_lane: 'local', job_state: 'waiting', job_run_at: at(1), job_lease_until: null, job_lease_id: 0, job_claims: 0, job_max_attempts: 3 });

    // Leased for an hour: countJobs below tells leased from available by the database's now(), which a slow host's
    // set-up (the database opened, a fresh schema) may carry past a lease of LEASE_MS from t0.
    const HOUR = 3_600_000;
    const jobs = await claim(at(10), 'local', 10, HOUR);
    expect(jobs).toEqual([
      { id: `task/${first}/1`, taskId: first, kind: 'generate', provider: 'local', attempts: 1, maxAttempts: 3 },
      { id: `task/${second}/1`, taskId: second, kind: 'generate', provider: 'local', attempts: 1, maxAttempts: 3 },
    ]);
    expect(await row(first)).toMatchObject({ job_lease_until: at(10 + HOUR), job_lease_id: 1, job_claims: 1 });
    expect(await claim(at(20))).toEqual([]);
    expect(await claim(at(30), 'instant', 1, HOUR)).toMatchObject([{ taskId: instant, provider: 'instant' }]);
    expect(await queue().countJobs()).toEqual({ available: 0, leased: 3, done: 1, dead: 0 });
  });

  it('starts what it claims when asked, answering each task as a start answers it; a task claimed again is started again', async () => {
    const starting = (when: Date) => {
      lastClaim = Math.max(lastClaim, when.getTime());
      return queue().claim({ workerId: 'worker_test', now: when, leaseMs: LEASE_MS, provider: 'local', limit: 10, start: true });
    };
    const queued = await submit(at(1));
    const [job] = await starting(at(10));
    expect(job).toMatchObject({ taskId: queued, attempts: 1, started: { id: queued, status: 'processing', updatedAt: at(10) } });
    expect(job!.started).toEqual(await store().findTask(queued));
    // Its lease ran out (its worker died): claimed again, without a start when not asked, then with a later one.
    const [again] = await claim(at(10 + LEASE_MS));
    expect(again).toMatchObject({ taskId: queued, attempts: 2 });
    expect(again!.started).toBeUndefined();
    const [third] = await starting(at(10 + 3 * LEASE_MS));
    expect(third!.started).toMatchObject({ status: 'processing', updatedAt: at(10 + 3 * LEASE_MS) });
    expect(third!.started).toEqual(await store().findTask(queued));
    // A cancelled task is not claimed, started or not.
    await store().cancelTask({ accountId: 'acc_1', id: queued, now: at(20) });
    expect(await starting(at(10 + 5 * LEASE_MS))).toEqual([]);
  });

  it('takes at most its limit, and a task whose job a claim holds only once that lease has run out, as a further attempt', async () => {
    const ids = [await submit(at(1)), await submit(at(2)), await submit(at(3))];
    expect((await claim(at(10), 'local', 2)).map((job) => job.taskId)).toEqual(ids.slice(0, 2));
    expect((await claim(at(11), 'local', 2)).map((job) => job.taskId)).toEqual([ids[2]]);
    expect(await claim(at(10 + LEASE_MS - 1))).toEqual([]);
    expect(await claim(at(10 + LEASE_MS))).toMatchObject([
      { taskId: ids[0], attempts: 2, id: `task/${ids[0]}/2` },
      { taskId: ids[1], attempts: 2, id: `task/${ids[1]}/2` },
    ]);
  });

  it('runs a retry when it is due, counted as an attempt; a release again at once, not counted; a buried job never', async () => {
    const retried = await submit(at(1));
    const released = await submit(at(2));
    const buried = await submit(at(3));
    const [retry, release, bury] = await claim(at(10));
    await queue().retry({ jobId: retry!.id, runAt: at(5_000), error: 'x', now: at(11) });
    await queue().release({ jobId: release!.id, workerId: 'worker_test', now: at(11) });
    await queue().bury({ jobId: bury!.id, error: 'x', now: at(11) });
    expect(await row(buried)).toMatchObject({ job_state: 'dead', job_lease_until: null });
    expect(await queue().countJobs()).toEqual({ available: 2, leased: 0, done: 0, dead: 1 });

    expect(await claim(at(20), 'local', 10, 60_000)).toMatchObject([{ taskId: released, attempts: 1 }]);
    expect(await claim(at(4_999))).toEqual([]);
    expect(await claim(at(5_000))).toMatchObject([{ taskId: retried, attempts: 2 }]);
    expect(await row(retried)).toMatchObject({ job_run_at: at(5_000), job_claims: 2 });
  });

  it('a completion writes nothing for a task that has ended; for one still active (followed upstream) it ends the job', async () => {
    const ended = await submit(at(1));
    const followed = await submit(at(2));
    const [endedJob, followedJob] = await claim(at(10));
    await store().startTask({ id: ended, now: at(11) });
    await store().failTask({ id: ended, now: at(12), code: 'provider_error', message: 'x' });
    await store().startTask({ id: followed, now: at(11) });
    const before = await row(ended);
    await backend.queue.complete(endedJob!.id, at(13));
    await backend.queue.complete(followedJob!.id, at(13));
    expect(await row(ended)).toEqual(before);
    expect(await row(followed)).toMatchObject({ job_state: 'done', job_lease_until: null });
    expect(await claim(at(10 + 2 * LEASE_MS))).toEqual([]);
    expect(await queue().countJobs()).toEqual({ available: 0, leased: 0, done: 2, dead: 0 });
  });

  it('wakes the workers of its lane at the submission’s commit', async () => {
    const listener = new pg.Client({ connectionString: store().pool.options.connectionString });
    await listener.connect();
    const notices: string[] = [];
    listener.on('notification', (message) => message.channel === JOBS_CHANNEL && notices.push(message.payload ?? ''));
    try {
      await listener.query(`LISTEN ${JOBS_CHANNEL}`);
      await submit(at(1), 'instant');
      await expect.poll(() => notices).toEqual(['instant']);
    } finally {
      await listener.end();
    }
  });

  it("runs a previous release's jobs still in pg-boss (enqueued during a deploy), looking there at most once a second", async () => {
    const legacy = async (id: string) => queue().enqueue(store().pool, { kind: 'generate', taskId: id, provider: 'local', maxAttempts: 3, runAt: at(0) });
    const old = await submit(at(1));
    const later = await submit(at(2));
    // As the previous release wrote them: the tasks' jobs are pg-boss's.
    await store().pool.query(`UPDATE tasks SET job_lane = NULL, job_state = NULL, job_run_at = NULL, job_max_attempts = NULL WHERE id = ANY($1)`, [[old, later]]);
    await legacy(old);
    const fresh = await submit(at(3));

    const t = lastClaim + 1_000;
    const jobs = await claim(new Date(t), 'local', 10, 60_000);
    expect(jobs.map((job) => job.taskId)).toEqual([fresh, old]);
    const legacyJob = jobs[1]!;
    expect(legacyJob).toMatchObject({ kind: 'generate', provider: 'local', attempts: 1, maxAttempts: 3 });
    expect(legacyJob.id.startsWith('local/')).toBe(true);

    await legacy(later);
    // Within a second of the last look: not looked for.
    expect(await claim(new Date(t + 999), 'local', 10, 60_000)).toEqual([]);
    expect(await claim(new Date(t + 1_000), 'local', 10, 60_000)).toMatchObject([{ taskId: later }]);
    // Its claim's calls go to pg-boss: extended, then completed there.
    expect(await queue().extendLease({ jobId: legacyJob.id, workerId: 'worker_test', now: new Date(t), leaseMs: 60_000 })).toBe(true);
    await backend.queue.complete(legacyJob.id, new Date(t));
    expect(await queue().extendLease({ jobId: legacyJob.id, workerId: 'worker_test', now: new Date(t), leaseMs: 60_000 })).toBe(false);
  });

  it("moves the previous release's open generation jobs to their tasks when it migrates, with their attempts and leases", async () => {
    const { boss } = queue();
    const waiting = await submit(at(1));
    const running = await submit(at(2));
    const ended = await submit(at(3));
    await store().pool.query(`UPDATE tasks SET job_lane = NULL, job_state = NULL, job_run_at = NULL, job_max_attempts = NULL`);
    // As the previous release left them: a job waiting (its second attempt, after a retry), one running, one of a task that has ended.
    await queue().enqueue(store().pool, { kind: 'generate', taskId: running, provider: 'local', maxAttempts: 3, runAt: at(0) });
    const [fetched] = await boss.fetch('vidgen-local', { batchSize: 1 });
    await queue().enqueue(store().pool, { kind: 'generate', taskId: waiting, provider: 'local', maxAttempts: 3, runAt: at(7_000) }, 2);
    await queue().enqueue(store().pool, { kind: 'generate', taskId: ended, provider: 'local', maxAttempts: 3, runAt: at(0) });
    await store().cancelTask({ accountId: 'acc_1', id: ended, now: at(4) });
    await store().startTask({ id: running, now: at(5) });
    const { rows: jobsBefore } = await store().pool.query(`SELECT id, data->>'taskId' AS task, started_on + expire_in AS lease_end FROM pgboss.job WHERE name = 'vidgen-local'`);
    expect(jobsBefore).toHaveLength(3);
    await store().pool.query(`DROP INDEX tasks_jobs_due;
      ALTER TABLE tasks RESET (fillfactor);
      ALTER TABLE tasks DROP COLUMN job_lane, DROP COLUMN job_state, DROP COLUMN job_run_at, DROP COLUMN job_lease_until, DROP COLUMN job_lease_id,
                        DROP COLUMN job_claims, DROP COLUMN job_max_attempts;
      DELETE FROM schema_migrations WHERE version = 11`);
    await store().migrate();

    const leaseEnd = jobsBefore.find((job) => job.task === running)!.lease_end as Date;
    expect(fetched).toBeDefined();
    expect(await row(waiting)).toEqual({ job_lane: 'local', job_state: 'waiting', job_run_at: at(7_000), job_lease_until: null, job_lease_id: 0, job_claims: 1, job_max_attempts: 3 });
    expect(await row(running)).toMatchObject({ job_lane: 'local', job_state: 'waiting', job_lease_until: leaseEnd, job_claims: 1 });
    expect(await row(ended)).toMatchObject({ job_lane: null, job_state: null });
    const { rows: jobsAfter } = await store().pool.query(`SELECT state FROM pgboss.job WHERE name = 'vidgen-local'`);
    expect(jobsAfter).toEqual([{ state: 'cancelled' }, { state: 'cancelled' }, { state: 'cancelled' }]);
    // The previous release's worker running its job finds its lease lost at its next heartbeat.
    expect(await queue().extendLease({ jobId: `local/${fetched!.id}/0`, workerId: 'worker_old', now: at(6), leaseMs: 60_000 })).toBe(false);

    // Claimed in this release's way, each as its second attempt: the waiting one when due, the running one once its lease
    // has run out (pg-boss's, on the database's clock: a second or so from now).
    const bothDue = Math.max(at(7_000).getTime(), leaseEnd.getTime());
    expect(await claim(new Date(Math.min(at(7_000).getTime(), leaseEnd.getTime()) - 1))).toEqual([]);
    const jobs = await claim(new Date(bothDue));
    expect(jobs.map(({ taskId, attempts }) => ({ taskId, attempts })).sort((a, b) => a.taskId.localeCompare(b.taskId))).toEqual(
      [{ taskId: waiting, attempts: 2 }, { taskId: running, attempts: 2 }].sort((a, b) => a.taskId.localeCompare(b.taskId)),
    );
  });
});
