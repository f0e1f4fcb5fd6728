import { isTerminal, VidgenError, type Task } from '@vidgen/client';
import { useQueries } from '@tanstack/react-query';
import { Link, useParams } from 'react-router';
import { useScopes } from '../../app/queries';
import { useClient } from '../../app/session';
import { Page } from '../../ui/Page';
import { StatusBadge } from '../../ui/StatusBadge';
import { formatTime } from '../../ui/format';
import { describeError, ErrorNotice, Loading } from '../../ui/states';
import { deliveryQuery, isNotFound, useCancelTask, useTask, useTaskDeliveries, useTaskLedger } from './queries';
import { TaskFields } from './TaskFields';
import { TaskTimeline } from './TaskTimeline';
import { TaskWebhooks } from './TaskWebhooks';
import { useLiveTask } from './useLiveTask';
import './tasks.css';

export default function TaskPage() {
  const { requestId = '' } = useParams();
  const task = useTask(requestId);
  useLiveTask(task.data);

  if (isNotFound(task.error)) {
    return (
      <Page title="No such task">
        <p>
          There is no task <code>{requestId}</code> in this account. <Link to="/tasks">Back to tasks</Link>
        </p>
      </Page>
    );
  }
  if (!task.data) {
    return (
      <Page title={requestId}>
        {task.error ? <ErrorNotice error={task.error} retry={() => void task.refetch()} /> : <Loading label="Loading the task…" />}
      </Page>
    );
  }
  return <TaskView task={task.data} />;
}

function TaskView({ task }: { task: Task }) {
  const client = useClient();
  const scopes = useScopes();
  const cancel = useCancelTask();
  const managesWebhooks = scopes.has('webhooks:manage');
  const ledger = useTaskLedger(task.requestId);
  const deliveries = useTaskDeliveries(task.requestId, managesWebhooks);
  const details = useQueries({ queries: (deliveries.data ?? []).map((delivery) => deliveryQuery(client, delivery.id)) });
  const canCancel = scopes.has('tasks:write') && !isTerminal(task.status);

  return (
    <Page
      title={task.requestId}
      actions={
        <>
          <StatusBadge status={task.status} />
          {canCancel ? (
            <button type="button" className="danger" disabled={cancel.isPending} onClick={() => cancel.mutate(task.requestId)}>
              Cancel task
            </button>
          ) : null}
        </>
      }
    >
      <div className="task-detail">
        {cancel.error ? (
          <p className="state state-error" role="alert">
            <strong>Could not cancel the task: {cancel.error instanceof VidgenError ? describeError(cancel.error) : 'something went wrong'}</strong>
          </p>
        ) : null}
        <p role="status" className="visually-hidden">
          {cancel.isSuccess ? 'Task cancelled; its credits are refunded.' : ''}
        </p>
        {isTerminal(task.status) ? null : <p className="muted">This page follows the task: its status changes here as soon as it does.</p>}

        {task.status === 'succeeded' ? (
          <section aria-labelledby="task-video">
            <h2 id="task-video">Video</h2>
            <video controls preload="metadata" src={task.output.url} aria-label={`Video of ${task.requestId}`}>
              This browser cannot play the video; download it instead.
            </video>
            <p className="task-download">
              <a className="button primary" href={task.output.url} download>
                Download
              </a>{' '}
              <span className="muted">Available until {formatTime(task.output.expiresAt)}</span>
            </p>
          </section>
        ) : null}

        {task.status === 'failed' ? (
          <div className="state state-error task-failure">
            <p>
              <strong>Failed: {task.error.message}</strong> (<code>{task.error.code}</code>). Its credits are refunded.
            </p>
          </div>
        ) : null}

        <section aria-labelledby="task-fields">
          <h2 id="task-fields">Details</h2>
          <TaskFields task={task} />
        </section>

        <section aria-labelledby="task-timeline">
          <h2 id="task-timeline">Timeline</h2>
          <TaskTimeline task={task} ledger={ledger} details={managesWebhooks ? details : []} />
        </section>

        {managesWebhooks ? (
          <section aria-labelledby="task-webhooks">
            <h2 id="task-webhooks">Webhook deliveries</h2>
            <TaskWebhooks task={task} deliveries={deliveries} />
          </section>
        ) : null}
      </div>
    </Page>
  );
}
