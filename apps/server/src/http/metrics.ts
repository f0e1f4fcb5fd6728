/** Prometheus metrics, in a registry of the app's own (tests build many apps). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock, type Clock } from '../interfaces.js';
import type { Store, UpstreamChannelRecord } from '../store/store.js';

export interface Metrics {
  registry: Registry;
  /** A request came in; call the returned function when it is answered. */
  requestStarted(): () => void;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  creditsCharged(amount: number): void;
  creditsRefunded(amount: number): void;
}

export interface MetricsOptions {
  /** Node's process metrics (off in tests, which build many registries). */
  processMetrics?: boolean;
  /** The configured upstream channels: each is exported (from zero, before its first task) with its limit. */
  channels?: readonly { name: string; maxInFlight: number }[];
  /** Whether a channel is cooling down is read against it. */
  clock?: Pick<Clock, 'now'>;
}

export function createMetrics(store: Store, { processMetrics = true, channels = [], clock = systemClock }: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry, prefix: 'vidgen_' });
  const requests = new Counter({
    name: 'vidgen_http_requests_total',
    help: 'HTTP requests by method, route and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'vidgen_http_request_duration_seconds',
    help: 'HTTP request latency by method and route.',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const inFlight = new Gauge({ name: 'vidgen_http_requests_in_flight', help: 'HTTP requests being answered (long polls included).', registers: [registry] });
  const charged = new Counter({ name: 'vidgen_credits_charged_total', help: 'Credits charged at acceptance.', registers: [registry] });
  const refunded = new Counter({ name: 'vidgen_credits_refunded_total', help: 'Credits refunded for failed and cancelled tasks.', registers: [registry] });
  new Gauge({
    name: 'vidgen_tasks',
    help: 'Tasks in the store by status.',
    labelNames: ['status'],
    registers: [registry],
    async collect() {
      for (const [status, count] of Object.entries(await store.countTasksByStatus())) this.set({ status }, count);
    },
  });
  addUpstreamGauges(registry, store, channels, clock);
  return {
    registry,
    requestStarted() {
      inFlight.inc();
      return () => inFlight.dec();
    },
    observeRequest(method, route, status, seconds) {
      requests.inc({ method, route, status: String(status) });
      latency.observe({ method, route }, seconds);
    },
    creditsCharged: (amount) => charged.inc(amount),
    creditsRefunded: (amount) => refunded.inc(amount),
  };
}

const NO_TASKS_YET: Omit<UpstreamChannelRecord, 'name'> = {
  inFlight: 0,
  consecutiveFailures: 0,
  cooldownUntil: null,
  lastError: null,
  lastErrorAt: null,
  creates: 0,
  createFailures: 0,
  lostCreates: 0,
  discardedResults: 0,
};

/**
 * The channels' gauges, labelled by channel: every configured channel and every channel the store knows
 * (one no longer configured may still have tasks upstream). The store's counts are cumulative, so they are
 * gauges set from the store, not counters of this process.
 */
function addUpstreamGauges(registry: Registry, store: Store, configured: readonly { name: string; maxInFlight: number }[], clock: Pick<Clock, 'now'>): void {
  const limit = new Gauge({ name: 'vidgen_upstream_limit', help: 'Upstream tasks a channel may have in flight (its configured maxInFlight).', labelNames: ['channel'], registers: [registry] });
  for (const channel of configured) limit.set({ channel: channel.name }, channel.maxInFlight);

  // prom-client starts every collect of a scrape at once: the first starts the read and the others share it
  // while it is pending, so a scrape reads the channels once; the next scrape reads again.
  let pending: Promise<{ channels: [name: string, record: Omit<UpstreamChannelRecord, 'name'>][]; now: Date }> | undefined;
  const snapshot = () =>
    (pending ??= store
      .listUpstreamChannels()
      .then((stored) => {
        const byName = new Map(stored.map((record) => [record.name, record]));
        const names = new Set([...configured.map((channel) => channel.name), ...byName.keys()]);
        return { channels: [...names].map((name) => [name, byName.get(name) ?? NO_TASKS_YET] as [string, Omit<UpstreamChannelRecord, 'name'>]), now: clock.now() };
      })
      .finally(() => (pending = undefined)));

  const fromStore = (name: string, help: string, value: (record: Omit<UpstreamChannelRecord, 'name'>, now: Date) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['channel'],
      registers: [registry],
      async collect() {
        const { channels, now } = await snapshot();
        this.reset();
        for (const [channel, record] of channels) this.set({ channel }, value(record, now));
      },
    });
  fromStore('vidgen_upstream_in_flight', 'Upstream tasks of ours being created or queued/running on the channel.', (r) => r.inFlight);
  fromStore('vidgen_upstream_consecutive_failures', 'Creates refused in a row by the channel (reset by a successful create).', (r) => r.consecutiveFailures);
  fromStore('vidgen_upstream_cooling_down', '1 while the channel is skipped for new creates after failures in a row, else 0.', (r, now) =>
    r.cooldownUntil && r.cooldownUntil.getTime() > now.getTime() ? 1 : 0,
  );
  fromStore('vidgen_upstream_creates', 'Creates the channel answered with an upstream id (cumulative, from the store).', (r) => r.creates);
  fromStore('vidgen_upstream_create_failures', 'Creates the channel refused before taking anything (cumulative, from the store).', (r) => r.createFailures);
  fromStore('vidgen_upstream_lost_creates', 'Creates whose answer was lost: the task may exist upstream, and is never sent again (cumulative, from the store).', (r) => r.lostCreates);
  fromStore('vidgen_upstream_discarded_results', 'Upstream tasks that finished after our task had ended: paid for, thrown away (cumulative, from the store).', (r) => r.discardedResults);
}
