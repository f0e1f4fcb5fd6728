import { useQuery } from '@tanstack/react-query';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';
import { formatNumber, formatTime } from '../../ui/format';
import { Empty, ErrorNotice, Loading } from '../../ui/states';

/** Every attempt of one delivery, oldest first: when, what the receiver answered (or why nothing came), how long it took. */
export function DeliveryAttempts({ deliveryId }: { deliveryId: string }) {
  const client = useClient();
  const detail = useQuery({ queryKey: queryKeys.delivery(deliveryId), queryFn: ({ signal }) => client.webhooks.delivery(deliveryId, { signal }) });
  if (detail.error) return <ErrorNotice error={detail.error} retry={() => void detail.refetch()} />;
  if (!detail.data) return <Loading label="Loading the attempts…" />;
  const { url, attemptHistory, nextAttemptAt, status } = detail.data;
  return (
    <div className="delivery-attempts">
      <p>
        Sent to <code>{url}</code>
        {status === 'pending' && nextAttemptAt ? <> · next attempt {formatTime(nextAttemptAt)}</> : null}
      </p>
      {attemptHistory.length === 0 ? (
        <Empty>No attempt has been made yet.</Empty>
      ) : (
        <table className="attempts-table">
          <caption className="visually-hidden">Attempts of delivery {deliveryId}</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">HTTP status</th>
              <th scope="col">Duration</th>
              <th scope="col">Error</th>
            </tr>
          </thead>
          <tbody>
            {attemptHistory.map((attempt, i) => (
              <tr key={i}>
                <td>
                  <time dateTime={attempt.attemptedAt}>{formatTime(attempt.attemptedAt)}</time>
                </td>
                <td>{attempt.statusCode ?? <span className="muted">no answer</span>}</td>
                <td>{formatNumber(attempt.durationMs)} ms</td>
                <td>{attempt.error ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
