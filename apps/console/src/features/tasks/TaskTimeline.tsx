import type { LedgerEntry, Task, WebhookDeliveryDetail } from '@vidgen/client';
import type { UseQueryResult } from '@tanstack/react-query';
import { formatCredits, formatTime } from '../../ui/format';
import { ErrorNotice, Loading } from '../../ui/states';
import { LEDGER_LABELS, STATUS_EVENT_LABELS } from './labels';

interface Moment {
  key: string;
  at: string;
  text: string;
  /** A time still to come (a scheduled webhook attempt). */
  due?: boolean;
}

/**
 * What happened to the task, oldest first: its own times, the credits it moved (ledger) and the
 * attempts to deliver its webhook (when the key may see them).
 */
export function TaskTimeline({ task, ledger, details }: { task: Task; ledger: UseQueryResult<LedgerEntry[]>; details: UseQueryResult<WebhookDeliveryDetail>[] }) {
  const moments = [...taskMoments(task), ...(ledger.data ?? []).map(ledgerMoment), ...details.flatMap((detail) => (detail.data ? deliveryMoments(detail.data) : []))];
  // Stable: moments at the same instant keep the order above (the task's, then the credits').
  moments.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
  const detailError = details.find((detail) => detail.error);
  return (
    <>
      <ol className="timeline">
        {moments.map((moment) => (
          <li key={moment.key} className={moment.due ? 'due' : undefined}>
            <time dateTime={moment.at}>{formatTime(moment.at)}</time>
            <span>
              {moment.text}
              {moment.due ? ' (scheduled)' : ''}
            </span>
          </li>
        ))}
      </ol>
      {ledger.isPending || details.some((detail) => detail.isPending) ? <Loading label="Loading credits and webhook attempts…" /> : null}
      {ledger.error ? <ErrorNotice error={ledger.error} retry={() => void ledger.refetch()} /> : null}
      {detailError?.error ? <ErrorNotice error={detailError.error} retry={() => void detailError.refetch()} /> : null}
    </>
  );
}

function taskMoments(task: Task): Moment[] {
  const moments: Moment[] = [{ key: 'created', at: task.createdAt, text: STATUS_EVENT_LABELS.queued }];
  // updatedAt is the last change: for a processing task, when processing began.
  if (task.status === 'processing' && task.updatedAt !== task.createdAt) moments.push({ key: 'processing', at: task.updatedAt, text: STATUS_EVENT_LABELS.processing });
  if (task.completedAt) {
    const why = task.status === 'failed' ? `: ${task.error.message} (${task.error.code})` : '';
    moments.push({ key: 'completed', at: task.completedAt, text: `${STATUS_EVENT_LABELS[task.status]}${why}` });
  }
  return moments;
}

function ledgerMoment(entry: LedgerEntry): Moment {
  return {
    key: entry.id,
    at: entry.createdAt,
    text: `${LEDGER_LABELS[entry.kind]} ${formatCredits(Math.abs(entry.amount))}; balance after: ${formatCredits(entry.balanceAfter)}`,
  };
}

function deliveryMoments(delivery: WebhookDeliveryDetail): Moment[] {
  const moments: Moment[] = delivery.attemptHistory.map((attempt, i) => ({
    key: `${delivery.id}-${i}`,
    at: attempt.attemptedAt,
    text: `Webhook attempt ${i + 1} (${delivery.eventType}): ${
      attempt.statusCode === null ? `no answer${attempt.error ? ` (${attempt.error})` : ''}` : `HTTP ${attempt.statusCode} after ${attempt.durationMs} ms`
    }`,
  }));
  if (delivery.status === 'pending' && delivery.nextAttemptAt) {
    moments.push({ key: `${delivery.id}-next`, at: delivery.nextAttemptAt, text: 'Next webhook attempt', due: true });
  }
  return moments;
}
