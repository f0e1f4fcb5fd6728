import type { ApiKey } from '@vidgen/client';
import { formatTime } from '../../ui/format';

/** How a key is named in the page: its name, or its hint when it has none. */
export const keyLabel = (key: Pick<ApiKey, 'name' | 'hint'>) => key.name ?? key.hint;

function Time({ iso }: { iso: string }) {
  return <time dateTime={iso}>{formatTime(iso)}</time>;
}

function KeyStatus({ apiKey, now }: { apiKey: ApiKey; now: number }) {
  if (apiKey.revokedAt)
    return (
      <span className="key-status key-revoked">
        Revoked <Time iso={apiKey.revokedAt} />
      </span>
    );
  if (apiKey.expiresAt && new Date(apiKey.expiresAt).getTime() <= now) return <span className="key-status key-expired">Expired</span>;
  return <span className="key-status key-active">Active</span>;
}

/**
 * The keys, newest first as the service lists them. The key in use is marked and has no revoke
 * button: the service refuses a key revoking itself, so the account is never locked out by mistake.
 */
export function KeyTable({ keys, currentKeyId, onRevoke }: { keys: ApiKey[]; currentKeyId: string | undefined; onRevoke: (key: ApiKey) => void }) {
  const now = Date.now();
  return (
    <div className="table-wrap">
      <table className="stacked keys-table" aria-labelledby="keys-list-heading">
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col">Mode</th>
            <th scope="col">Scopes</th>
            <th scope="col">Created</th>
            <th scope="col">Expires</th>
            <th scope="col">Status</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {keys.map((key) => {
            const current = key.id === currentKeyId;
            return (
              <tr key={key.id} className={key.revokedAt ? 'key-row-revoked' : undefined}>
                <td data-label="Name">
                  {key.name ?? <span className="muted">No name</span>}
                  {current ? <span className="badge badge-this-key">This key</span> : null}
                </td>
                <td data-label="Key">
                  <code>{key.hint}</code>
                </td>
                <td data-label="Mode">{key.mode}</td>
                <td data-label="Scopes">
                  <ul className="scope-list">
                    {key.scopes.map((scope) => (
                      <li key={scope}>
                        <code>{scope}</code>
                      </li>
                    ))}
                  </ul>
                </td>
                <td data-label="Created">
                  <Time iso={key.createdAt} />
                </td>
                <td data-label="Expires">{key.expiresAt ? <Time iso={key.expiresAt} /> : 'Never'}</td>
                <td data-label="Status">
                  <KeyStatus apiKey={key} now={now} />
                </td>
                <td className="actions">
                  {current ? (
                    <span className="muted">In use</span>
                  ) : key.revokedAt ? null : (
                    <button type="button" className="danger" aria-label={`Revoke ${keyLabel(key)}`} onClick={() => onRevoke(key)}>
                      Revoke
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
