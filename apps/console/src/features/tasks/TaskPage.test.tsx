import type { AccountSummary, LedgerEntryList, Task, WebhookDeliveryDetail, WebhookDeliveryList } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { errorAnswer, example, type Answer } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';
import { formatCredits } from '../../ui/format';
import { LEDGER_LABELS } from './labels';

const task = (name: 'queued' | 'processing' | 'succeeded' | 'failed' | 'cancelled') => example<Task>('getGeneration', 200, name);
/** A long poll that never ends (the test is over before it would). */
const never = () => new Promise<Answer>(() => {});
/** The task at first; long polls (wait=…) never answer. */
const only = (answer: Task) => (request: { url: URL }) => (request.url.searchParams.has('wait') ? never() : { body: answer });

describe('the Task page', () => {
  it('shows a succeeded task: heading, status, video player, Download link and every field', async () => {
    const succeeded = task('succeeded');
    if (succeeded.status !== 'succeeded') throw new Error('the example is not a succeeded task');
    // The example's first ledger entry, as this task's.
    const ledger = example<LedgerEntryList>('listLedgerEntries');
    const entry = { ...ledger.data[0]!, requestId: succeeded.requestId };
    const { container, api } = renderConsole(`/tasks/${succeeded.requestId}`, {
      getGeneration: only(succeeded),
      listLedgerEntries: () => ({ body: { ...ledger, data: [entry], nextCursor: null } }),
    });

    expect(await screen.findByRole('heading', { level: 1, name: succeeded.requestId })).toBeTruthy();
    expect((await screen.findAllByText('succeeded')).length).toBeGreaterThan(0);
    const video = container.querySelector('video')!;
    expect(video.getAttribute('src')).toBe(succeeded.output.url);
    expect(video.hasAttribute('controls')).toBe(true);
    expect(video.getAttribute('preload')).toBe('metadata');
    const download = screen.getByRole('link', { name: 'Download' });
    expect(download.getAttribute('href')).toBe(succeeded.output.url);
    expect(download.hasAttribute('download')).toBe(true);

    const fields = container.querySelector('dl.fields')!;
    const field = (term: string) => [...fields.querySelectorAll('dt')].find((dt) => dt.textContent === term)?.nextElementSibling?.textContent;
    expect(field('Model')).toBe(succeeded.model);
    expect(field('Prompt')).toBe(succeeded.prompt);
    expect(field('Mode')).toContain(succeeded.mode);
    expect(field('Duration')).toBe(`${succeeded.duration} s`);
    expect(field('Resolution')).toBe(succeeded.resolution);
    expect(field('Aspect ratio')).toBe(succeeded.aspectRatio);
    expect(JSON.parse(fields.querySelector('pre')!.textContent!)).toEqual(succeeded.metadata);
    expect(field('Credits charged')).toBe(formatCredits(succeeded.creditsCharged));
    expect(field('Output')).toContain(succeeded.output.url);
    // No cancelling what has ended.
    expect(screen.queryByRole('button', { name: 'Cancel task' })).toBeNull();

    // The timeline: accepted, its ledger entry, succeeded.
    const timeline = (await screen.findByRole('region', { name: 'Timeline' })).querySelector('ol')!;
    await waitFor(() => expect(timeline.textContent).toContain(`${LEDGER_LABELS[entry.kind]} ${formatCredits(Math.abs(entry.amount))}`));
    expect(timeline.textContent).toContain('Accepted and queued');
    expect(timeline.textContent).toContain('Succeeded');
    expect(api.calls('listLedgerEntries')[0]!.url.searchParams.get('requestId')).toBe(succeeded.requestId);
  });

  it('shows why a failed task failed, and no player', async () => {
    const failed = task('failed');
    if (failed.status !== 'failed') throw new Error('the example is not a failed task');
    const { container } = renderConsole(`/tasks/${failed.requestId}`, { getGeneration: only(failed) });
    expect(await screen.findByText(`Failed: ${failed.error.message}`)).toBeTruthy();
    expect(container.querySelector('video')).toBeNull();
    expect(screen.queryByRole('link', { name: 'Download' })).toBeNull();
    expect(screen.getAllByText(failed.error.code).length).toBeGreaterThan(0);
  });

  it('says "No such task" for an id the service does not know, with a way back', async () => {
    renderConsole('/tasks/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { getGeneration: () => ({ status: 404, body: example('getGeneration', 404) }) });
    expect(await screen.findByRole('heading', { level: 1, name: 'No such task' })).toBeTruthy();
    expect(screen.getByRole('link', { name: 'Back to tasks' }).getAttribute('href')).toBe('/tasks');
  });

  it('shows loading, then any other error with a retry', async () => {
    const queued = task('queued');
    let calls = 0;
    renderConsole(`/tasks/${queued.requestId}`, {
      getGeneration: async (request) => {
        if (request.url.searchParams.has('wait')) return never();
        calls += 1;
        if (calls === 1) {
          await new Promise((resolve) => setTimeout(resolve, 50));
          return errorAnswer(403, 'forbidden', 'this API key lacks the tasks:read scope');
        }
        return { body: queued };
      },
    });
    expect(await screen.findByText('Loading the task…')).toBeTruthy();
    expect((await screen.findByRole('alert')).textContent).toContain('lacks the tasks:read scope');
    await userEvent.click(screen.getByRole('button', { name: 'Try again' }));
    expect(await screen.findByRole('button', { name: 'Cancel task' })).toBeTruthy();
  });

  it('follows the task live: a queued task becomes succeeded and its player appears, with wait=30 polls', async () => {
    const queued = task('queued');
    const succeeded: Task = { ...task('succeeded'), requestId: queued.requestId };
    const { container, api } = renderConsole(`/tasks/${queued.requestId}`, {
      getGeneration: (request) => ({ body: request.url.searchParams.has('wait') ? succeeded : queued }),
    });
    expect(await screen.findByRole('button', { name: 'Cancel task' })).toBeTruthy();
    expect(await screen.findByRole('link', { name: 'Download' })).toBeTruthy();
    expect(container.querySelector('video')).not.toBeNull();
    expect(screen.queryByRole('button', { name: 'Cancel task' })).toBeNull();
    const polls = api.calls('getGeneration').filter((call) => call.url.searchParams.has('wait'));
    expect(polls.map((call) => call.url.searchParams.get('wait'))).toEqual(['30']);
  });

  it('cancels the task: POST …/cancel, then the task and the balance are fetched again', async () => {
    const queued = task('queued');
    const account = example<AccountSummary>('getAccount');
    let cancelled = false;
    const { api } = renderConsole(`/tasks/${queued.requestId}`, {
      getGeneration: (request) =>
        request.url.searchParams.has('wait') ? never() : { body: cancelled ? { ...task('cancelled'), requestId: queued.requestId } : queued },
      cancelGeneration: () => {
        cancelled = true;
        return { body: example('cancelGeneration') };
      },
      getAccount: () => ({ body: cancelled ? { ...account, balance: account.balance + queued.creditsCharged } : account }),
    });

    await userEvent.click(await screen.findByRole('button', { name: 'Cancel task' }));
    await waitFor(() => expect(screen.getByTestId('header-balance').textContent).toBe(formatCredits(account.balance + queued.creditsCharged)));
    expect(api.calls('cancelGeneration').map((call) => [call.method, call.url.pathname])).toEqual([['POST', `/api/open/v1/video/generations/${queued.requestId}/cancel`]]);
    expect(await screen.findByText('Task cancelled; its credits are refunded.')).toBeTruthy();
    await waitFor(() => expect(screen.queryByRole('button', { name: 'Cancel task' })).toBeNull());
    expect(screen.getAllByText('cancelled').length).toBeGreaterThan(0);
  });

  it('lists the webhook deliveries of the task with every attempt, and redelivers one', async () => {
    // The delivery example, and a task (an ended one) that it is the delivery of.
    const detail = example<WebhookDeliveryDetail>('getWebhookDelivery');
    const { success: _success, attemptHistory: _attempts, ...delivery } = detail;
    const failed: Task = { ...task('failed'), requestId: detail.requestId };
    const { api } = renderConsole(`/tasks/${failed.requestId}`, {
      getGeneration: only(failed),
      listWebhookDeliveries: () => ({ body: { success: true, data: [delivery], nextCursor: null } satisfies WebhookDeliveryList }),
      // The fake answers 200 by default; this operation answers 202.
      redeliverWebhook: () => ({ status: 202, body: example('redeliverWebhook', 202) }),
    });

    const section = await screen.findByRole('region', { name: 'Webhook deliveries' });
    const card = await within(section).findByRole('article', { name: `Delivery ${detail.id}` });
    const attempts = await within(card).findByRole('table', { name: /^Attempts of delivery/ });
    const rows = within(attempts).getAllByRole('row').slice(1);
    expect(rows).toHaveLength(detail.attemptHistory.length);
    detail.attemptHistory.forEach((attempt, i) => {
      const cells = within(rows[i]!).getAllByRole('cell').map((cell) => cell.textContent);
      expect(cells[1]).toBe(attempt.statusCode === null ? 'No answer' : String(attempt.statusCode));
      expect(cells[2]).toBe(`${attempt.durationMs} ms`);
      expect(cells[3]).toBe(attempt.error ?? '—');
    });
    // The attempts are in the timeline too.
    const timeline = screen.getByRole('region', { name: 'Timeline' });
    expect(within(timeline).getAllByText(/^Webhook attempt \d/)).toHaveLength(detail.attemptHistory.length);
    // The list was asked for this task's deliveries only.
    expect(api.calls('listWebhookDeliveries')[0]!.url.searchParams.get('requestId')).toBe(failed.requestId);

    const detailsBefore = api.calls('getWebhookDelivery').length;
    await userEvent.click(within(card).getByRole('button', { name: 'Redeliver' }));
    expect(await within(card).findByText(/^Redelivery scheduled/)).toBeTruthy();
    expect(api.calls('redeliverWebhook').map((call) => [call.method, call.url.pathname])).toEqual([
      ['POST', `/api/open/v1/account/webhooks/deliveries/${detail.id}/redeliver`],
    ]);
    // Then the delivery is read again, to show the attempt to come.
    await waitFor(() => expect(api.calls('getWebhookDelivery').length).toBeGreaterThan(detailsBefore));
  });

  it('says when the task has no webhook delivery', async () => {
    const succeeded = task('succeeded');
    renderConsole(`/tasks/${succeeded.requestId}`, {
      getGeneration: only(succeeded),
      listWebhookDeliveries: () => ({ body: { success: true, data: [], nextCursor: null } satisfies WebhookDeliveryList }),
    });
    expect(await screen.findByText(/^No webhook deliveries for this task/)).toBeTruthy();
  });

  it('shows no webhook section, and asks for no delivery, for a key without webhooks:manage', async () => {
    const queued = task('queued');
    const account = example<AccountSummary>('getAccount');
    const { api } = renderConsole(`/tasks/${queued.requestId}`, {
      getAccount: () => ({ body: { ...account, key: { ...account.key, scopes: ['tasks:read'] } } }),
      getGeneration: only(queued),
      listLedgerEntries: () => ({ body: { success: true, data: [], nextCursor: null } satisfies LedgerEntryList }),
    });
    expect(await screen.findByRole('heading', { level: 1, name: queued.requestId })).toBeTruthy();
    await screen.findByRole('region', { name: 'Timeline' });
    expect(screen.queryByRole('region', { name: 'Webhook deliveries' })).toBeNull();
    // Nor a Cancel task button: the key cannot write.
    expect(screen.queryByRole('button', { name: 'Cancel task' })).toBeNull();
    expect(api.calls('listWebhookDeliveries')).toHaveLength(0);
    expect(api.calls('getWebhookDelivery')).toHaveLength(0);
  });
});
