import type { Scope } from '@vidgen/client';
import type { ReactNode } from 'react';
import { ErrorNotice, Loading, MissingScope } from '../ui/states';
import { useAccount } from './queries';

/** Renders a page only for a key with the scope it needs; says so otherwise. */
export function RequireScope({ scope, children }: { scope: Scope; children: ReactNode }) {
  const account = useAccount();
  if (account.error) return <ErrorNotice error={account.error} retry={() => void account.refetch()} />;
  if (!account.data) return <Loading />;
  return account.data.key.scopes.includes(scope) ? <>{children}</> : <MissingScope scope={scope} />;
}
