/**
 * The job queue on PostgreSQL. Its lanes' jobs are rows of the store's own tables: a task's generation job is its
 * row's (pg-generation-lane.ts, migration 0011), a webhook delivery's its delivery's (pg-delivery-lane.ts, migration
 * 0009). pg-boss 10, which held them before (chosen by measurement, see the README: with `fetch()` woken by NOTIFY it
 * started jobs in ~2 ms at p50 and ran ~290 jobs/s end to end here, where its own `work()` loop manages 8/s), now runs
 * only what a previous release enqueued in it during a deploy, and its successors: every claim of a lane looks there
 * too, at most once a second. What follows is how those jobs are run.
 *
 * - One pg-boss queue per provider lane (`vidgen-local`, `vidgen-instant`,
 *   `vidgen-byteplus`), still created at start: a previous release enqueued its
 *   jobs there, in the transaction that created the task, with a NOTIFY on
 *   `vidgen_jobs` (as the submission does for a task's own job now).
 * - The lease is pg-boss's `expireIn`: a worker that dies stops extending it,
 *   pg-boss's maintenance puts the job back, and another worker claims it.
 *   Extending it is one UPDATE of pg-boss's job row (no API for it in v10).
 * - A retry at a chosen time completes the job and sends its successor with
 *   `startAfter`, in one transaction; the successor carries the attempt count.
 * - A claim's job id says whose it is (`task/…`, `webhooks/…`, or pg-boss's
 *   `<lane>/<id>/<claim>`), and this queue hands each call to its lane.
 */
import PgBoss from 'pg-boss';
import pg from 'pg';
import { WEBHOOKS_LANE, type Job, type JobQueue } from './queue.js';
import { isDeliveryClaim, PgDeliveryLane } from './pg-delivery-lane.js';
import { isTaskClaim, PgGenerationLane } from './pg-generation-lane.js';
import type { PgJobs, Queryable, Statement } from '../store/postgres/pg-store.js';
import { kept } from '../store/postgres/kept-plans.js';

export const JOBS_CHANNEL = 'vidgen_jobs';
const SCHEMA = 'pgboss';

/** A statement as node-postgres takes it: with a name when its plan is kept (prepared once per connection). */
type QueryConfig = { name?: string; text: string; values: unknown[] };
// Two of every task's statements, with fixed text and no result rows, so their plans may be kept (the store's
// kept-plans.ts): named when sent on their own, EXECUTEd when sent in a message (a completion with its task's COMMIT).
const EXTEND_LEASE = kept(`UPDATE ${SCHEMA}.job SET expire_in = (now() - started_on) + make_interval(secs => $4)
                           WHERE name = $1 AND id = $2 AND retry_count = $3 AND state = 'active'`);
const FINISH_JOB = kept(`UPDATE ${SCHEMA}.job SET state = $4, completed_on = now(), output = $5
                         WHERE name = $1 AND id = $2 AND retry_count = $3 AND state = 'active'`);
const LANE_PREFIX = 'vidgen-';
/** How often a lane's claims look for a previous release's jobs in pg-boss (a deploy under way, or one that ended with jobs left). */
const LEGACY_LOOK_MS = 1_000;
/**
 * Held (a session advisory lock on a connection of its own) by a process while it starts pg-boss
 * and creates the lanes' queues: pg-boss runs its own migrations under its own lock, but not
 * `createQueue`, whose table creation and partition attaching deadlock (40P01) when processes on a
 * new database create queues at once. Any constant shared by the processes, apart from the store's
 * migration lock.
 */
const QUEUE_START_LOCK = 7_316_202;

interface JobData {
  taskId: string;
  kind: Job['kind'];
  maxAttempts: number;
  /** 1 for the first job; a retry's successor carries the next number. */
  attempt: number;
}

const laneOf = (provider: string) => `${LANE_PREFIX}${provider}`;
/**
 * Job ids name the claim, not only the job: pg-boss puts a job whose lease ran out back under
 * the same id, counting `retry_count` up. A worker that lost its lease must not complete, retry,
 * extend or bury the next claimant's run, so every change is conditional on that count.
 */
const jobId = (provider: string, id: string, claim: number) => `${provider}/${id}/${claim}`;
function parseJobId(value: string): { provider: string; lane: string; id: string; claim: number } {
  const [provider = '', id = '', claim = '0'] = value.split('/');
  return { provider, lane: laneOf(provider), id, claim: Number(claim) };
}

export interface PgBossQueueOptions {
  connectionString: string;
  /** Every lane a job may be sent to (providers and `webhooks`, whose deliveries are their own queue). */
  lanes: string[];
  /** Claims a webhook delivery may have in a row without an attempt recorded (its workers died) before it fails. Default 20. */
  deliveryClaims?: number;
  /** A claimed job returns to the queue this long after its worker stops extending it. */
  leaseMs: number;
  /** Runs pg-boss's maintenance (lease expiry, archiving) in this process. */
  supervise: boolean;
  /** Runs `work` in one transaction (the store's). */
  transaction: <T>(work: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
  /** Runs one statement on its own (the store's pool); pg-boss's pool when not given. */
  query?: (statement: QueryConfig) => Promise<pg.QueryResult>;
  /** How a statement is sent: named when the store keeps its plan (KeptPlans.query); as text when not given. */
  statement?: (text: string, values: unknown[]) => QueryConfig;
  onError?: (error: Error) => void;
}

export class PgBossQueue implements JobQueue, PgJobs {
  readonly boss: PgBoss;
  private readonly leaseSeconds: number;
  private readonly deliveries: PgDeliveryLane;
  private readonly generations: PgGenerationLane;
  /** When each lane's claims last looked in pg-boss (LEGACY_LOOK_MS). */
  private readonly legacyLookedAt = new Map<string, number>();

  constructor(private readonly options: PgBossQueueOptions) {
    this.leaseSeconds = Math.max(1, Math.ceil(options.leaseMs / 1000));
    this.boss = new PgBoss({
      connectionString: options.connectionString,
      schema: SCHEMA,
      max: 4,
      schedule: false,
      supervise: options.supervise,
      // Expired leases are found by maintenance; run it often enough that a dead worker's job returns within ~lease + this.
      maintenanceIntervalSeconds: Math.max(1, Math.min(30, Math.floor(this.leaseSeconds / 2))),
      archiveCompletedAfterSeconds: 3_600,
    });
    this.boss.on('error', (error) => options.onError?.(error));
    const run = (text: string, values: unknown[]) => this.alone.query(this.statement(text, values));
    this.deliveries = new PgDeliveryLane(run, options.deliveryClaims ?? 20);
    this.generations = new PgGenerationLane(run);
  }

  /**
   * Creates pg-boss's schema (its own migrations, under its own lock) and the lanes' queues, one
   * process at a time: processes starting together on an empty database wait for each other here,
   * and the later ones find the queues made. The lock goes with its connection, also when a
   * process dies holding it.
   */
  async start(): Promise<void> {
    const lock = new pg.Client({ connectionString: this.options.connectionString });
    // A connection lost while waiting fails the query below; the event itself must not crash the process.
    lock.on('error', () => {});
    await lock.connect();
    try {
      // A process that holds the lock for long (a stuck start) fails the others' start instead of hanging it.
      await lock.query(`SET lock_timeout = '120s'`);
      await lock.query('SELECT pg_advisory_lock($1)', [QUEUE_START_LOCK]);
      await this.boss.start();
      for (const lane of this.options.lanes.filter((name) => name !== WEBHOOKS_LANE)) {
        // Retries of failed generations are the worker's (successor jobs); pg-boss's retries
        // only bring back jobs whose lease ran out, one more than the attempts the app allows
        // so that the worker sees the extra claim and fails the task itself.
        if (!(await this.boss.getQueue(laneOf(lane)))) {
          await this.boss.createQueue(laneOf(lane), { name: laneOf(lane), policy: 'standard', expireInSeconds: this.leaseSeconds, retryDelay: 0 });
        }
      }
    } finally {
      // Ending the session releases the lock.
      await lock.end().catch(() => {});
    }
  }

  async stop(): Promise<void> {
    await this.boss.stop({ graceful: false, wait: true, timeout: 1_000 }).catch(() => {});
  }

  /** `delayed`: start at `runAt` (a retry, a hand-back with a delay); otherwise at once, on the database's clock. */
  async enqueue(client: Queryable, job: { kind: Job['kind']; taskId: string; provider: string; maxAttempts: number; runAt: Date }, attempt = 1, delayed = attempt > 1): Promise<void> {
    const data: JobData = { taskId: job.taskId, kind: job.kind, maxAttempts: job.maxAttempts, attempt };
    // pg-boss's one INSERT, with the wake-up NOTIFY (sent at commit) in the same statement: one round trip, not two.
    const id = await this.boss.send(laneOf(job.provider), data, {
      db: {
        executeSql: (text, values) =>
          client.query(`WITH sent AS (${text}) SELECT id, pg_notify($${values!.length + 1}, $${values!.length + 2}) FROM sent`, [...values!, JOBS_CHANNEL, job.provider]),
      },
      expireInSeconds: this.leaseSeconds,
      retryLimit: job.maxAttempts + 1,
      retryDelay: 0,
      ...(delayed ? { startAfter: job.runAt } : {}),
    });
    // pg-boss answers null instead of failing when it inserted nothing (an unknown lane): a task must never lack its job.
    if (!id) throw new Error(`the job for ${job.taskId} was not enqueued in lane ${laneOf(job.provider)}`);
  }

  async claim(input: { workerId: string; now: Date; leaseMs: number; provider: string; limit: number; start?: boolean }): Promise<Job[]> {
    const { provider } = input;
    if (provider === WEBHOOKS_LANE) return this.deliveries.claim(input);
    const claimed = await this.generations.claim(input);
    const at = input.now.getTime();
    if (claimed.length < input.limit && at - (this.legacyLookedAt.get(provider) ?? -Infinity) >= LEGACY_LOOK_MS) {
      this.legacyLookedAt.set(provider, at);
      claimed.push(...(await this.claimLegacy(provider, input.limit - claimed.length)));
    }
    return claimed;
  }

  /** Up to `limit` of a previous release's jobs of the lane, from pg-boss. */
  private async claimLegacy(provider: string, limit: number): Promise<Job[]> {
    const jobs = await this.boss.fetch<JobData>(laneOf(provider), { batchSize: limit, includeMetadata: true });
    return jobs.map((job) => ({
      id: jobId(provider, job.id, job.retryCount),
      taskId: job.data.taskId,
      kind: job.data.kind,
      provider,
      // Claims after a lost lease count as attempts too.
      attempts: job.data.attempt + job.retryCount,
      maxAttempts: job.data.maxAttempts,
    }));
  }

  async extendLease(input: { jobId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean> {
    if (isTaskClaim(input.jobId)) return this.generations.extendLease(input);
    if (isDeliveryClaim(input.jobId)) return this.deliveries.extendLease(input);
    const { lane, id, claim } = parseJobId(input.jobId);
    // pg-boss expires on the database's clock: the lease is a duration from its now().
    const seconds = Math.max(1, input.leaseMs / 1000);
    // One statement: atomic on its own, no BEGIN/COMMIT round trips around it.
    const result = await this.alone.query(this.statement(EXTEND_LEASE, [lane, id, claim, seconds]));
    return result.rowCount === 1;
  }

  /** Ends this claim's run as `state` (completed or cancelled); false when the claim is no longer this one. */
  private async finish(client: Queryable, jobIdValue: string, state: 'completed' | 'cancelled', output: object | null): Promise<boolean> {
    const { lane, id, claim } = parseJobId(jobIdValue);
    const result = await client.query(this.statement(FINISH_JOB, [lane, id, claim, state, output === null ? null : JSON.stringify(output)]));
    return result.rowCount === 1;
  }

  private statement(text: string, values: unknown[]): QueryConfig {
    return this.options.statement ? this.options.statement(text, values) : { text, values };
  }

  /** A statement on its own (autocommit): the store's pool when given, else pg-boss's; a Queryable, for `finish`, which also runs inside the store's transactions. */
  private readonly alone = {
    query: (statement: QueryConfig) =>
      this.options.query ? this.options.query(statement) : (this.boss.getDb().executeSql(statement.text, statement.values) as Promise<pg.QueryResult>),
  } as unknown as Queryable;

  /**
   * The statement that completes this claim's run, to be sent with the task's ending: none for a job on the task's row,
   * which the task's move ends. (Nothing if the claim no longer holds the job.)
   */
  completeStatement(jobIdValue: string): Statement | undefined {
    if (isTaskClaim(jobIdValue)) return undefined;
    const { lane, id, claim } = parseJobId(jobIdValue);
    return [FINISH_JOB, [lane, id, claim, 'completed', null]];
  }

  async complete(jobIdValue: string): Promise<void> {
    if (isTaskClaim(jobIdValue)) return this.generations.complete(jobIdValue);
    if (isDeliveryClaim(jobIdValue)) return this.deliveries.complete(jobIdValue);
    await this.finish(this.alone, jobIdValue, 'completed', null);
  }

  async retry(input: { jobId: string; runAt: Date; error: string; now: Date }): Promise<void> {
    if (isTaskClaim(input.jobId)) return this.generations.retry(input);
    if (isDeliveryClaim(input.jobId)) return this.deliveries.retry(input);
    await this.handOn(input.jobId, input.runAt, { error: input.error }, 1);
  }

  async release(input: { jobId: string; workerId: string; now: Date; runAt?: Date }): Promise<void> {
    if (isTaskClaim(input.jobId)) return this.generations.release(input);
    if (isDeliveryClaim(input.jobId)) return this.deliveries.release(input);
    await this.handOn(input.jobId, input.runAt ?? input.now, { released: true }, 0);
  }

  /** Completes this claim and sends its successor at `runAt`, in one transaction; `counted` 1 makes this claim an attempt. */
  private async handOn(jobIdValue: string, runAt: Date, output: object, counted: 0 | 1): Promise<void> {
    const { lane, id, claim, provider } = parseJobId(jobIdValue);
    await this.options.transaction(async (client) => {
      const [job] = (
        await client.query(`SELECT data, retry_count FROM ${SCHEMA}.job WHERE name = $1 AND id = $2 AND retry_count = $3 AND state = 'active' FOR UPDATE`, [
          lane,
          id,
          claim,
        ])
      ).rows;
      // Not ours any more (its lease ran out and another worker has it): nothing to hand on.
      if (!job) return;
      const data = job.data as JobData;
      await this.finish(client, jobIdValue, 'completed', output);
      // Claims after lost leases count as attempts in the successor too.
      const attempt = data.attempt + (job.retry_count as number) + counted;
      await this.enqueue(client, { kind: data.kind, taskId: data.taskId, provider, maxAttempts: data.maxAttempts, runAt }, attempt, true);
    });
  }

  async bury(input: { jobId: string; error: string; now: Date }): Promise<void> {
    if (isTaskClaim(input.jobId)) return this.generations.bury(input);
    if (isDeliveryClaim(input.jobId)) return this.deliveries.bury(input);
    await this.finish(this.alone, input.jobId, 'cancelled', { error: input.error });
  }

  async countJobs(): Promise<Record<'available' | 'leased' | 'done' | 'dead', number>> {
    const counts = { available: 0, leased: 0, done: 0, dead: 0 };
    const states: Record<string, keyof typeof counts> = { created: 'available', retry: 'available', active: 'leased', completed: 'done', failed: 'dead', cancelled: 'dead' };
    const rows = await this.options.transaction(async (client) => {
      const live = await client.query(`SELECT state, count(*)::int AS n FROM ${SCHEMA}.job WHERE name LIKE $1 GROUP BY state`, [`${LANE_PREFIX}%`]);
      const archived = await client.query(`SELECT state, count(*)::int AS n FROM ${SCHEMA}.archive WHERE name LIKE $1 GROUP BY state`, [`${LANE_PREFIX}%`]);
      return [...live.rows, ...archived.rows];
    });
    for (const row of rows) counts[states[row.state]!] += row.n;
    const deliveries = await this.deliveries.countJobs();
    const generations = await this.generations.countJobs();
    return {
      available: counts.available + deliveries.available + generations.available,
      leased: counts.leased + deliveries.leased + generations.leased,
      done: counts.done + deliveries.done + generations.done,
      dead: counts.dead + generations.dead,
    };
  }
}
