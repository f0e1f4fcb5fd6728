import type { WebhookDeliveryStatus } from '@vidgen/client';
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Fragment, useId, useState } from 'react';
import { Link } from 'react-router';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';
import { formatTime } from '../../ui/format';
import { Pager, useCursorPages } from '../../ui/Pager';
import { Empty, ErrorNotice, Loading } from '../../ui/states';
import { DeliveryAttempts } from './DeliveryAttempts';

/** Every delivery status, said for people: a status added to the spec is a type error here until it is listed. */
const STATUS_HINTS = {
  pending: 'not yet delivered; an attempt is scheduled',
  delivered: 'the receiver answered 2xx',
  failed: 'a 410, or every retry used up',
} as const satisfies Record<WebhookDeliveryStatus, string>;
const STATUSES = Object.keys(STATUS_HINTS) as WebhookDeliveryStatus[];

export function DeliveryStatus({ status }: { status: WebhookDeliveryStatus }) {
  return (
    <span className={`badge delivery-${status}`} title={STATUS_HINTS[status]}>
      {status}
    </span>
  );
}

export function Deliveries() {
  const client = useClient();
  const queryClient = useQueryClient();
  const ids = useId();
  const [status, setStatus] = useState<WebhookDeliveryStatus>();
  const pages = useCursorPages();
  const [expanded, setExpanded] = useState<ReadonlySet<string>>(new Set());
  const [notice, setNotice] = useState<string>();
  const cursor = pages.cursor;

  const page = useQuery({
    queryKey: queryKeys.deliveryList(status, undefined, cursor),
    queryFn: ({ signal }) => client.webhooks.deliveries({ status, cursor, signal }),
    // The page shown stays until the next one arrives, so paging does not flash a spinner.
    placeholderData: keepPreviousData,
  });

  const redeliver = useMutation({
    mutationFn: (deliveryId: string) => client.webhooks.redeliver(deliveryId),
    onSuccess: (answer) => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.deliveries });
      setNotice(`Delivery ${answer.delivery.id} will be sent again now${answer.delivery.nextAttemptAt ? ` (due ${formatTime(answer.delivery.nextAttemptAt)})` : ''}.`);
    },
  });

  const toggle = (deliveryId: string) =>
    setExpanded((current) => {
      const next = new Set(current);
      if (!next.delete(deliveryId)) next.add(deliveryId);
      return next;
    });


  return (
    <section aria-labelledby={`${ids}-heading`} className="deliveries">
      <h2 id={`${ids}-heading`}>Deliveries</h2>
      <p className="muted">One per task that ended with a webhook URL, newest first.</p>
      <div className="deliveries-toolbar">
        <div className="field">
          <label htmlFor={`${ids}-status`}>Status</label>
          <select
            id={`${ids}-status`}
            value={status ?? ''}
            onChange={(event) => {
              setStatus(STATUSES.find((s) => s === event.target.value));
              // A cursor belongs to the filters it was issued for.
              pages.reset();
              setExpanded(new Set());
            }}
          >
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
      </div>

      {notice ? (
        <p role="status" className="notice">
          {notice}
        </p>
      ) : null}
      {redeliver.error ? <ErrorNotice error={redeliver.error} /> : null}

      {page.error ? (
        <ErrorNotice error={page.error} retry={() => void page.refetch()} />
      ) : !page.data ? (
        <Loading label="Loading the deliveries…" />
      ) : page.data.data.length === 0 ? (
        <Empty>{status ? `No ${status} deliveries.` : 'No deliveries yet: one is made when a task with a webhook URL ends.'}</Empty>
      ) : (
        <div className="table-wrap">
          <table className="stacked deliveries-table" aria-labelledby={`${ids}-heading`} aria-busy={page.isPlaceholderData || undefined}>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Task</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last attempt</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {page.data.data.map((delivery) => {
                const open = expanded.has(delivery.id);
                const detailsId = `${ids}-details-${delivery.id}`;
                return (
                  <Fragment key={delivery.id}>
                    <tr>
                      <td data-label="Event">
                        <code className="event">{delivery.eventType}</code>
                      </td>
                      <td data-label="Task">
                        <Link to={`/tasks/${delivery.requestId}`}>
                          <code>{delivery.requestId}</code>
                        </Link>
                      </td>
                      <td data-label="Status">
                        <DeliveryStatus status={delivery.status} />
                      </td>
                      <td data-label="Attempts">{delivery.attempts}</td>
                      <td data-label="Last attempt">
                        {delivery.lastAttemptAt ? <time dateTime={delivery.lastAttemptAt}>{formatTime(delivery.lastAttemptAt)}</time> : '—'}
                        {delivery.status === 'pending' && delivery.nextAttemptAt ? <span className="field-hint next-attempt">Next: {formatTime(delivery.nextAttemptAt)}</span> : null}
                      </td>
                      <td className="actions">
                        <button
                          type="button"
                          aria-label={`Details ${delivery.id}`}
                          aria-expanded={open}
                          aria-controls={open ? detailsId : undefined}
                          onClick={() => toggle(delivery.id)}
                        >
                          Details
                        </button>
                        <button
                          type="button"
                          aria-label={`Redeliver ${delivery.id}`}
                          disabled={redeliver.isPending && redeliver.variables === delivery.id}
                          onClick={() => {
                            setNotice(undefined);
                            redeliver.mutate(delivery.id);
                          }}
                        >
                          Redeliver
                        </button>
                      </td>
                    </tr>
                    {open ? (
                      <tr className="delivery-details">
                        <td id={detailsId} colSpan={6}>
                          <DeliveryAttempts deliveryId={delivery.id} />
                        </td>
                      </tr>
                    ) : null}
                  </Fragment>
                );
              })}
            </tbody>
          </table>
        </div>
      )}

      <Pager
        label="Deliveries pages"
        pageNumber={pages.pageNumber}
        canPrevious={pages.hasPrevious}
        nextCursor={page.isPlaceholderData ? undefined : (page.data?.nextCursor ?? undefined)}
        onPrevious={pages.previous}
        onNext={pages.next}
      />
    </section>
  );
}
