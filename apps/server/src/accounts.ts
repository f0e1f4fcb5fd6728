/** Account and key operations shared by the operator CLI and the development bootstrap. */
import { newAccountId, newKeyId } from './domain/ids.js';
import { apiKeyHint, generateApiKey, hashApiKey, SCOPES, type KeyMode, type Scope } from './domain/keys.js';
import type { ApiKeyRecord, Store } from './store/store.js';
import { newWebhookSecret } from './webhooks/signing.js';

export { newWebhookSecret };


export async function createAccount(store: Store, input: { name: string; credits: number; now: Date }) {
  return store.createAccount({ id: newAccountId(input.now), name: input.name, webhookSecret: newWebhookSecret(), openingGrant: input.credits, now: input.now });
}

/** Issues a key; the plain key is returned once and never stored. */
export async function issueApiKey(
  store: Store,
  input: { accountId: string; mode: KeyMode; scopes: Scope[]; name: string | null; expiresAt: Date | null; now: Date },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateApiKey(input.mode);
  const record = await store.createApiKey({
    id: newKeyId(input.now),
    accountId: input.accountId,
    hash: hashApiKey(key),
    hint: apiKeyHint(key),
    mode: input.mode,
    scopes: input.scopes,
    name: input.name,
    createdAt: input.now,
    expiresAt: input.expiresAt,
  });
  return { key, record };
}

/**
 * A new webhook signing secret for the account; the one it replaces also signs for `overlapHours`
 * (0: retired at once, and `previousSecretValidUntil` is null). Undefined when there is no such account.
 */
export async function rotateWebhookSecret(
  store: Store,
  input: { accountId: string; overlapHours: number; now: Date },
): Promise<{ secret: string; previousSecretValidUntil: Date | null } | undefined> {
  const secret = newWebhookSecret();
  // Until now itself for 0: the store signs with the previous secret only while its time is still ahead.
  const previousValidUntil = new Date(input.now.getTime() + input.overlapHours * 3_600_000);
  if (!(await store.rotateWebhookSecret({ accountId: input.accountId, secret, previousValidUntil }))) return undefined;
  return { secret, previousSecretValidUntil: input.overlapHours > 0 ? previousValidUntil : null };
}

/** On an empty store, a development account with credits and a key, for a first local start. */
export async function bootstrapDevelopmentAccount(store: Store, credits: number, now: Date): Promise<{ accountId: string; key: string } | undefined> {
  if ((await store.countAccounts()) > 0) return undefined;
  const account = await createAccount(store, { name: 'development', credits, now });
  // Every scope: the development key can try every operation.
  const { key } = await issueApiKey(store, { accountId: account.id, mode: 'test', scopes: [...SCOPES], name: 'development', expiresAt: null, now });
  return { accountId: account.id, key };
}
