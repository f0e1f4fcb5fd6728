/**
 * Opens what the configuration names: the store, its job queue and the task
 * events that wake long polls and reach rendering workers.
 * - SQLite: one process; the queue lives in the store, events stay in memory.
 * - PostgreSQL: any number of processes; the queue is pg-boss, events travel by LISTEN/NOTIFY (each process on the
 *   channels its roles need).
 * The PostgreSQL side (pg, pg-boss and this project's code for them) is loaded only when it is configured: a process on
 * SQLite never runs it, and loading it would keep ≈ 4 MB more heap resident for good.
 */
import type { Logger } from 'pino';
import { PROVIDER_NAMES, type Config } from '../config.js';
import { createInProcessTaskEvents } from '../events/in-process.js';
import { createMemoryRateLimiter, type RateLimiter } from '../http/rate-limit.js';
import type { TaskEvents } from '../interfaces.js';
import { WEBHOOKS_LANE, type JobQueue } from '../queue/queue.js';
import type { PgStore } from './postgres/pg-store.js';
import { SqliteStore } from './sqlite/sqlite-store.js';
import type { Store } from './store.js';

/** Every lane a job can be sent to: the providers, and webhook deliveries. */
export const JOB_LANES = [...PROVIDER_NAMES, WEBHOOKS_LANE] as const;

export interface Backend {
  store: Store;
  queue: JobQueue;
  events: TaskEvents;
  /** Request budgets: in memory for one process, in the database when several share it. */
  rateLimiter: RateLimiter;
  /** How often an idle worker looks for work nothing woke it for (leases run out, retries fall due). */
  workerPollMs: number;
  /**
   * Called when another process enqueued a job (PostgreSQL), with the NOTIFY's payload: the job's lane,
   * or `upstream` when an upstream task is due for a check now; set by whoever runs a worker.
   */
  onJobEnqueued: (listener: (payload: string) => void) => void;
  close(): Promise<void>;
}

export async function openBackend(
  config: Pick<Config, 'database' | 'jobLeaseMs'>,
  options: {
    logger: Logger;
    /**
     * LISTEN for other processes' news (servers and workers; not the CLI): `api` for status moves (long polls), `worker`
     * for job wake-ups and cancels; both for a process that is both. A channel no one here needs is not listened on: each
     * notice is sent to every listening connection and read there.
     */
    listen: false | { api: boolean; worker: boolean };
    /** Run the queue's maintenance here. */
    supervise: boolean;
  },
): Promise<Backend> {
  switch (config.database.kind) {
    case 'sqlite': {
      const store = new SqliteStore(config.database.path, { cacheMb: config.database.cacheMb, mmapMb: config.database.mmapMb });
      return {
        store,
        queue: store,
        events: createInProcessTaskEvents(),
        rateLimiter: createMemoryRateLimiter(),
        workerPollMs: Math.min(5_000, config.jobLeaseMs),
        onJobEnqueued: () => {},
        close: () => store.close(),
      };
    }
    case 'postgres': {
      const { url, poolSize, keepPlans } = config.database;
      const [{ createPostgresTaskEvents }, { createPgRateLimiter }, { JOBS_CHANNEL, PgBossQueue }, { PgStore }] = await Promise.all([
        import('../events/postgres.js'),
        import('./postgres/pg-rate-limiter.js'),
        import('../queue/pg-boss-queue.js'),
        import('./postgres/pg-store.js'),
      ]);
      let store: PgStore | undefined;
      const queue = new PgBossQueue({
        connectionString: url,
        lanes: [...JOB_LANES],
        leaseMs: config.jobLeaseMs,
        deliveryClaims: 20,
        supervise: options.supervise,
        transaction: (work) => store!.transaction(work),
        query: (statement) => store!.pool.query(statement),
        statement: (text, values) => store!.plans.query(text, values),
        onError: (error) => options.logger.error({ err: error }, 'job queue error'),
      });
      store = new PgStore(url, queue, { poolSize, keepPlans });
      try {
        await store.migrate();
        await queue.start();
      } catch (error) {
        await queue.stop();
        await store.close();
        throw error;
      }
      const jobListeners: ((payload: string) => void)[] = [];
      const { listen } = options;
      const events = listen
        ? createPostgresTaskEvents({
            connectionString: url,
            logger: options.logger,
            statuses: listen.api ? 'every' : 'cancels',
            channels: listen.worker ? { [JOBS_CHANNEL]: (payload) => jobListeners.forEach((listener) => listener(payload)) } : {},
          })
        : undefined;
      await events?.ready;
      return {
        store,
        queue,
        events: events ?? createInProcessTaskEvents(),
        rateLimiter: createPgRateLimiter(store.pool),
        // pg-boss does not announce jobs coming back (lease expiry) or falling due (retries): look every second.
        workerPollMs: 1_000,
        onJobEnqueued: (listener) => jobListeners.push(listener),
        async close() {
          await events?.close();
          await queue.stop();
          await store.close();
        },
      };
    }
  }
}
