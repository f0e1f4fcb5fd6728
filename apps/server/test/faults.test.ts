/**
 * Fault injection: what a user observes when a part of the service fails.
 * The store fails in the middle of a transaction (a trigger raising inside the
 * database; on PostgreSQL also a backend terminated mid-transaction); the
 * provider hangs, errors, or answers after a cancel; the disk that keeps the
 * output files is full (a real 64 KiB tmpfs); the webhook receiver (real
 * HTTPS on loopback) is slow or erroring. Every test runs on SQLite and on
 * PostgreSQL. worker.test.ts and webhooks.test.ts cover the happy paths and
 * some of these faults on SQLite; what they cover fully is not repeated here.
 */
import type { ServerResponse } from 'node:http';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLocalOutputFiles } from '../src/files/storage.js';
import type { GenerationRequest, GenerationResult, Provider } from '../src/providers/provider.js';
import type { JobQueue } from '../src/queue/queue.js';
import type { Worker } from '../src/queue/worker.js';
import type { Backend } from '../src/store/open.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import type { Store } from '../src/store/store.js';
import { createDeliveryRunner } from '../src/webhooks/deliveries.js';
import { createWebhookSender } from '../src/webhooks/sender.js';
import { silentLogger, SUBMIT, testConfig, until, validSubmit, type Harness, testWorker } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { mountSmallDisk, storeFaults, type StoreFaults } from './support/faults.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

const DEADLINE_MS = 30 * 60_000;
/** Webhook retry delays: short, so that a real-time queue (pg-boss) reaches them within the test. */
const SCHEDULE_MS = [300, 300, 300];
/** validSubmit() costs 12 credits (vidgen-2.0-fast, 480p, 4 s at 3 a second). */
const PRICE = 12;
const CREDITS = 1_000;

const MP4_HEADER = Buffer.from('\x00\x00\x00\x18ftypmp42', 'latin1');
const video = (bytes: number) => Buffer.concat([MP4_HEADER, Buffer.alloc(bytes - MP4_HEADER.length, 0x78)]);

// --- Providers with faults ----------------------------------------------------

type Behaviour = (request: GenerationRequest, call: number) => Promise<GenerationResult>;

interface TestProvider extends Provider {
  /** Every request, in order (the nth is the nth attempt). */
  calls: GenerationRequest[];
  /** What each call answered, once it did. */
  answers: GenerationResult[];
}

function testProvider(behaviour: Behaviour): TestProvider {
  const calls: GenerationRequest[] = [];
  const answers: GenerationResult[] = [];
  return {
    name: 'local',
    needsLocalMedia: false,
    calls,
    answers,
    async generate(request) {
      calls.push(request);
      const answer = await behaviour(request, calls.length);
      answers.push(answer);
      return answer;
    },
  };
}

const writesVideo =
  (bytes = 1024): Behaviour =>
  async (request) => {
    writeFileSync(request.outputPath, video(bytes));
    return { ok: true };
  };

/** Stops when aborted, the way a killed render ends. */
const hangsUntilAborted: Behaviour = (request) =>
  new Promise((resolve) => request.signal.addEventListener('abort', () => resolve({ ok: false, error: { code: 'internal_error', message: 'stopped' } })));

/** A promise the test opens when it chooses. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((resolve) => (open = resolve));
  return { wait, open };
}

// --- A real HTTPS webhook receiver on loopback, shared by the file ------------

interface Hook {
  path: string;
  id: string;
  type: string;
  body: string;
}

let receiver: HttpsFixture;
const hooks: Hook[] = [];
/** The receiver's answer to the nth request (from 1) on a path: a status, or `hang` (no answer). */
let answerFor: (path: string, n: number) => number | 'hang' = () => 200;
const hanging: ServerResponse[] = [];

beforeAll(async () => {
  receiver = await startHttpsFixture((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const path = req.url ?? '';
      hooks.push({ path, id: String(req.headers['webhook-id']), type: JSON.parse(body).type, body });
      const answer = answerFor(path, hooks.filter((h) => h.path === path).length);
      if (answer === 'hang') hanging.push(res);
      else res.writeHead(answer).end();
    });
  });
});
afterAll(async () => receiver?.close());
beforeEach(() => {
  hooks.length = 0;
  answerFor = () => 200;
});

/** Answers the requests left hanging. */
const answerHanging = (status: number) => hanging.splice(0).forEach((res) => res.writeHead(status).end());

// --- A full disk ----------------------------------------------------------------

/** 64 KiB: a 1 KiB video fits, a 256 KiB one does not. */
const smallDisk = mountSmallDisk(64 * 1024);
afterAll(() => smallDisk?.unmount());

/** Every file under `dir` (directories are not files). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => join(entry.parentPath, entry.name));
}

// --- The pipeline over either store ----------------------------------------------

interface Pipeline extends Harness<Store> {
  backend: Backend;
  worker: Worker;
  faults: StoreFaults;
  outputsDir: string;
  workDir: string;
  key: string;
  accountId: string;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

describe.each(backendKinds)('faults on $name', ({ name, skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => opened?.done());

  async function pipeline(
    provider: Provider,
    options: {
      outputsDir?: string;
      workDir?: string;
      webhookTimeoutMs?: number;
      abortGraceMs?: number;
      /** Wraps the queue the worker uses (to hold one of its calls). */
      queue?: (queue: JobQueue) => JobQueue;
    } = {},
  ): Promise<Pipeline> {
    const backend = await opened.fresh();
    const dir = mkdtempSync(join(tmpdir(), 'vidgen-faults-'));
    const outputsDir = options.outputsDir ?? join(dir, 'outputs');
    const workDir = options.workDir ?? join(dir, 'work');
    const files = createLocalOutputFiles({ directory: outputsDir, publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
    let worker: Worker | undefined;
    // The receiver and media server are on loopback: allowed, as a development deployment may (D5).
    const h = backendHarness(backend, { files, wakeWorkers: () => worker?.wake(), config: testConfig({ media: { allowLoopback: true }, webhooks: { allowLoopback: true } }) });
    worker = testWorker(h, {
      provider,
      queue: options.queue ? options.queue(backend.queue) : backend.queue,
      files,
      workDir,
      concurrency: { local: 1, webhooks: 2 },
      outputTtlMs: 3600_000,
      // Retries at once: pg-boss keeps them on the database's clock, which a manual clock cannot move.
      retryDelayMs: () => 0,
      abortGraceMs: options.abortGraceMs,
      deliveries: createDeliveryRunner({
        store: backend.store,
        clock: h.clock,
        events: backend.events,
        logger: silentLogger,
        scheduleMs: SCHEDULE_MS,
        random: () => 0,
        sender: createWebhookSender({ timeoutMs: options.webhookTimeoutMs ?? 10_000, allowLoopback: true, ca: receiver.ca }),
      }),
    });
    const faults = storeFaults(backend);
    const { key, accountId } = await h.account(CREDITS);
    cleanups.push(async () => {
      answerHanging(200);
      await worker!.stop();
      await faults.clear();
      rmSync(dir, { recursive: true, force: true });
    });
    return { ...h, backend, worker, faults, outputsDir, workDir, key, accountId };
  }

  const submitted = async (p: Pipeline, patch: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
    const res = await p.request('POST', SUBMIT, { key: p.key, body: validSubmit({ webhookUrl: receiver.url('/hook'), ...patch }), headers });
    expect(res.status).toBe(202);
    return ((await res.json()) as { requestId: string }).requestId;
  };
  const taskOf = async (p: Pipeline, id: string) => (await (await p.request('GET', `${SUBMIT}/${id}`, { key: p.key })).json()) as any;
  const ledgerOf = async (p: Pipeline) => (await p.store.listLedger(p.accountId)).map((e) => `${e.kind} ${e.amount}`);
  /** Waits for the condition, waking the worker each time (a queue on the database's clock needs asking again). */
  const settled = (p: Pipeline, condition: () => boolean | Promise<boolean>) =>
    until(async () => {
      p.worker.wake();
      return condition();
    });
  const statusIs = (p: Pipeline, id: string, status: string) => async () => (await taskOf(p, id)).status === status;
  /** Starts the worker, submits, and waits until the task is `status` and the worker has nothing running. */
  const submittedAndRun = async (p: Pipeline, status: string, patch: Record<string, unknown> = {}) => {
    p.worker.start();
    const id = await submitted(p, patch);
    await settled(p, statusIs(p, id, status));
    await p.worker.idle();
    return id;
  };

  const expectInternalError = async (res: Response) => {
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ success: false, error: { code: 'internal_error' } });
    expect(text).not.toMatch(/injected|trigger|ledger|pgboss|terminat|SQL/i);
  };

  /** A lost database connection is the store being unreachable: 503, to be retried, not a bug's 500. */
  const expectUnavailable = async (res: Response) => {
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    const text = await res.text();
    expect(JSON.parse(text)).toMatchObject({ success: false, error: { code: 'unavailable', message: expect.stringMatching(/store is unreachable/) } });
    expect(text).not.toMatch(/injected|trigger|ledger|pgboss|terminat|SQL/i);
  };

  /** Nothing of the submission stayed: no task, no charge, no job. */
  const expectNothingWritten = async (p: Pipeline) => {
    expect(await p.store.listTasks({ accountId: p.accountId, limit: 10 })).toEqual([]);
    expect(await p.store.auditBalance(p.accountId)).toEqual({ balance: CREDITS, ledgerSum: CREDITS });
    expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`]);
    expect(await p.backend.queue.countJobs()).toEqual({ available: 0, leased: 0, done: 0, dead: 0 });
  };

  /** A retry with the same Idempotency-Key is a new submission: the failed one left no claim on the key. */
  const expectRetryAccepted = async (p: Pipeline, idempotencyKey: string) => {
    const res = await p.request('POST', SUBMIT, { key: p.key, body: validSubmit(), headers: { 'Idempotency-Key': idempotencyKey } });
    expect(res.status).toBe(202);
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(await p.store.listTasks({ accountId: p.accountId, limit: 10 })).toHaveLength(1);
    expect(await p.store.auditBalance(p.accountId)).toEqual({ balance: CREDITS - PRICE, ledgerSum: CREDITS - PRICE });
    expect(await p.backend.queue.countJobs()).toMatchObject({ available: 1 });
  };

  describe.skipIf(skip)('the store failing in the middle of a transaction', () => {
    it.each(['charge', 'generation job'] as const)(
      'a store failure in the middle of a submission (at the %s) answers 500 internal_error and leaves no task, no charge and no job',
      async (point) => {
        const p = await pipeline(testProvider(writesVideo()));
        await p.faults.failAt(point);
        await expectInternalError(await p.request('POST', SUBMIT, { key: p.key, body: validSubmit(), headers: { 'Idempotency-Key': 'order-1' } }));
        await expectNothingWritten(p);

        await p.faults.clear();
        await expectRetryAccepted(p, 'order-1');
      },
    );

    it.runIf(name === 'PostgreSQL')(
      'a submission whose database connection is killed mid-transaction answers 503 unavailable with Retry-After, leaves nothing, and the service keeps serving',
      async () => {
        const p = await pipeline(testProvider(writesVideo()));
        // Held at the charge's ledger row: the Idempotency-Key and the task with its job are written, uncommitted.
        // (Before the fix, the dropped client's 'error' event went unheard: an uncaught exception, the process ended.)
        const held = await p.faults.holdAt('charge');
        const answer = p.request('POST', SUBMIT, { key: p.key, body: validSubmit(), headers: { 'Idempotency-Key': 'order-1' } });
        await held.reached();
        await held.terminate();
        await expectUnavailable(await answer);
        await p.faults.clear();
        await expectNothingWritten(p);

        expect((await p.request('GET', '/readyz')).status).toBe(200);
        await expectRetryAccepted(p, 'order-1');
        // The pool dropped the dead connection: every connection it hands out works.
        await Promise.all(Array.from({ length: 25 }, () => (p.backend.store as PgStore).pool.query('SELECT 1')));
      },
    );

    it('a store failure in the middle of a cancel answers 500 internal_error and leaves the task as it was, unrefunded; the cancel can be retried', async () => {
      const p = await pipeline(testProvider(writesVideo()));
      const id = await submitted(p);
      await p.faults.failAt('refund');
      await expectInternalError(await p.request('POST', `${SUBMIT}/${id}/cancel`, { key: p.key }));
      expect(await taskOf(p, id)).toMatchObject({ status: 'queued', creditsRefunded: 0 });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`]);
      expect(await p.store.auditBalance(p.accountId)).toEqual({ balance: CREDITS - PRICE, ledgerSum: CREDITS - PRICE });
      expect(await p.store.getDeliveryForTask(id)).toBeUndefined();

      await p.faults.clear();
      const again = await p.request('POST', `${SUBMIT}/${id}/cancel`, { key: p.key });
      expect(again.status).toBe(200);
      expect(await taskOf(p, id)).toMatchObject({ status: 'cancelled', creditsRefunded: PRICE });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      expect((await p.store.getDeliveryForTask(id))?.eventType).toBe('video.generation.cancelled');
    });

    it('a store failure while completing a task leaves it processing with its job retried; the retry succeeds, charged once and never refunded', async () => {
      const retried = gate();
      const provider = testProvider(async (request, call) => {
        if (call === 2) await retried.wait;
        return writesVideo()(request, call);
      });
      const p = await pipeline(provider);
      await p.faults.failAt('task succeeded');
      p.worker.start();
      const id = await submitted(p);
      await until(() => provider.calls.length === 2);
      // Between the attempts the user sees a task still being worked on, nothing refunded, no event.
      expect(await taskOf(p, id)).toMatchObject({ status: 'processing', output: null, creditsRefunded: 0 });
      expect(await p.store.getDeliveryForTask(id)).toBeUndefined();

      await p.faults.clear();
      retried.open();
      await settled(p, statusIs(p, id, 'succeeded'));
      const url = new URL((await taskOf(p, id)).output.url);
      const download = await p.request('GET', url.pathname + url.search);
      expect(download.status).toBe(200);
      expect(Buffer.from(await download.arrayBuffer())).toEqual(video(1024));
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`]);
      await until(() => hooks.length === 1);
      expect(hooks[0]!.type).toBe('video.generation.succeeded');
    });

    it('a store failure on every completion fails the task with internal_error after its attempts, refunded once, keeping no output file', async () => {
      const provider = testProvider(writesVideo());
      const p = await pipeline(provider);
      await p.faults.failAt('task succeeded');
      const id = await submittedAndRun(p, 'failed');
      expect(provider.calls).toHaveLength(3);
      expect(await taskOf(p, id)).toMatchObject({ error: { code: 'internal_error', message: 'generation failed inside the service' }, output: null, creditsRefunded: PRICE });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      expect(filesUnder(p.outputsDir)).toEqual([]);
      await until(() => hooks.length === 1);
      expect(hooks[0]!.type).toBe('video.generation.failed');
    });

    it.runIf(name === 'PostgreSQL')(
      "a worker whose database connection is killed while completing a task retries it: succeeded, charged once, and the service keeps serving",
      async () => {
        const retried = gate();
        const provider = testProvider(async (request, call) => {
          if (call === 2) await retried.wait;
          return writesVideo()(request, call);
        });
        const p = await pipeline(provider);
        const held = await p.faults.holdAt('task succeeded');
        p.worker.start();
        const id = await submitted(p);
        await held.reached();
        await held.terminate();
        await until(() => provider.calls.length === 2);
        expect(await taskOf(p, id)).toMatchObject({ status: 'processing', output: null });

        await p.faults.clear();
        retried.open();
        await settled(p, statusIs(p, id, 'succeeded'));
        expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`]);
        await until(() => hooks.length === 1);
        expect(hooks[0]!.type).toBe('video.generation.succeeded');
        expect((await p.request('GET', '/readyz')).status).toBe(200);
      },
    );

    it("a store failure while recording a failure leaves the task processing with its job retried; it then fails with the provider's code, refunded once", async () => {
      const retried = gate();
      const provider = testProvider(async (_request, call) => {
        if (call === 2) await retried.wait;
        return { ok: false, error: { code: 'provider_error', message: 'generation failed upstream' } };
      });
      const p = await pipeline(provider);
      await p.faults.failAt('refund');
      p.worker.start();
      const id = await submitted(p);
      await until(() => provider.calls.length === 2);
      expect(await taskOf(p, id)).toMatchObject({ status: 'processing', creditsRefunded: 0 });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`]);

      await p.faults.clear();
      retried.open();
      await settled(p, statusIs(p, id, 'failed'));
      expect(await taskOf(p, id)).toMatchObject({ error: { code: 'provider_error', message: 'generation failed upstream' }, creditsRefunded: PRICE });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      await until(() => hooks.length === 1);
      expect(hooks[0]!.type).toBe('video.generation.failed');
    });

    it('a store failure while timing out an overdue task does not stop the worker: other tasks still run, and the overdue one fails with timeout once the store recovers', async () => {
      const p = await pipeline(testProvider(writesVideo()));
      // An upstream lane no worker here runs: its task waits in the queue until its deadline.
      p.deps.config.providers['vidgen-2.0'] = 'byteplus';
      const overdue = await submitted(p, { model: 'vidgen-2.0' });
      p.clock.advance(DEADLINE_MS);
      await p.faults.failAt('refund');
      const next = await submitted(p);
      p.worker.start();
      await settled(p, statusIs(p, next, 'succeeded'));
      expect((await taskOf(p, overdue)).status).toBe('queued');

      await p.faults.clear();
      p.clock.advance(1000);
      await settled(p, statusIs(p, overdue, 'failed'));
      expect(await taskOf(p, overdue)).toMatchObject({ error: { code: 'timeout' } });
      expect((await p.store.listLedger(p.accountId)).filter((e) => e.kind === 'refund').map((e) => e.taskId)).toEqual([overdue]);
    });
  });

  describe.skipIf(skip)('the provider failing', () => {
    it('a provider that hangs until aborted fails the task with timeout at its deadline, refunded once', async () => {
      const provider = testProvider(hangsUntilAborted);
      const p = await pipeline(provider);
      p.worker.start();
      const id = await submitted(p);
      await until(() => provider.calls.length === 1);
      p.clock.advance(DEADLINE_MS - 1000);
      expect((await taskOf(p, id)).status).toBe('processing');

      p.clock.advance(1000);
      await settled(p, statusIs(p, id, 'failed'));
      expect(provider.calls[0]!.signal.aborted).toBe(true);
      expect(await taskOf(p, id)).toMatchObject({ error: { code: 'timeout', message: 'no result within the deadline' }, creditsRefunded: PRICE });
      await p.worker.idle();
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      await until(() => hooks.length === 1);
      expect(hooks[0]!.type).toBe('video.generation.failed');
    });

    it('a provider that never answers, even to its abort, still fails the task with timeout at its deadline and does not hold up the next task', async () => {
      const never = gate();
      const provider = testProvider(async (request, call) => {
        if (call === 1) await never.wait;
        return writesVideo()(request, call);
      });
      const p = await pipeline(provider, { abortGraceMs: 10_000 });
      // Lets it end with the test (the worker has stopped waiting for it by then).
      cleanups.push(never.open);
      p.worker.start();
      const stuck = await submitted(p);
      await until(() => provider.calls.length === 1);
      p.clock.advance(DEADLINE_MS);
      await settled(p, statusIs(p, stuck, 'failed'));
      expect(await taskOf(p, stuck)).toMatchObject({ error: { code: 'timeout' }, creditsRefunded: PRICE });

      const next = await submitted(p);
      p.clock.advance(10_000);
      await settled(p, statusIs(p, next, 'succeeded'));
      expect((await p.store.listLedger(p.accountId)).filter((e) => e.kind === 'refund').map((e) => e.taskId)).toEqual([stuck]);
    });

    it('a provider that throws on every attempt is retried per the job attempts, then the task fails with internal_error, refunded once', async () => {
      const provider = testProvider(async () => {
        throw new Error('the upstream client crashed');
      });
      const p = await pipeline(provider);
      const id = await submittedAndRun(p, 'failed');
      expect(provider.calls).toHaveLength(3);
      const task = await taskOf(p, id);
      expect(task).toMatchObject({ error: { code: 'internal_error', message: 'generation failed inside the service' }, creditsRefunded: PRICE });
      expect(JSON.stringify(task)).not.toContain('crashed');
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      await settled(p, async () => (await p.store.getDeliveryForTask(id))?.status === 'delivered');
      await p.worker.idle();
      expect(hooks.map((h) => h.type)).toEqual(['video.generation.failed']);
      // The generation job is given up for good; nothing is left to run.
      expect(await p.backend.queue.countJobs()).toMatchObject({ available: 0, leased: 0, dead: 1 });
    });

    it('a provider that answers an error fails the task at once with its code, refunded once', async () => {
      const provider = testProvider(async () => ({ ok: false, error: { code: 'content_rejected', message: 'the prompt was refused by moderation' } }));
      const p = await pipeline(provider);
      const id = await submittedAndRun(p, 'failed');
      expect(provider.calls).toHaveLength(1);
      expect(await taskOf(p, id)).toMatchObject({ error: { code: 'content_rejected', message: 'the prompt was refused by moderation' }, creditsRefunded: PRICE });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
    });

    it('a provider that answers success after a cancel: the result is discarded, the task stays cancelled, refunded once, no output file kept, and the webhook says cancelled', async () => {
      // It hears the abort, and answers with a finished video anyway (an upstream that finished meanwhile).
      const provider = testProvider(async (request, call) => {
        await new Promise((resolve) => request.signal.addEventListener('abort', resolve));
        return writesVideo()(request, call);
      });
      const p = await pipeline(provider);
      p.worker.start();
      const id = await submitted(p);
      await until(() => provider.calls.length === 1);
      expect((await p.request('POST', `${SUBMIT}/${id}/cancel`, { key: p.key })).status).toBe(200);
      await until(() => provider.answers.length === 1);
      await p.worker.idle();
      expect(provider.answers[0]).toEqual({ ok: true });
      expect(await taskOf(p, id)).toMatchObject({ status: 'cancelled', output: null, creditsRefunded: PRICE });
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      expect(filesUnder(p.outputsDir)).toEqual([]);
      await until(() => hooks.length === 1);
      expect(hooks[0]!.type).toBe('video.generation.cancelled');
      expect(JSON.parse(hooks[0]!.body).data).toMatchObject({ requestId: id, status: 'cancelled', output: null });
      // Past the delivery's lease and retry times only once it is recorded: nothing may send it again.
      await until(async () => (await p.store.getDeliveryForTask(id))?.status === 'delivered');
      await p.worker.idle();
      p.clock.advance(60_000);
      await p.worker.idle();
      expect(hooks).toHaveLength(1);
      expect(provider.calls).toHaveLength(1);
    });
  });

  describe.skipIf(skip || !smallDisk)('a full disk for output files', () => {
    afterEach(() => {
      for (const entry of readdirSync(smallDisk!.path)) rmSync(join(smallDisk!.path, entry), { recursive: true, force: true });
    });

    it.each([
      ['outputs on a disk of their own', { outputs: true, work: false }],
      ['renders and outputs on one disk', { outputs: true, work: true }],
    ])('a full disk (%s) fails the task with internal_error after its attempts, refunded once, leaves no partial file, and the service keeps serving', async (_layout, on) => {
      const disk = smallDisk!.path;
      const provider = testProvider((request, call) => writesVideo(request.prompt === 'big' ? 256 * 1024 : 1024)(request, call));
      const p = await pipeline(provider, { outputsDir: on.outputs ? join(disk, 'outputs') : undefined, workDir: on.work ? join(disk, 'work') : undefined });
      const big = await submittedAndRun(p, 'failed', { prompt: 'big' });
      expect(provider.calls).toHaveLength(3);
      const failed = await taskOf(p, big);
      expect(failed).toMatchObject({ error: { code: 'internal_error', message: 'generation failed inside the service' }, creditsRefunded: PRICE });
      expect(JSON.stringify(failed)).not.toMatch(/ENOSPC|\/tmp/);
      expect(await ledgerOf(p)).toEqual([`grant ${CREDITS}`, `charge -${PRICE}`, `refund ${PRICE}`]);
      expect(filesUnder(disk)).toEqual([]);

      expect((await p.request('GET', '/readyz')).status).toBe(200);
      const small = await submitted(p, { prompt: 'small' });
      await settled(p, statusIs(p, small, 'succeeded'));
      const url = new URL((await taskOf(p, small)).output.url);
      expect(Buffer.from(await (await p.request('GET', url.pathname + url.search)).arrayBuffer())).toEqual(video(1024));
    });
  });

  describe.skipIf(skip)('the webhook receiver failing', () => {
    it('a receiver slower than the timeout: the attempt is recorded as a timeout and retried with the same webhook-id', async () => {
      answerFor = (_path, n) => (n === 1 ? 'hang' : 200);
      const p = await pipeline(testProvider(writesVideo()), { webhookTimeoutMs: 300 });
      p.worker.start();
      const id = await submitted(p);
      await until(() => hooks.length === 1);
      // The task is done while its receiver keeps the event waiting (its attempt may or may not have timed out yet).
      expect(await taskOf(p, id)).toMatchObject({ status: 'succeeded', webhook: { status: 'pending' } });
      await until(async () => ((await p.store.getDeliveryForTask(id))?.attempts ?? 0) >= 1);
      const delivery = (await p.store.getDeliveryForTask(id))!;
      const [first] = await p.store.listDeliveryAttempts(delivery.id);
      expect(first).toMatchObject({ statusCode: null, error: 'timed out after 300 ms' });

      p.clock.advance(SCHEDULE_MS[0]!);
      await settled(p, async () => (await p.store.getDeliveryForTask(id))?.status === 'delivered');
      expect(hooks.map((h) => h.id)).toEqual([delivery.id, delivery.id]);
      expect(hooks[1]!.body).toBe(hooks[0]!.body);
      expect((await p.store.listDeliveryAttempts(delivery.id)).map((a) => a.statusCode)).toEqual([null, 200]);
    });

    // webhooks.test.ts covers this fully on SQLite.
    it.runIf(name === 'PostgreSQL')('a receiver answering 5xx is retried on the schedule with the same webhook-id until it answers 2xx, once', async () => {
      answerFor = (_path, n) => [500, 503][n - 1] ?? 200;
      const p = await pipeline(testProvider(writesVideo()));
      p.worker.start();
      const id = await submitted(p);
      // Each retry is due at its failed attempt's time plus the schedule's delay (the delivery's row is its queue entry), and
      // not claimable sooner.
      for (const [i, delay] of SCHEDULE_MS.slice(0, 2).entries()) {
        await settled(p, async () => (await p.store.getDeliveryForTask(id))?.attempts === i + 1);
        await p.worker.idle();
        const [failed] = (await p.store.listDeliveryAttempts((await p.store.getDeliveryForTask(id))!.id)).slice(i);
        expect(await p.store.getDeliveryForTask(id)).toMatchObject({ status: 'pending', nextAttemptAt: new Date(failed!.attemptedAt.getTime() + delay) });
        p.clock.advance(delay - 1);
        expect(await p.backend.queue.claim({ workerId: 'worker_test', now: p.clock.now(), leaseMs: 1_000, provider: 'webhooks', limit: 1 })).toEqual([]);
        expect(hooks).toHaveLength(i + 1);
        p.clock.advance(1);
      }
      await settled(p, async () => (await p.store.getDeliveryForTask(id))?.status === 'delivered');
      const delivery = (await p.store.getDeliveryForTask(id))!;
      const attempts = await p.store.listDeliveryAttempts(delivery.id);
      expect(attempts.map((a) => a.statusCode)).toEqual([500, 503, 200]);
      expect(hooks.map((h) => h.id)).toEqual(Array(3).fill(delivery.id));
      expect(new Set(hooks.map((h) => h.body)).size).toBe(1);
      expect(await taskOf(p, id)).toMatchObject({ status: 'succeeded', webhook: { status: 'delivered', attempts: 3 } });
      p.clock.advance(60_000);
      await p.worker.idle();
      expect(hooks).toHaveLength(3);
    });

    it("a slow receiver holds up neither other tasks' deliveries nor its own task's status", async () => {
      answerFor = (path) => (path === '/slow' ? 'hang' : 200);
      const p = await pipeline(testProvider(writesVideo()));
      p.worker.start();
      const slow = await submitted(p, { webhookUrl: receiver.url('/slow') });
      await until(() => hooks.some((h) => h.path === '/slow'));
      expect(await taskOf(p, slow)).toMatchObject({ status: 'succeeded', webhook: { status: 'pending', attempts: 0 } });

      const fast = await submitted(p, { webhookUrl: receiver.url('/fast') });
      await settled(p, async () => (await p.store.getDeliveryForTask(fast))?.status === 'delivered');
      expect(await taskOf(p, fast)).toMatchObject({ status: 'succeeded', webhook: { status: 'delivered', attempts: 1 } });
      expect((await p.store.getDeliveryForTask(slow))!).toMatchObject({ status: 'pending', attempts: 0 });

      answerHanging(200);
      await settled(p, async () => (await p.store.getDeliveryForTask(slow))?.status === 'delivered');
      expect(hooks.filter((h) => h.path === '/slow')).toHaveLength(1);
    });
  });
  describe.skipIf(skip)("the worker's bookkeeping under slow parts", () => {
    /** The queue with one method held at its first call (or every call) until `held` opens. */
    const holding = (method: 'claim' | 'complete', held_calls: 'first' | 'every' = 'first') => {
      const held = gate();
      let calls = 0;
      return {
        held,
        get calls() {
          return calls;
        },
        wrap: (queue: JobQueue): JobQueue =>
          Object.assign(Object.create(queue) as JobQueue, {
            [method]: async (...args: unknown[]) => {
              if (++calls === 1 || held_calls === 'every') await held.wait;
              return (queue[method] as (...a: unknown[]) => Promise<unknown>).apply(queue, args);
            },
          }),
      };
    };

    it('stopping while a slow queue is still answering a claim waits for the job that claim started', async () => {
      // Every lane's claim is held: the one that returns the job among them.
      const claim = holding('claim', 'every');
      const p = await pipeline(testProvider(writesVideo()), { queue: claim.wrap });
      const id = await submitted(p);
      p.worker.start();
      await until(() => claim.calls >= 1);
      const stopped = p.worker.stop();
      claim.held.open();
      await stopped;
      expect(p.worker.running).toBe(0);
      expect((await taskOf(p, id)).status).toBe('succeeded');
    });

    it("a task's webhook delivery that starts while its generation job is still finishing counts as running", async () => {
      answerFor = () => 'hang';
      const complete = holding('complete');
      // A failed render (its half-written output left behind): the task fails, refunded, with its event queued, and
      // then the job is completed. (A succeeded task's job is completed in the task's own transaction.)
      let written: string | undefined;
      const failing: Behaviour = async (request) => {
        written = request.outputPath;
        writeFileSync(request.outputPath, video(100));
        return { ok: false, error: { code: 'provider_error', message: 'failed half way' } };
      };
      const p = await pipeline(testProvider(failing), { queue: complete.wrap });
      p.worker.start();
      const id = await submitted(p);
      await until(() => complete.calls === 1);
      // The task has failed and its event is queued; its generation job is not marked done yet.
      expect((await taskOf(p, id)).status).toBe('failed');
      await settled(p, () => hooks.length === 1);
      complete.held.open();
      // The generation job's last step is removing what its attempt left (the half-written output).
      await until(() => !existsSync(written!));
      await until(() => p.worker.running === 1);
      // Idle means the delivery has finished too.
      answerHanging(200);
      await p.worker.idle();
      expect((await p.store.getDeliveryForTask(id))?.status).toBe('delivered');
    });
  });
});
