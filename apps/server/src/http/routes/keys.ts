/**
 * The account's API keys, managed by one of its keys (`keys:manage`): list them, issue one (never
 * one that may do more than the calling key may), revoke one (never the calling key itself).
 */
import type { Routes } from '../frame.js';
import { toApiKeyResource } from '../../domain/key-view.js';
import type { RequestBody, SuccessBody } from '@vidgen/types';
import { issueApiKey } from '../../accounts.js';
import type { ApiKeyRecord } from '../../store/store.js';
import { answer } from '../answer.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError, type ErrorDetail } from '../errors.js';
import { authenticate, guarded, optionalJsonBody, readOptionalJson } from '../middleware.js';
import { rateLimit } from '../rate-limit.js';
import { bodyValidator, honoPath, specOperation, summarise } from '../spec.js';

type CreateRequest = RequestBody<'createApiKey'>;

const DAY_MS = 86_400_000;
/** The answer holds a secret (the key itself): no cache may keep it. */
const NO_STORE = { 'Cache-Control': 'no-store' };

const invalid = (details: ErrorDetail[]) => new ApiError('invalid_request', summarise(details), details);
/** One answer for an id of no key, of another account's key, and of any shape: nothing tells them apart. */
const notFound = (id: string) => new ApiError('not_found', `no key ${id}`);

/** What a request asks beyond what the calling key may do itself: each scope it lacks, a live key from a test key. */
function beyondCaller(caller: ApiKeyRecord, request: CreateRequest): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  request.scopes?.forEach((scope, i) => {
    if (!caller.scopes.includes(scope)) details.push({ field: `/scopes/${i}`, message: 'the calling key lacks this scope', value: scope });
  });
  if (caller.mode === 'test' && request.mode === 'live') details.push({ field: '/mode', message: 'a test key issues only test keys', value: 'live' });
  return details;
}

export function registerKeyRoutes(app: Routes, deps: AppDeps): void {
  const { store, clock, config } = deps;
  const limits = { rateLimiter: deps.rateLimiter, clock, rateLimits: config.rateLimits };
  const auth = (operationId: string) => [authenticate(deps, specOperation(operationId).scopes ?? []), rateLimit(limits, 'read')];
  const path = (operationId: string) => honoPath(specOperation(operationId).path);
  const validateCreateBody = bodyValidator<CreateRequest>('createApiKey');

  app.get(path('listApiKeys'), guarded([...auth('listApiKeys')], async (c) => {
    // The store lists them oldest first (created_at, id); the API newest first.
    const keys = (await store.listApiKeys(c.get('apiKey').accountId)).reverse();
    return answer(c, { success: true, data: keys.map(toApiKeyResource) } satisfies SuccessBody<'listApiKeys'>, 200);
  }));

  app.post(path('createApiKey'), guarded([...auth('createApiKey'), optionalJsonBody()], async (c) => {
    // No body, or an empty one: `{}`, a key like the calling one.
    const checked = validateCreateBody((await readOptionalJson(c)) ?? {});
    if (!checked.ok) throw invalid(checked.details);
    const request = checked.value;
    const caller = c.get('apiKey');
    const beyond = beyondCaller(caller, request);
    if (beyond.length) {
      const scopes = beyond.some((detail) => detail.field !== '/mode');
      const mode = beyond.some((detail) => detail.field === '/mode');
      const message = [scopes && 'a key cannot issue a key with scopes it lacks itself', mode && 'a test key cannot issue a live key'].filter(Boolean).join('; ');
      throw new ApiError('forbidden', message, beyond);
    }
    const now = clock.now();
    const { key, record } = await issueApiKey(store, {
      accountId: caller.accountId,
      mode: request.mode ?? caller.mode,
      scopes: request.scopes ?? caller.scopes,
      name: request.name ?? null,
      expiresAt: request.expiresInDays === undefined ? null : new Date(now.getTime() + request.expiresInDays * DAY_MS),
      now,
    });
    return answer(c, { success: true, ...toApiKeyResource(record), key } satisfies SuccessBody<'createApiKey'>, 201, NO_STORE);
  }));

  // No body is read: one that is sent is ignored.
  app.post(path('revokeApiKey'), guarded([...auth('revokeApiKey')], async (c) => {
    const id = c.req.param('keyId')!;
    const caller = c.get('apiKey');
    if (id === caller.id) {
      throw new ApiError('invalid_state', 'a key cannot revoke itself; revoke it with another key', [
        { field: 'keyId', message: 'is the key making this request', value: id },
      ]);
    }
    // Only the account's own keys: the id is compared with theirs, never looked up on its own (whatever its shape).
    const owned = (await store.listApiKeys(caller.accountId)).some((key) => key.id === id);
    const revoked = owned ? await store.revokeApiKey({ id, now: clock.now() }) : undefined;
    if (!revoked) throw notFound(id);
    // Refused by this process from its next request on; another process's cache keeps the record at most keyCacheMs.
    deps.apiKeyCache?.forget(id);
    return answer(c, { success: true, key: toApiKeyResource(revoked) } satisfies SuccessBody<'revokeApiKey'>, 200);
  }));
}
