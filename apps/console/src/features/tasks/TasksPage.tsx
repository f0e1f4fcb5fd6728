import { isTerminal, VidgenError, type Task, type TaskStatus } from '@vidgen/client';
import { useId, useState, type ReactNode } from 'react';
import { Link, useSearchParams } from 'react-router';
import { useScopes } from '../../app/queries';
import { Page } from '../../ui/Page';
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
  // The cursors of the pages opened so far; the last is the page shown, none is the first page.
  const [cursors, setCursors] = useState<string[]>([]);
  const cursor = cursors.at(-1);
  const list = useTaskList(status, cursor);
  const cancel = useCancelTask();
  const canCancel = useScopes().has('tasks:write');
  const pageNumber = cursors.length + 1;
  const nextCursor = list.data?.nextCursor ?? undefined;
  const turning = list.isPlaceholderData;

  let body: ReactNode;
  if (list.error && !list.data) body = <ErrorNotice error={list.error} retry={() => void list.refetch()} />;
  else if (!list.data) body = <Loading label="Loading tasks…" />;
  else if (list.data.data.length === 0)
    body =
      cursors.length > 0 ? (
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
            Tasks{status ? ` (${status})` : ''}, newest first, page {pageNumber}
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
      {list.data || cursors.length > 0 ? (
        <nav className="pager" aria-label="Pages of tasks">
          <PagerButton disabled={cursors.length === 0 || turning} onClick={() => setCursors((stack) => stack.slice(0, -1))}>
            Previous page
          </PagerButton>
          <span aria-live="polite">Page {pageNumber}</span>
          <PagerButton disabled={!nextCursor || turning} onClick={() => nextCursor && setCursors((stack) => [...stack, nextCursor])}>
            Next page
          </PagerButton>
        </nav>
      ) : null}
    </>
  );
}

/**
 * aria-disabled rather than disabled: a button that becomes disabled while focused (the last
 * page reached) would drop keyboard focus to the page's start.
 */
function PagerButton({ disabled, onClick, children }: { disabled: boolean; onClick: () => void; children: ReactNode }) {
  return (
    <button type="button" aria-disabled={disabled} onClick={() => !disabled && onClick()}>
      {children}
    </button>
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
