/** The states every page has besides its data: loading, empty, failed, not allowed. */
import { VidgenError, type Scope } from '@vidgen/client';
import type { ReactNode } from 'react';

export function Loading({ label = 'Loading…' }: { label?: string }) {
  return (
    <p className="state state-loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" /> {label}
    </p>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <p className="state state-empty">{children}</p>;
}

/** What went wrong, in the service's words, with the correlation id to quote to support. */
export function ErrorNotice({ error, retry }: { error: unknown; retry?: () => void }) {
  const known = error instanceof VidgenError ? error : undefined;
  return (
    <div className="state state-error" role="alert">
      <p>
        <strong>{known ? describeError(known) : 'Something went wrong.'}</strong>
      </p>
      {known?.details?.length ? (
        <ul>
          {known.details.map((detail, i) => (
            <li key={i}>
              {detail.field ? <code>{detail.field}</code> : null} {detail.message}
            </li>
          ))}
        </ul>
      ) : null}
      {known?.correlationId ? (
        <p className="muted">
          Correlation id: <code>{known.correlationId}</code>
        </p>
      ) : null}
      {retry ? (
        <button type="button" onClick={retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

export function describeError(error: VidgenError): string {
  if (error.code === 'network_error') return 'The service could not be reached. Check your connection and try again.';
  if (error.status === 401) return 'This API key is not valid (it may have been revoked or have expired).';
  return error.message;
}

export function MissingScope({ scope }: { scope: Scope }) {
  return (
    <div className="state state-error" role="note">
      <p>
        This key does not have the <code>{scope}</code> scope. Sign in with a key that has it to use this page.
      </p>
    </div>
  );
}
