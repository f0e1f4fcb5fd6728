/**
 * Builds the generation pipeline from configuration: providers routed by
 * model, the reference fetcher, output files and the worker.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { ConfigError, type Config, type ProviderName } from './config.js';
import type { ModelId } from './domain/catalog.js';
import { newUlid } from './domain/ids.js';
import type { OutputFiles } from './files/storage.js';
import type { Clock, TaskEvents } from './interfaces.js';
import { createMediaFetcher } from './media/fetcher.js';
import { createUpstreamClient } from './providers/byteplus/client.js';
import { createInstantProvider } from './providers/instant/instant-provider.js';
import { createLocalProvider } from './providers/local/local-provider.js';
import type { Provider } from './providers/provider.js';
import { createWorker, type Worker } from './queue/worker.js';
import { upstreamCallbackUrl } from './upstream/callback-token.js';
import { createFollower } from './upstream/follower.js';
import { createUpstreamSubmitter, type Channel } from './upstream/submitter.js';
import { createDeliveryRunner } from './webhooks/deliveries.js';
import { createWebhookSender } from './webhooks/sender.js';
import { WEBHOOKS_LANE, type JobQueue } from './queue/queue.js';
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
      case 'byteplus':
        // Not a renderer: the worker hands this lane's jobs to the upstream submitter (`upstream` in createPipelineWorker), never to generate().
        return { name: 'byteplus', needsLocalMedia: false, generate: () => Promise.reject(new Error('the byteplus lane is run by the upstream submitter')) };
    }
  };
  for (const name of new Set(Object.values(config.providers))) built.set(name, build(name));
  return (model) => built.get(config.providers[model])!;
}

/** The upstream channels' clients, checked against the routing: every model routed to `byteplus` needs a channel that maps it. */
export function createChannels(config: Config): Channel[] {
  const routed = (Object.keys(config.providers) as ModelId[]).filter((m) => config.providers[m] === 'byteplus');
  if (routed.length === 0) return [];
  const { channels, requestTimeoutMs } = config.upstream;
  if (channels.length === 0) {
    throw new ConfigError('VIDGEN_PROVIDERS routes a model to byteplus, but no upstream channel is configured (VIDGEN_UPSTREAM_CHANNELS, or VIDGEN_BYTEPLUS_API_KEY)');
  }
  const unmapped = routed.filter((m) => !channels.some((channel) => channel.modelIds[m]));
  if (unmapped.length) throw new ConfigError(`no upstream channel maps ${unmapped.join(', ')} to an upstream model id (VIDGEN_BYTEPLUS_MODELS or a channel's models)`);
  return channels.map((channel) => ({ config: channel, client: createUpstreamClient({ baseUrl: channel.baseUrl, apiKey: channel.apiKey, requestTimeoutMs }) }));
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
  /** Signs the upstream's callback URLs (upstream/callback-token.ts); callbacks are asked for only with VIDGEN_PUBLIC_BASE_URL set. */
  callbackSecret?: string;
}): Worker {
  const { config } = deps;
  const workerId = `upstream_${newUlid(deps.clock.now().getTime())}`;
  const channels = createChannels(config);
  let worker: Worker | undefined;
  const follower =
    channels.length === 0
      ? undefined
      : createFollower({
          store: deps.store,
          clock: deps.clock,
          logger: deps.logger,
          events: deps.events,
          clients: new Map(channels.map((channel) => [channel.config.name, channel.client])),
          files: deps.files,
          workDir: join(config.dataDir, 'work'),
          workerId,
          pollMs: config.upstream.pollMs,
          batchSize: config.upstream.batchSize,
          leaseMs: config.jobLeaseMs,
          downloadConcurrency: config.upstream.downloadConcurrency,
          downloadAttempts: config.upstream.downloadAttempts,
          outputTtlMs: config.outputTtlMs,
          onSlotFreed: () => worker?.wake('jobs'),
        });
  const upstream =
    follower &&
    ({
      lane: 'byteplus',
      follower,
      submitter: createUpstreamSubmitter({
        store: deps.store,
        queue: deps.queue,
        events: deps.events,
        clock: deps.clock,
        logger: deps.logger,
        channels,
        pollMs: config.upstream.pollMs,
        createTimeoutMs: config.upstream.requestTimeoutMs,
        cooldownAfter: config.upstream.cooldownAfter,
        cooldownMs: config.upstream.cooldownMs,
        callbackUrl: deps.callbackSecret && config.publicBaseUrl ? (taskId) => upstreamCallbackUrl(config.publicBaseUrl!, deps.callbackSecret!, taskId) : undefined,
      }),
    } as const);
  worker = createWorker({
    upstream,
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
    concurrency: { ...config.concurrency, [WEBHOOKS_LANE]: config.webhooks.concurrency },
    claimIntervalMs: config.claimIntervalMs,
    // A job enqueued wakes the lanes models are routed to, and webhooks; the rest are looked at every poll.
    wakeLanes: [...new Set(Object.values(config.providers)), WEBHOOKS_LANE],
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
  return worker;
}
