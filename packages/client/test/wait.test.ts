/**
 * waitForCompletion against stubs of the query endpoint: a loopback HTTP server that holds long
 * polls the way the service does (answered when the test changes the task), and a fake fetch on
 * fake timers for the 20-second timeline.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createClient, VidgenTaskError, VidgenTimeoutError, type Task } from '../src/index.js';
import { sleep } from '../src/retry.js';
import { MAX_TIMER_DELAY_MS } from '../src/timers.js';
import { json, taskIn } from './helpers.js';

const POLL_HINT = { queued: 2, processing: 5 } as const;

/** The query endpoint of one task, with the service's long poll: `set()` moves the task. */
async function startTaskStub() {
  let task: Task = taskIn('queued');
  const waits: (string | null)[] = [];
  const held = new Set<{ from: Task['status']; release: () => void }>();
  const arrivals: (() => void)[] = [];
  const answer = (res: ServerResponse) => {
    const hint = task.status === 'queued' || task.status === 'processing' ? { 'Retry-After': String(POLL_HINT[task.status]) } : {};
    res.writeHead(200, { 'Content-Type': 'application/json', 'X-Correlation-Id': 'stub', ...hint }).end(JSON.stringify(task));
  };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url!, 'http://stub');
    const wait = Number(url.searchParams.get('wait') ?? 0);
    waits.push(url.searchParams.get('wait'));
    arrivals.shift()?.();
    if (!wait || task.status === 'succeeded' || task.status === 'failed' || task.status === 'cancelled') return answer(res);
    const entry = {
      from: task.status,
      release: () => {
        clearTimeout(timer);
        held.delete(entry);
        answer(res);
      },
    };
    const timer = setTimeout(entry.release, wait * 1000);
    held.add(entry);
    req.on('close', () => {
      clearTimeout(timer);
      held.delete(entry);
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    waits,
    reset(status: Task['status']) {
      task = taskIn(status);
      waits.length = 0;
    },
    /** Resolves when the next request arrives. */
    nextRequest: () => new Promise<void>((done) => arrivals.push(done)),
    set(status: Task['status']) {
      task = taskIn(status);
      for (const entry of [...held]) if (entry.from !== status) entry.release();
    },
    close: () => new Promise<void>((done) => (server.closeAllConnections(), server.close(() => done()))),
  };
}

describe('waitForCompletion with a long-polling stub', () => {
  let stub: Awaited<ReturnType<typeof startTaskStub>>;
  beforeAll(async () => {
    stub = await startTaskStub();
  });
  afterAll(() => stub.close());

  const client = () => createClient({ baseUrl: stub.baseUrl, apiKey: 'vg_test_x', retry: false });

  it('a task that takes long makes at most 2 requests: one long poll per change', async () => {
    stub.reset('queued');
    const updates: Task['status'][] = [];
    const arrived = stub.nextRequest();
    const done = client().waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 60_000, onUpdate: (task) => updates.push(task.status) });
    await arrived;
    const secondArrived = stub.nextRequest();
    stub.set('processing');
    await secondArrived;
    stub.set('succeeded');
    expect((await done).status).toBe('succeeded');
    expect(stub.waits).toEqual(['30', '30']);
    expect(updates).toEqual(['processing', 'succeeded']);
  });

  it('submitAndWait knows the task is queued, and one long poll covers queued → succeeded', async () => {
    stub.reset('queued');
    const accepted = { success: true, requestId: 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', status: 'queued', creditsCharged: 100 };
    const fetch = async (request: Request) => (request.method === 'POST' ? json(accepted, 202) : globalThis.fetch(request));
    const arrived = stub.nextRequest();
    const done = createClient({ baseUrl: stub.baseUrl, apiKey: 'vg_test_x', fetch }).submitAndWait({ model: 'vidgen-2.0', prompt: 'x' }, { timeout: 60_000 });
    await arrived;
    stub.set('succeeded');
    expect((await done).status).toBe('succeeded');
    expect(stub.waits).toEqual(['30']);
  });

  it('rejects with VidgenTaskError carrying the task and its error when the task fails', async () => {
    stub.reset('processing');
    const arrived = stub.nextRequest();
    const done = client().waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 60_000 }).catch((e: unknown) => e);
    await arrived;
    stub.set('failed');
    const error = (await done) as VidgenTaskError;
    expect(error).toBeInstanceOf(VidgenTaskError);
    expect(error.task.status).toBe('failed');
    expect(error.error).toEqual({ code: 'provider_error', message: 'the stub failed it' });
  });

  it('never asks for a longer wait than the time left, and rejects with VidgenTimeoutError', async () => {
    stub.reset('queued');
    const started = Date.now();
    const error = (await client()
      .waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 1_500 })
      .catch((e: unknown) => e)) as VidgenTimeoutError;
    expect(error).toBeInstanceOf(VidgenTimeoutError);
    expect(error.lastTask?.status).toBe('queued');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_450);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(stub.waits).toEqual(['1']);
  });

  it('stops when the signal aborts, with its reason', async () => {
    stub.reset('queued');
    const controller = new AbortController();
    const arrived = stub.nextRequest();
    const done = client().waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { signal: controller.signal }).catch((e: unknown) => e);
    await arrived;
    controller.abort(new Error('user left'));
    expect(await done).toEqual(new Error('user left'));
  });
});

describe('waitForCompletion on fake timers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A fake service whose task is queued for 2 s, processing until `succeedsAt` (20 s), then succeeded. */
  function timeline(options: { longPoll: boolean; succeedsAt?: number }) {
    const { succeedsAt = 20_000 } = options;
    const start = Date.now();
    const statusAt = (ms: number): Task['status'] => (ms < 2_000 ? 'queued' : ms < succeedsAt ? 'processing' : 'succeeded');
    const changes = [2_000, succeedsAt];
    const requests: { at: number; wait: string | null }[] = [];
    const answer = () => {
      const status = statusAt(Date.now() - start);
      const hint: Record<string, string> = status === 'queued' || status === 'processing' ? { 'Retry-After': String(POLL_HINT[status]) } : {};
      return json(taskIn(status), 200, hint);
    };
    const fetch = async (request: Request): Promise<Response> => {
      const wait = new URL(request.url).searchParams.get('wait');
      const at = Date.now() - start;
      requests.push({ at, wait });
      if (request.method === 'POST') return json({ success: true, requestId: taskIn('queued').requestId, status: 'queued', creditsCharged: 100 }, 202);
      const status = statusAt(at);
      if (!options.longPoll || !wait || status === 'succeeded') return answer();
      // Held until the status changes or `wait` seconds pass, as the service does.
      const nextChange = changes.find((change) => change > at)!;
      await new Promise((resolve) => setTimeout(resolve, Math.min(Number(wait) * 1000, nextChange - at)));
      return answer();
    };
    return { fetch, requests };
  }

  it('a 20 s task takes 2 requests with the long poll', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const service = timeline({ longPoll: true });
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: service.fetch });
    const done = client.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 120_000 });
    await vi.advanceTimersByTimeAsync(21_000);
    expect((await done).status).toBe('succeeded');
    expect(service.requests).toEqual([
      { at: 0, wait: '30' },
      { at: 2_000, wait: '30' },
    ]);
  });

  it('when a server answers at once without a change, the next poll waits for Retry-After', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const service = timeline({ longPoll: false });
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: service.fetch });
    const done = client.submitAndWait({ model: 'vidgen-2.0', prompt: 'x' }, { timeout: 120_000 });
    await vi.advanceTimersByTimeAsync(30_000);
    expect((await done).status).toBe('succeeded');
    // queued (as submitted) → pause the queued hint (2 s); processing is a change → at once;
    // processing again → pause the processing hint (5 s) each time until it succeeds.
    expect(service.requests.map((request) => request.at)).toEqual([0, 0, 2_000, 2_000, 7_000, 12_000, 17_000, 22_000]);
  });

  /** A service that never answers: its request only ends, with the reason, when it is aborted. */
  const silentFetch = (request: Request) =>
    new Promise<Response>((_, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason), { once: true }));

  /** Whether `promise` has settled yet, without an unhandled rejection. */
  function track<T>(promise: Promise<T>) {
    const state = { settled: false, outcome: undefined as unknown };
    void promise.then(
      (value) => Object.assign(state, { settled: true, outcome: value }),
      (error: unknown) => Object.assign(state, { settled: true, outcome: error }),
    );
    return state;
  }

  // setTimeout fires after 1 ms for a delay over 2^31 - 1 ms or Infinity (the fake timers do the same).
  it('a timeout longer than setTimeout takes (2^31 - 1 ms) runs out when it should, not after 1 ms', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const timeout = MAX_TIMER_DELAY_MS + 60_001; // 24.8 days and a minute
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: silentFetch });
    const wait = track(client.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout }));
    await vi.advanceTimersByTimeAsync(10);
    expect(wait.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(timeout - 11);
    expect(wait.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(wait.outcome).toBeInstanceOf(VidgenTimeoutError);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('timeout: Infinity sets no timer and waits until the task ends, however long', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: silentFetch });
    const controller = new AbortController();
    const wait = track(client.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: Infinity, signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(10);
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(1_000 * 24 * 3600_000);
    expect(wait.settled).toBe(false);
    controller.abort(new Error('user left'));
    await vi.advanceTimersByTimeAsync(0);
    expect(wait.outcome).toEqual(new Error('user left'));

    // A task that takes 45 minutes (longer than the default timeout): one long poll per 30 s.
    const service = timeline({ longPoll: true, succeedsAt: 45 * 60_000 });
    const done = track(createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: service.fetch }).waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: Infinity }));
    await vi.advanceTimersByTimeAsync(45 * 60_000 + 1_000);
    expect((done.outcome as Task | undefined)?.status).toBe('succeeded');
    // The first at 0 s (queued; answered at 2 s, processing), then 90 long polls from 2 s on, the last answered at 45 min.
    expect(service.requests).toHaveLength(1 + Math.ceil((45 * 60_000 - 2_000) / 30_000));
    expect(service.requests.every((request) => request.wait === '30')).toBe(true);
  });

  it('a timeout that is not a number is refused', async () => {
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch: silentFetch });
    await expect(client.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: Number.NaN })).rejects.toThrow(TypeError);
  });

  it('sleep waits out a delay longer than setTimeout takes, and Infinity never ends', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const long = track(sleep(3 * MAX_TIMER_DELAY_MS + 5));
    const forever = track(sleep(Infinity));
    await vi.advanceTimersByTimeAsync(3 * MAX_TIMER_DELAY_MS + 4);
    expect(long.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(long.settled).toBe(true);
    await vi.advanceTimersByTimeAsync(10 * MAX_TIMER_DELAY_MS);
    expect(forever.settled).toBe(false);
    expect(vi.getTimerCount()).toBe(0);
  });
});
