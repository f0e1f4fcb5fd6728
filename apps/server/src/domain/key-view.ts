/** An API key as the API shows it (getAccount's `key`, the key operations), typed by the spec: never the key, nor its hash. */
import type { components } from '@vidgen/types';
import type { ApiKeyRecord } from '../store/store.js';

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export const toApiKeyResource = (key: ApiKeyRecord): components['schemas']['ApiKey'] => ({
  id: key.id,
  hint: key.hint,
  mode: key.mode,
  scopes: key.scopes,
  name: key.name,
  createdAt: key.createdAt.toISOString(),
  expiresAt: iso(key.expiresAt),
  revokedAt: iso(key.revokedAt),
});
