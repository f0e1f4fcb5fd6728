/**
 * Follows upstream tasks without holding a slot: every `pollMs` it claims the followed tasks that are
 * due (leased, so several worker processes share them and none is queried twice at once), queries
 * them in batches through the upstream's list endpoint (`filter.task_ids`, up to `batchSize` ids per
 * request), records what it saw, and acts on the ends:
 * - succeeded: the video is downloaded (bounded concurrency, retries) into our storage and the task
 *   completed with it, in the transaction that ends the upstream row;
 * - failed / expired / cancelled upstream: the task fails, refunded (expired → timeout, moderation →
 *   content_rejected, others → provider_error);
 * - our task ended meanwhile (cancelled, timed out): a task still queued upstream is cancelled there
 *   (DELETE); a running one runs on and its result is discarded when it arrives (counted: paid for).
 * A callback from the upstream, a cancel or a failure only make a task due at once (`wake`).
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { OutputFiles } from '../files/storage.js';
import type { Clock, TaskEvents } from '../interfaces.js';
import { isActive } from '../domain/states.js';
import { taskErrorFor, type DownloadOutcome, type RemoteProvider } from '../providers/byteplus/client.js';
import type { UpstreamTask } from '../providers/byteplus/protocol.js';
import type { Store, UpstreamOutcome, UpstreamTaskRecord } from '../store/store.js';

export interface FollowerOptions {
  store: Store;
  clock: Clock;
  logger: Logger;
  events: TaskEvents;
  /** The client of each channel, by name. */
  clients: ReadonlyMap<string, RemoteProvider>;
  files: OutputFiles;
  /** Where videos are downloaded before they go into storage. */
  workDir: string;
  workerId: string;
  pollMs: number;
  batchSize: number;
  /** How long a claimed check or download is this worker's without renewal. */
  leaseMs: number;
  downloadConcurrency: number;
  downloadAttempts: number;
  outputTtlMs: number;
  /** An upstream task ended: a channel slot is free (the worker may create another). */
  onSlotFreed?: () => void;
  /** Upstream list requests in flight at once. Default 4. */
  listConcurrency?: number;
  /**
   * The most followed tasks one claim takes; a round that takes that many claims again at once, until no more are
   * due. Default: five waves of list requests (`batchSize` × `listConcurrency` × 5). Several workers so share a
   * period's tasks instead of the first to look taking them all.
   */
  checksPerClaim?: number;
}

export interface Follower {
  start(): void;
  /** Looks now for tasks due (a callback, a cancel). */
  wake(): void;
  /** Stops claiming; waits for the queries under way, and for downloads, stopped after `graceMs` (their lease brings them back). */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Resolves when no round and no download is under way (tests). */
  idle(): Promise<void>;
}


export function createFollower(options: FollowerOptions): Follower {
  const { store, clock, logger, events } = options;
  let started = false;
  let stopping = false;
  let cancelTimer: (() => void) | undefined;
  const downloads = new Map<string, { done: Promise<void>; abort: () => void }>();
  let idleWaiters: (() => void)[] = [];

  const settleIdle = () => {
    if (checks.running || downloadClaims.running || downloads.size > 0) return;
    const waiters = idleWaiters;
    idleWaiters = [];
    waiters.forEach((resolve) => resolve());
  };

  function later(ms: number): Date {
    return new Date(clock.now().getTime() + ms);
  }

  async function end(record: UpstreamTaskRecord, outcome: UpstreamOutcome, extra: Omit<Parameters<Store['endUpstream']>[0], 'taskId' | 'now' | 'outcome'> = {}): Promise<void> {
    const ended = await store.endUpstream({ taskId: record.taskId, now: clock.now(), outcome, ...extra });
    if (ended.changed && ended.task) events.publish(ended.task.id, ended.task.status);
    if (ended.outcome === 'discarded') logger.warn({ taskId: record.taskId, channel: record.channel }, 'upstream result discarded: our task had ended (the upstream bills it)');
    if (record.state === 'following') options.onSlotFreed?.();
  }

  type Check = { taskId: string; upstreamStatus: string; nextCheckAt: Date; error?: string };
  /**
   * When the tasks of this round are next due: one period after the round's claim, less a little, so
   * that the next round (its timer set one period after this one's) finds them due. Counted from the
   * end of the list request instead, each task was seen every other round: every 10 s at a 5 s period.
   * Rounds never overlap, so one value serves the round.
   */
  let nextCheckAt = new Date(0);

  /** What to do with one followed task, given what the upstream says of it. */
  async function act(record: UpstreamTaskRecord, seen: UpstreamTask, client: RemoteProvider, checks: Check[]): Promise<void> {
    const ours = isActive(record.taskStatus);
    switch (seen.status) {
      case 'queued':
        if (!ours) {
          const cancelled = await client.cancel(seen.id);
          if (cancelled.ok) return end(record, 'cancelled', { upstreamStatus: 'cancelled' });
          checks.push({ taskId: record.taskId, upstreamStatus: seen.status, nextCheckAt: nextCheckAt, error: `cancel refused: ${cancelled.message}` });
          return;
        }
        checks.push({ taskId: record.taskId, upstreamStatus: seen.status, nextCheckAt: nextCheckAt });
        return;
      case 'running':
        // Our task may have ended: a running upstream task cannot be cancelled; its result is discarded when it comes.
        checks.push({ taskId: record.taskId, upstreamStatus: seen.status, nextCheckAt: nextCheckAt });
        return;
      case 'succeeded':
        await store.markUpstreamSucceeded({ taskId: record.taskId, videoUrl: seen.videoUrl!, usage: seen.usage ?? null, now: clock.now() });
        options.onSlotFreed?.();
        // Downloaded now, not after the rest of the round's lists.
        wakeDownloads();
        return;
      case 'failed':
      case 'expired':
      case 'cancelled':
        return end(record, seen.status, { upstreamStatus: seen.status, ...(ours ? { fail: taskErrorFor(seen) } : {}) });
    }
  }

  /** One list request for up to `batchSize` tasks of one channel. */
  async function checkBatch(channel: string, records: UpstreamTaskRecord[]): Promise<Check[]> {
    const checks: Check[] = [];
    const client = options.clients.get(channel);
    const retryLater = (record: UpstreamTaskRecord, error: string) =>
      checks.push({ taskId: record.taskId, upstreamStatus: record.upstreamStatus ?? 'queued', nextCheckAt: nextCheckAt, error });
    if (!client) {
      // A channel removed from the configuration while it still had tasks: they wait for it to come back.
      records.forEach((record) => retryLater(record, `channel ${channel} is not configured in this process`));
      return checks;
    }
    const listed = await client.list(records.map((record) => record.upstreamId!));
    if (!listed.ok) {
      logger.warn({ channel, tasks: records.length, reason: listed.message }, 'upstream list failed: tried again next round');
      records.forEach((record) => retryLater(record, listed.message));
      return checks;
    }
    const seen = new Map(listed.tasks.map((task) => [task.id, task]));
    for (const record of records) {
      try {
        let task = seen.get(record.upstreamId!);
        if (!task) {
          // Not in the list answer: asked for on its own before concluding anything.
          const queried = await client.query(record.upstreamId!);
          if (!queried.ok && queried.notFound) {
            await end(record, 'failed', { error: queried.message, fail: { code: 'provider_error', message: `the upstream no longer knows task ${record.upstreamId}` } });
            continue;
          }
          if (!queried.ok) {
            retryLater(record, queried.message);
            continue;
          }
          task = queried.task;
        }
        await act(record, task, client, checks);
      } catch (error) {
        // A store failure for one task: its lease brings it back.
        logger.error({ err: error, taskId: record.taskId }, 'following an upstream task failed');
      }
    }
    return checks;
  }

  const lanes = Math.max(1, options.listConcurrency ?? 4);
  const checksPerClaim = Math.max(1, options.checksPerClaim ?? options.batchSize * lanes * 5);

  /**
   * Claims due tasks and follows them; true when it took as many as one claim may (more may be due).
   * `continuing`: the claim after a full one, in the same round: its tasks are next due with the round's first
   * (counted from a later claim, the last of them would miss the next round and wait for the one after).
   */
  async function checkDue(continuing: boolean): Promise<boolean> {
    const roundAt = clock.now();
    if (!continuing) nextCheckAt = new Date(roundAt.getTime() + options.pollMs - Math.min(500, options.pollMs / 10));
    const claimed = await store.claimUpstreamWork({ kind: 'check', workerId: options.workerId, now: roundAt, leaseMs: options.leaseMs, limit: checksPerClaim });
    if (claimed.length === 0) return false;
    const batches: [string, UpstreamTaskRecord[]][] = [];
    const byChannel = new Map<string, UpstreamTaskRecord[]>();
    for (const record of claimed) byChannel.set(record.channel, [...(byChannel.get(record.channel) ?? []), record]);
    for (const [channel, records] of byChannel) {
      for (let i = 0; i < records.length; i += options.batchSize) batches.push([channel, records.slice(i, i + options.batchSize)]);
    }
    // A few list requests at once: 1,000 tasks are ten requests, not a thousand.
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(lanes, batches.length) }, async () => {
        while (next < batches.length) {
          const [channel, records] = batches[next++]!;
          const checks = await checkBatch(channel, records);
          await store.recordUpstreamChecks({ workerId: options.workerId, now: clock.now(), checks });
        }
      }),
    );
    return claimed.length >= checksPerClaim;
  }

  async function download(record: UpstreamTaskRecord): Promise<void> {
    const log = logger.child({ taskId: record.taskId, channel: record.channel });
    if (!isActive(record.taskStatus)) return end(record, 'discarded', { upstreamStatus: 'succeeded' });
    const client = options.clients.get(record.channel);
    const controller = new AbortController();
    const path = join(options.workDir, `upstream-${record.taskId}-${record.downloadAttempts}.mp4`);
    const heartbeat = setInterval(() => {
      store.extendUpstreamLease({ taskId: record.taskId, workerId: options.workerId, now: clock.now(), leaseMs: options.leaseMs }).then(
        (kept) => kept || controller.abort(),
        (error: unknown) => log.warn({ err: error }, 'could not extend the download lease'),
      );
    }, Math.max(50, Math.floor(options.leaseMs / 3)));
    heartbeat.unref();
    downloads.set(record.taskId, { done: Promise.resolve(), abort: () => controller.abort() });
    try {
      await mkdir(options.workDir, { recursive: true });
      const fetched: DownloadOutcome = client
        ? await client.download(record.videoUrl!, path, controller.signal)
        : { ok: false, code: 'provider_error', message: `channel ${record.channel} is not configured in this process` };
      if (!fetched.ok && fetched.aborted) return; // Shutdown or lease lost: the lease brings the download back.
      if (!fetched.ok) {
        const attempts = record.downloadAttempts + 1;
        if (attempts >= options.downloadAttempts) {
          log.warn({ reason: fetched.message, attempts }, 'upstream video could not be downloaded: the task fails');
          return end(record, 'failed', { error: fetched.message, fail: { code: fetched.code, message: fetched.message } });
        }
        // 5 s, 10 s, 20 s … at most 5 minutes: the upstream's URL lasts about a day.
        const delay = Math.min(300_000, 5_000 * 2 ** record.downloadAttempts);
        await store.retryUpstreamDownload({ taskId: record.taskId, now: clock.now(), nextAt: later(delay), error: fetched.message });
        return;
      }
      const now = clock.now();
      const outputKey = await options.files.put(record.taskId, path);
      const outputExpiresAt = new Date(now.getTime() + options.outputTtlMs);
      const ended = await store.endUpstream({
        taskId: record.taskId,
        now,
        outcome: 'succeeded',
        upstreamStatus: 'succeeded',
        complete: { outputKey, outputUrl: await options.files.urlFor(outputKey, outputExpiresAt), outputExpiresAt },
      });
      if (ended.changed && ended.task) events.publish(ended.task.id, ended.task.status);
      else if (ended.task?.status !== 'succeeded') {
        // Cancelled while downloading: the result is discarded (D7), its file with it.
        await options.files.remove(outputKey);
        log.warn('upstream result discarded: our task had ended (the upstream bills it)');
      }
    } catch (error) {
      log.error({ err: error }, 'storing an upstream video failed: tried again after its lease');
    } finally {
      clearInterval(heartbeat);
      await rm(path, { force: true }).catch(() => {});
    }
  }

  function startDownloads(records: UpstreamTaskRecord[]): void {
    for (const record of records) {
      const entry = { done: Promise.resolve(), abort: () => {} };
      downloads.set(record.taskId, entry);
      entry.done = download(record)
        .catch((error: unknown) => logger.error({ err: error, taskId: record.taskId }, 'upstream download stopped by an error'))
        .finally(() => {
          downloads.delete(record.taskId);
          settleIdle();
          // A free download slot: the next download due, not a check round (that made rounds between the
          // periods, each listing the few tasks just due instead of full batches).
          wakeDownloads();
        });
    }
  }

  async function downloadDue(): Promise<void> {
    const free = options.downloadConcurrency - downloads.size;
    if (free <= 0 || stopping) return;
    const claimed = await store.claimUpstreamWork({ kind: 'download', workerId: options.workerId, now: clock.now(), leaseMs: options.leaseMs, limit: free });
    startDownloads(claimed);
  }

  /**
   * Runs `pass` until a pass ends with nothing more asked of it (no wake meanwhile, and `pass` did not answer
   * true); one run at a time: a wake during a run makes it pass again instead of starting another.
   */
  function serially(pass: () => Promise<boolean>, failure: string): { wake(): void; readonly running: Promise<void> | undefined } {
    let running: Promise<void> | undefined;
    let again = false;
    const run = async () => {
      try {
        do {
          again = false;
          try {
            if (await pass()) again = true;
          } catch (error) {
            logger.error({ err: error }, failure);
          }
        } while (again && !stopping);
      } finally {
        // In the same turn as the last look at `again`: a wake after it starts a new run instead of being lost.
        running = undefined;
        settleIdle();
      }
    };
    return {
      wake() {
        if (!started || stopping) return;
        if (running) again = true;
        else running = run();
      },
      get running() {
        return running;
      },
    };
  }

  /** Claims of downloads, apart from the check rounds: a finished download or a success seen starts one without a check round. */
  const downloadClaims = serially(async () => {
    await downloadDue();
    return false;
  }, 'claiming upstream downloads failed: tried again next round');
  const wakeDownloads = () => downloadClaims.wake();

  /** A full claim in the round before: the next claim continues its round. */
  let full = false;
  /** Rounds: query what is due, start downloads; a full claim claims again at once, not a period later (and another worker may take some meanwhile). */
  const checks = serially(async () => {
    try {
      full = await checkDue(full);
    } catch (error) {
      full = false;
      throw error;
    }
    wakeDownloads();
    return full;
  }, 'following upstream tasks failed: tried again next round');
  const wake = () => checks.wake();

  function schedule(): void {
    cancelTimer?.();
    if (stopping) return;
    cancelTimer = clock.setTimeout(() => {
      wake();
      schedule();
    }, options.pollMs);
  }

  return {
    start() {
      if (started) return;
      started = true;
      wake();
      schedule();
    },
    wake,
    async stop({ graceMs }: { graceMs?: number } = {}) {
      stopping = true;
      cancelTimer?.();
      const abortAll = () => [...downloads.values()].forEach((d) => d.abort());
      let cancelGrace = () => {};
      if (graceMs !== undefined && graceMs <= 0) abortAll();
      else if (graceMs !== undefined) cancelGrace = clock.setTimeout(abortAll, graceMs);
      try {
        await checks.running;
        await downloadClaims.running;
        await Promise.allSettled([...downloads.values()].map((d) => d.done));
      } finally {
        cancelGrace();
      }
    },
    idle() {
      return !checks.running && !downloadClaims.running && downloads.size === 0 ? Promise.resolve() : new Promise((resolve) => idleWaiters.push(resolve));
    },
  };
}
