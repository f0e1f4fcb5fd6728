/** Prometheus metrics, in a registry of the app's own (tests build many apps). */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock, type Clock } from '../interfaces.js';
import type { Store, UpstreamChannelRecord } from '../store/store.js';

export interface Metrics {
  /** Everything but the HTTP request metrics, which `exposition()` adds. */
  registry: Registry;
  /** A request was answered (the request frame, http/frame.ts). */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** The text GET /metrics answers: the registry's metrics, then the HTTP requests' (in `registry.contentType`). */
  exposition(): Promise<string>;
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
  /** The requests being answered, read when scraped (`vidgen_http_requests_in_flight`). */
  requestsInFlight?: { readonly count: number };
}

export function createMetrics(store: Store, { processMetrics = true, channels = [], clock = systemClock, requestsInFlight }: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (processMetrics) collectDefaultMetrics({ register: registry, prefix: 'vidgen_' });
  const requests = new RequestMetrics();
  new Gauge({
    name: 'vidgen_http_requests_in_flight',
    help: 'HTTP requests being answered (long polls included).',
    registers: [registry],
    collect() {
      this.set(requestsInFlight?.count ?? 0);
    },
  });
  const charged = new Counter({ name: 'vidgen_credits_charged_total', help: 'Credits charged at acceptance.', registers: [registry] });
  const refunded = new Counter({ name: 'vidgen_credits_refunded_total', help: 'Credits refunded for failed and cancelled tasks.', registers: [registry] });
  new Gauge({
    name: 'vidgen_tasks',
    // Read without reading every task: the active ones through their partial index, the ended ones from the usage totals (Store.countTasksByStatus).
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
    observeRequest: (method, route, status, seconds) => requests.observe(method, route, status, seconds),
    exposition: async () => `${await registry.metrics()}\n${requests.text()}`,
    creditsCharged: (amount) => charged.inc(amount),
    creditsRefunded: (amount) => refunded.inc(amount),
  };
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** One method and route's requests: answers by status, and the latency histogram (per bucket, not cumulative; the last is over 30 s). */
interface RouteRequests {
  method: string;
  route: string;
  byStatus: Map<number, number>;
  buckets: number[];
  sum: number;
}

/**
 * `vidgen_http_requests_total` (by method, route and status) and
 * `vidgen_http_request_duration_seconds` (by method and route), kept as plain
 * numbers and written out when scraped. prom-client's labelled counter and
 * histogram hash and check their labels on every call: about a microsecond a
 * request, for numbers read a few times a minute. Routes are the app's
 * patterns ('unmatched' for none) and methods what Node parses, so the label
 * sets are bounded.
 */
export class RequestMetrics {
  /** By route, then method: both strings the same each time (the app's patterns, Node's methods), so each lookup finds its key by its kept hash, with no key string made per request. */
  private readonly routes = new Map<string, Map<string, RouteRequests>>();
  /** In the order first seen, for the text. */
  private readonly entries: RouteRequests[] = [];

  observe(method: string, route: string, status: number, seconds: number): void {
    let methods = this.routes.get(route);
    if (!methods) {
      methods = new Map();
      this.routes.set(route, methods);
    }
    let entry = methods.get(method);
    if (!entry) {
      entry = { method, route, byStatus: new Map(), buckets: new Array<number>(LATENCY_BUCKETS.length + 1).fill(0), sum: 0 };
      methods.set(method, entry);
      this.entries.push(entry);
    }
    entry.byStatus.set(status, (entry.byStatus.get(status) ?? 0) + 1);
    let bucket = 0;
    while (bucket < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[bucket]!) bucket++;
    entry.buckets[bucket]!++;
    entry.sum += seconds;
  }

  /** Both metrics in Prometheus's text format, as prom-client writes its own. */
  text(): string {
    const counts = ['# HELP vidgen_http_requests_total HTTP requests by method, route and status.', '# TYPE vidgen_http_requests_total counter'];
    const latency = [
      '# HELP vidgen_http_request_duration_seconds HTTP request latency by method and route.',
      '# TYPE vidgen_http_request_duration_seconds histogram',
    ];
    for (const { method, route, byStatus, buckets, sum } of this.entries) {
      const labels = `method="${labelValue(method)}",route="${labelValue(route)}"`;
      for (const [status, count] of byStatus) counts.push(`vidgen_http_requests_total{${labels},status="${status}"} ${count}`);
      let below = 0;
      LATENCY_BUCKETS.forEach((bound, i) => {
        below += buckets[i]!;
        latency.push(`vidgen_http_request_duration_seconds_bucket{le="${bound}",${labels}} ${below}`);
      });
      const total = below + buckets[LATENCY_BUCKETS.length]!;
      latency.push(`vidgen_http_request_duration_seconds_bucket{le="+Inf",${labels}} ${total}`);
      latency.push(`vidgen_http_request_duration_seconds_sum{${labels}} ${sum}`);
      latency.push(`vidgen_http_request_duration_seconds_count{${labels}} ${total}`);
    }
    return `${counts.join('\n')}\n\n${latency.join('\n')}\n`;
  }
}

/** A label value escaped as the text format wants it (backslash, double quote, newline). */
const labelValue = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

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
