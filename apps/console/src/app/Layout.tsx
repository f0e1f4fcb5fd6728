import type { Scope } from '@vidgen/client';
import { NavLink, Outlet } from 'react-router';
import { formatCredits } from '../ui/format';
import { useAccount, useScopes } from './queries';
import { useSession } from './session';

/** The pages, in the navigation's order, with the scope each needs to appear. */
const NAVIGATION: { to: string; label: string; scope: Scope; end?: boolean }[] = [
  { to: '/', label: 'Overview', scope: 'tasks:read', end: true },
  { to: '/generate', label: 'Generate', scope: 'tasks:write' },
  { to: '/tasks', label: 'Tasks', scope: 'tasks:read' },
  { to: '/keys', label: 'Keys', scope: 'keys:manage' },
  { to: '/webhooks', label: 'Webhooks', scope: 'webhooks:manage' },
];

export function Layout() {
  const { signOut } = useSession();
  const account = useAccount();
  const scopes = useScopes();
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="app-header">
        <span className="brand">vidgen</span>
        <nav aria-label="Main">
          <ul>
            {NAVIGATION.filter((item) => scopes.has(item.scope)).map((item) => (
              <li key={item.to}>
                <NavLink to={item.to} end={item.end ?? false}>
                  {item.label}
                </NavLink>
              </li>
            ))}
          </ul>
        </nav>
        <div className="account">
          {account.data ? (
            <span className="account-name" title={account.data.id}>
              {account.data.name} · <span data-testid="header-balance">{formatCredits(account.data.balance)}</span>
            </span>
          ) : null}
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <Outlet />
      </main>
    </>
  );
}
