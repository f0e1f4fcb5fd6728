/**
 * The submitter and the follower over a real store (SQLite and PostgreSQL) and a loopback stand-in of
 * the upstream, driven by a manual clock: batched following, every upstream ending mapped and refunded
 * once, cancels passed upstream or results discarded, callbacks as hints, download retries, and two
 * workers sharing the following without doing a task twice.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ModelId } from '../src/domain/catalog.js';
import { createLocalOutputFiles } from '../src/files/storage.js';
import { createUpstreamClient } from '../src/providers/byteplus/client.js';
import type { Provider } from '../src/providers/provider.js';
import { wakeForNotice, type Worker } from '../src/queue/worker.js';
import type { Backend } from '../src/store/open.js';
import type { Store } from '../src/store/store.js';
import type { ChannelConfig } from '../src/upstream/channels.js';
import { upstreamCallbackUrl } from '../src/upstream/callback-token.js';
import { createFollower, type Follower } from '../src/upstream/follower.js';
import { createUpstreamSubmitter } from '../src/upstream/submitter.js';
import { ManualClock, SUBMIT, testConfig, testWorker, until, validSubmit, type Harness } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { type BytePlusStandin, errorReply, makeTestVideo, scripts, startBytePlusStandin } from './support/byteplus-standin.js';

const API_KEY = 'ark-follower-test';
const TASKS = '/contents/generations/tasks';
const MODEL_IDS: Partial<Record<ModelId, string>> = { 'vidgen-2.0': 'dreamina-seedance-2-0-260128', 'vidgen-2.0-fast': 'dreamina-seedance-2-0-fast-260128', 'vidgen-1.5-pro': 'seedance-1-5-pro-251215' };
const POLL_MS = 1_000;
const CALLBACK_SECRET = 'callback-secret';

let dir: string;
let standin: BytePlusStandin;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-follower-'));
  standin = await startBytePlusStandin({ apiKey: API_KEY, video: readFileSync(await makeTestVideo(dir)) });
});
afterAll(async () => {
  await standin.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Never called: the byteplus lane's jobs go to the submitter. */
const noRenderer: Provider = { name: 'byteplus', needsLocalMedia: false, generate: () => Promise.reject(new Error('not a renderer')) };

interface Setup extends Harness<Store> {
  worker: Worker;
  follower: Follower;
  outputs: string;
  /** A second worker process on the same store: its own submitter, follower and worker id. */
  another(): { worker: Worker; follower: Follower };
}

const cleanups: (() => Promise<unknown> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  standin.reset();
});

describe.each(backendKinds)('following upstream tasks on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => opened?.done());

  async function setup(
    options: {
      downloadAttempts?: number;
      /** Clock time a list request takes. */ listTakesMs?: number;
      /** Pass a callback_url with each create. */ callbacks?: boolean;
      /** Told of each claim the followers make (their store's claimUpstreamWork). */ onClaim?: (kind: 'check' | 'download') => void;
      checksPerClaim?: number;
    } = {},
  ): Promise<Setup> {
    const backend: Backend = await opened.fresh();
    const outputs = mkdtempSync(join(dir, 'outputs-'));
    const files = createLocalOutputFiles({ directory: outputs, publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('test-secret') });
    const workers: Worker[] = [];
    const h = backendHarness(backend, {
      config: testConfig({ providers: { 'vidgen-2.0': 'byteplus', 'vidgen-2.0-fast': 'byteplus', 'vidgen-1.5-pro': 'byteplus' } }),
      wakeWorkers: (what) => workers.forEach((w) => w.wake(what)),
      files,
      upstreamCallbackSecret: CALLBACK_SECRET,
    });
    // The app listening on loopback, for the upstream's callbacks.
    const server = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    const publicBaseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
    backend.onJobEnqueued((payload) => workers.forEach((w) => w.wake(wakeForNotice(payload))));
    const channel: ChannelConfig = { name: 'main', kind: 'byteplus', baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, maxInFlight: 1_000, priority: 0, weight: 1 };
    const real = createUpstreamClient({ baseUrl: standin.baseUrl, apiKey: API_KEY, requestTimeoutMs: 5_000 });
    const client: typeof real = {
      ...real,
      list: async (ids) => {
        h.clock.advance(options.listTakesMs ?? 0);
        return real.list(ids);
      },
    };
    let n = 0;
    const process = () => {
      const id = `test_${++n}`;
      let worker: Worker | undefined;
      const onClaim = options.onClaim;
      const followerStore: Store = onClaim
        ? new Proxy(h.store, {
            get(target, property) {
              const value = Reflect.get(target, property, target) as unknown;
              if (property === 'claimUpstreamWork') return (input: Parameters<Store['claimUpstreamWork']>[0]) => (onClaim(input.kind), target.claimUpstreamWork(input));
              return typeof value === 'function' ? value.bind(target) : value;
            },
          })
        : h.store;
      const follower = createFollower({
        store: followerStore,
        clock: h.clock,
        logger: h.deps.logger,
        events: h.deps.events,
        clients: new Map([['main', client]]),
        files,
        workDir: join(dir, `work-${id}`),
        workerId: `follower_${id}`,
        pollMs: POLL_MS,
        batchSize: 100,
        leaseMs: 60_000,
        downloadConcurrency: 8,
        downloadAttempts: options.downloadAttempts ?? 3,
        outputTtlMs: 7 * 24 * 3600_000,
        onSlotFreed: () => worker?.wake('jobs'),
        checksPerClaim: options.checksPerClaim,
      });
      const submitter = createUpstreamSubmitter({
        store: h.store,
        queue: backend.queue,
        events: h.deps.events,
        clock: h.clock,
        logger: h.deps.logger,
        channels: [{ config: channel, client }],
        pollMs: POLL_MS,
        createTimeoutMs: 5_000,
        cooldownAfter: 3,
        cooldownMs: 30_000,
        callbackUrl: options.callbacks ? (taskId) => upstreamCallbackUrl(publicBaseUrl, CALLBACK_SECRET, taskId) : undefined,
      });
      worker = testWorker(h, { provider: noRenderer, files, workDir: join(dir, `work-${id}`), queue: backend.queue, concurrency: { byteplus: 16 }, upstream: { lane: 'byteplus', submitter, follower } });
      workers.push(worker);
      cleanups.push(() => worker!.stop({ graceMs: 0 }));
      worker.start();
      return { worker, follower };
    };
    const first = process();
    return { ...h, ...first, outputs, another: process };
  }

  async function submit(s: Setup, key: string, count: number, body: Record<string, unknown> = validSubmit()): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const res = await s.request('POST', SUBMIT, { key, body });
      expect(res.status).toBe(202);
      ids.push(((await res.json()) as { requestId: string }).requestId);
    }
    return ids;
  }

  /** One at a time, each created upstream before the next: the stand-in's scripts go to them in this order. */
  async function submitInOrder(s: Setup, key: string, count: number): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const [id] = await submit(s, key, 1);
      await created(s, [id!]);
      ids.push(id!);
    }
    return ids;
  }

  const statusOf = async (s: Setup, id: string) => (await s.store.findTask(id))!.status;
  const upstreamOf = async (s: Setup, id: string) => (await s.store.getUpstreamTask(id))!;
  /** Waits until every task's upstream row is past `creating` (the create answered and was recorded). */
  const created = (s: Setup, ids: string[]) => until(async () => (await Promise.all(ids.map((id) => s.store.getUpstreamTask(id)))).every((u) => u && u.state !== 'creating'));
  /** One polling period: the follower's round runs, and this waits for it and its downloads. */
  async function round(s: Setup, follower: Follower = s.follower): Promise<void> {
    s.clock.advance(POLL_MS);
    await follower.idle();
  }
  const refunds = async (s: Setup, accountId: string) => (await s.store.listLedger(accountId)).filter((e) => e.kind === 'refund').length;

  it.skipIf(skip)('follows 250 tasks with 3 list requests a round, none on its own, and completes each with its video', async () => {
    const s = await setup();
    const { key, accountId } = await s.account();
    for (let i = 0; i < 250; i++) standin.enqueue(scripts.succeedsAfter(1));
    const ids = await submit(s, key, 250);
    await created(s, ids);
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(250);

    await round(s);
    expect(standin.listed().map((batch) => batch.length).sort((a, b) => a - b)).toEqual([50, 100, 100]);
    expect(await statusOf(s, ids[0]!)).toBe('processing');
    await round(s);
    await until(async () => (await Promise.all(ids.map((id) => statusOf(s, id)))).every((status) => status === 'succeeded'));
    expect(standin.listed()).toHaveLength(6);
    // Only list requests: no task was queried on its own.
    expect(standin.requestsTo('GET', TASKS).filter((r) => r.path !== `/api/v3${TASKS}`)).toHaveLength(0);
    const task = await s.store.findTask(ids[0]!);
    expect(existsSync(join(s.outputs, task!.outputKey!))).toBe(true);
    expect(await upstreamOf(s, ids[0]!)).toMatchObject({ state: 'ended', outcome: 'succeeded', usage: { completionTokens: 108900, totalTokens: 108900 } });
    expect(await refunds(s, accountId)).toBe(0);
  });

  it.skipIf(skip)('downloads what a round saw succeed without another round: a finished download or a job woken for claims only downloads', async () => {
    const claims = { check: 0, download: 0 };
    const s = await setup({ onClaim: (kind) => claims[kind]++ });
    const { key } = await s.account();
    for (let i = 0; i < 12; i++) standin.enqueue(scripts.succeedsAfter(0));
    const ids = await submit(s, key, 12);
    await created(s, ids);
    await s.follower.idle();
    // Woken for jobs (a submission elsewhere, a slot freed): no look at the followed tasks.
    claims.check = claims.download = 0;
    s.worker.wake('jobs');
    s.worker.wake('jobs');
    await s.follower.idle();
    expect(claims).toEqual({ check: 0, download: 0 });
    // One round lists them all, sees them succeed, and their 12 downloads (8 at a time) follow without another check.
    await round(s);
    await until(async () => (await Promise.all(ids.map((id) => statusOf(s, id)))).every((status) => status === 'succeeded'));
    await s.follower.idle();
    expect(standin.listed()).toHaveLength(1);
    expect(claims.check).toBe(1);
    expect(claims.download).toBeGreaterThanOrEqual(2);
    expect(standin.requests.filter((r) => r.path.startsWith('/media/'))).toHaveLength(12);
    // Woken for the upstream (a callback, a cancel): a check round.
    s.worker.wake('upstream');
    await s.follower.idle();
    expect(claims.check).toBe(2);
  });

  it.skipIf(skip)('claims at most checksPerClaim followed tasks at a time, and again at once while more are due: each listed once in the period', async () => {
    const claims = { check: 0, download: 0 };
    // Each list request takes 300 ms of the clock in the first round: its three claims span 900 ms of it.
    const options = { checksPerClaim: 100, listTakesMs: 300, onClaim: (kind: 'check' | 'download') => claims[kind]++ };
    const s = await setup(options);
    const { key } = await s.account();
    for (let i = 0; i < 250; i++) standin.enqueue(scripts.runsForever());
    const ids = await submit(s, key, 250);
    await created(s, ids);
    await s.follower.idle();
    claims.check = 0;
    await round(s);
    // 100, 100, then 50: not a full claim, so no fourth.
    expect(claims.check).toBe(3);
    expect(standin.listed().map((batch) => batch.length).sort((a, b) => a - b)).toEqual([50, 100, 100]);
    expect(new Set(standin.listed().flat()).size).toBe(250);
    // The next period (its timer one period after this one's), its lists instant: all 250 due again at its start,
    // the last claim's too (due from the round's start, not from their claim's).
    options.listTakesMs = 0;
    s.clock.advance(POLL_MS - 900);
    await s.follower.idle();
    expect(claims.check).toBe(6);
    expect(standin.listed()).toHaveLength(6);
    expect(new Set(standin.listed().slice(3).flat()).size).toBe(250);
  });

  it.skipIf(skip)('queries each followed task every period, however long its list request takes', async () => {
    const s = await setup({ listTakesMs: 300 });
    const { key } = await s.account();
    standin.enqueue(scripts.runsForever());
    const [id] = await submit(s, key, 1);
    await created(s, [id!]);
    await round(s);
    expect(standin.listed()).toHaveLength(1);
    // The follower's timer fires one period after the last: 300 ms of it went on the list request.
    for (let i = 2; i <= 5; i++) {
      s.clock.advance(POLL_MS - 300);
      await s.follower.idle();
      expect(standin.listed()).toHaveLength(i);
    }
    expect(await upstreamOf(s, id!)).toMatchObject({ state: 'following', upstreamStatus: 'running' });
  });

  it.skipIf(skip)('maps every upstream ending to the contract and refunds each exactly once', async () => {
    const s = await setup();
    const { key, accountId } = await s.account();
    standin.enqueue(scripts.expires());
    standin.enqueue(scripts.failsWith('OutputVideoSensitiveContentDetected', 'The output video may contain sensitive content.'));
    standin.enqueue(scripts.failsWith('InternalServiceError', 'The service encountered an unexpected internal error.'));
    standin.enqueue(scripts.rejectedAtCreate('InputTextSensitiveContentDetected', 'The input text may contain sensitive content.'));
    const ids = await submitInOrder(s, key, 4);
    await round(s);
    await round(s);
    await until(async () => (await Promise.all(ids.map((id) => statusOf(s, id)))).every((status) => status === 'failed'));
    const codes = await Promise.all(ids.map(async (id) => (await s.store.findTask(id))!.errorCode));
    expect(codes).toEqual(['timeout', 'content_rejected', 'provider_error', 'content_rejected']);
    expect((await Promise.all(ids.map((id) => upstreamOf(s, id)))).map((u) => u.outcome)).toEqual(['expired', 'failed', 'failed', 'refused']);
    await round(s);
    expect(await refunds(s, accountId)).toBe(4);
    expect(await s.store.auditBalance(accountId)).toMatchObject({ balance: 1_000_000 });
  });

  it.skipIf(skip)('cancels a task still queued upstream there, and discards (and counts) the result of one that was running', async () => {
    const s = await setup();
    const { key, accountId } = await s.account();
    standin.enqueue(scripts.queuedForever());
    standin.enqueue(scripts.held());
    const [queued, running] = await submitInOrder(s, key, 2);
    await round(s);

    for (const id of [queued, running]) expect((await s.request('POST', `${SUBMIT}/${id}/cancel`, { key })).status).toBe(200);
    // Refunded at once, whatever the upstream does next.
    expect(await refunds(s, accountId)).toBe(2);
    // The cancel made both due: the follower looks without waiting for its period.
    await until(async () => standin.requestsTo('DELETE', TASKS).length >= 1);
    await until(async () => (await upstreamOf(s, queued!)).state === 'ended');
    expect(await upstreamOf(s, queued!)).toMatchObject({ outcome: 'cancelled', upstreamStatus: 'cancelled' });

    expect((await upstreamOf(s, running!)).state).toBe('following');
    standin.finish();
    await round(s);
    await until(async () => (await upstreamOf(s, running!)).state === 'ended');
    expect(await upstreamOf(s, running!)).toMatchObject({ outcome: 'discarded', usage: { totalTokens: 108900 } });
    expect(await statusOf(s, running!)).toBe('cancelled');
    // Not downloaded: nothing of it is kept.
    expect(standin.requests.filter((r) => r.path.startsWith('/media/'))).toHaveLength(0);
    expect((await s.store.listUpstreamChannels())[0]).toMatchObject({ discardedResults: 1, inFlight: 0 });
    expect(await refunds(s, accountId)).toBe(2);
  });

  it.skipIf(skip)('queries a task at once on a callback hint, and not before', async () => {
    const s = await setup();
    const { key } = await s.account();
    standin.enqueue(scripts.succeedsAfter(0));
    const [id] = await submit(s, key, 1);
    await created(s, [id!]);
    expect(standin.listed()).toHaveLength(0);
    expect(await s.store.requestUpstreamCheck({ taskId: id!, now: s.clock.now() })).toBe(true);
    s.worker.wake();
    await until(async () => (await statusOf(s, id!)) === 'succeeded');
    expect(standin.listed()).toHaveLength(1);
    expect(await s.store.requestUpstreamCheck({ taskId: id!, now: s.clock.now() })).toBe(false);
  });

  it.skipIf(skip)('asks for callbacks, and finishes a task the moment the upstream calls back, without waiting for its period', async () => {
    const s = await setup({ callbacks: true });
    const { key } = await s.account();
    standin.enqueue(scripts.held());
    const [id] = await submit(s, key, 1);
    await created(s, [id!]);
    const body = standin.requestsTo('POST', TASKS)[0]!.body as { callback_url: string };
    expect(body.callback_url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/upstream/callbacks/${id}\\?token=[\\w-]{43}$`));
    await round(s);
    expect(standin.listed()).toHaveLength(1);

    // The upstream ends the task and POSTs to the callback URL: the follower queries it at once (the clock does not move).
    standin.finish();
    await until(async () => (await statusOf(s, id!)) === 'succeeded');
    expect(standin.callbacks.map((c) => c.status)).toContain('succeeded');
    expect(standin.listed()).toHaveLength(2);
  });

  it.skipIf(skip)('retries a failed download, then fails the task refunded after the last attempt', async () => {
    const s = await setup({ downloadAttempts: 2 });
    const { key, accountId } = await s.account();
    standin.enqueue({ ...scripts.succeedsAfter(0), download: errorReply(503, 'ServiceUnavailable', 'Try again.') });
    const [id] = await submit(s, key, 1);
    await created(s, [id!]);
    await round(s);
    await until(async () => (await upstreamOf(s, id!)).downloadAttempts === 1);
    expect(await statusOf(s, id!)).toBe('processing');
    s.clock.advance(5_000);
    await until(async () => (await statusOf(s, id!)) === 'failed');
    expect((await s.store.findTask(id!))!.errorCode).toBe('provider_error');
    expect(await upstreamOf(s, id!)).toMatchObject({ state: 'ended', outcome: 'failed' });
    expect(await refunds(s, accountId)).toBe(1);
  });

  it.skipIf(skip)('shares the following between two workers: each task listed once a round and completed once', async () => {
    const s = await setup();
    const second = s.another();
    const { key, accountId } = await s.account();
    for (let i = 0; i < 120; i++) standin.enqueue(scripts.succeedsAfter(1));
    const ids = await submit(s, key, 120);
    await created(s, ids);
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(120);
    // Both followers' timers fire in the same period.
    s.clock.advance(POLL_MS);
    await Promise.all([s.follower.idle(), second.follower.idle()]);
    const listedOnce = standin.listed().flat();
    expect(listedOnce).toHaveLength(120);
    expect(new Set(listedOnce).size).toBe(120);
    s.clock.advance(POLL_MS);
    await Promise.all([s.follower.idle(), second.follower.idle()]);
    await until(async () => (await Promise.all(ids.map((id) => statusOf(s, id)))).every((status) => status === 'succeeded'));
    expect(standin.listed().flat()).toHaveLength(240);
    expect((await s.store.listLedger(accountId)).filter((e) => e.kind === 'charge')).toHaveLength(120);
    expect(await refunds(s, accountId)).toBe(0);
  });
});

describe.each(backendKinds)('a create whose job another claim takes while it waits for its answer, on $name', ({ name, skip, open }) => {
  const LEASE_MS = 1_000;
  const CREATE_TIMEOUT_MS = 60_000;
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open({ leaseMs: LEASE_MS });
  });
  afterAll(async () => opened?.done());

  /**
   * A submitted task whose job `w1` has claimed, and a submitter whose creates reach the stand-in at once but whose
   * answers wait until `answer()`. The clock starts at the real time: PostgreSQL's queue starts jobs on its own clock.
   */
  async function setup() {
    const backend: Backend = await opened.fresh();
    const clock = new ManualClock(Date.now());
    const h = backendHarness(backend, { clock, config: testConfig({ providers: { 'vidgen-2.0': 'byteplus', 'vidgen-2.0-fast': 'byteplus', 'vidgen-1.5-pro': 'byteplus' } }) });
    const real = createUpstreamClient({ baseUrl: standin.baseUrl, apiKey: API_KEY, requestTimeoutMs: CREATE_TIMEOUT_MS });
    let answer!: () => void;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const client: typeof real = { ...real, create: async (body) => real.create(body).then(async (outcome) => (await answered, outcome)) };
    const channel: ChannelConfig = { name: 'main', kind: 'byteplus', baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, maxInFlight: 10, priority: 0, weight: 1 };
    const submitter = createUpstreamSubmitter({
      store: h.store,
      queue: backend.queue,
      events: h.deps.events,
      clock,
      logger: h.deps.logger,
      channels: [{ config: channel, client }],
      pollMs: POLL_MS,
      createTimeoutMs: CREATE_TIMEOUT_MS,
      cooldownAfter: 3,
      cooldownMs: 30_000,
    });
    const { key, accountId } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit() });
    const id = ((await res.json()) as { requestId: string }).requestId;
    const claim = async (workerId: string) => (await backend.queue.claim({ workerId, now: clock.now(), leaseMs: LEASE_MS, provider: 'byteplus', limit: 1 }))[0];
    const job = (await claim('w1'))!;
    expect(job.taskId).toBe(id);
    /** The job claimed again by `w2` once w1's lease lapsed (nothing renews it here): on the clock, or PostgreSQL's. */
    const reclaim = async () => {
      clock.advance(LEASE_MS + 1);
      let again: Awaited<ReturnType<typeof claim>>;
      await until(async () => (again = await claim('w2')) !== undefined);
      return again!;
    };
    const refunds = async () => (await h.store.listLedger(accountId)).filter((e) => e.kind === 'refund').length;
    return { h, clock, backend, submitter, answer, id, job, claim, reclaim, refunds };
  }

  it.skipIf(skip)('is handed back until the create could have been answered: the first claim records it, and the next finds it created', async () => {
    const { h, clock, backend, submitter, answer, id, job, claim, reclaim, refunds } = await setup();
    standin.enqueue(scripts.held());
    const createdAt = clock.now().getTime();
    const first = submitter.run(job, 'w1');
    await standin.received('POST', TASKS, 1);
    const second = await reclaim();
    expect(second.id).not.toBe(job.id);
    await submitter.run(second, 'w2');
    // Not given up as lost: the claim that sent the create may still be alive.
    expect(await h.store.getUpstreamTask(id)).toMatchObject({ state: 'creating' });
    expect((await h.store.findTask(id))!.status).toBe('queued');
    answer();
    await first;
    expect(await h.store.getUpstreamTask(id)).toMatchObject({ state: 'following', upstreamId: standin.createdTasks()[0]!.id });
    expect((await h.store.findTask(id))!.status).toBe('processing');
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
    expect(await refunds()).toBe(0);
    // Handed back to the create's timeout and a margin to record its answer: waiting until then.
    expect(await claim('w3')).toBeUndefined();
    expect(await backend.queue.countJobs()).toMatchObject({ available: 1, leased: 0 });
    if (name === 'SQLite') {
      // (PostgreSQL starts it on the database's clock, a minute from now: not waited for here.)
      clock.advance(createdAt + CREATE_TIMEOUT_MS + 5_000 - clock.now().getTime() - 1);
      expect(await claim('w3')).toBeUndefined();
      clock.advance(1);
      await submitter.run((await claim('w3'))!, 'w3');
      expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
      expect(await h.store.getUpstreamTask(id)).toMatchObject({ state: 'following' });
      expect(await backend.queue.countJobs()).toMatchObject({ available: 0, leased: 0 });
    }
  });

  it.skipIf(skip)('is lost once its answer can no longer come, and not sent again', async () => {
    const { h, clock, submitter, answer, id, job, reclaim, refunds } = await setup();
    standin.enqueue(scripts.held());
    const first = submitter.run(job, 'w1').catch((error: Error) => error);
    await standin.received('POST', TASKS, 1);
    clock.advance(CREATE_TIMEOUT_MS + 5_000);
    await submitter.run(await reclaim(), 'w2');
    expect(await h.store.getUpstreamTask(id)).toMatchObject({ state: 'ended', outcome: 'lost' });
    expect(await h.store.findTask(id)).toMatchObject({ status: 'failed', errorCode: 'provider_error' });
    expect(await refunds()).toBe(1);
    // An answer after that changes nothing: the claim that waited for it records nothing.
    answer();
    expect(await first).toBeInstanceOf(Error);
    expect(await h.store.findTask(id)).toMatchObject({ status: 'failed' });
    expect(await refunds()).toBe(1);
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
  });
});
