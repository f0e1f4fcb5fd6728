import { VidgenError, type Task, type WebhookDelivery } from '@vidgen/client';
import { useQuery, type UseQueryResult } from '@tanstack/react-query';
import { useId } from 'react';
import { useClient } from '../../app/session';
import { formatTime } from '../../ui/format';
import { describeError, Empty, ErrorNotice, Loading } from '../../ui/states';
import { deliveryQuery, useRedeliver } from './queries';

/** The task's webhook deliveries, each with every attempt, and a way to send one again. */
export function TaskWebhooks({ task, deliveries }: { task: Task; deliveries: UseQueryResult<WebhookDelivery[]> }) {
  if (deliveries.error) return <ErrorNotice error={deliveries.error} retry={() => void deliveries.refetch()} />;
  if (!deliveries.data) return <Loading label="Loading webhook deliveries…" />;
  if (deliveries.data.length === 0) {
    return <Empty>No webhook deliveries for this task. {task.webhook ? '' : 'A task has one once it has ended, if it was submitted with a webhookUrl.'}</Empty>;
  }
  return (
    <div className="deliveries">
      {deliveries.data.map((delivery) => (
        <DeliveryCard key={delivery.id} delivery={delivery} />
      ))}
    </div>
  );
}

function DeliveryCard({ delivery: listed }: { delivery: WebhookDelivery }) {
  const client = useClient();
  const detail = useQuery(deliveryQuery(client, listed.id));
  const redeliver = useRedeliver();
  const headingId = useId();
  // The detail is the fresher copy once it has arrived (it is refetched after a redelivery).
  const delivery: WebhookDelivery = detail.data ?? listed;

  return (
    <article className="card delivery" aria-labelledby={headingId}>
      <h3 id={headingId}>
        Delivery <code>{delivery.id}</code>
      </h3>
      <dl className="fields">
        <dt>Event</dt>
        <dd>
          <code>{delivery.eventType}</code>
        </dd>
        <dt>Sent to</dt>
        <dd className="mono">{delivery.url}</dd>
        <dt>Status</dt>
        <dd>
          <span className={`badge badge-${delivery.status}`}>{delivery.status}</span>
        </dd>
        <dt>Attempts</dt>
        <dd>{delivery.attempts}</dd>
        <dt>Last attempt</dt>
        <dd>{formatTime(delivery.lastAttemptAt)}</dd>
        {delivery.nextAttemptAt ? (
          <>
            <dt>Next attempt</dt>
            <dd>{formatTime(delivery.nextAttemptAt)}</dd>
          </>
        ) : null}
        <dt>Created</dt>
        <dd>{formatTime(delivery.createdAt)}</dd>
      </dl>

      <h4>Attempts</h4>
      {detail.error ? (
        <ErrorNotice error={detail.error} retry={() => void detail.refetch()} />
      ) : !detail.data ? (
        <Loading label="Loading attempts…" />
      ) : detail.data.attemptHistory.length === 0 ? (
        <Empty>No attempt yet.</Empty>
      ) : (
        // Focusable: on a phone the table scrolls sideways, and a keyboard must be able to scroll it.
        <div className="table-wrap scroll-box" tabIndex={0} role="region" aria-label={`Attempts of delivery ${delivery.id}`}>
          <table>
            <caption className="visually-hidden">Attempts of delivery {delivery.id}, oldest first</caption>
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Time</th>
                <th scope="col">Status code</th>
                <th scope="col">Duration</th>
                <th scope="col">Error</th>
              </tr>
            </thead>
            <tbody>
              {detail.data.attemptHistory.map((attempt, i) => (
                <tr key={i}>
                  <th scope="row">{i + 1}</th>
                  <td>
                    <time dateTime={attempt.attemptedAt}>{formatTime(attempt.attemptedAt)}</time>
                  </td>
                  <td>{attempt.statusCode ?? 'No answer'}</td>
                  <td>{attempt.durationMs} ms</td>
                  <td>{attempt.error ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}

      <p className="delivery-actions">
        {/* Named "Redeliver" for every delivery; which one it sends is its description (the heading). */}
        <button type="button" aria-describedby={headingId} aria-disabled={redeliver.isPending} onClick={() => !redeliver.isPending && redeliver.mutate(delivery.id)}>
          Redeliver
        </button>
      </p>
      {redeliver.error ? (
        <p className="field-error" role="alert">
          Could not redeliver: {redeliver.error instanceof VidgenError ? describeError(redeliver.error) : 'something went wrong'}
        </p>
      ) : null}
      <p role="status" className="muted">
        {redeliver.data ? `Redelivery scheduled${redeliver.data.delivery.nextAttemptAt ? ` for ${formatTime(redeliver.data.delivery.nextAttemptAt)}` : ''}.` : ''}
      </p>
    </article>
  );
}
