/** Prometheus metrics, in a registry of the app's own (tests build many apps). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '../store/store.js';

export interface Metrics {
  registry: Registry;
  /** A request came in; call the returned function when it is answered. */
  requestStarted(): () => void;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  creditsCharged(amount: number): void;
  creditsRefunded(amount: number): void;
}

export function createMetrics(store: Store, { processMetrics = true } = {}): Metrics {
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
