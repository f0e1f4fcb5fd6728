/**
 * The signed-in key. It lives in sessionStorage only (gone when the tab closes, never in
 * localStorage, a cookie or a URL), and every API call goes through one client made from it.
 */
import { createClient, type VidgenClient } from '@vidgen/client';
import { createContext, useCallback, useContext, useMemo, useState, type ReactNode } from 'react';

export const KEY_STORAGE_ITEM = 'vidgen.console.apiKey';

export interface Session {
  client: VidgenClient | undefined;
  signIn(apiKey: string): void;
  signOut(): void;
}

const SessionContext = createContext<Session | undefined>(undefined);

function readStoredKey(): string | undefined {
  try {
    return sessionStorage.getItem(KEY_STORAGE_ITEM) ?? undefined;
  } catch {
    return undefined;
  }
}

export interface SessionProviderProps {
  children: ReactNode;
  /** Where the API is; the page's own origin unless a test says otherwise. */
  baseUrl?: string;
  /** A fetch for tests; the browser's otherwise. */
  fetch?: (request: Request) => Promise<Response>;
  /** Called when the key changes, so cached answers of another key are dropped. */
  onChange?: () => void;
}

export function SessionProvider({ children, baseUrl = window.location.origin, fetch, onChange }: SessionProviderProps) {
  const [apiKey, setApiKey] = useState(readStoredKey);
  const client = useMemo(
    // The browser retries nothing on its own; the client's retries cover 429 and 5xx, with the
    // Idempotency-Key a submit carries, so a retried submit never charges twice.
    () => (apiKey ? createClient({ baseUrl, apiKey, ...(fetch ? { fetch } : {}) }) : undefined),
    [apiKey, baseUrl, fetch],
  );
  const signIn = useCallback(
    (key: string) => {
      sessionStorage.setItem(KEY_STORAGE_ITEM, key);
      setApiKey(key);
      onChange?.();
    },
    [onChange],
  );
  const signOut = useCallback(() => {
    sessionStorage.removeItem(KEY_STORAGE_ITEM);
    setApiKey(undefined);
    onChange?.();
  }, [onChange]);
  const session = useMemo(() => ({ client, signIn, signOut }), [client, signIn, signOut]);
  return <SessionContext.Provider value={session}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside <SessionProvider>');
  return session;
}

/** The signed-in client; the pages that call it are only rendered once a key is set. */
export function useClient(): VidgenClient {
  const { client } = useSession();
  if (!client) throw new Error('useClient without a signed-in key');
  return client;
}
