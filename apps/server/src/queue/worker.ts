/**
 * The worker: claims generation jobs and sees each task through — start it,
 * fetch its references when the provider needs files, have the provider
 * render, keep the output, and finish the task — within the task's deadline.
 * A cancel (from the API, through TaskEvents) or the deadline aborts the
 * provider, which kills its render. Runs inside the server process by default.
 */
import { mkdir, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { ModelId } from '../domain/catalog.js';
import { newUlid } from '../domain/ids.js';
import { mediaKindOf } from '../domain/rules.js';
import type { OutputFiles } from '../files/storage.js';
import type { Clock, TaskEvents } from '../interfaces.js';
import type { GenerationResult, Provider, ReferenceMedia } from '../providers/provider.js';
import type { PendingDelivery, Store, TaskRecord } from '../store/store.js';
import type { Follower } from '../upstream/follower.js';
import type { UpstreamSubmitter } from '../upstream/submitter.js';
import type { DeliveryRunner } from '../webhooks/deliveries.js';
import { WEBHOOKS_LANE, type Job, type JobQueue } from './queue.js';

/** What the worker needs of the reference fetcher (media/fetcher.ts). */
export interface ReferenceFetcher {
  fetch(url: string, kind: ReferenceMedia['kind'], destinationPath: string, signal?: AbortSignal): Promise<{ ok: true } | { ok: false; reason: string }>;
}

export interface WorkerOptions {
  store: Store;
  queue: JobQueue;
  events: TaskEvents;
  clock: Clock;
  logger: Logger;
  /** The provider for each model (configuration routes models to providers). */
  providerFor: (model: ModelId) => Provider;
  /** Jobs run at once, per provider name; a provider absent here is not run by this worker. */
  concurrency: Record<string, number>;
  /**
   * The lanes a wake-up (`wake()`: a job enqueued) claims from: those models are routed to, and
   * webhooks. The others (a lane no model is routed to any more, whose old jobs still must run) are
   * claimed from at every poll only. Default: every lane of `concurrency`. A claim on a lane with
   * nothing in it still costs a query (PostgreSQL) or a commit (SQLite).
   */
  wakeLanes?: string[];
  fetcher: ReferenceFetcher;
  files: OutputFiles;
  /** Scratch space for fetched references and renders in progress. */
  workDir: string;
  /** How long a claim lasts without a heartbeat; a dead worker's jobs are claimed again after it. */
  leaseMs: number;
  /** How often to look for work when nothing woke the worker, and to sweep deadlines and files. */
  pollMs: number;
  /**
   * Under load, the least time from one claim round's start to the next (default 0): a round woken while the previous one
   * was under way, and that one claimed more than one job, waits out the rest of it and claims what came meanwhile in one
   * go; a wake-up of an idle worker, or after a round of one job or none, claims at once. The wait also ends when half the
   * slots of a lane whose last claim got all it asked for (work is waiting) are free: they would otherwise stand idle,
   * and a claim for half a lane is batch enough (the pipeline benchmark's one PostgreSQL process ran 10-20 % faster).
   * On PostgreSQL each claim is a query planned and run (config.ts, VIDGEN_CLAIM_INTERVAL_MS).
   */
  claimIntervalMs?: number;
  /** How long an output file is served after completion (D13: 7 days). */
  outputTtlMs: number;
  /** Delay before a job that hit an unexpected error is tried again. */
  retryDelayMs: (attempt: number) => number;
  /** Runs `deliver` jobs (webhooks), in the `webhooks` lane of `concurrency`. */
  deliveries?: DeliveryRunner;
  /**
   * The remote provider: the `generate` jobs of `lane` only create the upstream task (`submitter`), within the room
   * its channels have; the `follower` then follows it, holding no slot. Started and stopped with the worker.
   */
  upstream?: { lane: string; submitter: UpstreamSubmitter; follower: Follower };
  /**
   * How long a provider may take to stop once aborted (cancel, deadline, shutdown) before the
   * worker stops waiting for it (default 60 s): one that ignores its signal must not hold its slot forever.
   */
  abortGraceMs?: number;
}

/** What a wake-up is for (Worker.wake). */
export type WakeFor = 'jobs' | 'upstream';

/** What another process's notice (PostgreSQL NOTIFY on the jobs channel) is for: its payload is a job's lane, or `upstream`. */
export const wakeForNotice = (payload: string): WakeFor => (payload === 'upstream' ? 'upstream' : 'jobs');

export interface Worker {
  start(): void;
  /**
   * Looks for work now: `jobs` claims jobs (one was enqueued, a slot freed), `upstream` has the
   * follower look for upstream tasks due (a callback, a cancel); both when not said.
   */
  wake(what?: WakeFor): void;
  /**
   * Stops claiming; resolves when running jobs have finished. Renders still
   * running after `graceMs` (default: no bound) are stopped and their jobs
   * handed back to the queue for another worker, without counting an attempt.
   * A second call with a shorter bound shortens it.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Resolves when no job is running (tests). */
  idle(): Promise<void>;
  readonly running: number;
}

/** Where an attempt works (attemptSpace). */
interface AttemptSpace {
  /** Its own directory, for a provider that needs the references on disk. */
  dir?: string;
  /** Where the provider leaves the MP4. */
  outputPath: string;
  /** The output is in storage (OutputFiles.put moved it there, or it was written there): nothing left to remove. */
  stored?: boolean;
}

export function createWorker(options: WorkerOptions): Worker {
  const { store, queue, events, clock, logger } = options;
  const workerId = `worker_${newUlid(clock.now().getTime())}`;
  /** Running jobs by job id (a task's generation and its webhook delivery may overlap). */
  const inFlight = new Map<string, Promise<void>>();
  /** Stops each running render for shutdown (its job is handed back). */
  const handBack = new Set<() => void>();
  /** Set once the shutdown bound has passed: a job claimed before it but not yet rendering is handed back too. */
  let handingBack = false;
  const busy = new Map<string, number>();
  /** Each provider with a free slot, and how many it has; the remote lane also within the room its channels have. */
  const free = async () => {
    const lanes = Object.entries(options.concurrency).map(([provider, limit]) => ({ provider, slots: limit - (busy.get(provider) ?? 0) }));
    const remote = lanes.find(({ provider, slots }) => provider === options.upstream?.lane && slots > 0);
    if (remote) remote.slots = Math.min(remote.slots, await options.upstream!.submitter.freeSlots());
    return lanes.filter(({ slots }) => slots > 0);
  };
  let started = false;
  /** The work directory, made on the first attempt that writes its output there. */
  let workDirMade: Promise<void> | undefined;
  /** The poll timer asked for a sweep (deadlines, expired outputs); pumps woken by work skip it. */
  let sweepDue = true;
  let stopping = false;
  let pumping = false;
  let pumpAgain = false;
  const allLanes = Object.keys(options.concurrency);
  const wakeLanes = options.wakeLanes ?? allLanes;
  const claimIntervalMs = options.claimIntervalMs ?? 0;
  /** The lanes the next round of the pump claims from: a lane is asked for when it may have work this worker has room for. */
  const wanted = new Set<string>();
  /** Settles when the pump in progress has stopped claiming (its last claim's job is in `inFlight`). */
  let pumped: Promise<void> = Promise.resolve();
  let cancelTimer: (() => void) | undefined;
  /** Ends the pump's wait before a claim round early (roomForABatch). */
  let cutWait: (() => void) | undefined;
  /** The lanes whose last claim took as many jobs as it asked for: more may be waiting. */
  const backlogged = new Set<string>();
  /** A lane with work waiting has half its slots free: a claim for them is a batch worth its query, and waiting would leave them idle. */
  const roomForABatch = () => [...backlogged].some((lane) => (busy.get(lane) ?? 0) <= (options.concurrency[lane] ?? 0) / 2);
  let idleWaiters: (() => void)[] = [];
  /** Generation jobs whose completion handed their task's webhook to this worker (runHeld): none was queued for a claim. */
  const handedOver = new Set<string>();

  const settleIdle = () => {
    if (inFlight.size > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    waiters.forEach((resolve) => resolve());
  };

  /**
   * Claims jobs while there is room and work; re-runs if woken meanwhile. Every lane with free
   * slots claims as many jobs as it has slots in one go: a claim is a write (one commit on
   * SQLite, one query on PostgreSQL), and a job at a time had bounded the worker at one claim per
   * commit.
   */
  async function pump(ask: Iterable<string> = allLanes): Promise<void> {
    for (const lane of ask) wanted.add(lane);
    if (pumping) {
      pumpAgain = true;
      return;
    }
    pumping = true;
    let finished!: () => void;
    pumped = new Promise((resolve) => (finished = resolve));
    try {
      let roundStartedAt: number | undefined;
      /** Jobs the last round claimed: more than one is load (at a few tasks a second each round finds one or none). */
      let lastClaimed = 0;
      do {
        // A round after a round that found load (woken while the last one claimed more than one job): not sooner than
        // claimIntervalMs after that one began. After a round of one job or none, at once: a task's next job (its
        // webhook) is then usually what woke it, and waiting would only add to the task's latency. Nor while (or once) half
        // the slots of a lane with work waiting are free.
        const wait = roundStartedAt === undefined || lastClaimed < 2 ? 0 : roundStartedAt + claimIntervalMs - clock.now().getTime();
        if (wait > 0 && !roomForABatch()) {
          await new Promise<void>((resolve) => {
            const cancel = clock.setTimeout(() => ((cutWait = undefined), resolve()), wait);
            cutWait = () => ((cutWait = undefined), cancel(), resolve());
          });
        }
        roundStartedAt = clock.now().getTime();
        pumpAgain = false;
        if (sweepDue) {
          sweepDue = false;
          await sweep();
        }
        const asked = new Set(wanted);
        wanted.clear();
        const lanes = stopping ? [] : (await free()).filter(({ provider }) => asked.has(provider));
        const claims = await Promise.allSettled(
          // A render lane's tasks are started as they are claimed (the queue does it in the claim where it can); the remote
          // lane's jobs only create the upstream task, and a delivery is not a start.
          lanes.map(({ provider, slots }) =>
            queue.claim({ workerId, now: clock.now(), leaseMs: options.leaseMs, provider, limit: slots, start: provider !== WEBHOOKS_LANE && provider !== options.upstream?.lane }),
          ),
        );
        // Jobs claimed are started even when stopping began meanwhile: stop() waits for them.
        lastClaimed = claims.reduce((sum, claim) => sum + (claim.status === 'fulfilled' ? claim.value.length : 0), 0);
        claims.forEach((claim, i) => {
          const { provider, slots } = lanes[i]!;
          if (claim.status === 'fulfilled' && claim.value.length >= slots) backlogged.add(provider);
          else backlogged.delete(provider);
          if (claim.status === 'rejected') logger.error({ err: claim.reason }, 'worker: claiming failed');
          else claim.value.forEach(start);
        });
      } while (pumpAgain && !stopping);
    } catch (error) {
      logger.error({ err: error }, 'worker: claiming failed');
    } finally {
      pumping = false;
      finished();
    }
  }

  function start(job: Job): void {
    busy.set(job.provider, (busy.get(job.provider) ?? 0) + 1);
    // A store or queue failure inside a job (a database blip) is logged; the job's lease brings it back.
    const run = runJob(job)
      .catch((error: unknown) => logger.error({ err: error, taskId: job.taskId, jobId: job.id }, 'job stopped by an error outside its own handling'))
      .finally(() => {
        busy.set(job.provider, (busy.get(job.provider) ?? 1) - 1);
        inFlight.delete(job.id);
        settleIdle();
        // A slot of this lane is free: of the lanes that were full, only this one can have work this
        // worker had no room for. A generation that ended may have enqueued its webhook: that lane
        // too (in one process on SQLite nothing else announces it), unless it handed its webhook to this worker.
        const queuedWebhook = job.kind === 'generate' && !handedOver.delete(job.id);
        if (!stopping) void pump(queuedWebhook ? [job.provider, WEBHOOKS_LANE] : [job.provider]);
        if (cutWait && roomForABatch()) cutWait();
      });
    inFlight.set(job.id, run);
  }

  /** Deadlines (D7), expired output files (D13) and Idempotency-Keys. A failure is logged and tried again at the next poll: claiming goes on. */
  async function sweep(): Promise<void> {
    const now = clock.now();
    try {
      for (const task of await store.expireOverdueTasks({ now, limit: 100 })) {
        events.publish(task.id, task.status);
        logger.warn({ taskId: task.id }, 'task timed out');
      }
    } catch (error) {
      logger.error({ err: error }, 'worker: timing out overdue tasks failed');
    }
    try {
      for (const output of await store.listExpiredOutputs({ now, limit: 100 })) {
        await options.files.remove(output.outputKey);
        await store.clearOutputKey(output.id);
      }
    } catch (error) {
      logger.error({ err: error }, 'worker: removing expired output files failed');
    }
    try {
      await store.purgeExpiredIdempotencyKeys({ now, limit: 1000 });
    } catch (error) {
      logger.error({ err: error }, 'worker: purging expired Idempotency-Keys failed');
    }
  }

  function schedule(): void {
    cancelTimer?.();
    if (stopping) return;
    cancelTimer = clock.setTimeout(() => {
      sweepDue = true;
      void pump().finally(schedule);
    }, options.pollMs);
  }

  async function fetchReferences(task: TaskRecord, dir: string, signal: AbortSignal): Promise<{ ok: true; references: ReferenceMedia[] } | { ok: false; reason: string }> {
    const references: ReferenceMedia[] = [];
    for (const [i, url] of task.mediaUrls.entries()) {
      const kind = mediaKindOf(url)!;
      const path = join(dir, `reference-${i}`);
      const fetched = await options.fetcher.fetch(url, kind, path, signal);
      if (!fetched.ok) return { ok: false, reason: fetched.reason };
      references.push({ url, kind, path });
    }
    return { ok: true, references };
  }

  async function generate(task: TaskRecord, provider: Provider, space: AttemptSpace, signal: AbortSignal): Promise<GenerationResult> {
    let references: ReferenceMedia[] = task.mediaUrls.map((url) => ({ url, kind: mediaKindOf(url)! }));
    if (space.dir) {
      const fetched = await fetchReferences(task, space.dir, signal);
      if (!fetched.ok) return { ok: false, error: { code: 'media_unavailable', message: fetched.reason } };
      references = fetched.references;
    }
    return provider.generate({
      taskId: task.id,
      model: task.model,
      prompt: task.prompt,
      duration: task.duration,
      aspectRatio: task.aspectRatio,
      resolution: task.resolution,
      mode: task.mode,
      references,
      outputPath: space.outputPath,
      signal,
    });
  }

  /**
   * The provider's answer, or undefined when it has not answered `abortGraceMs` after its abort:
   * the task's outcome is decided without it, and its slot is free again.
   */
  function unlessAbandoned(generation: Promise<GenerationResult>, signal: AbortSignal, log: () => Logger): Promise<GenerationResult | undefined> {
    return new Promise((resolve, reject) => {
      let cancelGrace = () => {};
      const onAbort = () => {
        cancelGrace = clock.setTimeout(() => {
          log().warn('the provider did not stop after its abort: no longer waiting for it');
          resolve(undefined);
        }, options.abortGraceMs ?? 60_000);
      };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      const settle = () => (cancelGrace(), signal.removeEventListener('abort', onAbort));
      generation.then(
        (result) => (settle(), resolve(result)),
        (error: unknown) => (settle(), reject(error)),
      );
    });
  }

  /**
   * One webhook attempt, under a renewed lease like any job: an attempt may take longer than the
   * lease (VIDGEN_WEBHOOK_TIMEOUT_MS above VIDGEN_JOB_LEASE_SECONDS), and a lapsed lease would let
   * another claim POST the same event again while this one is still open. If another claim has
   * the job all the same (heartbeats failed), this attempt, already sent, is recorded but settles
   * nothing and leaves the job alone: both are the holder's.
   */
  async function runDelivery(job: Job): Promise<void> {
    const extend = () => queue.extendLease({ jobId: job.id, workerId, now: clock.now(), leaseMs: options.leaseMs });
    let lost = false;
    const heartbeat = setInterval(() => {
      extend().then(
        (kept) => (lost ||= !kept),
        (error: unknown) => logger.warn({ err: error, jobId: job.id }, 'could not extend the lease'),
      );
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    heartbeat.unref();
    try {
      // Asked when the attempt has ended, before it settles anything: the last heartbeat may be a third of a lease old.
      // Not knowing (the database out of reach) is taken as holding it: a stale claim's complete or retry is refused anyway.
      const holdsClaim = async () => !lost && (await extend().catch(() => true));
      const next = await options.deliveries!.attempt(job.taskId, { holdsClaim, claim: job.id, ...(job.delivery ? { pending: job.delivery } : {}) });
      if (next && 'claimLost' in next) logger.warn({ taskId: job.taskId, jobId: job.id }, 'webhook attempt ended after another claim took its job');
      else if (next && 'retryAt' in next) await queue.retry({ jobId: job.id, runAt: next.retryAt, error: 'delivery attempt failed', now: clock.now() });
      // Completed with the attempt's record (`completed`), or now: the delivery was not pending.
      else if (!next) await queue.complete(job.id, clock.now());
    } catch (error) {
      logger.error({ err: error, taskId: job.taskId }, 'webhook delivery failed unexpectedly');
      const now = clock.now();
      await queue.retry({ jobId: job.id, runAt: new Date(now.getTime() + options.retryDelayMs(job.attempts)), error: String(error), now });
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** A remote lane's job creates the upstream task: short, but under a renewed lease like any job. */
  async function runUpstreamCreate(job: Job): Promise<void> {
    const heartbeat = setInterval(() => {
      queue.extendLease({ jobId: job.id, workerId, now: clock.now(), leaseMs: options.leaseMs }).catch((error: unknown) =>
        logger.warn({ err: error, jobId: job.id }, 'could not extend the lease'),
      );
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    heartbeat.unref();
    try {
      await options.upstream!.submitter.run(job, workerId);
    } finally {
      clearInterval(heartbeat);
    }
  }

  async function runJob(job: Job): Promise<void> {
    if (job.kind === 'deliver') return runDelivery(job);
    if (job.provider === options.upstream?.lane) return runUpstreamCreate(job);
    // The job's logger, made at its first line: most jobs write none, and a child made for every job (its bindings
    // serialised) was work and memory the job held across collections for nothing (BENCHMARKS.md, twenty-ninth pass).
    let jobLog: Logger | undefined;
    const log = () => (jobLog ??= logger.child({ taskId: job.taskId, jobId: job.id, attempt: job.attempts }));
    if (job.attempts > job.maxAttempts) {
      // Claimed again after its workers kept dying: give up, refunded.
      await queue.bury({ jobId: job.id, error: 'too many attempts', now: clock.now() });
      const failed = await store.failTask({ id: job.taskId, now: clock.now(), code: 'internal_error', message: 'generation failed inside the service' });
      if (failed.kind === 'failed') events.publish(job.taskId, failed.task.status);
      return;
    }
    const controller = new AbortController();
    let abortReason: 'cancelled' | 'timeout' | 'shutdown' | 'lease lost' | undefined;
    const abort = (reason: 'cancelled' | 'timeout' | 'shutdown' | 'lease lost') => {
      abortReason ??= reason;
      controller.abort(reason);
    };
    // Listening before the start: a cancel that lands before it leaves the task not startable, one after it is heard
    // (no read of the task in between needed). A task the claim started: a cancel since is heard all the same (TaskEvents
    // tells a listener of a cancel announced just before it subscribed).
    const unsubscribe = events.subscribe(job.taskId, (status) => status === 'cancelled' && abort('cancelled'));
    let started: Awaited<ReturnType<Store['startTask']>>;
    try {
      started = job.started ? { kind: 'started', task: job.started } : await store.startTask({ id: job.taskId, now: clock.now() });
    } catch (error) {
      unsubscribe();
      throw error;
    }
    if (started.kind === 'not_startable') {
      unsubscribe();
      // Cancelled or ended while queued: nothing to do.
      await queue.complete(job.id, clock.now());
      return;
    }
    const task = started.task;
    events.publish(task.id, task.status);
    const onShutdown = () => abort('shutdown');
    handBack.add(onShutdown);
    // The bound passed while this job was being started: hand it back rather than render past the bound.
    if (handingBack) onShutdown();
    const remaining = (task.deadlineAt?.getTime() ?? Infinity) - clock.now().getTime();
    const cancelDeadline = Number.isFinite(remaining) ? clock.setTimeout(() => abort('timeout'), Math.max(0, remaining)) : () => {};
    const heartbeat = setInterval(() => {
      queue.extendLease({ jobId: job.id, workerId, now: clock.now(), leaseMs: options.leaseMs }).then(
        // Another claim has the job (this one's lease ran out while the database was out of reach, say): stop rendering it twice.
        (kept) => kept || abort('lease lost'),
        (error: unknown) => log().warn({ err: error }, 'could not extend the lease'),
      );
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    heartbeat.unref();
    /** The output this attempt stored, until the task is recorded with it (or without it). */
    let storedOutput: string | undefined;
    let space: AttemptSpace | undefined;

    try {
      const provider = options.providerFor(task.model);
      space = await attemptSpace(task.id, job.attempts, provider);
      const result = controller.signal.aborted ? undefined : await unlessAbandoned(generate(task, provider, space, controller.signal), controller.signal, log);
      const now = clock.now();

      if (abortReason === 'cancelled') {
        log().info('render stopped: the task was cancelled');
      } else if (abortReason === 'lease lost' && !result?.ok) {
        // The job is another claim's now: nothing here is this claim's to record.
        log().warn('render stopped: the lease ran out and another claim has the job');
        return;
      } else if (abortReason === 'shutdown' && !result?.ok) {
        // The task stays processing; the next claim starts it again (startTask takes a processing task).
        await queue.release({ jobId: job.id, workerId, now });
        log().info('render stopped for shutdown: job handed back');
        return;
      } else if (abortReason === 'timeout') {
        const failed = await store.failTask({ id: task.id, now, code: 'timeout', message: 'no result within the deadline' });
        if (failed.kind === 'failed') events.publish(task.id, failed.task.status);
      } else if (result?.ok) {
        const outputKey = await options.files.put(task.id, space.outputPath);
        storedOutput = outputKey;
        space.stored = true;
        const outputExpiresAt = new Date(now.getTime() + options.outputTtlMs);
        const outputUrl = await options.files.urlFor(outputKey, outputExpiresAt);
        // The task's webhook attempted by this worker, from a webhooks slot held for it now: its queue entry is written
        // already claimed, leased to this worker (no claim round for it, no other process woken). Without a free slot it
        // is written for any worker to claim.
        const holding = task.webhookUrl !== null && holdWebhookSlot();
        let completed: Awaited<ReturnType<Store['completeTask']>>;
        try {
          completed = await store.completeTask({
            id: task.id,
            now,
            outputKey,
            outputUrl,
            outputExpiresAt,
            job: job.id,
            started: task,
            ...(holding ? { holdDelivery: { leaseUntil: new Date(clock.now().getTime() + options.leaseMs), workerId } } : {}),
          });
        } finally {
          if (holding) busy.set(WEBHOOKS_LANE, (busy.get(WEBHOOKS_LANE) ?? 1) - 1);
        }
        storedOutput = undefined;
        if (completed.kind === 'succeeded') {
          // Its job was completed with it.
          events.publish(task.id, completed.task.status);
          if (completed.heldDelivery) {
            handedOver.add(job.id);
            await runHeld(completed.heldDelivery, task.id, completed.pendingDelivery);
          }
          return;
        } else if (completed.status === 'succeeded') {
          // Another claim of the job (this one's lease had run out) completed the task first. Its output is kept: this
          // attempt's file too if it is that (moved into storage under the task's key), else removed (written in place
          // under this attempt's own key).
          await removeUnlessOutputOf(task, outputKey, log);
          log().info('task completed by another claim first: its output kept');
        } else {
          // Cancelled while rendering: the result is discarded (D7).
          await options.files.remove(outputKey);
          log().info({ status: completed.status }, 'result discarded');
        }
      } else if (result) {
        const failed = await store.failTask({ id: task.id, now, code: result.error.code, message: result.error.message });
        if (failed.kind === 'failed') events.publish(task.id, failed.task.status);
      }
      await queue.complete(job.id, clock.now());
    } catch (error) {
      log().error({ err: error }, 'job failed unexpectedly');
      const now = clock.now();
      if (job.attempts < job.maxAttempts) {
        await queue.retry({ jobId: job.id, runAt: new Date(now.getTime() + options.retryDelayMs(job.attempts)), error: String(error), now });
      } else {
        await queue.bury({ jobId: job.id, error: String(error), now });
        const failed = await store.failTask({ id: task.id, now, code: 'internal_error', message: 'generation failed inside the service' });
        if (failed.kind === 'failed') events.publish(task.id, failed.task.status);
      }
      // Stored, but perhaps not recorded with the task: a file no task names would never be served or swept.
      if (storedOutput) await removeUnlessOutputOf(task, storedOutput, log);
    } finally {
      clearInterval(heartbeat);
      handBack.delete(onShutdown);
      cancelDeadline();
      unsubscribe();
      if (space) await clearAttemptSpace(space);
    }
  }

  /** Takes a webhooks slot for a delivery this worker will be handed by its task's completion; false when the lane is full, absent or stopping. */
  function holdWebhookSlot(): boolean {
    const limit = options.concurrency[WEBHOOKS_LANE] ?? 0;
    if (!options.deliveries || stopping || (busy.get(WEBHOOKS_LANE) ?? 0) >= limit) return false;
    busy.set(WEBHOOKS_LANE, (busy.get(WEBHOOKS_LANE) ?? 0) + 1);
    return true;
  }

  /**
   * Runs the delivery a completion wrote already claimed by this worker, as if a claim round had handed it over; when
   * stopping began meanwhile, hands it back at once for another worker (stop() no longer waits for jobs it had not seen).
   */
  async function runHeld(claim: string, taskId: string, delivery?: PendingDelivery): Promise<void> {
    const held: Job = { id: claim, taskId, kind: 'deliver', provider: WEBHOOKS_LANE, attempts: 1, maxAttempts: 1, ...(delivery ? { delivery } : {}) };
    if (stopping) await queue.release({ jobId: held.id, workerId, now: clock.now() });
    else start(held);
  }

  /** Removes a stored file unless the task names it as its output (a commit reported as failed may have landed). */
  async function removeUnlessOutputOf(task: TaskRecord, key: string, log: () => Logger): Promise<void> {
    try {
      const current = await store.getTask(task.accountId, task.id);
      if (current && current.outputKey !== key) await options.files.remove(key);
    } catch (error) {
      log().warn({ err: error, outputKey: key }, 'could not tell whether the stored file is the task output: kept');
    }
  }

  /**
   * Where an attempt works: a directory of its own when its provider needs the references on disk (fetched into it),
   * else only its output file, beside the other attempts' in the work directory. A directory made and removed per
   * task is not free on ext4: its inode allocator steps over each inode deleted in the last seconds, and at hundreds
   * of tasks a second that was half of the worker's CPU (BENCHMARKS.md, fifth pass). Either way the attempt is in
   * the name, so a render orphaned by a killed process cannot collide with its retry. A provider that renders in this
   * process (it needs no references on disk) writes straight to where local storage keeps outputs (OutputFiles.placeFor),
   * under a key with the attempt in it: moving the file there was a rename a task (BENCHMARKS.md, twenty-fourth pass).
   */
  async function attemptSpace(taskId: string, attempt: number, provider: Provider): Promise<AttemptSpace> {
    if (provider.needsLocalMedia) {
      const dir = join(options.workDir, `${taskId}-${attempt}`);
      await mkdir(dir, { recursive: true });
      return { dir, outputPath: join(dir, 'output.mp4') };
    }
    // Written where the store keeps it, when it keeps it on this disk: no move into storage afterwards.
    const placed = options.files.placeFor?.(taskId, attempt);
    if (placed) return { outputPath: placed };
    workDirMade ??= mkdir(options.workDir, { recursive: true }).then(
      () => {},
      (error: unknown) => {
        workDirMade = undefined;
        throw error;
      },
    );
    await workDirMade;
    return { outputPath: join(options.workDir, `${taskId}-${attempt}.mp4`) };
  }

  /** Takes away what the attempt left: its directory (usually empty by now: one rmdir, else the whole tree), or its output file if it was not stored. */
  async function clearAttemptSpace(space: AttemptSpace): Promise<void> {
    if (!space.dir) {
      // Not after a put, which moved it away: a removal of a name not there is an lstat, 6.7 % of the server's CPU
      // in a PostgreSQL pipeline profile (BENCHMARKS.md, sixth pass).
      if (!space.stored) await rm(space.outputPath, { force: true });
      return;
    }
    try {
      await rmdir(space.dir);
    } catch {
      await rm(space.dir, { recursive: true, force: true });
    }
  }

  return {
    start() {
      if (started) return;
      started = true;
      void pump();
      schedule();
      options.upstream?.follower.start();
    },
    wake(what) {
      if (started && !stopping) {
        if (what !== 'upstream') void pump(wakeLanes);
        if (what !== 'jobs') options.upstream?.follower.wake();
      }
    },
    async stop({ graceMs }: { graceMs?: number } = {}) {
      stopping = true;
      cancelTimer?.();
      cutWait?.();
      const followerStopped = options.upstream?.follower.stop({ graceMs });
      const handBackAll = () => {
        handingBack = true;
        [...handBack].forEach((stopRender) => stopRender());
      };
      let cancelGrace = () => {};
      if (graceMs !== undefined && graceMs <= 0) handBackAll();
      else if (graceMs !== undefined) cancelGrace = clock.setTimeout(handBackAll, graceMs);
      try {
        // A claim under way when stopping began still starts its job: wait for it to count as running.
        await pumped;
        await Promise.allSettled([...inFlight.values(), followerStopped]);
      } finally {
        cancelGrace();
      }
    },
    idle() {
      return inFlight.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
    get running() {
      return inFlight.size;
    },
  };
}
