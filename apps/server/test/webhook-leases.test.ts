/**
 * Webhook attempts under the job lease, on both stores: an attempt that runs longer than the lease
 * keeps its job (no second claim POSTs the same event while it is open); an attempt that ends after
 * another claim took its job (its heartbeats failed) is recorded but settles nothing; and the retry
 * schedule counts from the end of an attempt, not its start.
 *
 * Also, on both: the worker that completes a task attempts its webhook itself, handed the delivery's queue
 * entry already claimed (no claim round), unless its webhooks lane is full; one that dies holding it leaves
 * it to another worker once the lease has run out.
 *
 * Receivers are real HTTPS servers on loopback that hold each request until the test answers it. A
 * delivery's lease and its retries are on the (manual) clock the claims are given, on both stores.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLocalOutputFiles } from '../src/files/storage.js';
import type { GenerationRequest, GenerationResult, Provider } from '../src/providers/provider.js';
import type { Job, JobQueue } from '../src/queue/queue.js';
import type { Worker, WorkerOptions } from '../src/queue/worker.js';
import type { Backend } from '../src/store/open.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import type { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import { createDeliveryRunner } from '../src/webhooks/deliveries.js';
import { createWebhookSender } from '../src/webhooks/sender.js';
import { SUBMIT, silentLogger, testConfig, testWorker, until, validSubmit } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

const instant: Provider = {
  name: 'instant',
  needsLocalMedia: false,
  async generate(request: GenerationRequest): Promise<GenerationResult> {
    writeFileSync(request.outputPath, 'mp4');
    return { ok: true };
  },
};

/** A POST the receiver holds until the test answers it. */
interface Post {
  headers: IncomingHttpHeaders;
  body: string;
  answer(status: number): void;
}

/** What a worker asked of its queue, and what it got. */
interface QueueLog {
  claims: { provider: string; jobs: Job[]; afterRetries: number }[];
  extensions: { now: Date; kept: boolean }[];
  retries: { runAt: Date }[];
}

/** The worker's queue, recording its calls; `unreachable` makes lease extensions fail the way a database out of reach does. */
function observed(queue: JobQueue, state: { unreachable: boolean } = { unreachable: false }): { queue: JobQueue; log: QueueLog } {
  const log: QueueLog = { claims: [], extensions: [], retries: [] };
  return {
    log,
    queue: {
      async claim(input) {
        const afterRetries = log.retries.length;
        const jobs = await queue.claim(input);
        log.claims.push({ provider: input.provider, jobs, afterRetries });
        return jobs;
      },
      async extendLease(input) {
        if (state.unreachable) throw new Error('connect ECONNREFUSED (the test made the database unreachable)');
        const kept = await queue.extendLease(input);
        log.extensions.push({ now: input.now, kept });
        return kept;
      },
      complete: (jobId, now) => queue.complete(jobId, now),
      async retry(input) {
        await queue.retry(input);
        log.retries.push({ runAt: input.runAt });
      },
      release: (input) => queue.release(input),
      bury: (input) => queue.bury(input),
      countJobs: () => queue.countJobs(),
    },
  };
}

describe.each(backendKinds)('webhook attempts and the job lease on $name', ({ name, skip, open }) => {
  const pg = name === 'PostgreSQL';
  /** The lease: only the manual clock lets it run out (a delivery's lease is on the claims' clock on both stores). */
  const leaseMs = 1_000;
  let opened: OpenedBackend;
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-webhook-leases-'));
  const cleanups: (() => Promise<void> | void)[] = [];

  beforeAll(async () => {
    if (!skip) opened = await open({ leaseMs });
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    await opened?.done();
    rmSync(dir, { recursive: true, force: true });
  });

  async function setUp() {
    const backend: Backend = await opened.fresh();
    const posts: Post[] = [];
    let closing = false;
    const receiver: HttpsFixture = await startHttpsFixture((req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString()));
      req.on('end', () => {
        let answered = false;
        const answer = (status: number) => {
          if (answered) return;
          answered = true;
          res.writeHead(status).end();
        };
        posts.push({ headers: req.headers, body, answer });
        if (closing) answer(200);
      });
    });
    const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
    const workers: Worker[] = [];
    const h = backendHarness(backend, { files, wakeWorkers: () => workers.forEach((w) => w.wake()), config: testConfig({ webhooks: { allowLoopback: true } }) });
    const newWorker = (overrides: Partial<WorkerOptions> & { unreachable?: { unreachable: boolean } } = {}) => {
      const { unreachable, ...options } = overrides;
      const { queue, log } = observed(backend.queue, unreachable);
      const worker = testWorker(h, {
        provider: instant,
        queue,
        files,
        workDir: join(dir, 'work'),
        concurrency: { local: 1, webhooks: 1 },
        leaseMs,
        deliveries: createDeliveryRunner({
          store: backend.store,
          clock: h.clock,
          events: backend.events,
          logger: silentLogger,
          scheduleMs: [1_000, 1_000, 1_000],
          random: () => 0,
          // Longer than the lease, as VIDGEN_WEBHOOK_TIMEOUT_MS may be (15 s against a lease of 1 s, say); never reached here.
          sender: createWebhookSender({ timeoutMs: 20_000, allowLoopback: true, ca: receiver.ca }),
        }),
        ...options,
      });
      workers.push(worker);
      return { worker, log };
    };
    cleanups.push(async () => {
      closing = true;
      posts.forEach((post) => post.answer(200));
      for (const worker of workers) await worker.stop();
      await receiver.close();
    });
    const { key } = await h.account(10_000);
    const submit = async () => {
      const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ webhookUrl: receiver.url('/hook') }) });
      expect(res.status).toBe(202);
      return ((await res.json()) as { requestId: string }).requestId;
    };
    const deliveryOf = async (taskId: string) => (await backend.store.getDeliveryForTask(taskId))!;
    /** When the task's pending delivery is due next, as the queue has it (on PostgreSQL the delivery's row is its queue entry). */
    const jobRunAt = async (taskId: string): Promise<Date> => {
      if (pg) {
        const { rows } = await (backend.store as PgStore).pool.query(`SELECT next_attempt_at FROM webhook_deliveries WHERE task_id = $1`, [taskId]);
        return rows[0].next_attempt_at as Date;
      }
      const row = (backend.store as SqliteStore).db.prepare(`SELECT run_at FROM jobs WHERE kind = 'deliver' AND task_id = ?`).get(taskId) as { run_at: number };
      return new Date(row.run_at);
    };
    /** Lets the first claim's lease run out (unless renewed): the deliveries' leases are on the claims' clock on both stores, moved three leases on. */
    const outlastLease = () => h.clock.advance(3 * leaseMs);
    return { backend, h, posts, newWorker, submit, deliveryOf, jobRunAt, outlastLease };
  }

  describe.skipIf(skip)('an attempt longer than the lease', () => {
    it('keeps its job: another worker claims nothing while it is open, and the event is POSTed once, recorded once', async () => {
      const { backend, h, posts, newWorker, submit, deliveryOf, outlastLease } = await setUp();
      const first = newWorker();
      first.worker.start();
      const id = await submit();
      await until(() => posts.length === 1);

      await outlastLease();
      // A renewal made after the lease would have run out (on SQLite: on the clock moved past it); at most a third of a lease away.
      const now = h.clock.now().getTime();
      await until(() => first.log.extensions.some((e) => e.kept && e.now.getTime() >= now), 5_000).catch(() => {});

      const second = newWorker({ concurrency: { webhooks: 1 } });
      second.worker.start();
      await until(() => second.log.claims.some((c) => c.provider === 'webhooks'));
      expect(second.log.claims.filter((c) => c.provider === 'webhooks').flatMap((c) => c.jobs)).toEqual([]);
      expect(posts).toHaveLength(1);

      posts[0]!.answer(200);
      await until(async () => (await deliveryOf(id)).status === 'delivered');
      await first.worker.idle();
      h.clock.advance(10_000);
      second.worker.wake();
      const claimsBefore = second.log.claims.length;
      await until(() => second.log.claims.length > claimsBefore);
      await second.worker.idle();

      expect(posts).toHaveLength(1);
      const delivery = await deliveryOf(id);
      expect(posts[0]!.headers['webhook-id']).toBe(delivery.id);
      expect(delivery).toMatchObject({ status: 'delivered', attempts: 1 });
      expect((await h.store.listDeliveryAttempts(delivery.id)).map((a) => a.statusCode)).toEqual([200]);
      expect(await backend.queue.countJobs()).toMatchObject({ leased: 0, available: 0 });
    });

    // 500: an answer to retry, the claim asked by a lease check; 410: an answer that settles, the claim found by the
    // transaction that records the attempt and would complete its job.
    it.each([500, 410])('ends (answered %i) after another claim took its job (its heartbeats failed): recorded and counted, but the holder settles the delivery', async (lastAnswer) => {
      const { backend, h, posts, newWorker, submit, deliveryOf, outlastLease } = await setUp();
      const database = { unreachable: true };
      const first = newWorker({ unreachable: database });
      first.worker.start();
      const id = await submit();
      await until(() => posts.length === 1);

      await outlastLease();
      const second = newWorker({ concurrency: { webhooks: 1 } });
      second.worker.start();
      await until(() => posts.length === 2);
      expect(posts[1]!.headers['webhook-id']).toBe(posts[0]!.headers['webhook-id']);
      database.unreachable = false;

      // The holder's attempt delivers; the first, answered last, fails — and must not undo that.
      posts[1]!.answer(200);
      await until(async () => (await deliveryOf(id)).status === 'delivered');
      await second.worker.idle();
      posts[0]!.answer(lastAnswer);
      await until(async () => (await deliveryOf(id)).attempts === 2);
      await first.worker.idle();

      const delivery = await deliveryOf(id);
      expect(delivery).toMatchObject({ status: 'delivered', attempts: 2, nextAttemptAt: null });
      expect((await h.store.listDeliveryAttempts(delivery.id)).map((a) => a.statusCode)).toEqual([200, lastAnswer]);
      // The first claim neither retried nor completed the job.
      expect(first.log.retries).toEqual([]);
      expect(await backend.queue.countJobs()).toMatchObject({ leased: 0, available: 0 });
      expect(posts).toHaveLength(2);
    });
  });

  describe.skipIf(skip)('the retry schedule', () => {
    it("counts from the end of an attempt: after one that took 20 s, the next is the schedule's delay after it ended", async () => {
      const { h, posts, newWorker, submit, deliveryOf, jobRunAt } = await setUp();
      const first = newWorker();
      first.worker.start();
      const id = await submit();
      await until(() => posts.length === 1);
      const startedAt = h.clock.now().getTime();

      // The attempt takes 20 s (of the clock) before the receiver answers 500.
      h.clock.advance(20_000);
      posts[0]!.answer(500);
      await until(() => first.log.retries.length === 1);

      const delivery = await deliveryOf(id);
      const [attempt] = await h.store.listDeliveryAttempts(delivery.id);
      expect(attempt!.attemptedAt.getTime()).toBe(startedAt);
      expect(delivery.nextAttemptAt?.getTime()).toBe(startedAt + 20_000 + 1_000);
      expect(first.log.retries[0]!.runAt.getTime()).toBe(startedAt + 20_000 + 1_000);
      expect((await jobRunAt(id)).getTime()).toBe(startedAt + 20_000 + 1_000);

      // The worker looks for work once the attempt is over: the retry is not due yet.
      await until(() => first.log.claims.some((c) => c.provider === 'webhooks' && c.afterRetries === 1));
      expect(first.log.claims.filter((c) => c.provider === 'webhooks' && c.afterRetries === 1).flatMap((c) => c.jobs)).toEqual([]);
      expect(posts).toHaveLength(1);
      h.clock.advance(1_000);
      first.worker.wake();
      await until(() => posts.length === 2);
      expect(posts[1]!.headers['webhook-id']).toBe(delivery.id);
    });
  });

  describe.skipIf(skip)('the delivery handed to the worker that completes its task', () => {
    /** The task's delivery's queue entry (PostgreSQL: the delivery's row; SQLite: its deliver job): its claims so far, and its lease. */
    const leaseOf = async (backend: Backend, taskId: string): Promise<{ claims: number; leaseUntil: Date | null }> => {
      if (pg) {
        const { rows } = await (backend.store as PgStore).pool.query('SELECT lease_id, lease_until FROM webhook_deliveries WHERE task_id = $1', [taskId]);
        return { claims: rows[0].lease_id as number, leaseUntil: rows[0].lease_until as Date | null };
      }
      const row = (backend.store as SqliteStore).db.prepare(`SELECT claims, lease_until FROM jobs WHERE kind = 'deliver' AND task_id = ?`).get(taskId) as { claims: number; lease_until: number | null };
      return { claims: row.claims, leaseUntil: row.lease_until === null ? null : new Date(row.lease_until) };
    };
    /** The job id of the `n`th claim of the task's delivery, as the store's queue names it. */
    const claimId = async (backend: Backend, taskId: string, n: number): Promise<string> => {
      if (pg) return `webhooks/${(await backend.store.getDeliveryForTask(taskId))!.id}/${n}`;
      const row = (backend.store as SqliteStore).db.prepare(`SELECT id FROM jobs WHERE kind = 'deliver' AND task_id = ?`).get(taskId) as { id: number };
      return `${row.id}.${n}`;
    };
    const claimedDeliveries = (log: QueueLog) => log.claims.filter((c) => c.provider === 'webhooks').flatMap((c) => c.jobs);

    it('is attempted by that worker without a claim round, under the lease it was written with', async () => {
      const { backend, h, posts, newWorker, submit, deliveryOf } = await setUp();
      const reads = vi.spyOn(backend.store, 'pendingDelivery');
      const first = newWorker();
      first.worker.start();
      const id = await submit();
      await until(() => posts.length === 1);
      // The completion hands the delivery and its secrets over (SQLite, and PostgreSQL from its message's answers): the attempt reads neither.
      expect(reads).toHaveBeenCalledTimes(0);
      reads.mockRestore();
      // Written claimed (its first claim), leased on the claims' clock; no claim handed it out.
      expect(await leaseOf(backend, id)).toEqual({ claims: 1, leaseUntil: new Date(h.clock.now().getTime() + leaseMs) });
      expect(claimedDeliveries(first.log)).toEqual([]);
      // Its lease is kept while the attempt is open, as a claimed delivery's is.
      h.clock.advance(3 * leaseMs);
      const now = h.clock.now().getTime();
      await until(() => first.log.extensions.some((e) => e.kept && e.now.getTime() >= now));
      posts[0]!.answer(200);
      await until(async () => (await deliveryOf(id)).status === 'delivered');
      await first.worker.idle();
      expect(await leaseOf(backend, id)).toMatchObject({ claims: 1, leaseUntil: null });
      expect(await backend.queue.countJobs()).toMatchObject({ leased: 0, available: 0 });
      expect(posts).toHaveLength(1);
    });

    it('is claimed by another worker once the lease of a worker that died holding it has run out, and not before', async () => {
      const { backend, h, posts, newWorker, submit, deliveryOf } = await setUp();
      const id = await submit();
      // A worker completes the task, handed the delivery, and dies before its attempt.
      await h.store.startTask({ id, now: h.clock.now() });
      const completed = await h.store.completeTask({
        id,
        now: h.clock.now(),
        outputKey: `${id}.mp4`,
        outputUrl: 'https://files.example.com/x',
        outputExpiresAt: new Date(h.clock.now().getTime() + 3_600_000),
        holdDelivery: { leaseUntil: new Date(h.clock.now().getTime() + leaseMs), workerId: 'worker_that_died' },
      });
      expect(completed).toMatchObject({ kind: 'succeeded', heldDelivery: await claimId(backend, id, 1) });
      // The delivery as written and the secrets with it: what the attempt would have read.
      expect((completed as { pendingDelivery?: unknown }).pendingDelivery).toEqual(await backend.store.pendingDelivery(id, h.clock.now()));
      const other = newWorker({ concurrency: { webhooks: 1 } });
      other.worker.start();
      await until(() => other.log.claims.some((c) => c.provider === 'webhooks'));
      expect(claimedDeliveries(other.log)).toEqual([]);
      h.clock.advance(leaseMs);
      other.worker.wake();
      await until(() => posts.length === 1);
      expect(claimedDeliveries(other.log)).toMatchObject([{ id: await claimId(backend, id, 2), taskId: id, attempts: 2 }]);
      posts[0]!.answer(200);
      await until(async () => (await deliveryOf(id)).status === 'delivered');
      expect(await deliveryOf(id)).toMatchObject({ status: 'delivered', attempts: 1 });
    });

    it('is handed back at once, unattempted, when the worker began stopping while the task was being completed', async () => {
      const { backend, posts, newWorker, submit, deliveryOf } = await setUp();
      let openCompletion!: () => void;
      const completionHeld = new Promise<void>((resolve) => (openCompletion = resolve));
      let completing!: () => void;
      const completionCalled = new Promise<void>((resolve) => (completing = resolve));
      // The store as the worker sees it: its completion waits until the test lets it return.
      const store = Object.create(backend.store) as typeof backend.store;
      store.completeTask = async (input) => {
        const outcome = await backend.store.completeTask(input);
        completing();
        await completionHeld;
        return outcome;
      };
      const first = newWorker({ store });
      first.worker.start();
      const id = await submit();
      await completionCalled;
      expect(await leaseOf(backend, id)).toMatchObject({ claims: 1 });
      const stopped = first.worker.stop();
      openCompletion();
      await stopped;
      expect(await leaseOf(backend, id)).toEqual({ claims: 1, leaseUntil: null });
      expect(posts).toHaveLength(0);
      // Another worker claims it at once, without waiting out the lease.
      const other = newWorker({ concurrency: { webhooks: 1 } });
      other.worker.start();
      await until(() => posts.length === 1);
      expect(claimedDeliveries(other.log)).toMatchObject([{ taskId: id, id: await claimId(backend, id, 2) }]);
      posts[0]!.answer(200);
      await until(async () => (await deliveryOf(id)).status === 'delivered');
    });

    it('is written for any worker to claim when the completing worker has no webhook slot free', async () => {
      const { backend, posts, newWorker, submit, deliveryOf } = await setUp();
      const first = newWorker();
      first.worker.start();
      const held = await submit();
      await until(() => posts.length === 1);
      // Its one webhooks slot is taken by the first task's open attempt: the second's delivery is left unclaimed.
      const queued = await submit();
      await until(async () => (await backend.store.findTask(queued))?.status === 'succeeded');
      expect(await leaseOf(backend, queued)).toEqual({ claims: 0, leaseUntil: null });
      posts[0]!.answer(200);
      await until(() => posts.length === 2);
      expect(claimedDeliveries(first.log)).toMatchObject([{ taskId: queued, id: await claimId(backend, queued, 1) }]);
      posts[1]!.answer(200);
      await until(async () => (await deliveryOf(queued)).status === 'delivered');
      expect(await deliveryOf(held)).toMatchObject({ status: 'delivered', attempts: 1 });
    });
  });
});
