/**
 * Graceful shutdown on both stores: a draining API refuses new work and answers
 * its long polls at once; a stopping worker claims nothing more, lets running
 * renders finish within a bound and hands the rest back to the queue.
 * (The process-level sequence — SIGTERM, exit 0 — is in processes.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLocalOutputFiles } from '../src/files/storage.js';
import type { GenerationRequest, GenerationResult, Provider } from '../src/providers/provider.js';
import type { JobQueue } from '../src/queue/queue.js';
import type { Worker } from '../src/queue/worker.js';
import type { Backend } from '../src/store/open.js';
import { SUBMIT, until, validSubmit, testWorker } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';

const provider = (generate: (request: GenerationRequest) => Promise<GenerationResult>): Provider => ({ name: 'test', needsLocalMedia: false, generate });
const writesVideo = async (request: GenerationRequest): Promise<GenerationResult> => {
  writeFileSync(request.outputPath, Buffer.from('\x00\x00\x00\x18ftypmp42 video', 'latin1'));
  return { ok: true };
};
/** A render that runs until it is stopped, the way a killed ffmpeg ends. */
const rendersUntilStopped = (request: GenerationRequest) =>
  new Promise<GenerationResult>((resolve) => request.signal.addEventListener('abort', () => resolve({ ok: false, error: { code: 'internal_error', message: 'stopped' } })));

describe.each(backendKinds)('shutdown on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  let backend: Backend;
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-shutdown-'));
  const workers: Worker[] = [];
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterEach(async () => {
    for (const worker of workers.splice(0)) await worker.stop({ graceMs: 0 });
  });
  afterAll(async () => {
    await opened?.done();
    rmSync(dir, { recursive: true, force: true });
  });

  async function setUp() {
    backend = await opened.fresh();
    const shutdown = new AbortController();
    const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('test-secret') });
    const h = backendHarness(backend, { files, shutdown: shutdown.signal });
    const newWorker = (p: Provider) => {
      const worker = testWorker(h, { provider: p, queue: backend.queue, files, workDir: join(dir, 'work') });
      workers.push(worker);
      return worker;
    };
    const { key, accountId } = await h.account(1_000);
    const submit = async () => ((await (await h.request('POST', SUBMIT, { key, body: validSubmit() })).json()) as { requestId: string }).requestId;
    const status = async (id: string) => (await backend.store.getTask(accountId, id))!.status;
    return { h, shutdown, newWorker, key, accountId, submit, status };
  }

  describe.skipIf(skip)('the API', () => {
    it('once draining, fails readiness and answers new requests 503 unavailable with Retry-After and Connection: close, while staying alive', async () => {
      const { h, shutdown, key, submit } = await setUp();
      const id = await submit();
      shutdown.abort();

      const ready = await h.request('GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(((await ready.json()) as { error: { code: string } }).error.code).toBe('unavailable');
      expect((await h.request('GET', '/healthz')).status).toBe(200);

      for (const [method, path] of [
        ['GET', `${SUBMIT}/${id}`],
        ['POST', SUBMIT],
        ['GET', '/api/open/v1/models'],
      ] as const) {
        const res = await h.request(method, path, { key, ...(method === 'POST' ? { body: validSubmit() } : {}) });
        expect(res.status, `${method} ${path}`).toBe(503);
        expect(res.headers.get('retry-after')).toBe('1');
        expect(res.headers.get('connection')).toBe('close');
        expect(await res.json()).toMatchObject({ success: false, error: { code: 'unavailable', message: expect.stringMatching(/shutting down/) } });
      }
    });

    it('answers a long poll waiting when the drain starts at once, with the task as it is, and closes its connection', async () => {
      const { h, shutdown, key, submit } = await setUp();
      const id = await submit();
      const polling = h.request('GET', `${SUBMIT}/${id}?wait=30`, { key });
      await until(() => h.clock.pendingTimers > 0);
      shutdown.abort();
      // The clock never moves: only the drain can have ended the wait.
      const res = await polling;
      expect(res.status).toBe(200);
      expect(((await res.json()) as { status: string }).status).toBe('queued');
      expect(res.headers.get('connection')).toBe('close');
      expect(h.clock.pendingTimers).toBe(0);
    });
  });

  describe.skipIf(skip)('the worker', () => {
    it('lets a render that ends within the bound finish: the task succeeds and the worker stops', async () => {
      const { newWorker, submit, status } = await setUp();
      let finish: (() => void) | undefined;
      const worker = newWorker(provider((request) => new Promise((resolve) => (finish = () => void writesVideo(request).then(resolve)))));
      worker.start();
      const id = await submit();
      worker.wake();
      await until(() => finish !== undefined);

      const stopped = worker.stop({ graceMs: 60_000 });
      finish!();
      await stopped;
      expect(await status(id)).toBe('succeeded');
      expect(worker.running).toBe(0);
    });

    it('hands a render still running at the bound back to the queue without counting an attempt; another worker finishes it, charged once', async () => {
      const { h, newWorker, submit, status, accountId } = await setUp();
      let rendering = false;
      const first = newWorker(provider((request) => ((rendering = true), rendersUntilStopped(request))));
      first.start();
      const id = await submit();
      first.wake();
      await until(() => rendering);

      const stopped = first.stop({ graceMs: 5_000 });
      h.clock.advance(5_000);
      await stopped;
      expect(await status(id)).toBe('processing');

      // Claimable again at once, still its first attempt.
      const [claimed] = await backend.queue.claim({ workerId: 'inspector', now: h.clock.now(), leaseMs: 60_000, provider: 'local', limit: 1 });
      expect(claimed).toMatchObject({ taskId: id, kind: 'generate', attempts: 1 });
      await backend.queue.release({ jobId: claimed!.id, workerId: 'inspector', now: h.clock.now() });

      const second = newWorker(provider(writesVideo));
      second.start();
      await until(async () => (await status(id)) === 'succeeded');
      const ledger = await backend.store.listLedger(accountId);
      expect(ledger.filter((entry) => entry.taskId === id).map((entry) => entry.kind)).toEqual(['charge']);
      const audit = await backend.store.auditBalance(accountId);
      expect(audit!.balance).toBe(audit!.ledgerSum);
    });

    it('hands back a job whose bound passed while it was being started, before its render begins', async () => {
      const { h, submit, status } = await setUp();
      // The task's start waits at a gate: the bound passes between the claim and the render. The start is the store's
      // startTask, or (PostgreSQL) the claim itself, whose answer then waits.
      let atGate: (() => void) | undefined;
      const gate = new Promise<void>((resolve) => (atGate = resolve));
      let reachedGate = false;
      const store = new Proxy(backend.store, {
        get(target, name, receiver) {
          if (name === 'startTask')
            return async (input: { id: string; now: Date }) => {
              reachedGate = true;
              await gate;
              return target.startTask(input);
            };
          const value: unknown = Reflect.get(target, name, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      const queue = new Proxy(backend.queue, {
        get(target, name, receiver) {
          if (name === 'claim')
            return async (input: Parameters<JobQueue['claim']>[0]) => {
              const jobs = await target.claim(input);
              if (jobs.some((job) => job.started)) {
                reachedGate = true;
                await gate;
              }
              return jobs;
            };
          const value: unknown = Reflect.get(target, name, receiver);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
      let renders = 0;
      const worker = testWorker({ ...h, store }, {
        provider: provider((request) => ((renders += 1), rendersUntilStopped(request))),
        queue,
        files: createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('test-secret') }),
        workDir: join(dir, 'work'),
      });
      workers.push(worker);
      worker.start();
      const id = await submit();
      worker.wake();
      // At the start's gate: the job running (startTask's), or its claim answering (the claim's, not yet running).
      await until(() => reachedGate);

      const stopped = worker.stop({ graceMs: 0 });
      atGate!();
      await stopped;
      expect(renders).toBe(0);
      expect(await status(id)).toBe('processing');
      const [claimed] = await backend.queue.claim({ workerId: 'inspector', now: h.clock.now(), leaseMs: 60_000, provider: 'local', limit: 1 });
      expect(claimed).toMatchObject({ taskId: id, kind: 'generate', attempts: 1 });
    });

    it('claims nothing once stopping', async () => {
      const { newWorker, submit, status } = await setUp();
      const worker = newWorker(provider(writesVideo));
      worker.start();
      await worker.stop({ graceMs: 0 });
      const id = await submit();
      worker.wake();
      expect(await status(id)).toBe('queued');
      expect(worker.running).toBe(0);
    });
  });
});
