/**
 * Builds the generation pipeline from configuration: providers routed by
 * model, the reference fetcher, output files and the worker.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type Config, type ProviderName } from './config.js';
import type { ModelId } from './domain/catalog.js';
import type { OutputFiles } from './files/storage.js';
import type { Clock, TaskEvents } from './interfaces.js';
import { createMediaFetcher } from './media/fetcher.js';
import { createBytePlusProvider } from './providers/byteplus/byteplus-provider.js';
import { createInstantProvider } from './providers/instant/instant-provider.js';
import { createLocalProvider } from './providers/local/local-provider.js';
import type { Provider } from './providers/provider.js';
import { createWorker, type Worker } from './queue/worker.js';
import { createDeliveryRunner } from './webhooks/deliveries.js';
import { createWebhookSender } from './webhooks/sender.js';
import type { JobQueue } from './queue/queue.js';
import type { Store } from './store/store.js';

export { createOutputFiles } from './files/output-files.js';

function createProviders(config: Config): (model: ModelId) => Provider {
  const built = new Map<ProviderName, Provider>();
  const build = (name: ProviderName): Provider => {
    switch (name) {
      case 'local':
        return createLocalProvider({ concurrency: Math.max(1, config.concurrency.local) });
      case 'instant':
        return createInstantProvider({ preparedPath: join(config.dataDir, 'instant.mp4'), delayMs: config.instantDelayMs });
      case 'byteplus': {
        const { apiKey, baseUrl, modelIds } = config.byteplus;
        if (!apiKey) throw new ConfigError('VIDGEN_PROVIDERS routes a model to byteplus, but VIDGEN_BYTEPLUS_API_KEY is not set');
        const routed = (Object.keys(config.providers) as ModelId[]).filter((m) => config.providers[m] === 'byteplus');
        const unmapped = routed.filter((m) => !modelIds[m]);
        if (unmapped.length) throw new ConfigError(`VIDGEN_BYTEPLUS_MODELS must map ${unmapped.join(', ')} to BytePlus model ids`);
        return createBytePlusProvider({ baseUrl, apiKey, modelIds });
      }
    }
  };
  for (const name of new Set(Object.values(config.providers))) built.set(name, build(name));
  return (model) => built.get(config.providers[model])!;
}

export function createPipelineWorker(deps: {
  config: Config;
  store: Store;
  queue: JobQueue;
  /** How often to look for work nothing woke the worker for. */
  pollMs: number;
  events: TaskEvents;
  clock: Clock;
  logger: Logger;
  files: OutputFiles;
}): Worker {
  const { config } = deps;
  return createWorker({
    store: deps.store,
    queue: deps.queue,
    events: deps.events,
    clock: deps.clock,
    logger: deps.logger,
    providerFor: createProviders(config),
    fetcher: createMediaFetcher({
      allowLoopback: config.media.allowLoopback,
      ca: config.media.caFile ? readFileSync(config.media.caFile) : undefined,
    }),
    files: deps.files,
    workDir: join(config.dataDir, 'work'),
    concurrency: { ...config.concurrency, webhooks: config.webhooks.concurrency },
    deliveries: createDeliveryRunner({
      store: deps.store,
      clock: deps.clock,
      events: deps.events,
      logger: deps.logger,
      scheduleMs: config.webhooks.retryScheduleMs,
      sender: createWebhookSender({
        timeoutMs: config.webhooks.timeoutMs,
        allowLoopback: config.webhooks.allowLoopback,
        ca: config.webhooks.caFile ? readFileSync(config.webhooks.caFile) : undefined,
      }),
    }),
    leaseMs: config.jobLeaseMs,
    pollMs: deps.pollMs,
    outputTtlMs: config.outputTtlMs,
    retryDelayMs: (attempt) => Math.min(60_000, 1_000 * 2 ** attempt),
  });
}
