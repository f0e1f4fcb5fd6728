/**
 * The pipeline around the provider: claims, lifecycle moves, refunds, cancel,
 * deadlines, crashed workers and output files. The provider here is scripted
 * per test (it is the port under the worker); the real renderer has its own tests.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createLocalOutputFiles, type OutputFiles } from '../src/files/storage.js';
import type { GenerationRequest, GenerationResult, Provider } from '../src/providers/provider.js';
import type { ReferenceFetcher, Worker, WorkerOptions } from '../src/queue/worker.js';
import { harness, SUBMIT, validSubmit, type Harness, until, testWorker } from './support.js';

const MP4_BYTES = Buffer.from('\x00\x00\x00\x18ftypmp42' + 'x'.repeat(1000), 'latin1');

/** A provider whose behaviour each test scripts; it records the requests it got. */
function scriptedProvider(behaviour: (request: GenerationRequest) => Promise<GenerationResult>): Provider & { requests: GenerationRequest[] } {
  const requests: GenerationRequest[] = [];
  return {
    name: 'scripted',
    needsLocalMedia: true,
    requests,
    generate(request) {
      requests.push(request);
      return behaviour(request);
    },
  };
}

const writesVideo = async (request: GenerationRequest): Promise<GenerationResult> => {
  writeFileSync(request.outputPath, MP4_BYTES);
  return { ok: true };
};

/** Resolves when the signal aborts, the way a killed render ends. */
const rendersUntilAborted = (request: GenerationRequest) =>
  new Promise<GenerationResult>((resolve) => {
    request.signal.addEventListener('abort', () => resolve({ ok: false, error: { code: 'internal_error', message: 'cancelled' } }));
  });

const fetchesEverything: ReferenceFetcher = {
  async fetch(_url, _kind, destinationPath) {
    writeFileSync(destinationPath, 'reference');
    return { ok: true };
  },
};

interface Pipeline extends Harness {
  worker: Worker;
  files: OutputFiles;
  dir: string;
  newWorker(provider: Provider, overrides?: Partial<WorkerOptions>): Worker;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

function pipeline(provider: Provider, fetcher: ReferenceFetcher = fetchesEverything): Pipeline {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-worker-'));
  const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('test-secret') });
  let worker: Worker | undefined;
  const h = harness({ files, wakeWorkers: () => worker?.wake() });
  const newWorker = (p: Provider, overrides = {}) =>
    testWorker(h, { provider: p, fetcher, files, workDir: join(dir, 'work'), ...overrides });
  worker = newWorker(provider);
  cleanups.push(async () => {
    await worker?.stop();
    await h.store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { ...h, worker, files, dir, newWorker };
}

async function submit(p: Pipeline, key: string, body: Record<string, unknown> = validSubmit()) {
  const res = await p.request('POST', SUBMIT, { key, body });
  expect(res.status).toBe(202);
  return ((await res.json()) as any).requestId as string;
}

const task = async (p: Pipeline, key: string, id: string) => (await (await p.request('GET', `${SUBMIT}/${id}`, { key })).json()) as any;

/**
 * A task rendered twice: `firstProvider`'s claim holds it until its lease runs out (its heartbeats are real-time, the
 * clock is not), the pipeline's own worker claims it again and completes it; then the first render ends (`finishFirst`).
 * `held`: the first render has begun, and is waiting to be let finish.
 */
async function renderedTwice(p: Pipeline, key: string, firstProvider: Provider, held: () => boolean): Promise<{ id: string; first: Worker }> {
  const id = await submit(p, key);
  const first = p.newWorker(firstProvider);
  cleanups.unshift(() => first.stop({ graceMs: 0 }));
  first.start();
  await until(held);
  p.clock.advance(60_000);
  p.worker.start();
  await until(async () => (await task(p, key, id)).status === 'succeeded');
  return { id, first };
}

describe('the worker', () => {
  it('takes a task from queued through processing to succeeded, with a signed output URL', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key, validSubmit({ mediaUrls: ['https://cdn.example.com/a.png'] }));
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    const done = await task(p, key, id);
    expect(done.output.url).toMatch(new RegExp(`^http://vidgen\\.test/files/${id}\\.mp4\\?expires=\\d+&sig=`));
    expect(done.output.expiresAt).toBe(new Date(p.clock.now().getTime() + 7 * 24 * 3600_000).toISOString());
    expect(done.completedAt).toBeTruthy();
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 88, ledgerSum: 88 });
    expect(await p.store.countJobs()).toMatchObject({ done: 1, available: 0, leased: 0 });

    const url = new URL(done.output.url);
    const whole = await p.request('GET', url.pathname + url.search);
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer())).toEqual(MP4_BYTES);
    const part = await p.request('GET', url.pathname + url.search, { headers: { Range: 'bytes=4-11' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 4-11/${MP4_BYTES.length}`);
    expect(Buffer.from(await part.arrayBuffer()).toString('latin1')).toBe('ftypmp42');
    const head = await p.request('HEAD', url.pathname + url.search);
    expect(head.headers.get('content-length')).toBe(String(MP4_BYTES.length));
    const past = await p.request('GET', url.pathname + url.search, { headers: { Range: `bytes=${MP4_BYTES.length}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${MP4_BYTES.length}`);
    // Another first character of the signature (a fixed 'X' would equal it one time in 64).
    const forged = await p.request('GET', url.pathname + url.search.replace(/sig=(.)/, (_, first: string) => `sig=${first === 'A' ? 'B' : 'A'}`));
    expect(forged.status).toBe(403);
    // The attempt's directory held the fetched reference: removed with it.
    await p.worker.idle();
    expect(readdirSync(join(p.dir, 'work'))).toEqual([]);
  });

  it('gives a provider that needs no references on disk an output path where local storage keeps outputs, under the task\'s key, and no directory of its own; a failed attempt leaves nothing', async () => {
    let fails = false;
    const provider = {
      ...scriptedProvider(async (request) => {
        writeFileSync(request.outputPath, MP4_BYTES);
        return fails ? { ok: false, error: { code: 'provider_error', message: 'half written, then failed' } } : { ok: true };
      }),
      needsLocalMedia: false,
    };
    const p = pipeline(provider);
    const { key } = await p.account(100);
    p.worker.start();
    const done = await submit(p, key);
    await until(async () => (await task(p, key, done)).status === 'succeeded');
    // Written where it is kept: nothing moved, and no work directory made.
    expect(provider.requests.map((r) => r.outputPath)).toEqual([join(p.dir, 'outputs', `${done}.mp4`)]);
    expect((await task(p, key, done)).output.url).toMatch(new RegExp(`/files/${done}\\.mp4\\?`));
    expect(readdirSync(join(p.dir, 'outputs'))).toEqual([`${done}.mp4`]);
    fails = true;
    const failed = await submit(p, key);
    await until(async () => (await task(p, key, failed)).status === 'failed');
    await p.worker.idle();
    // The failed one's file removed: no file and no directory left behind.
    expect(readdirSync(join(p.dir, 'outputs'))).toEqual([`${done}.mp4`]);
    expect(existsSync(join(p.dir, 'work'))).toBe(false);
  });

  it('writes a later attempt in place under a key of its own: a render of an earlier claim that ends late neither writes over it nor stays behind', async () => {
    const inProcess = (behaviour: (request: GenerationRequest) => Promise<GenerationResult>) => ({ ...scriptedProvider(behaviour), needsLocalMedia: false });
    let finishFirst: (() => void) | undefined;
    const late = Buffer.from('a late render, not the output');
    const firstProvider = inProcess((request) => new Promise((resolve) => (finishFirst = () => (writeFileSync(request.outputPath, late), resolve({ ok: true })))));
    const secondProvider = inProcess(writesVideo);
    const p = pipeline(secondProvider);
    const { key, accountId } = await p.account(100);
    const { id, first } = await renderedTwice(p, key, firstProvider, () => finishFirst !== undefined);
    expect(firstProvider.requests[0]!.outputPath).toBe(join(p.dir, 'outputs', `${id}.mp4`));
    expect(secondProvider.requests[0]!.outputPath).toBe(join(p.dir, 'outputs', `${id}-2.mp4`));
    finishFirst!();
    await first.idle();

    // The task's output is the second attempt's, served; the first's file, written after the task ended, is removed.
    const done = await task(p, key, id);
    const url = new URL(done.output.url);
    expect(url.pathname).toBe(`/files/${id}-2.mp4`);
    const res = await p.request('GET', url.pathname + url.search);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(MP4_BYTES);
    expect(readdirSync(join(p.dir, 'outputs'))).toEqual([`${id}-2.mp4`]);
    expect((await p.store.listLedger(accountId)).map((e) => e.kind)).toEqual(['grant', 'charge']);
  });

  it('claims as many jobs as a lane has free slots in one claim, and sweeps deadlines only when its poll timer fires', async () => {
    const p = pipeline(scriptedProvider(rendersUntilAborted));
    const { key } = await p.account(1000);
    for (let i = 0; i < 5; i++) await submit(p, key);
    const claims: { provider: string; limit: number; got: number }[] = [];
    let sweeps = 0;
    let purges = 0;
    const store = new Proxy(p.store, {
      get(target, name) {
        if (name === 'claim')
          return async (input: Parameters<typeof target.claim>[0]) => {
            const jobs = await target.claim(input);
            claims.push({ provider: input.provider, limit: input.limit, got: jobs.length });
            return jobs;
          };
        if (name === 'expireOverdueTasks') sweeps += 1;
        if (name === 'purgeExpiredIdempotencyKeys') purges += 1;
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const worker = p.newWorker(scriptedProvider(rendersUntilAborted), { store, queue: store, concurrency: { local: 4 } });
    cleanups.unshift(() => worker.stop({ graceMs: 0 }));
    worker.start();
    await until(() => worker.running === 4);
    expect(claims).toEqual([{ provider: 'local', limit: 4, got: 4 }]);
    expect(sweeps).toBe(1);

    // Woken by work with every slot taken: neither a claim nor a sweep.
    worker.wake();
    // The pump it starts has nothing to wait for (no lane to claim for): it is over by the next turn.
    await new Promise((resolve) => setImmediate(resolve));
    expect(claims).toHaveLength(1);
    expect(sweeps).toBe(1);
    // The poll timer sweeps.
    p.clock.advance(1000);
    await until(() => sweeps === 2);
    // Each sweep also purges expired Idempotency-Keys.
    await until(() => purges === 2);
  });

  /**
   * A worker with claimIntervalMs 25 on a store whose claims are recorded (when each began, by the clock, and what it got),
   * the first one held until `release()`: work announced meanwhile finds a claim under way.
   */
  function heldFirstClaim(p: Pipeline, slots = 8) {
    const claims: { at: number; got: number }[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const store = new Proxy(p.store, {
      get(target, name) {
        if (name === 'claim')
          return async (input: Parameters<typeof target.claim>[0]) => {
            const at = p.clock.now().getTime();
            const jobs = await target.claim(input);
            claims.push({ at, got: jobs.length });
            if (claims.length === 1) await held;
            return jobs;
          };
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const worker = p.newWorker(scriptedProvider(rendersUntilAborted), { store, queue: store, concurrency: { local: slots }, claimIntervalMs: 25 });
    cleanups.unshift(() => worker.stop({ graceMs: 0 }));
    return { worker, claims, release };
  }

  it('under load claims no sooner than claimIntervalMs after its last claim began, taking what came meanwhile in one go; an idle worker claims at once', async () => {
    const p = pipeline(scriptedProvider(rendersUntilAborted));
    const { key } = await p.account(1000);
    // Two jobs in the first claim: load (after a claim of one job or none the next round would claim at once).
    await submit(p, key);
    await submit(p, key);
    const { worker, claims, release } = heldFirstClaim(p);
    const started = p.clock.now().getTime();
    // An idle worker claims at once.
    worker.start();
    await until(() => claims.length === 1);
    expect(claims[0]).toEqual({ at: started, got: 2 });
    // Three more tasks while the first claim is under way, each announced (the harness wakes the pipeline's own worker).
    for (let i = 0; i < 3; i++) {
      await submit(p, key);
      worker.wake();
    }
    p.clock.advance(10);
    release();
    // The next round waits for the rest of the interval (the clock has moved 10 of its 25 ms): no claim before it.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(claims).toHaveLength(1);
    p.clock.advance(15);
    await until(() => claims.length === 2);
    expect(claims[1]).toEqual({ at: started + 25, got: 3 });
    await until(() => worker.running === 5);
  });

  it('claims again at once after a claim of one job, whatever the interval: the next job of a task is not held back at a few tasks a second', async () => {
    const p = pipeline(scriptedProvider(rendersUntilAborted));
    const { key } = await p.account(1000);
    await submit(p, key);
    const { worker, claims, release } = heldFirstClaim(p);
    const started = p.clock.now().getTime();
    worker.start();
    await until(() => claims.length === 1);
    await submit(p, key);
    worker.wake();
    release();
    // No clock moved: the next round is not waiting for one.
    await until(() => claims.length === 2);
    expect(claims).toEqual([{ at: started, got: 1 }, { at: started, got: 1 }]);
    await until(() => worker.running === 2);
  });

  it('under load claims before the interval is out once half the slots of a lane with work waiting are free: they would stand idle', async () => {
    const p = pipeline(scriptedProvider(rendersUntilAborted));
    const { key } = await p.account(1000);
    const first = await submit(p, key);
    await submit(p, key);
    const { worker, claims, release } = heldFirstClaim(p, 2);
    const started = p.clock.now().getTime();
    worker.start();
    await until(() => claims.length === 1);
    // Both slots taken by a claim that got all it asked for: more may be waiting (one more is).
    expect(claims[0]).toEqual({ at: started, got: 2 });
    await submit(p, key);
    worker.wake();
    release();
    await until(() => worker.running === 2);
    // Waiting out the interval: no slot is free.
    for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(claims).toHaveLength(1);
    // A render ends (its task cancelled): half the slots are free, and the next round claims without waiting for the clock.
    expect((await p.request('POST', `${SUBMIT}/${first}/cancel`, { key })).status).toBe(200);
    await until(() => claims.length === 2);
    expect(claims[1]).toEqual({ at: started, got: 1 });
    await until(() => worker.running === 2);
  });

  it('hands the provider the fetched references in order', async () => {
    const provider = scriptedProvider(writesVideo);
    const p = pipeline(provider);
    const { key } = await p.account();
    p.worker.start();
    const mediaUrls = ['https://cdn.example.com/a.png', 'https://cdn.example.com/b.mp4', 'https://cdn.example.com/c.mp3'];
    const id = await submit(p, key, validSubmit({ mediaUrls }));
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    expect(provider.requests[0]!.references.map((r) => [r.url, r.kind])).toEqual([
      [mediaUrls[0], 'image'],
      [mediaUrls[1], 'video'],
      [mediaUrls[2], 'audio'],
    ]);
    expect(provider.requests[0]!.mode).toBe('multimodal_reference');
  });

  it('wakes a long poll when the task starts and when it finishes', async () => {
    let finish: (() => void) | undefined;
    const p = pipeline(
      scriptedProvider(
        (request) =>
          new Promise((resolve) => {
            finish = () => resolve(writesVideo(request));
          }),
      ),
    );
    const { key } = await p.account();
    const id = await submit(p, key);
    const first = p.request('GET', `${SUBMIT}/${id}?wait=30`, { key });
    await until(() => p.clock.pendingTimers === 1);
    p.worker.start();
    expect(((await (await first).json()) as any).status).toBe('processing');
    await until(() => finish !== undefined);
    // The worker's own timers are pending already: the poll is waiting once it adds its own.
    const before = p.clock.pendingTimers;
    const second = p.request('GET', `${SUBMIT}/${id}?wait=30`, { key });
    await until(() => p.clock.pendingTimers > before);
    finish!();
    expect(((await (await second).json()) as any).status).toBe('succeeded');
  });

  it('fails a task the provider could not generate, refunding it once', async () => {
    const p = pipeline(scriptedProvider(async () => ({ ok: false, error: { code: 'provider_error', message: 'generation failed upstream' } })));
    const { key, accountId } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key);
    await until(async () => (await task(p, key, id)).status === 'failed');
    expect(await task(p, key, id)).toMatchObject({ error: { code: 'provider_error', message: 'generation failed upstream' }, output: null, creditsRefunded: 12 });
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
    // An empty attempt directory is removed as well.
    await p.worker.idle();
    expect(readdirSync(join(p.dir, 'work'))).toEqual([]);
  });

  it('fails with media_unavailable when a reference cannot be fetched', async () => {
    const provider = scriptedProvider(writesVideo);
    const p = pipeline(provider, { fetch: async (url) => ({ ok: false, reason: `${url}: address 10.0.0.5 is not public` }) });
    const { key, accountId } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key, validSubmit({ mediaUrls: ['https://cdn.example.com/a.png'] }));
    await until(async () => (await task(p, key, id)).status === 'failed');
    expect((await task(p, key, id)).error).toEqual({ code: 'media_unavailable', message: 'https://cdn.example.com/a.png: address 10.0.0.5 is not public' });
    expect(provider.requests).toHaveLength(0);
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
  });

  it('stops the render on cancel: cancelled, refunded once, no output', async () => {
    const provider = scriptedProvider(rendersUntilAborted);
    const p = pipeline(provider);
    const { key, accountId } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key);
    await until(() => provider.requests.length === 1);
    expect((await p.request('POST', `${SUBMIT}/${id}/cancel`, { key })).status).toBe(200);
    await p.worker.idle();
    expect(provider.requests[0]!.signal.aborted).toBe(true);
    expect(await task(p, key, id)).toMatchObject({ status: 'cancelled', output: null, creditsRefunded: 12 });
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
    expect(existsSync(join(p.dir, 'outputs', `${id}.mp4`))).toBe(false);
  });

  it('discards a result that arrives after the cancel', async () => {
    let finish: (() => void) | undefined;
    // This provider ignores its signal and finishes anyway, as a slow upstream might.
    const provider = scriptedProvider((request) => new Promise((resolve) => (finish = () => resolve(writesVideo(request)))));
    const p = pipeline(provider);
    const { key } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key);
    await until(() => finish !== undefined);
    await p.request('POST', `${SUBMIT}/${id}/cancel`, { key });
    finish!();
    await p.worker.idle();
    expect((await task(p, key, id)).status).toBe('cancelled');
    expect(existsSync(join(p.dir, 'outputs', `${id}.mp4`))).toBe(false);
  });

  it("keeps the output of a task rendered twice after a lease ran out: the later render's discard does not delete it", async () => {
    let finishFirst: (() => void) | undefined;
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    const firstProvider = scriptedProvider((request) => new Promise((resolve) => (finishFirst = () => resolve(writesVideo(request)))));
    const { id, first } = await renderedTwice(p, key, firstProvider, () => finishFirst !== undefined);
    finishFirst!();
    await first.idle();

    const done = await task(p, key, id);
    expect(done.status).toBe('succeeded');
    const url = new URL(done.output.url);
    const res = await p.request('GET', url.pathname + url.search);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer())).toEqual(MP4_BYTES);
    expect((await p.store.listLedger(accountId)).map((e) => e.kind)).toEqual(['grant', 'charge']);
  });

  it('stops a render whose lease another claim has taken, recording nothing for it', async () => {
    const stopped = scriptedProvider(rendersUntilAborted);
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    const id = await submit(p, key);
    // A short lease, so that the heartbeat (every lease/3 of real time) runs during the test.
    const first = p.newWorker(stopped, { leaseMs: 150 });
    cleanups.unshift(() => first.stop({ graceMs: 0 }));
    first.start();
    await until(() => stopped.requests.length === 1);
    p.clock.advance(150);
    p.worker.start();
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    // The first claim's next heartbeat finds the job no longer its own.
    await until(() => stopped.requests[0]!.signal.aborted);
    await first.idle();
    expect(await task(p, key, id)).toMatchObject({ status: 'succeeded', error: null });
    expect(await p.store.countJobs()).toMatchObject({ done: 1, leased: 0, available: 0 });
    expect((await p.store.listLedger(accountId)).map((e) => e.kind)).toEqual(['grant', 'charge']);
  });

  it('removes a stored output the task was not recorded with (the completing write failed) before the job is retried', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    let failures = 0;
    const store = new Proxy(p.store, {
      get(target, name) {
        if (name === 'completeTask' && failures++ === 0) return async () => Promise.reject(new Error('the database went away'));
        const value: unknown = Reflect.get(target, name, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const worker = p.newWorker(scriptedProvider(writesVideo), { store, queue: store });
    cleanups.unshift(() => worker.stop({ graceMs: 0 }));
    const { key } = await p.account(100);
    const id = await submit(p, key);
    worker.start();
    await until(() => failures >= 1);
    await worker.idle();
    expect((await task(p, key, id)).status).toBe('processing');
    expect(readdirSync(join(p.dir, 'outputs'))).toEqual([]);
    // The retry stores it again and completes the task with it.
    p.clock.advance(1000);
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    expect(readdirSync(join(p.dir, 'outputs'))).toEqual([`${id}.mp4`]);
  });

  it('fails a task that passes its deadline with timeout, refunded', async () => {
    const provider = scriptedProvider(rendersUntilAborted);
    const p = pipeline(provider);
    const { key, accountId } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key);
    await until(() => provider.requests.length === 1);
    p.clock.advance(30 * 60_000);
    await p.worker.idle();
    expect(await task(p, key, id)).toMatchObject({ status: 'failed', error: { code: 'timeout' }, creditsRefunded: 12 });
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
  });

  it('times out a task still queued at its deadline (no worker ran)', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    const id = await submit(p, key);
    p.clock.advance(30 * 60_000);
    p.worker.start();
    await until(async () => (await task(p, key, id)).status === 'failed');
    expect((await task(p, key, id)).error.code).toBe('timeout');
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
  });

  it('resumes the job of a worker that died, once its lease runs out', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    const id = await submit(p, key);
    // A worker claims and starts the task, then dies: no heartbeat, no completion.
    const [claimed] = await p.store.claim({ workerId: 'worker_dead', now: p.clock.now(), leaseMs: 60_000, provider: 'local', limit: 1 });
    await p.store.startTask({ id: claimed!.taskId, now: p.clock.now() });
    p.worker.start();
    await p.worker.idle();
    expect((await task(p, key, id)).status).toBe('processing');
    p.clock.advance(60_000);
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    expect(await p.store.countJobs()).toMatchObject({ done: 1 });
    expect((await p.store.listLedger(accountId)).map((e) => e.kind)).toEqual(['grant', 'charge']);
  });

  it('gives up on a job claimed too many times: failed internal_error, refunded', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    const { key, accountId } = await p.account(100);
    const id = await submit(p, key);
    for (let i = 0; i < 3; i++) {
      await p.store.claim({ workerId: `worker_dead_${i}`, now: p.clock.now(), leaseMs: 1000, provider: 'local', limit: 1 });
      p.clock.advance(1000);
    }
    p.worker.start();
    await until(async () => (await task(p, key, id)).status === 'failed');
    expect((await task(p, key, id)).error.code).toBe('internal_error');
    expect(await p.store.countJobs()).toMatchObject({ dead: 1 });
    expect(await p.store.auditBalance(accountId)).toEqual({ balance: 100, ledgerSum: 100 });
  });

  it('retries a job after an unexpected error in the service, logging it with the task, the job and the attempt', async () => {
    let calls = 0;
    const provider = scriptedProvider(async (request) => {
      calls += 1;
      if (calls === 1) throw new Error('a bug');
      return writesVideo(request);
    });
    const p = pipeline(provider);
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    await p.worker.stop();
    const worker = p.newWorker(provider, { logger });
    cleanups.unshift(() => worker.stop());
    const { key } = await p.account(100);
    // Submitted first: this worker is not the one the harness wakes, and its start claims what is queued.
    const id = await submit(p, key);
    worker.start();
    await until(() => calls === 1);
    await worker.idle();
    expect((await task(p, key, id)).status).toBe('processing');
    // The job's logger is made at its first line, with the job's bindings.
    const failed = lines.find((line) => line.msg === 'job failed unexpectedly');
    expect(failed).toMatchObject({ level: 50, taskId: id, jobId: expect.anything(), attempt: 1, err: { message: 'a bug' } });
    p.clock.advance(1000);
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    // A job that ends as it should writes no line of its own.
    expect(lines.filter((line) => line.msg !== 'job failed unexpectedly' && line.taskId === id)).toEqual([]);
  });

  it('keeps a slot per provider: a busy renderer does not hold up an upstream task', async () => {
    const local = scriptedProvider(rendersUntilAborted);
    const upstream = { ...scriptedProvider(writesVideo), name: 'upstream', needsLocalMedia: false };
    const p = pipeline(local);
    p.deps.config.providers['vidgen-2.0'] = 'upstream';
    const worker = p.newWorker(local, {
      providerFor: (model) => (model === 'vidgen-2.0' ? upstream : local),
      concurrency: { local: 1, upstream: 1 },
    });
    cleanups.push(() => worker.stop());
    const { key } = await p.account(10_000);
    const rendering = await submit(p, key);
    const waiting = await submit(p, key);
    worker.start();
    await until(() => local.requests.length === 1);
    const remote = await submit(p, key, validSubmit({ model: 'vidgen-2.0' }));
    worker.wake();
    await until(async () => (await task(p, key, remote)).status === 'succeeded');
    expect((await task(p, key, rendering)).status).toBe('processing');
    expect((await task(p, key, waiting)).status).toBe('queued');
    await p.request('POST', `${SUBMIT}/${rendering}/cancel`, { key });
    await p.request('POST', `${SUBMIT}/${waiting}/cancel`, { key });
  });

  it('deletes output files once they expire', async () => {
    const p = pipeline(scriptedProvider(writesVideo));
    const { key } = await p.account(100);
    p.worker.start();
    const id = await submit(p, key);
    await until(async () => (await task(p, key, id)).status === 'succeeded');
    const file = join(p.dir, 'outputs', `${id}.mp4`);
    expect(existsSync(file)).toBe(true);
    p.clock.advance(7 * 24 * 3600_000);
    await until(() => !existsSync(file));
    const url = new URL((await task(p, key, id)).output.url);
    expect((await p.request('GET', url.pathname + url.search)).status).toBe(403);
  });
});
