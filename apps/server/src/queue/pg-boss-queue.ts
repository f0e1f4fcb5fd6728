/**
 * The job queue on PostgreSQL, on pg-boss 10 (chosen by measurement, see the
 * README: with `fetch()` woken by NOTIFY it started jobs in ~2 ms at p50 and
 * ran ~290 jobs/s end to end here, where its own `work()` loop manages 8/s).
 *
 * - One pg-boss queue per lane (`vidgen-local`, `vidgen-byteplus`,
 *   `vidgen-webhooks`); a job is enqueued with the app's own client, so inside
 *   the transaction that creates its task or delivery, and the same
 *   transaction NOTIFYs `vidgen_jobs` so idle workers wake at commit.
 * - The lease is pg-boss's `expireIn`: a worker that dies stops extending it,
 *   pg-boss's maintenance puts the job back, and another worker claims it.
 *   Extending it is one UPDATE of pg-boss's job row (no API for it in v10).
 * - A retry at a chosen time completes the job and sends its successor with
 *   `startAfter`, in one transaction; the successor carries the attempt count.
 */
import PgBoss from 'pg-boss';
import type pg from 'pg';
import type { Job, JobQueue } from './queue.js';
import type { PgJobs, Queryable } from '../store/postgres/pg-store.js';

export const JOBS_CHANNEL = 'vidgen_jobs';
const SCHEMA = 'pgboss';
const LANE_PREFIX = 'vidgen-';

interface JobData {
  taskId: string;
  kind: Job['kind'];
  maxAttempts: number;
  /** 1 for the first job; a retry's successor carries the next number. */
  attempt: number;
}

const laneOf = (provider: string) => `${LANE_PREFIX}${provider}`;
/** Job ids name their lane: pg-boss addresses a job by queue and id. */
const jobId = (provider: string, id: string) => `${provider}/${id}`;
function parseJobId(id: string): { provider: string; lane: string; id: string } {
  const slash = id.indexOf('/');
  const provider = id.slice(0, slash);
  return { provider, lane: laneOf(provider), id: id.slice(slash + 1) };
}

const adapter = (client: Queryable): PgBoss.Db => ({ executeSql: (text, values) => client.query(text, values) });

export interface PgBossQueueOptions {
  connectionString: string;
  /** Every lane a job may be sent to (providers and `webhooks`). */
  lanes: string[];
  /** A claimed job returns to the queue this long after its worker stops extending it. */
  leaseMs: number;
  /** Runs pg-boss's maintenance (lease expiry, archiving) in this process. */
  supervise: boolean;
  /** Runs `work` in one transaction (the store's). */
  transaction: <T>(work: (client: pg.PoolClient) => Promise<T>) => Promise<T>;
  onError?: (error: Error) => void;
}

export class PgBossQueue implements JobQueue, PgJobs {
  readonly boss: PgBoss;
  private readonly leaseSeconds: number;

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
  }

  /** Creates pg-boss's schema (its own migrations, under its own lock) and the lanes' queues. */
  async start(): Promise<void> {
    await this.boss.start();
    for (const lane of this.options.lanes) {
      // Retries of failed generations are the worker's (successor jobs); pg-boss's retries
      // only bring back jobs whose lease ran out, one more than the attempts the app allows
      // so that the worker sees the extra claim and fails the task itself.
      if (!(await this.boss.getQueue(laneOf(lane)))) {
        await this.boss.createQueue(laneOf(lane), { name: laneOf(lane), policy: 'standard', expireInSeconds: this.leaseSeconds, retryDelay: 0 });
      }
    }
  }

  async stop(): Promise<void> {
    await this.boss.stop({ graceful: false, wait: true, timeout: 1_000 }).catch(() => {});
  }

  async enqueue(client: Queryable, job: { kind: Job['kind']; taskId: string; provider: string; maxAttempts: number; runAt: Date }, attempt = 1): Promise<void> {
    const data: JobData = { taskId: job.taskId, kind: job.kind, maxAttempts: job.maxAttempts, attempt };
    await this.boss.send(laneOf(job.provider), data, {
      db: adapter(client),
      expireInSeconds: this.leaseSeconds,
      retryLimit: job.maxAttempts + 1,
      retryDelay: 0,
      ...(attempt > 1 ? { startAfter: job.runAt } : {}),
    });
    await client.query('SELECT pg_notify($1, $2)', [JOBS_CHANNEL, job.provider]);
  }

  async claim(input: { workerId: string; now: Date; leaseMs: number; providers: string[] }): Promise<Job | undefined> {
    for (const provider of input.providers) {
      const [job] = await this.boss.fetch<JobData>(laneOf(provider), { batchSize: 1, includeMetadata: true });
      if (!job) continue;
      return {
        id: jobId(provider, job.id),
        taskId: job.data.taskId,
        kind: job.data.kind,
        provider,
        // Claims after a lost lease count as attempts too.
        attempts: job.data.attempt + job.retryCount,
        maxAttempts: job.data.maxAttempts,
      };
    }
    return undefined;
  }

  async extendLease(input: { jobId: string; workerId: string; leaseUntil: Date }): Promise<boolean> {
    const { lane, id } = parseJobId(input.jobId);
    const seconds = Math.max(1, (input.leaseUntil.getTime() - Date.now()) / 1000);
    const result = await this.options.transaction((client) =>
      client.query(
        `UPDATE ${SCHEMA}.job SET expire_in = (now() - started_on) + make_interval(secs => $3) WHERE name = $1 AND id = $2 AND state = 'active'`,
        [lane, id, seconds],
      ),
    );
    return result.rowCount === 1;
  }

  async complete(jobIdValue: string): Promise<void> {
    const { lane, id } = parseJobId(jobIdValue);
    await this.boss.complete(lane, id);
  }

  async retry(input: { jobId: string; runAt: Date; error: string; now: Date }): Promise<void> {
    const { lane, id, provider } = parseJobId(input.jobId);
    await this.options.transaction(async (client) => {
      const [job] = (await client.query(`SELECT data FROM ${SCHEMA}.job WHERE name = $1 AND id = $2 AND state = 'active' FOR UPDATE`, [lane, id])).rows;
      // Not ours any more (its lease ran out and another worker has it): nothing to hand on.
      if (!job) return;
      const data = job.data as JobData;
      await this.boss.complete(lane, id, { error: input.error }, { db: adapter(client) });
      await this.enqueue(client, { kind: data.kind, taskId: data.taskId, provider, maxAttempts: data.maxAttempts, runAt: input.runAt }, data.attempt + 1);
    });
  }

  async bury(input: { jobId: string; error: string; now: Date }): Promise<void> {
    const { lane, id } = parseJobId(input.jobId);
    await this.boss.cancel(lane, id);
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
    return counts;
  }
}
