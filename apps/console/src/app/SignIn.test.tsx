import { screen, waitFor } from '@testing-library/react';
import userEvent from '@testing-library/user-event';
import { describe, expect, it } from 'vitest';
import { errorAnswer } from '../../test/support/fake-api';
import { renderConsole, TEST_KEY } from '../../test/support/render';
import { KEY_STORAGE_ITEM } from './session';

describe('signing in', () => {
  it('checks the pasted key, keeps it in sessionStorage only, and shows the pages its scopes allow', async () => {
    const { api } = renderConsole('/', {}, { signedIn: false });
    await userEvent.click(screen.getByLabelText('API key'));
    await userEvent.paste(TEST_KEY);
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect(await screen.findByRole('navigation', { name: 'Main' })).toBeTruthy();
    expect(sessionStorage.getItem(KEY_STORAGE_ITEM)).toBe(TEST_KEY);
    expect(localStorage.length).toBe(0);
    expect(api.calls('getAccount')[0]!.headers.get('Authorization')).toBe(`Bearer ${TEST_KEY}`);
    expect(window.location.href).not.toContain(TEST_KEY);
  });

  it('refuses a key the service does not know, and keeps nothing', async () => {
    renderConsole('/', { getAccount: () => errorAnswer(401, 'unauthorized', 'the API key is not valid') }, { signedIn: false });
    await userEvent.click(screen.getByLabelText('API key'));
    await userEvent.paste(TEST_KEY);
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect((await screen.findByRole('alert')).textContent).toMatch(/not valid/);
    expect(sessionStorage.getItem(KEY_STORAGE_ITEM)).toBeNull();
  });

  it('says what a key looks like before asking the service', async () => {
    const { api } = renderConsole('/', {}, { signedIn: false });
    await userEvent.type(screen.getByLabelText('API key'), 'not-a-key');
    await userEvent.click(screen.getByRole('button', { name: 'Sign in' }));
    expect((await screen.findByRole('alert')).textContent).toMatch(/vg_live_ or vg_test_/);
    expect(api.requests).toHaveLength(0);
  });

  it('signs out: the key is forgotten and the form is back', async () => {
    renderConsole('/');
    await userEvent.click(await screen.findByRole('button', { name: 'Sign out' }));
    expect(await screen.findByLabelText('API key')).toBeTruthy();
    expect(sessionStorage.getItem(KEY_STORAGE_ITEM)).toBeNull();
  });

  it('goes back to the sign-in form when the key stops working', async () => {
    renderConsole('/', { getAccount: () => errorAnswer(401, 'unauthorized', 'the API key has been revoked') });
    await waitFor(() => expect(screen.getByLabelText('API key')).toBeTruthy());
    expect(sessionStorage.getItem(KEY_STORAGE_ITEM)).toBeNull();
  });
});
