/** The one bag of dependencies the app is built from (nothing listens at import). */
import type { Logger } from 'pino';
import type { PriceTable } from '../domain/catalog.js';
import type { Clock, TaskEvents } from '../interfaces.js';
import type { Store } from '../store/store.js';
import type { Metrics } from './metrics.js';

export interface AppConfig {
  prices: PriceTable;
  /** How long an Idempotency-Key's first answer is kept for replays. */
  idempotencyTtlMs: number;
}

export interface AppDeps {
  store: Store;
  clock: Clock;
  logger: Logger;
  events: TaskEvents;
  config: AppConfig;
  metrics?: Metrics;
  /** The built reference page, or undefined when it has not been built. */
  docsHtml?: () => string | undefined;
  /** True while the process drains for shutdown: readiness fails. */
  isDraining?: () => boolean;
}
