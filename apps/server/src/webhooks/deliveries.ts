/**
 * Sends one webhook delivery attempt and decides what comes next (D8): any
 * 2xx delivers; 410 stops for good; anything else retries on the schedule
 * (with jitter, and no sooner than a Retry-After), until the schedule runs out.
 */
import type { Logger } from 'pino';
import type { Clock, TaskEvents } from '../interfaces.js';
import type { DeliveryRecord, Store } from '../store/store.js';

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

export interface DeliveryRunner {
  /** Makes one attempt; returns when to try again, or undefined when the delivery is settled. */
  attempt(taskId: string): Promise<{ retryAt: Date } | undefined>;
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
    async attempt(taskId) {
      const delivery: DeliveryRecord | undefined = await deps.store.getDeliveryForTask(taskId);
      if (!delivery || delivery.status !== 'pending') return undefined;
      const secrets = await deps.store.webhookSecrets(delivery.accountId, deps.clock.now());
      const attemptedAt = deps.clock.now();
      const result = await deps.sender.send({ url: delivery.url, id: delivery.id, body: delivery.body, secrets });
      const attemptsMade = delivery.attempts + 1;
      const delay = deps.scheduleMs[attemptsMade - 1];
      let status: DeliveryRecord['status'] = 'pending';
      let nextAttemptAt: Date | null = null;
      if (result.outcome === 'delivered') status = 'delivered';
      else if (result.outcome === 'gone' || delay === undefined) status = 'failed';
      else {
        const jittered = delay + Math.floor(delay * 0.1 * random());
        nextAttemptAt = new Date(attemptedAt.getTime() + Math.max(jittered, result.retryAfterMs ?? 0));
      }
      await deps.store.recordDeliveryAttempt({
        deliveryId: delivery.id,
        redeliveries: delivery.redeliveries,
        attempt: {
          attemptedAt,
          statusCode: result.status ?? null,
          error: result.outcome === 'retry' ? (result.error ?? null) : null,
          durationMs: Math.round(result.durationMs),
        },
        status,
        nextAttemptAt,
      });
      deps.logger.info({ taskId, deliveryId: delivery.id, attempt: attemptsMade, outcome: result.outcome, statusCode: result.status }, 'webhook attempt');
      return nextAttemptAt ? { retryAt: nextAttemptAt } : undefined;
    },
  };
}
