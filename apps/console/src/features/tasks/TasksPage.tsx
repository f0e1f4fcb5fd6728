import { isTerminal, VidgenError, type Task, type TaskStatus } from '@vidgen/client';
import { useId, type ReactNode } from 'react';
import { Link, useSearchParams } from 'react-router';
import { useScopes } from '../../app/queries';
import { Page } from '../../ui/Page';
import { Pager, useCursorPages } from '../../ui/Pager';
import { StatusBadge } from '../../ui/StatusBadge';
import { formatNumber, formatTime } from '../../ui/format';
import { describeError, Empty, ErrorNotice, Loading } from '../../ui/states';
import { formatSeconds, isStatus, STATUSES } from './labels';
import { useCancelTask, useTaskList } from './queries';
import { useLiveTask } from './useLiveTask';
import './tasks.css';

/** The list's times to the minute, so the table fits; the exact one is in the title. */
const shortTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export default function TasksPage() {
  const [params, setParams] = useSearchParams();
  const raw = params.get('status');
  const status = isStatus(raw) ? raw : undefined;
  const selectId = useId();

  const choose = (value: string) =>
    setParams((previous) => {
      const next = new URLSearchParams(previous);
      if (isStatus(value)) next.set('status', value);
      else next.delete('status');
      return next;
    });

  return (
    <Page title="Tasks">
      <div className="field tasks-filter">
        <label htmlFor={selectId}>Status</label>
        <select id={selectId} value={status ?? 'all'} onChange={(event) => choose(event.target.value)}>
          <option value="all">all</option>
          {STATUSES.map((value) => (
            <option key={value} value={value}>
              {value}
            </option>
          ))}
        </select>
      </div>
      {/* A new filter starts again from its first page: the cursors of another filter mean nothing to it. */}
      <TaskListView key={status ?? 'all'} status={status} />
    </Page>
  );
}

function TaskListView({ status }: { status: TaskStatus | undefined }) {
  const pages = useCursorPages();
  const list = useTaskList(status, pages.cursor);
  const cancel = useCancelTask();
  const canCancel = useScopes().has('tasks:write');
  const turning = list.isPlaceholderData;

  let body: ReactNode;
  if (list.error && !list.data) body = <ErrorNotice error={list.error} retry={() => void list.refetch()} />;
  else if (!list.data) body = <Loading label="Loading tasks…" />;
  else if (list.data.data.length === 0)
    body =
      pages.hasPrevious ? (
        <Empty>No more tasks.</Empty>
      ) : status ? (
        <Empty>No {status} tasks.</Empty>
      ) : (
        <Empty>
          No tasks yet. <Link to="/generate">Generate a video</Link>.
        </Empty>
      );
  else
    body = (
      <div className="table-wrap scroll-box">
        <table className="tasks-table" aria-busy={turning || undefined}>
          <caption className="visually-hidden">
            Tasks{status ? ` (${status})` : ''}, newest first, page {pages.pageNumber}
          </caption>
          <thead>
            <tr>
              <th scope="col">Task</th>
              <th scope="col">Status</th>
              <th scope="col">Model</th>
              <th scope="col">Resolution</th>
              <th scope="col">Duration</th>
              <th scope="col">Credits</th>
              <th scope="col">Created</th>
              {canCancel ? (
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              ) : null}
            </tr>
          </thead>
          <tbody>
            {list.data.data.map((task) => (
              <TaskRow key={task.requestId} task={task} canCancel={canCancel} cancelling={cancel.isPending && cancel.variables === task.requestId} onCancel={(id) => cancel.mutate(id)} />
            ))}
          </tbody>
        </table>
      </div>
    );

  return (
    <>
      <CancelOutcome cancel={cancel} />
      {body}
      {list.data || pages.hasPrevious ? (
        <Pager
          label="Pages of tasks"
          pageNumber={pages.pageNumber}
          canPrevious={pages.hasPrevious && !turning}
          nextCursor={turning ? undefined : (list.data?.nextCursor ?? undefined)}
          onPrevious={pages.previous}
          onNext={pages.next}
        />
      ) : null}
    </>
  );
}

function TaskRow({ task, canCancel, cancelling, onCancel }: { task: Task; canCancel: boolean; cancelling: boolean; onCancel: (requestId: string) => void }) {
  useLiveTask(task);
  return (
    <tr>
      <th scope="row">
        <Link to={`/tasks/${task.requestId}`} className="mono">
          {task.requestId}
        </Link>
      </th>
      <td>
        <StatusBadge status={task.status} />
      </td>
      <td className="model">{task.model}</td>
      <td>{task.resolution}</td>
      <td>{formatSeconds(task.duration)}</td>
      <td>
        {formatNumber(task.creditsCharged)}
        {task.creditsRefunded > 0 ? <span className="muted refund"> {formatNumber(task.creditsRefunded)} refunded</span> : null}
      </td>
      <td>
        <time dateTime={task.createdAt} title={formatTime(task.createdAt)}>
          {shortTime.format(new Date(task.createdAt))}
        </time>
      </td>
      {canCancel ? (
        <td>
          {isTerminal(task.status) ? null : (
            <button type="button" className="danger" aria-label={`Cancel ${task.requestId}`} disabled={cancelling} onClick={() => onCancel(task.requestId)}>
              {cancelling ? 'Cancelling…' : 'Cancel'}
            </button>
          )}
        </td>
      ) : null}
    </tr>
  );
}

function CancelOutcome({ cancel }: { cancel: ReturnType<typeof useCancelTask> }) {
  return (
    <>
      {cancel.error ? (
        <p className="state state-error" role="alert">
          <strong>
            Could not cancel <code>{cancel.variables}</code>: {cancel.error instanceof VidgenError ? describeError(cancel.error) : 'something went wrong'}
          </strong>
        </p>
      ) : null}
      <p role="status" className="visually-hidden">
        {cancel.isSuccess ? `Task ${cancel.variables} cancelled; its credits are refunded.` : ''}
      </p>
    </>
  );
}
