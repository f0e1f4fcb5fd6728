import type { WebhookDeliveryDetail, WebhookDeliveryList, WebhookSecret } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { errorAnswer, example, type Handler } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';

const current = example<WebhookSecret>('getWebhookSecret');
const rotated = example<WebhookSecret>('rotateWebhookSecret', 200, 'rotated');
// Named examples: the tests rely on what each holds (a pending delivery, a next page, failed attempts).
const firstPage = example<WebhookDeliveryList>('listWebhookDeliveries', 200, 'firstPage');
const detail = example<WebhookDeliveryDetail>('getWebhookDelivery', 200, 'retrying');
const [pending, delivered] = firstPage.data as [WebhookDeliveryList['data'][number], WebhookDeliveryList['data'][number]];

/** The fake API answers an operation's 200 example by default; redeliverWebhook answers 202. */
/** The spec's 202 example, for the delivery asked for. */
const redeliverAccepted: Handler = (request) => {
  const body = example('redeliverWebhook', 202);
  body.delivery.id = request.url.pathname.split('/').at(-2);
  return { status: 202, body };
};
const deliveries = {
  listWebhookDeliveries: (() => ({ body: firstPage })) satisfies Handler,
  getWebhookDelivery: (() => ({ body: detail })) satisfies Handler,
};

/** A secret that a rotation really replaces, so the refetch after it shows the new one. */
function secretService() {
  let secret = current;
  return {
    getWebhookSecret: (() => ({ body: secret })) satisfies Handler,
    rotateWebhookSecret: (() => {
      secret = rotated;
      return { body: rotated };
    }) satisfies Handler,
  };
}

const secretElement = () => screen.findByTestId('webhook-secret');

describe('the Webhooks page: the signing secret', () => {
  it('shows the secret masked until asked, and copies it either way', async () => {
    const user = userEvent.setup();
    renderConsole('/webhooks', { redeliverWebhook: redeliverAccepted });
    const secret = await secretElement();
    expect(secret.textContent).toMatch(/^whsec_•+/);
    expect(secret.textContent).not.toContain(current.secret);

    await user.click(screen.getByRole('button', { name: 'Copy secret' }));
    expect(await navigator.clipboard.readText()).toBe(current.secret);

    await user.click(screen.getByRole('button', { name: 'Show secret' }));
    expect(secret.textContent).toBe(current.secret);
    await user.click(screen.getByRole('button', { name: 'Hide secret' }));
    expect(secret.textContent).not.toContain(current.secret);
    expect(screen.getByText('Only this secret signs deliveries.')).toBeTruthy();
  });

  it('says until when the previous secret signs', async () => {
    renderConsole('/webhooks', { getWebhookSecret: () => ({ body: rotated }) });
    expect(await screen.findByText(/The previous secret also signs deliveries until/)).toBeTruthy();
  });

  it('rotates with the overlap given, once confirmed, and shows the new secret', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', secretService());
    await secretElement();
    const overlap = screen.getByLabelText('Overlap (hours)') as HTMLInputElement;
    expect(overlap.value).toBe('24');
    await user.clear(overlap);
    await user.type(overlap, '48');
    await user.click(screen.getByRole('button', { name: 'Rotate secret' }));

    const dialog = screen.getByRole('dialog', { name: 'Rotate the signing secret?' });
    expect(dialog.textContent).toMatch(/for 48 hours/);
    expect(api.calls('rotateWebhookSecret')).toHaveLength(0);
    await user.click(within(dialog).getByRole('button', { name: 'Rotate' }));

    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(api.calls('rotateWebhookSecret').map((call) => call.body)).toEqual([{ overlapHours: 48 }]);
    expect(screen.getByText(/New secret made/).getAttribute('role')).toBe('status');
    await user.click(screen.getByRole('button', { name: 'Show secret' }));
    expect((await secretElement()).textContent).toBe(rotated.secret);
    expect(screen.getByText(/The previous secret also signs deliveries until/)).toBeTruthy();
  });

  it('sends nothing when the confirm is cancelled', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', secretService());
    await secretElement();
    const rotate = screen.getByRole('button', { name: 'Rotate secret' });
    await user.click(rotate);
    await user.click(within(screen.getByRole('dialog')).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(rotate);
    expect(api.calls('rotateWebhookSecret')).toHaveLength(0);
  });

  it.each(['169', '2.5', ''])('refuses an overlap of “%s” at the field, without asking the service', async (value) => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', secretService());
    await secretElement();
    const overlap = screen.getByLabelText('Overlap (hours)');
    await user.clear(overlap);
    if (value) await user.type(overlap, value);
    await user.click(screen.getByRole('button', { name: 'Rotate secret' }));
    expect(overlap.getAttribute('aria-invalid')).toBe('true');
    const message = document.getElementById(overlap.getAttribute('aria-describedby')!.split(' ').at(-1)!)!;
    expect(message.textContent).toMatch(/from 0 to 168/);
    expect(document.activeElement).toBe(overlap);
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(api.calls('rotateWebhookSecret')).toHaveLength(0);
  });
});

describe('the Webhooks page: deliveries', () => {
  it('lists the deliveries with their task, status, attempts and last attempt', async () => {
    renderConsole('/webhooks', deliveries);
    const link = await screen.findByRole('link', { name: pending.requestId });
    expect(link.getAttribute('href')).toBe(`/tasks/${pending.requestId}`);
    const row = link.closest('tr')!;
    expect(within(row).getByText(pending.eventType)).toBeTruthy();
    expect(within(row).getByText(pending.status)).toBeTruthy();
    expect(within(row).getByText(String(pending.attempts))).toBeTruthy();
    expect(screen.getByRole('link', { name: delivered.requestId })).toBeTruthy();
  });

  it('filters by status and follows the cursors back and forth', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', {
      listWebhookDeliveries: (request) =>
        request.url.searchParams.get('cursor') ? { body: { success: true, data: [delivered], nextCursor: null } } : { body: { ...firstPage, data: [pending] } },
    });
    await screen.findByRole('link', { name: pending.requestId });
    const query = () => Object.fromEntries(api.calls('listWebhookDeliveries').at(-1)!.url.searchParams);
    expect(query()).toEqual({});

    await user.selectOptions(screen.getByLabelText('Status'), 'failed');
    await waitFor(() => expect(query()).toEqual({ status: 'failed' }));
    expect(screen.getByRole('button', { name: 'Previous page' }).getAttribute('aria-disabled')).toBe('true');

    await user.click(screen.getByRole('button', { name: 'Next page' }));
    await waitFor(() => expect(query()).toEqual({ status: 'failed', cursor: firstPage.nextCursor }));
    expect(await screen.findByRole('link', { name: delivered.requestId })).toBeTruthy();
    expect(screen.getByText('Page 2')).toBeTruthy();
    expect(screen.getByRole('button', { name: 'Next page' }).getAttribute('aria-disabled')).toBe('true');

    await user.click(screen.getByRole('button', { name: 'Previous page' }));
    expect(await screen.findByRole('link', { name: pending.requestId })).toBeTruthy();
    expect(screen.getByText('Page 1')).toBeTruthy();

    // A new filter starts again from the first page: a cursor belongs to the filters it was issued for.
    await user.click(screen.getByRole('button', { name: 'Next page' }));
    expect(await screen.findByText('Page 2')).toBeTruthy();
    await user.selectOptions(screen.getByLabelText('Status'), 'delivered');
    await waitFor(() => expect(query()).toEqual({ status: 'delivered' }));
    expect(screen.getByText('Page 1')).toBeTruthy();
  });

  it('shows a delivery’s attempts on demand', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', deliveries);
    const toggle = await screen.findByRole('button', { name: `Details ${pending.id}` });
    expect(toggle.getAttribute('aria-expanded')).toBe('false');
    await user.click(toggle);
    expect(toggle.getAttribute('aria-expanded')).toBe('true');

    const attempts = await screen.findByRole('table', { name: `Attempts of delivery ${pending.id}` });
    expect(api.calls('getWebhookDelivery')[0]!.url.pathname).toBe(`/api/open/v1/account/webhooks/deliveries/${pending.id}`);
    expect(within(attempts).getAllByRole('row')).toHaveLength(detail.attemptHistory.length + 1);
    expect(within(attempts).getByText('503')).toBeTruthy();
    expect(within(attempts).getByText('timed out after 15000 ms')).toBeTruthy();
    expect(within(attempts).getByText('no answer')).toBeTruthy();
    expect(document.getElementById(toggle.getAttribute('aria-controls')!)!.contains(attempts)).toBe(true);

    await user.click(toggle);
    expect(screen.queryByRole('table', { name: `Attempts of delivery ${pending.id}` })).toBeNull();
  });

  it('sends a delivery again', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/webhooks', { ...deliveries, redeliverWebhook: redeliverAccepted });
    await user.click(await screen.findByRole('button', { name: `Redeliver ${pending.id}` }));
    expect(await screen.findByText(new RegExp(`Delivery ${pending.id} will be sent again`))).toBeTruthy();
    expect(api.calls('redeliverWebhook').map((call) => [call.method, call.url.pathname])).toEqual([
      ['POST', `/api/open/v1/account/webhooks/deliveries/${pending.id}/redeliver`],
    ]);
    // The list is read again, to show the delivery pending.
    await waitFor(() => expect(api.calls('listWebhookDeliveries').length).toBeGreaterThan(1));
  });

  it('says when there are no deliveries', async () => {
    renderConsole('/webhooks', { listWebhookDeliveries: () => ({ body: { success: true, data: [], nextCursor: null } }) });
    expect(await screen.findByText(/No deliveries yet/)).toBeTruthy();
  });

  it('says when the deliveries cannot be listed', async () => {
    renderConsole('/webhooks', { listWebhookDeliveries: () => errorAnswer(400, 'invalid_request', 'cursor is not a cursor this service issued') });
    expect((await screen.findByRole('alert')).textContent).toMatch(/not a cursor this service issued/);
  });
});
