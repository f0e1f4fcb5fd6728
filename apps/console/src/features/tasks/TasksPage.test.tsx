import { isTerminal, type AccountSummary, type CancelGenerationResponse, type Task, type TaskList, type TaskWithStatus } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { example, type Answer } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';
import { formatCredits, formatNumber } from '../../ui/format';

/** What the fake answers when a test does not say otherwise. */
const defaultList = () => example<TaskList>('listGenerations');
const firstPage = () => example<TaskList>('listGenerations', 200, 'firstPage');
const lastPage = () => example<TaskList>('listGenerations', 200, 'lastPage');
const page = (...data: Task[]): Answer => ({ body: { success: true, data, nextCursor: null } satisfies TaskList });

/** An answer that waits until the test gives it. */
function held() {
  let give!: (answer: Answer) => void;
  const answer = new Promise<Answer>((resolve) => (give = resolve));
  return { answer, give };
}

/** A long poll that never ends (the test is over before it would). */
const never = () => new Promise<Answer>(() => {});

function rowOf(requestId: string): HTMLElement {
  return screen.getByRole('link', { name: requestId }).closest('tr')!;
}

describe('the Tasks page', () => {
  it('lists tasks (the spec example) with a link, status, model, resolution, duration, credits and a Cancel for the running ones', async () => {
    renderConsole('/tasks', { getGeneration: never });
    const tasks = defaultList().data;
    for (const task of tasks) {
      const link = await screen.findByRole('link', { name: task.requestId });
      expect(link.getAttribute('href')).toBe(`/tasks/${task.requestId}`);
      const row = within(rowOf(task.requestId));
      expect(row.getByText(task.status)).toBeTruthy();
      expect(row.getByText(task.model)).toBeTruthy();
      expect(row.getByText(task.resolution)).toBeTruthy();
      expect(row.getByText(`${task.duration} s`)).toBeTruthy();
      expect(row.getByText(formatNumber(task.creditsCharged))).toBeTruthy();
      // Only a task still queued or processing can be cancelled.
      expect(row.queryByRole('button', { name: `Cancel ${task.requestId}` }) !== null).toBe(!isTerminal(task.status));
    }
    expect(tasks.some((task) => isTerminal(task.status)) && tasks.some((task) => !isTerminal(task.status))).toBe(true);
  });

  it('filters by status: the choice goes into ?status= and into the request', async () => {
    const { api } = renderConsole('/tasks', { getGeneration: never, listGenerations: (request) => (request.url.searchParams.get('status') === 'failed' ? { body: lastPage() } : { body: firstPage() }) });
    const select = await screen.findByLabelText('Status');
    expect((select as HTMLSelectElement).value).toBe('all');
    expect(api.calls('listGenerations')[0]!.url.searchParams.has('status')).toBe(false);

    await userEvent.selectOptions(select, 'failed');
    const failed = lastPage().data[0]!;
    expect(await screen.findByRole('link', { name: failed.requestId })).toBeTruthy();
    expect(api.calls('listGenerations').at(-1)!.url.searchParams.get('status')).toBe('failed');
    expect(api.calls('listGenerations').at(-1)!.url.searchParams.get('limit')).toBe('20');
  });

  it('opens with the status of the address (?status=failed)', async () => {
    const { api } = renderConsole('/tasks?status=failed', { listGenerations: () => ({ body: lastPage() }) });
    expect(await screen.findByRole('link', { name: lastPage().data[0]!.requestId })).toBeTruthy();
    expect((screen.getByLabelText('Status') as HTMLSelectElement).value).toBe('failed');
    expect(api.calls('listGenerations').map((call) => call.url.searchParams.get('status'))).toEqual(['failed']);
  });

  it('pages forward with nextCursor and back again', async () => {
    const first = firstPage();
    const { api } = renderConsole('/tasks', {
      getGeneration: never,
      listGenerations: (request) => ({ body: request.url.searchParams.get('cursor') === first.nextCursor ? lastPage() : first }),
    });
    await screen.findByRole('link', { name: first.data[0]!.requestId });
    const previous = screen.getByRole('button', { name: 'Previous page' });
    expect(previous.getAttribute('aria-disabled')).toBe('true');

    await userEvent.click(screen.getByRole('button', { name: 'Next page' }));
    expect(await screen.findByRole('link', { name: lastPage().data[0]!.requestId })).toBeTruthy();
    expect(api.calls('listGenerations').at(-1)!.url.searchParams.get('cursor')).toBe(first.nextCursor);
    expect(screen.getByText('Page 2')).toBeTruthy();
    // The last page: nowhere further to go.
    expect(screen.getByRole('button', { name: 'Next page' }).getAttribute('aria-disabled')).toBe('true');

    await userEvent.click(screen.getByRole('button', { name: 'Previous page' }));
    expect(await screen.findByRole('link', { name: first.data[0]!.requestId })).toBeTruthy();
    expect(screen.getByText('Page 1')).toBeTruthy();
  });

  it('shows loading, then an empty state that links to Generate', async () => {
    const list = held();
    renderConsole('/tasks', { listGenerations: () => list.answer });
    expect(await screen.findByText('Loading tasks…')).toBeTruthy();
    list.give(page());
    expect((await screen.findByRole('link', { name: 'Generate a video' })).getAttribute('href')).toBe('/generate');
  });

  it("shows the service's error, and the list once tried again", async () => {
    let calls = 0;
    renderConsole('/tasks', {
      getGeneration: never,
      listGenerations: () => (++calls === 1 ? { status: 400, body: example('listGenerations', 400, 'malformedCursor') } : { body: firstPage() }),
    });
    expect((await screen.findByRole('alert')).textContent).toContain(example('listGenerations', 400, 'malformedCursor').error.message);
    await userEvent.click(screen.getByRole('button', { name: 'Try again' }));
    expect(await screen.findByRole('link', { name: firstPage().data[0]!.requestId })).toBeTruthy();
  });

  it('follows a queued task live with wait=30 long polls until it succeeds, then refreshes the balance', async () => {
    const queued = example<TaskWithStatus<'queued'>>('getGeneration', 200, 'queued');
    const succeeded: Task = { ...example<Task>('getGeneration', 200, 'succeeded'), requestId: queued.requestId };
    const processing: Task = { ...queued, status: 'processing', updatedAt: '2026-11-22T10:00:03.000Z' };
    const account = example<AccountSummary>('getAccount');
    let ended = false;
    const second = held();
    const answers = [Promise.resolve<Answer>({ body: processing }), second.answer];
    const { api } = renderConsole('/tasks', {
      listGenerations: () => page(queued),
      getGeneration: () => answers.shift() ?? never(),
      getAccount: () => ({ body: ended ? { ...account, balance: account.balance + 1 } : account }),
    });

    const link = await screen.findByRole('link', { name: queued.requestId });
    const row = within(link.closest('tr')!);
    expect(await row.findByText('processing')).toBeTruthy();
    ended = true;
    second.give({ body: succeeded });
    expect(await row.findByText('succeeded')).toBeTruthy();
    expect(row.queryByRole('button', { name: `Cancel ${queued.requestId}` })).toBeNull();

    const polls = api.calls('getGeneration');
    expect(polls).toHaveLength(2);
    for (const poll of polls) {
      expect(poll.url.pathname).toBe(`/api/open/v1/video/generations/${queued.requestId}`);
      expect(poll.url.searchParams.get('wait')).toBe('30');
    }
    // The task ended: its refund (or charge) is in the balance now.
    await waitFor(() => expect(screen.getByTestId('header-balance').textContent).toBe(formatCredits(account.balance + 1)));
  });

  it('cancels a running task from its row: POST …/cancel, then the list and the balance are fetched again', async () => {
    const first = firstPage();
    const running = first.data.find((task) => !isTerminal(task.status))!;
    const account = example<AccountSummary>('getAccount');
    const afterCancel: TaskList = {
      ...first,
      data: first.data.map((task) => (task.requestId === running.requestId ? { ...example<Task>('getGeneration', 200, 'cancelled'), requestId: running.requestId } : task)),
    };
    let cancelled = false;
    const { api } = renderConsole('/tasks', {
      getGeneration: never,
      listGenerations: () => ({ body: cancelled ? afterCancel : first }),
      cancelGeneration: () => {
        cancelled = true;
        return { body: { ...example<CancelGenerationResponse>('cancelGeneration'), requestId: running.requestId } };
      },
      getAccount: () => ({ body: cancelled ? { ...account, balance: account.balance + running.creditsCharged } : account }),
    });

    await userEvent.click(await screen.findByRole('button', { name: `Cancel ${running.requestId}` }));
    await waitFor(() => expect(screen.getByTestId('header-balance').textContent).toBe(formatCredits(account.balance + running.creditsCharged)));
    const [cancel] = api.calls('cancelGeneration');
    expect(cancel!.method).toBe('POST');
    expect(cancel!.url.pathname).toBe(`/api/open/v1/video/generations/${running.requestId}/cancel`);
    expect(await within(rowOf(running.requestId)).findByText('cancelled')).toBeTruthy();
    expect(screen.queryByRole('button', { name: `Cancel ${running.requestId}` })).toBeNull();
    expect(screen.getByText(`Task ${running.requestId} cancelled; its credits are refunded.`)).toBeTruthy();
  });

  it('says why a cancel was refused', async () => {
    const running = defaultList().data.find((task) => !isTerminal(task.status))!;
    renderConsole('/tasks', { getGeneration: never, cancelGeneration: () => ({ status: 409, body: example('cancelGeneration', 409) }) });
    await userEvent.click(await screen.findByRole('button', { name: `Cancel ${running.requestId}` }));
    expect((await screen.findByRole('alert')).textContent).toContain(example('cancelGeneration', 409).error.message);
  });

  it('offers no Cancel to a key without tasks:write', async () => {
    const account = example<AccountSummary>('getAccount');
    renderConsole('/tasks', { getGeneration: never, getAccount: () => ({ body: { ...account, key: { ...account.key, scopes: ['tasks:read'] } } }) });
    await screen.findByRole('link', { name: defaultList().data[0]!.requestId });
    expect(screen.queryByRole('button', { name: /^Cancel / })).toBeNull();
  });
});
