import { createClient, VidgenError } from '@vidgen/client';
import { useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { describeError } from '../ui/states';
import { queryKeys } from './queries';
import { useSession } from './session';

/**
 * Sign in by pasting an API key. The key is checked (getAccount) before it is kept, so a typo
 * or a revoked key is refused here rather than on every page.
 */
export function SignIn({ baseUrl = window.location.origin, fetch }: { baseUrl?: string; fetch?: (request: Request) => Promise<Response> }) {
  const { signIn } = useSession();
  const queryClient = useQueryClient();
  const [key, setKey] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const fieldId = useId();
  const errorId = useId();

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    const apiKey = key.trim();
    if (!/^vg_(live|test)_\S+$/.test(apiKey)) {
      setError('An API key starts with vg_live_ or vg_test_.');
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      const client = createClient({ baseUrl, apiKey, retry: false, ...(fetch ? { fetch } : {}) });
      const account = await client.account();
      signIn(apiKey);
      queryClient.setQueryData(queryKeys.account, account);
    } catch (caught) {
      setError(
        caught instanceof VidgenError && caught.status === 403
          ? 'This key cannot read the account (it lacks the tasks:read scope); the console needs a key that has it.'
          : caught instanceof VidgenError
            ? describeError(caught)
            : 'The key could not be checked.',
      );
    } finally {
      setBusy(false);
    }
  };

  return (
    <main id="main" className="sign-in">
      <h1>vidgen console</h1>
      <p>Paste an API key of your account. It is kept in this tab only and forgotten when you sign out or close the tab.</p>
      <form onSubmit={submit} noValidate>
        <label htmlFor={fieldId}>API key</label>
        <input
          id={fieldId}
          name="apiKey"
          type="password"
          autoComplete="off"
          spellCheck={false}
          placeholder="vg_live_…"
          value={key}
          onChange={(event) => setKey(event.target.value)}
          aria-invalid={error ? true : undefined}
          aria-describedby={error ? errorId : undefined}
          required
        />
        {error ? (
          <p id={errorId} className="field-error" role="alert">
            {error}
          </p>
        ) : null}
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}
