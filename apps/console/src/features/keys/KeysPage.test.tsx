import type { AccountSummary, ApiKeyList, CreatedApiKey, RevokeApiKeyResponse } from '@vidgen/client';
import { screen, waitFor, within } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { errorAnswer, example, type Handler } from '../../../test/support/fake-api';
import { renderConsole } from '../../../test/support/render';

const listed = example<ApiKeyList>('listApiKeys');
const caller = example<AccountSummary>('getAccount').key;
const created = example<CreatedApiKey>('createApiKey', 201);
const revoked = example<RevokeApiKeyResponse>('revokeApiKey').key;
const other = listed.data.find((key) => key.id !== caller.id && !key.revokedAt)!;

/** The fake API answers an operation's 200 example by default; createApiKey answers 201. */
const issue: Handler = () => ({ status: 201, body: created });

/** Lists the keys as they stand, so a refetch after a revoke shows it as the service would. */
function keysService() {
  let data = structuredClone(listed.data);
  return {
    listApiKeys: (() => ({ body: { success: true, data } })) satisfies Handler,
    revokeApiKey: ((request) => {
      const id = request.url.pathname.split('/').at(-2);
      data = data.map((key) => (key.id === id ? { ...key, revokedAt: revoked.revokedAt } : key));
      return { body: { success: true, key: data.find((key) => key.id === id) } };
    }) satisfies Handler,
  };
}

const rowOf = (text: string) => screen.getByText(text).closest('tr')!;

describe('the Keys page', () => {
  it('lists the account’s keys, marks the key in use and offers no revoke for it', async () => {
    renderConsole('/keys', { createApiKey: issue });
    expect(await screen.findByText(other.name!)).toBeTruthy();
    expect(screen.getAllByRole('row')).toHaveLength(listed.data.length + 1);
    for (const key of listed.data) expect(screen.getByText(key.hint)).toBeTruthy();

    const current = rowOf(caller.name!);
    expect(within(current).getByText('This key')).toBeTruthy();
    expect(within(current).queryByRole('button')).toBeNull();
    expect(screen.queryByRole('button', { name: `Revoke ${caller.name}` })).toBeNull();

    expect(screen.getByRole('button', { name: `Revoke ${other.name}` })).toBeTruthy();
    // A revoked key (this one has no name: its hint stands in) is shown as such, with nothing to revoke.
    const gone = listed.data.find((key) => key.revokedAt)!;
    expect(within(rowOf(gone.hint)).getByText(/Revoked/)).toBeTruthy();
    expect(screen.queryByRole('button', { name: `Revoke ${gone.name ?? gone.hint}` })).toBeNull();
  });

  it('offers the signed-in key’s scopes, creates a key with the name and scopes chosen, and shows it once', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/keys', { createApiKey: issue });
    await screen.findByLabelText('Name');
    const boxes = screen.getAllByRole('checkbox');
    expect(boxes.map((box) => (box as HTMLInputElement).labels?.[0]?.textContent)).toEqual(caller.scopes);
    expect(boxes.every((box) => !(box as HTMLInputElement).checked)).toBe(true);

    await user.type(screen.getByLabelText('Name'), 'Dashboard (read-only)');
    await user.click(screen.getByLabelText('tasks:read'));
    await user.type(screen.getByLabelText('Expires in days'), '90');
    await user.click(screen.getByRole('button', { name: 'Create key' }));

    const panel = await screen.findByRole('region', { name: 'New key' });
    expect(api.calls('createApiKey')[0]!.body).toEqual({ name: 'Dashboard (read-only)', scopes: ['tasks:read'], expiresInDays: 90 });
    expect(within(panel).getByTestId('new-key').textContent).toBe(created.key);
    expect(panel.textContent).toMatch(/It will not be shown again/);
    expect(document.activeElement).toBe(panel);

    await user.click(within(panel).getByRole('button', { name: 'Copy key' }));
    expect(await navigator.clipboard.readText()).toBe(created.key);
    // Nowhere but on screen: not in storage, not in the URL.
    expect(JSON.stringify({ ...sessionStorage })).not.toContain(created.key);
    expect(localStorage.length).toBe(0);
    expect(window.location.href).not.toContain(created.key);
    await waitFor(() => expect(api.calls('listApiKeys').length).toBeGreaterThan(1));

    await user.click(within(panel).getByRole('button', { name: 'Done' }));
    expect(screen.queryByRole('region', { name: 'New key' })).toBeNull();
    expect(document.body.textContent).not.toContain(created.key);
  });

  it('asks for at least one scope and a whole number of days before sending anything', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/keys', { createApiKey: issue });
    await user.type(await screen.findByLabelText('Name'), 'CI');
    await user.type(screen.getByLabelText('Expires in days'), '0');
    await user.click(screen.getByRole('button', { name: 'Create key' }));
    expect(screen.getByText('Choose at least one scope.')).toBeTruthy();
    expect(screen.getByLabelText('Expires in days').getAttribute('aria-invalid')).toBe('true');
    expect(api.calls('createApiKey')).toHaveLength(0);
  });

  it('shows why the service refused to create a key', async () => {
    const user = userEvent.setup();
    renderConsole('/keys', { createApiKey: () => ({ status: 403, body: example('createApiKey', 403, 'widerScopes') }) });
    await user.click(await screen.findByLabelText('tasks:write'));
    await user.click(screen.getByRole('button', { name: 'Create key' }));
    const alert = await screen.findByRole('alert');
    expect(alert.textContent).toMatch(/cannot issue a key with scopes it lacks/);
    expect(alert.textContent).toContain('/scopes/1');
    expect(screen.queryByRole('region', { name: 'New key' })).toBeNull();
  });

  it('revokes a key only once confirmed, and then shows it revoked', async () => {
    const user = userEvent.setup();
    const { api } = renderConsole('/keys', keysService());
    const button = await screen.findByRole('button', { name: `Revoke ${other.name}` });

    await user.click(button);
    let dialog = screen.getByRole('dialog', { name: `Revoke ${other.name}?` });
    await user.click(within(dialog).getByRole('button', { name: 'Cancel' }));
    expect(screen.queryByRole('dialog')).toBeNull();
    expect(document.activeElement).toBe(button);
    expect(api.calls('revokeApiKey')).toHaveLength(0);

    await user.click(button);
    dialog = screen.getByRole('dialog', { name: `Revoke ${other.name}?` });
    await user.click(within(dialog).getByRole('button', { name: 'Revoke key' }));
    await waitFor(() => expect(screen.queryByRole('dialog')).toBeNull());
    expect(api.calls('revokeApiKey').map((call) => call.url.pathname)).toEqual([`/api/open/v1/account/keys/${other.id}/revoke`]);
    expect(within(rowOf(other.name!)).getByText(/Revoked/)).toBeTruthy();
    expect(screen.queryByRole('button', { name: `Revoke ${other.name}` })).toBeNull();
    expect(screen.getByRole('status').textContent).toMatch(/is revoked/);
  });

  it('shows a refused revoke in the confirm', async () => {
    const user = userEvent.setup();
    renderConsole('/keys', { revokeApiKey: () => errorAnswer(404, 'not_found', 'no such API key') });
    await user.click(await screen.findByRole('button', { name: `Revoke ${other.name}` }));
    await user.click(screen.getByRole('button', { name: 'Revoke key' }));
    const dialog = screen.getByRole('dialog');
    expect((await within(dialog).findByRole('alert')).textContent).toMatch(/no such API key/);
  });

  it('says so when the keys cannot be listed', async () => {
    renderConsole('/keys', { listApiKeys: () => errorAnswer(403, 'forbidden', 'this API key lacks the keys:manage scope') });
    expect((await screen.findByRole('alert')).textContent).toMatch(/lacks the keys:manage scope/);
    expect(screen.getByRole('button', { name: 'Try again' })).toBeTruthy();
  });
});
