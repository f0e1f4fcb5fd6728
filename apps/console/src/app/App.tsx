import { VidgenError } from '@vidgen/client';
import { QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { createBrowserRouter, createMemoryRouter, RouterProvider } from 'react-router';
import { routes } from './routes';
import { SessionProvider, useSession } from './session';
import { SignIn } from './SignIn';

export interface AppProps {
  /** Tests: the API's origin and a fetch to answer it; a memory router at this path. */
  baseUrl?: string;
  fetch?: (request: Request) => Promise<Response>;
  initialPath?: string;
}

function newQueryClient(onUnauthorized: () => void): QueryClient {
  return new QueryClient({
    // A key revoked or expired while signed in: back to the sign-in form.
    queryCache: new QueryCache({ onError: (error) => error instanceof VidgenError && error.status === 401 && onUnauthorized() }),
    defaultOptions: {
      queries: {
        // The client already retries what is safe to retry (429, 5xx, network) with backoff.
        retry: false,
        refetchOnWindowFocus: true,
        staleTime: 5_000,
      },
    },
  });
}

function Routed({ baseUrl, fetch, initialPath }: AppProps) {
  const { client } = useSession();
  const router = useMemo(
    () => (initialPath === undefined ? createBrowserRouter(routes, { basename: '/console' }) : createMemoryRouter(routes, { initialEntries: [initialPath] })),
    [initialPath],
  );
  if (!client) return <SignIn {...(baseUrl ? { baseUrl } : {})} {...(fetch ? { fetch } : {})} />;
  return <RouterProvider router={router} />;
}

export function App(props: AppProps) {
  const [signOutRef] = useState<{ current?: () => void }>({});
  const [queryClient] = useState(() => newQueryClient(() => signOutRef.current?.()));
  return (
    <QueryClientProvider client={queryClient}>
      <SessionProvider {...(props.baseUrl ? { baseUrl: props.baseUrl } : {})} {...(props.fetch ? { fetch: props.fetch } : {})} onChange={() => queryClient.clear()}>
        <SignOutBridge target={signOutRef} />
        <Routed {...props} />
      </SessionProvider>
    </QueryClientProvider>
  );
}

/** Lets the query cache (made outside the session) sign out on a 401. */
function SignOutBridge({ target }: { target: { current?: () => void } }) {
  const { signOut } = useSession();
  target.current = signOut;
  return null;
}
