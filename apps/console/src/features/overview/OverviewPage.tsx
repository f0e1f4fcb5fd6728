import { Link } from 'react-router';
import { useAccount } from '../../app/queries';
import { Page } from '../../ui/Page';
import { StatusBadge } from '../../ui/StatusBadge';
import { formatCredits, formatNumber, formatTime } from '../../ui/format';
import { Empty, ErrorNotice, Loading } from '../../ui/states';
import { useRecentTasks, useUsage, USAGE_DAYS } from './queries';
import { totals, UsageCharts } from './UsageChart';
import './overview.css';

export default function OverviewPage() {
  return (
    <Page title="Overview">
      <AccountCards />
      <section aria-labelledby="overview-usage">
        <h2 id="overview-usage">Usage, last {USAGE_DAYS} days</h2>
        <Usage />
      </section>
      <section aria-labelledby="overview-recent">
        <h2 id="overview-recent">Recent tasks</h2>
        <RecentTasks />
      </section>
    </Page>
  );
}

function AccountCards() {
  const account = useAccount();
  if (account.error) return <ErrorNotice error={account.error} retry={() => void account.refetch()} />;
  if (!account.data) return <Loading label="Loading the account…" />;
  const { balance, creditsHeld, activeTasks, limits } = account.data;
  return (
    <section aria-labelledby="overview-account">
      <h2 id="overview-account" className="visually-hidden">
        Account
      </h2>
      <dl className="cards overview-cards">
        <div className="card">
          <dt className="label">Balance</dt>
          <dd className="value">{formatCredits(balance)}</dd>
        </div>
        <div className="card">
          <dt className="label">Credits held</dt>
          <dd className="value">{formatCredits(creditsHeld)}</dd>
          <dd className="muted">by queued and processing tasks, given back if they fail or are cancelled</dd>
        </div>
        <div className="card">
          <dt className="label">Active tasks</dt>
          <dd className="value">{formatNumber(activeTasks)}</dd>
          {limits.maxActiveTasks === null ? null : <dd className="muted">of at most {formatNumber(limits.maxActiveTasks)} at a time</dd>}
        </div>
      </dl>
    </section>
  );
}

function Usage() {
  const usage = useUsage();
  if (usage.error) return <ErrorNotice error={usage.error} retry={() => void usage.refetch()} />;
  if (!usage.data) return <Loading label="Loading usage…" />;
  const buckets = usage.data.data;
  const sums = totals(buckets);
  if (sums.charged + sums.refunded + sums.succeeded + sums.failed + sums.cancelled === 0) {
    return <Empty>No usage in the last {USAGE_DAYS} days.</Empty>;
  }
  return <UsageCharts buckets={buckets} days={USAGE_DAYS} />;
}

function RecentTasks() {
  const recent = useRecentTasks();
  if (recent.error) return <ErrorNotice error={recent.error} retry={() => void recent.refetch()} />;
  if (!recent.data) return <Loading label="Loading recent tasks…" />;
  if (recent.data.data.length === 0) {
    return (
      <Empty>
        No tasks yet. <Link to="/generate">Generate your first video</Link>.
      </Empty>
    );
  }
  return (
    <>
      <div className="table-wrap scroll-box">
        <table>
          <caption className="visually-hidden">The {recent.data.data.length} newest tasks</caption>
          <thead>
            <tr>
              <th scope="col">Task</th>
              <th scope="col">Status</th>
              <th scope="col">Model</th>
              <th scope="col">Created</th>
            </tr>
          </thead>
          <tbody>
            {recent.data.data.map((task) => (
              <tr key={task.requestId}>
                <th scope="row" className="overview-task">
                  <Link to={`/tasks/${task.requestId}`} className="mono">
                    {task.requestId}
                  </Link>
                </th>
                <td>
                  <StatusBadge status={task.status} />
                </td>
                <td>{task.model}</td>
                <td>
                  <time dateTime={task.createdAt}>{formatTime(task.createdAt)}</time>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p>
        <Link to="/tasks">All tasks</Link>
      </p>
    </>
  );
}
