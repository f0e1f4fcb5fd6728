/** The one bag of dependencies the app is built from (nothing listens at import). */
import type { Logger } from 'pino';
import type { ModelId, PriceTable } from '../domain/catalog.js';
import type { OutputFiles } from '../files/storage.js';
import type { Clock, TaskEvents } from '../interfaces.js';
import type { WakeFor } from '../queue/worker.js';
import type { Store } from '../store/store.js';
import type { ConsoleAssets } from './console-assets.js';
import type { RequestsInFlight } from './drain.js';
import type { ApiKeyCache } from './middleware.js';
import type { Metrics } from './metrics.js';
import type { RateLimiter, RateLimits } from './rate-limit.js';

export interface AppConfig {
  prices: PriceTable;
  /** How long an Idempotency-Key's first answer is kept for replays. */
  idempotencyTtlMs: number;
  /** A task not terminal this long after acceptance fails with `timeout` (D7). */
  taskDeadlineMs: number;
  /** How many times a task's job is claimed before it is given up (worker crashes, bugs). */
  jobMaxAttempts: number;
  /** The provider each model is routed to; the job records it. */
  providers: Record<ModelId, string>;
  /** Per-key request budgets (D10); absent: none. */
  rateLimits?: RateLimits;
  /** Queued and processing tasks an account may have at once (D10); absent or 0: no cap. */
  maxActiveTasks?: number;
  /** How long a key's stored record is reused before it is read again (http/middleware.ts createApiKeyCache); absent or 0: read every time. */
  keyCacheMs?: number;
  /** Loopback reference and webhook URLs accepted at submission (tests and local development only; absent: refused, D5). */
  media?: { allowLoopback: boolean };
  webhooks?: { allowLoopback: boolean };
}

export interface AppDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  events: TaskEvents;
  config: AppConfig;
  metrics?: Metrics;
  /** Counts requests against `config.rateLimits`. */
  rateLimiter?: RateLimiter;
  /** The built reference page, or undefined when it has not been built. */
  docsHtml?: () => string | undefined;
  /** The web console's build, or undefined when it has not been built (http/console-assets.ts). */
  consoleAssets?: () => ConsoleAssets | undefined;
  /** Origins besides this one that output files are played from (`output.url`'s), for the console's `media-src`. */
  consoleMediaOrigins?: () => Promise<string[]>;
  /** Aborted when the process starts draining for shutdown (http/drain.ts). */
  shutdown?: AbortSignal;
  /** Counts the requests being answered, for the drain and the in-flight gauge; createApp makes one when absent. */
  requests?: RequestsInFlight;
  /** Tells workers in this process that a job was enqueued or an upstream task is due (so they need not wait for their poll); both when not said. */
  wakeWorkers?: (what?: WakeFor) => void;
  /** Serves output files (GET /files/…); absent when this process serves none. */
  files?: OutputFiles;
  /** Verifies the upstream's callback tokens (upstream/callback-token.ts); absent: no callbacks are asked for or taken. */
  upstreamCallbackSecret?: string;
  /** Made by createApp from `config.keyCacheMs`. */
  apiKeyCache?: ApiKeyCache;
}
