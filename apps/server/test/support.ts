/** Test wiring: an app on a fresh SQLite store, a manual clock, keys made the operators' way. */
import pino from 'pino';
import { createAccount, issueApiKey } from '../src/accounts.js';
import { createApp } from '../src/app.js';
import { DEFAULT_PRICES } from '../src/domain/catalog.js';
import type { Scope } from '../src/domain/keys.js';
import { createInProcessTaskEvents } from '../src/events/in-process.js';
import type { AppConfig, AppDeps } from '../src/http/deps.js';
import type { Clock } from '../src/interfaces.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { NewTask, Store } from '../src/store/store.js';
import { newRequestId } from '../src/domain/ids.js';
import type { OutputFiles } from '../src/files/storage.js';
import type { Provider } from '../src/providers/provider.js';
import type { JobQueue } from '../src/queue/queue.js';
import { createWorker, type Worker, type WorkerOptions } from '../src/queue/worker.js';

/** A clock that moves only when told to, firing the timers that fall due. */
export class ManualClock implements Clock {
  private timers: { at: number; callback: () => void }[] = [];
  constructor(private ms = Date.parse('2026-11-22T10:00:00.000Z')) {}
  now = () => new Date(this.ms);
  setTimeout = (callback: () => void, delay: number) => {
    const timer = { at: this.ms + delay, callback };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((t) => t !== timer);
    };
  };
  advance(delay: number): void {
    this.ms += delay;
    const due = this.timers.filter((t) => t.at <= this.ms);
    this.timers = this.timers.filter((t) => t.at > this.ms);
    for (const timer of due) timer.callback();
  }
  get pendingTimers(): number {
    return this.timers.length;
  }
}

export const silentLogger = pino({ level: 'silent' });

/** A task as a submission makes it (text to video, 5 s, 720p, no webhook, due 30 minutes after `at`), its id from `at`; `patch` for the rest. */
export const newTask = (accountId: string, creditsCharged: number, at: Date, patch: Partial<NewTask> = {}): NewTask => ({
  id: newRequestId(at),
  accountId,
  model: 'vidgen-2.0',
  prompt: 'p',
  duration: 5,
  aspectRatio: '16:9',
  resolution: '720p',
  mode: 'text_to_video',
  mediaUrls: [],
  metadata: null,
  webhookUrl: null,
  creditsCharged,
  deadlineAt: new Date(at.getTime() + 30 * 60_000),
  ...patch,
});

export interface Harness<S extends Store = SqliteStore> {
  app: ReturnType<typeof createApp>;
  store: S;
  clock: ManualClock;
  deps: AppDeps;
  /** Creates an account with credits and a key; returns both ids and the key. */
  account(credits?: number, scopes?: Scope[]): Promise<{ accountId: string; key: string; keyId: string }>;
  request(method: string, path: string, init?: { key?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
}

/** The AppConfig tests start from: default prices, every model on the local provider, no limits. */
export const testConfig = (patch: Partial<AppConfig> = {}): AppConfig => ({
  prices: DEFAULT_PRICES,
  idempotencyTtlMs: 24 * 3600_000,
  taskDeadlineMs: 30 * 60_000,
  jobMaxAttempts: 3,
  providers: { 'vidgen-2.0': 'local', 'vidgen-2.0-fast': 'local', 'vidgen-1.5-pro': 'local' },
  ...patch,
});

/** An app over a fresh in-memory SQLite store. */
export function harness(overrides: Partial<AppDeps> = {}, path = ':memory:'): Harness {
  return harnessOver(new SqliteStore(path), overrides);
}

/** An app over any store (see support/backends.ts for both kinds). */
export function harnessOver<S extends Store>(store: S, overrides: Partial<AppDeps> = {}): Harness<S> {
  const clock = new ManualClock();
  const deps: AppDeps = {
    store,
    clock,
    logger: silentLogger,
    events: createInProcessTaskEvents(),
    config: testConfig(),
    ...overrides,
  };
  const app = createApp(deps);
  const h: Harness<S> = {
    app,
    store,
    clock: deps.clock as ManualClock,
    deps,
    async account(credits = 1_000_000, scopes: Scope[] = ['tasks:read', 'tasks:write']) {
      const now = deps.clock.now();
      const account = await createAccount(store, { name: 'test', credits, now });
      const { key, record } = await issueApiKey(store, { accountId: account.id, mode: 'test', scopes, name: null, expiresAt: null, now });
      return { accountId: account.id, key, keyId: record.id };
    },
    request(method, url, init = {}) {
      const headers: Record<string, string> = { ...init.headers };
      if (init.key) headers.Authorization = `Bearer ${init.key}`;
      let body: string | undefined;
      if (init.body !== undefined) {
        body = typeof init.body === 'string' ? init.body : JSON.stringify(init.body);
        headers['Content-Type'] ??= 'application/json';
      }
      return Promise.resolve(app.request(url, { method, headers, body }));
    },
  };
  return h;
}

export const SUBMIT = '/api/open/v1/video/generations';
export const validSubmit = (patch: Record<string, unknown> = {}) => ({ model: 'vidgen-2.0-fast', prompt: 'a red ball bouncing', duration: 4, resolution: '480p', ...patch });

/**
 * Yields to the event loop until the condition holds: no timers, so it never
 * sleeps to synchronise. Gives up after `timeoutMs` of real time (under the
 * tests' 30 s), however many turns that took on a loaded machine.
 */
export async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition never held within ${timeoutMs} ms`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * A worker over a harness's store (its queue too, unless given) with the tests'
 * defaults: one local slot, a 60 s lease, a 1 s poll, references "fetched" as
 * they are, retries after 1 s, outputs kept 7 days.
 */
export function testWorker(
  h: Pick<Harness<Store>, 'store' | 'deps'>,
  options: { provider: Provider; files: OutputFiles; workDir: string; queue?: JobQueue } & Partial<WorkerOptions>,
): Worker {
  const { provider, ...overrides } = options;
  return createWorker({
    store: h.store,
    queue: (h.store as unknown as JobQueue),
    events: h.deps.events,
    clock: h.deps.clock,
    logger: silentLogger,
    providerFor: () => provider,
    fetcher: { fetch: async () => ({ ok: true }) },
    concurrency: { local: 1 },
    leaseMs: 60_000,
    pollMs: 1000,
    outputTtlMs: 7 * 24 * 3600_000,
    retryDelayMs: () => 1000,
    ...overrides,
  });
}
