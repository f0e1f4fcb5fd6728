/**
 * Creates upstream tasks: runs the `generate` jobs of the remote lane. A job takes a slot on a
 * channel (the store's `creating` row, written before the request is sent), sends the create, and
 * records the upstream id the moment it answers; then the job is done and the follower has the task.
 *
 * - All channels full (or cooling down): the job is handed back for later, uncounted; the task stays `queued`.
 * - A create refused for the channel's sake (429, 5xx, quota, key) or that never reached it: the next channel.
 * - A create refused for the task's sake (invalid, moderated): the task fails, refunded.
 * - A create whose answer was lost after it was sent: never sent again (the upstream may run it, and
 *   bills it); the task fails refunded, counted as `lost` on its channel.
 * - A job claimed again (crash, lease, shutdown) whose task has an upstream row never creates again:
 *   the row says where it stands. A `creating` row is a create that may have been sent: `lost` once its
 *   answer can no longer come (the create's timeout passed since the reservation); before that the job
 *   is handed back until then, since the claim that sent it may be alive (its lease lapsed on a
 *   heartbeat that did not get through) and about to record the upstream id.
 */
import type { Logger } from 'pino';
import type { TaskEvents, Clock } from '../interfaces.js';
import type { CreateTaskBody } from '../providers/byteplus/protocol.js';
import { buildContent } from '../providers/byteplus/protocol.js';
import type { RemoteProvider } from '../providers/byteplus/client.js';
import { mediaKindOf } from '../domain/rules.js';
import type { Job, JobQueue } from '../queue/queue.js';
import type { Store, TaskRecord, UpstreamChannelRecord, UpstreamTaskRecord } from '../store/store.js';
import { channelsFor, freeSlots, type ChannelConfig } from './channels.js';

export interface Channel {
  config: ChannelConfig;
  client: RemoteProvider;
}

export interface UpstreamSubmitterOptions {
  store: Store;
  queue: JobQueue;
  events: TaskEvents;
  clock: Clock;
  logger: Logger;
  channels: Channel[];
  /** When a followed task is first queried (the follower's cadence). */
  pollMs: number;
  /** How long a create may wait for its answer (the channels' request timeout): a `creating` row older than this is lost. */
  createTimeoutMs: number;
  cooldownAfter: number;
  cooldownMs: number;
  /** The callback URL to give the upstream for a task, when the service has a public address. */
  callbackUrl?: (taskId: string) => string;
  /** An upstream task was created (the follower may want to look sooner than its cadence). */
  onCreated?: () => void;
  random?: () => number;
}

export interface UpstreamSubmitter {
  /** Creates this process may start now: the room left on channels that are not cooling down. */
  freeSlots(): Promise<number>;
  /** Runs one `generate` job of the remote lane, claimed by `workerId`, to its end (the job completed, handed back or buried). */
  run(job: Job, workerId: string): Promise<void>;
}

/** Waits before a task whose channels are all full or failing is offered again. */
const WAIT_FOR_ROOM_MS = 1_000;
/** After a create's timeout, for the claim that sent it to record its answer. */
const RECORD_MARGIN_MS = 5_000;

export function createUpstreamSubmitter(options: UpstreamSubmitterOptions): UpstreamSubmitter {
  const { store, queue, events, clock, logger } = options;
  const byName = new Map(options.channels.map((channel) => [channel.config.name, channel]));
  const configs = options.channels.map((channel) => channel.config);

  async function health(): Promise<Map<string, UpstreamChannelRecord>> {
    return new Map((await store.listUpstreamChannels()).map((record) => [record.name, record]));
  }

  function createBody(task: TaskRecord, channel: ChannelConfig): CreateTaskBody | { error: string } {
    const references = task.mediaUrls.map((url) => ({ url, kind: mediaKindOf(url)! }));
    const content = buildContent(task.mode, task.prompt, references);
    if (!content.ok) return { error: `inconsistent task: ${content.message}` };
    const callbackUrl = options.callbackUrl?.(task.id);
    return {
      model: channel.modelIds[task.model]!,
      content: content.value,
      ratio: task.aspectRatio,
      duration: task.duration,
      resolution: task.resolution,
      watermark: false,
      ...(callbackUrl ? { callback_url: callbackUrl } : {}),
    };
  }

  const publishIfMoved = (moved: { task: TaskRecord | undefined; changed: boolean }) => {
    if (moved.changed && moved.task) events.publish(moved.task.id, moved.task.status);
  };

  /** The job of a task that has its upstream row: never create again. */
  async function resume(job: Job, workerId: string, upstream: UpstreamTaskRecord, log: Logger): Promise<void> {
    if (upstream.state === 'creating') {
      const answerBy = upstream.updatedAt.getTime() + options.createTimeoutMs + RECORD_MARGIN_MS;
      const now = clock.now();
      if (now.getTime() < answerBy) {
        // The create may still be answered to the claim that sent it: back then, to find the row created or still creating.
        log.warn({ channel: upstream.channel, answerBy: new Date(answerBy) }, 'upstream create of an earlier claim still unanswered: looked at again after its timeout');
        await queue.release({ jobId: job.id, workerId, now, runAt: new Date(answerBy) });
        return;
      }
      // The claim before this one took the slot and may have sent the create; its answer is gone with it.
      log.warn({ channel: upstream.channel }, 'upstream create interrupted before its answer was recorded: not sent again (lost)');
      publishIfMoved(
        await store.endUpstream({
          taskId: job.taskId,
          now: clock.now(),
          outcome: 'lost',
          error: 'interrupted between the create and its record',
          fail: { code: 'provider_error', message: 'the upstream task could not be confirmed after an interruption; it is not created twice' },
        }),
      );
    }
    await queue.complete(job.id, clock.now());
  }

  async function run(job: Job, workerId: string): Promise<void> {
    const log = logger.child({ taskId: job.taskId, jobId: job.id, attempt: job.attempts });
    const existing = await store.getUpstreamTask(job.taskId);
    if (existing) return resume(job, workerId, existing, log);
    const task = await store.findTask(job.taskId);
    if (!task || task.status !== 'queued') {
      // Cancelled or timed out while it waited for a channel.
      await queue.complete(job.id, clock.now());
      return;
    }
    if (job.attempts > job.maxAttempts) {
      // Claimed again after its workers kept dying before even taking a slot: give up, refunded.
      await queue.bury({ jobId: job.id, error: 'too many attempts', now: clock.now() });
      const failed = await store.failTask({ id: job.taskId, now: clock.now(), code: 'internal_error', message: 'generation failed inside the service' });
      if (failed.kind === 'failed') events.publish(job.taskId, failed.task.status);
      return;
    }

    const tried = new Set<string>();
    let waitMs = WAIT_FOR_ROOM_MS;
    for (;;) {
      const now = clock.now();
      const offered = channelsFor({ channels: configs, model: task.model, health: await health(), now, exclude: tried, random: options.random });
      const reserved = offered.length === 0 ? ({ kind: 'full' } as const) : await store.reserveUpstream({ taskId: task.id, channels: offered.map((c) => ({ name: c.name, limit: c.maxInFlight })), now });
      switch (reserved.kind) {
        case 'exists':
          return resume(job, workerId, reserved.upstream, log);
        case 'not_queued':
          await queue.complete(job.id, clock.now());
          return;
        case 'full':
          // Every channel is full, failing or cooling down: the task stays queued and is offered again.
          await queue.release({ jobId: job.id, workerId, now, runAt: new Date(now.getTime() + waitMs) });
          log.debug({ tried: [...tried] }, 'no upstream channel has room: the task waits, queued');
          return;
        case 'reserved':
          break;
      }
      const channel = byName.get(reserved.channel)!;
      const body = createBody(reserved.task, channel.config);
      if ('error' in body) {
        publishIfMoved(await store.endUpstream({ taskId: task.id, now, outcome: 'refused', error: body.error, fail: { code: 'internal_error', message: body.error } }));
        await queue.complete(job.id, clock.now());
        return;
      }
      const created = await channel.client.create(body);
      const answeredAt = clock.now();
      switch (created.kind) {
        case 'created': {
          const recorded = await store.recordUpstreamCreated({
            taskId: task.id,
            upstreamId: created.upstreamId,
            now: answeredAt,
            nextCheckAt: new Date(answeredAt.getTime() + options.pollMs),
          });
          if (recorded.started && recorded.task) events.publish(task.id, recorded.task.status);
          log.info({ channel: channel.config.name, upstreamId: created.upstreamId }, 'upstream task created');
          await queue.complete(job.id, clock.now());
          options.onCreated?.();
          return;
        }
        case 'unreached':
        case 'refused':
          if (created.kind === 'unreached' || created.elsewhere) {
            log.warn({ channel: channel.config.name, reason: created.message }, 'upstream create refused by the channel: trying another');
            await store.releaseUpstreamReservation({
              taskId: task.id,
              channel: channel.config.name,
              error: created.message,
              now: answeredAt,
              countFailure: true,
              cooldownAfter: options.cooldownAfter,
              cooldownMs: options.cooldownMs,
            });
            tried.add(channel.config.name);
            if (created.kind === 'refused') waitMs = Math.max(waitMs, created.retryAfterMs);
            continue;
          }
          publishIfMoved(
            await store.endUpstream({ taskId: task.id, now: answeredAt, outcome: 'refused', error: created.message, fail: { code: created.code, message: created.message } }),
          );
          await queue.complete(job.id, clock.now());
          return;
        case 'unknown':
          log.warn({ channel: channel.config.name, reason: created.message }, 'upstream create answer lost: not sent again (lost)');
          publishIfMoved(
            await store.endUpstream({
              taskId: task.id,
              now: answeredAt,
              outcome: 'lost',
              error: created.message,
              fail: { code: 'provider_error', message: `the upstream did not confirm the task (${created.message}); it is not created twice` },
            }),
          );
          await queue.complete(job.id, clock.now());
          return;
      }
    }
  }

  return {
    async freeSlots() {
      return freeSlots(configs, await health(), clock.now());
    },
    run,
  };
}
