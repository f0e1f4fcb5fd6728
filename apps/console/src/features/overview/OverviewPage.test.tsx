import type { TaskList, UsageBucket, UsageReport } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { errorAnswer, example, type Answer } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';
import { formatCredits, formatNumber } from '../../ui/format';

const DAY_MS = 86_400_000;

/** A handler whose answer waits until the test gives it. */
function held() {
  let give!: (answer: Answer) => void;
  const answer = new Promise<Answer>((resolve) => (give = resolve));
  return { handler: () => answer, give };
}

describe('the overview', () => {
  it('shows the account, 30 days of usage as charts with their numbers, and the newest tasks (spec examples)', async () => {
    const { api } = renderConsole('/');
    const account = example('getAccount');

    const cards = await screen.findByRole('region', { name: 'Account' });
    expect(within(cards).getByText(formatCredits(account.balance))).toBeTruthy();
    expect(within(cards).getByText(formatCredits(account.creditsHeld))).toBeTruthy();
    expect(within(cards).getByText('Active tasks').closest('.card')!.textContent).toContain(formatNumber(account.activeTasks));

    const daily = example<UsageReport>('getUsage');
    const sum = (value: (bucket: UsageBucket) => number) => formatNumber(daily.data.reduce((total, bucket) => total + value(bucket), 0));
    const credits = await screen.findByRole('img', { name: /^Credits over the last 30 days/ });
    expect(credits.getAttribute('aria-label')).toBe(
      `Credits over the last 30 days: ${sum((b) => b.creditsCharged)} charged, ${sum((b) => b.creditsRefunded)} refunded, ${sum((b) => b.creditsNet)} net.`,
    );
    expect(screen.getByRole('img', { name: /^Tasks ended/ }).getAttribute('aria-label')).toBe(
      `Tasks ended over the last 30 days: ${sum((b) => b.tasks.succeeded + b.tasks.failed + b.tasks.cancelled)} in all, ${sum((b) => b.tasks.succeeded)} succeeded, ${sum((b) => b.tasks.failed)} failed, ${sum((b) => b.tasks.cancelled)} cancelled.`,
    );
    expect(credits.querySelectorAll('rect.bar-charged')).toHaveLength(daily.data.filter((b) => b.creditsCharged > 0).length);

    // The numbers behind the charts, a row per day and the totals.
    await userEvent.click(screen.getByText('Usage by day, in numbers'));
    const table = screen.getByRole('table', { name: /Usage per day/ });
    const rows = within(table).getAllByRole('row');
    expect(rows).toHaveLength(1 + daily.data.length + 1);
    const last = daily.data.at(-1)!;
    expect(within(rows.at(-2)!).getAllByRole('cell').map((cell) => cell.textContent)).toEqual(
      [last.creditsCharged, last.creditsRefunded, last.creditsNet, last.tasks.succeeded, last.tasks.failed, last.tasks.cancelled, last.secondsDelivered].map(formatNumber),
    );
    expect(within(rows.at(-1)!).getAllByRole('cell')[0]!.textContent).toBe(sum((b) => b.creditsCharged));

    const usage = api.calls('getUsage')[0]!.url.searchParams;
    expect(usage.get('granularity')).toBe('day');
    const span = Date.parse(usage.get('to')!) - Date.parse(usage.get('from')!);
    expect(span).toBe(30 * DAY_MS);
    expect(Math.abs(Date.parse(usage.get('to')!) - Date.now())).toBeLessThan(60_000);

    const recent = example<TaskList>('listGenerations');
    for (const task of recent.data) {
      const link = await screen.findByRole('link', { name: task.requestId });
      expect(link.getAttribute('href')).toBe(`/tasks/${task.requestId}`);
      expect(within(link.closest('tr')!).getByText(task.status)).toBeTruthy();
    }
    expect(api.calls('listGenerations')[0]!.url.searchParams.get('limit')).toBe('5');
  });

  it('says when there is no usage and no task yet, with a link to generate one', async () => {
    const daily = example<UsageReport>('getUsage');
    const quiet: UsageReport = {
      ...daily,
      data: daily.data.map((bucket) => ({
        ...bucket,
        tasks: { succeeded: 0, failed: 0, cancelled: 0 },
        secondsDelivered: 0,
        creditsCharged: 0,
        creditsRefunded: 0,
        creditsNet: 0,
      })),
    };
    renderConsole('/', {
      getUsage: () => ({ body: quiet }),
      listGenerations: () => ({ body: { success: true, data: [], nextCursor: null } }),
    });
    expect(await screen.findByText('No usage in the last 30 days.')).toBeTruthy();
    expect((await screen.findByRole('link', { name: 'Generate your first video' })).getAttribute('href')).toBe('/generate');
    expect(screen.queryByRole('img')).toBeNull();
  });

  it('shows loading states until the answers arrive', async () => {
    const usage = held();
    const tasks = held();
    renderConsole('/', { getUsage: usage.handler, listGenerations: tasks.handler });
    expect(await screen.findByText('Loading usage…')).toBeTruthy();
    expect(screen.getByText('Loading recent tasks…')).toBeTruthy();
    usage.give({ body: example('getUsage') });
    tasks.give({ body: example('listGenerations') });
    expect(await screen.findByRole('img', { name: /^Credits over/ })).toBeTruthy();
    await waitFor(() => expect(screen.queryByText('Loading recent tasks…')).toBeNull());
  });

  it("shows the service's error for usage and for the tasks, and tries again on request", async () => {
    let usageCalls = 0;
    renderConsole('/', {
      getUsage: () => (++usageCalls === 1 ? { status: 400, body: example('getUsage', 400, 'fromAfterTo') } : { body: example('getUsage') }),
      listGenerations: () => errorAnswer(403, 'forbidden', 'this API key lacks the tasks:read scope'),
    });
    const usageSection = await screen.findByRole('region', { name: 'Usage, last 30 days' });
    expect((await within(usageSection).findByRole('alert')).textContent).toContain(example('getUsage', 400, 'fromAfterTo').error.message);
    const recentSection = screen.getByRole('region', { name: 'Recent tasks' });
    expect((await within(recentSection).findByRole('alert')).textContent).toContain('lacks the tasks:read scope');

    await userEvent.click(within(usageSection).getByRole('button', { name: 'Try again' }));
    expect(await within(usageSection).findByRole('img', { name: /^Credits over/ })).toBeTruthy();
  });
});
