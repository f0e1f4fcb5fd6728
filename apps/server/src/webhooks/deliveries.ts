/**
 * Sends one webhook delivery attempt and decides what comes next (D8): any
 * 2xx delivers; 410 stops for good; anything else retries on the schedule
 * (with jitter, and no sooner than a Retry-After), until the schedule runs out.
 * Each delay counts from the end of the attempt before it, so an attempt that
 * ran up to its timeout is not followed by the next one at once.
 */
import type { Logger } from 'pino';
import type { Clock, TaskEvents } from '../interfaces.js';
import { SETTLES_NOTHING, type DeliveryRecord, type PendingDelivery, type Store } from '../store/store.js';

export type SendResult =
  | { outcome: 'delivered'; status: number; durationMs: number }
  | { outcome: 'gone'; status: number; durationMs: number }
  | { outcome: 'retry'; status?: number; error?: string; retryAfterMs?: number; durationMs: number };

export interface WebhookSender {
  send(input: { url: string; id: string; body: string; secrets: string[]; signal?: AbortSignal }): Promise<SendResult>;
}

/** Standard Webhooks' schedule: delays before attempts 2, 3, …, after the immediate first one. */
export const DEFAULT_RETRY_SCHEDULE_MS = [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, 72_000_000, 86_400_000];

/** Parses `5s,5m,30m,2h` (or plain milliseconds) into delays. */
export function parseRetrySchedule(text: string): number[] {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
  return text.split(',').map((part) => {
    const match = /^\s*(\d+)\s*(ms|s|m|h|d)?\s*$/.exec(part);
    if (!match) throw new Error(`not a duration: ${JSON.stringify(part)} (use e.g. 5s, 5m, 2h)`);
    return Number(match[1]) * units[match[2] ?? 'ms']!;
  });
}

/**
 * What an attempt leaves the job to do: complete it (undefined: the delivery is settled, or was not pending);
 * nothing, the job completed with the attempt (`completed`, when the attempt was given its claim); try again at
 * `retryAt`; or nothing because the claim that ran it no longer holds the job (`claimLost`).
 */
export type AttemptOutcome = { retryAt: Date } | { claimLost: true } | { completed: true } | undefined;

export interface DeliveryRunner {
  /**
   * Makes one attempt. When the job is no longer the claim's that runs it (its lease ran out and
   * another claim has the job, or an operator redelivered it), the attempt is recorded and counted —
   * it was sent — but settles nothing: the delivery's status and next attempt are the holder's to
   * decide. `claim` (the queue's job id): an attempt that settles the delivery completes the claim's job
   * in the transaction that records it, which also tells whether the claim still held it. `holdsClaim`,
   * asked once an attempt that does not settle it has ended (or any attempt, without `claim`), says
   * whether it does. `pending`: the delivery and its secrets as the caller already has them (handed over by the
   * completion that wrote it), instead of reading them.
   */
  attempt(taskId: string, options?: { holdsClaim?: () => Promise<boolean>; claim?: string; pending?: PendingDelivery }): Promise<AttemptOutcome>;
}

export function createDeliveryRunner(deps: {
  store: Store;
  sender: WebhookSender;
  clock: Clock;
  events: TaskEvents;
  logger: Logger;
  scheduleMs: number[];
  /** In [0, 1); up to 10 % of a delay is added at random. */
  random?: () => number;
}): DeliveryRunner {
  const random = deps.random ?? Math.random;
  return {
    async attempt(taskId, { holdsClaim, claim, pending: given } = {}) {
      const pending = given ?? (await deps.store.pendingDelivery(taskId, deps.clock.now()));
      if (!pending) return undefined;
      const { delivery, secrets } = pending;
      const attemptedAt = deps.clock.now();
      const result = await deps.sender.send({ url: delivery.url, id: delivery.id, body: delivery.body, secrets });
      // The schedule counts from the attempt's end: one that ran up to its timeout would otherwise be
      // followed at once by the next (a 5 s delay after a 15 s attempt).
      const endedAt = deps.clock.now();
      const attemptsMade = delivery.attempts + 1;
      const delay = deps.scheduleMs[attemptsMade - 1];
      let status: DeliveryRecord['status'] = 'pending';
      let nextAttemptAt: Date | null = null;
      if (result.outcome === 'delivered') status = 'delivered';
      else if (result.outcome === 'gone' || delay === undefined) status = 'failed';
      else {
        const jittered = delay + Math.floor(delay * 0.1 * random());
        nextAttemptAt = new Date(endedAt.getTime() + Math.max(jittered, result.retryAfterMs ?? 0));
      }
      // Settled: the claim's job completes with the record, whose transaction also finds whether the claim still holds
      // it. Otherwise the lease check asks it first.
      const completing = claim !== undefined && nextAttemptAt === null;
      const heldBefore = completing || !holdsClaim || (await holdsClaim());
      const held = await deps.store.recordDeliveryAttempt({
        deliveryId: delivery.id,
        redeliveries: heldBefore ? delivery.redeliveries : SETTLES_NOTHING,
        attempt: {
          attemptedAt,
          statusCode: result.status ?? null,
          error: result.outcome === 'retry' ? (result.error ?? null) : null,
          durationMs: Math.round(result.durationMs),
        },
        status,
        nextAttemptAt,
        ...(completing ? { job: { id: claim, now: endedAt } } : {}),
      }) && heldBefore;
      if (!held) {
        deps.logger.warn({ taskId, deliveryId: delivery.id, outcome: result.outcome, statusCode: result.status }, 'webhook attempt ended after its claim was lost: recorded, settles nothing');
        return { claimLost: true };
      }
      deps.logger.info({ taskId, deliveryId: delivery.id, attempt: attemptsMade, outcome: result.outcome, statusCode: result.status }, 'webhook attempt');
      if (completing) return { completed: true };
      return nextAttemptAt ? { retryAt: nextAttemptAt } : undefined;
    },
  };
}
