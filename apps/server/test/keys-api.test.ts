/**
 * The account's API keys through the API (listApiKeys, createApiKey, revokeApiKey), on both stores:
 * every answer checked against the spec; a key never issues a key that may do more than it may;
 * a key never revokes itself; another account's keys are never seen.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../src/accounts.js';
import type { Scope } from '../src/domain/keys.js';
import { testConfig, type Harness } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { checkedAnswer } from './support/spec-responses.js';
import type { Store } from '../src/store/store.js';

const KEYS = '/api/open/v1/account/keys';
const revokePath = (id: string) => `${KEYS}/${encodeURIComponent(id)}/revoke`;
const GENERATIONS = '/api/open/v1/video/generations';
const MANAGER: Scope[] = ['tasks:read', 'tasks:write', 'keys:manage'];
const DAY_MS = 86_400_000;

/** The answer, after checking it against what the spec documents for the operation. */
const checked = checkedAnswer;

describe.each(backendKinds)('API keys through the API on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });

  /** A harness whose key cache keeps records for a minute: a revocation must still be felt at once. */
  async function setUp(): Promise<Harness<Store>> {
    return backendHarness(await opened.fresh(), { config: testConfig({ keyCacheMs: 60_000 }) });
  }

  /** Another key of the account, issued the operators' way. */
  async function anotherKey(h: Harness<Store>, accountId: string, scopes: Scope[] = ['tasks:read'], mode: 'live' | 'test' = 'test') {
    h.clock.advance(1000);
    const { key, record } = await issueApiKey(h.store, { accountId, mode, scopes, name: 'other', expiresAt: null, now: h.clock.now() });
    return { key, keyId: record.id };
  }

  it.skipIf(skip)('lists the account’s keys newest first, revoked ones included, never a key or its hash', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const second = await anotherKey(h, caller.accountId);
    const third = await anotherKey(h, caller.accountId, ['tasks:read', 'tasks:write'], 'live');
    await h.store.revokeApiKey({ id: second.keyId, now: h.clock.now() });
    await h.account(0, MANAGER); // another account's key is not listed

    const { status, body } = await checked(h.request('GET', KEYS, { key: caller.key }), 'listApiKeys');
    expect(status).toBe(200);
    expect(body.data.map((k: { id: string }) => k.id)).toEqual([third.keyId, second.keyId, caller.keyId]);
    expect(body.data[0]).toMatchObject({ mode: 'live', scopes: ['tasks:read', 'tasks:write'], name: 'other', revokedAt: null, expiresAt: null });
    expect(body.data[1].revokedAt).toBe(h.clock.now().toISOString());
    expect(body.data[2].hint).toBe(`${caller.key.slice(0, 8)}…${caller.key.slice(-4)}`);
    const text = JSON.stringify(body);
    for (const key of [caller.key, second.key, third.key]) expect(text).not.toContain(key.slice(8));
    expect(text).not.toMatch(/hash/);
  });

  it.skipIf(skip)('issues a key like the calling one from no body or {}, answered once with no-store, and it works', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    for (const body of [undefined, {}]) {
      const created = await checked(h.request('POST', KEYS, { key: caller.key, body }), 'createApiKey', 'POST');
      expect(created.status).toBe(201);
      expect(created.headers.get('cache-control')).toBe('no-store');
      expect(created.body).toMatchObject({ success: true, mode: 'test', scopes: MANAGER, name: null, expiresAt: null, revokedAt: null });
      expect(created.body.key).toMatch(/^vg_test_/);
      expect(created.body.hint).toBe(`${created.body.key.slice(0, 8)}…${created.body.key.slice(-4)}`);
      expect(created.body.createdAt).toBe(h.clock.now().toISOString());
      // The new key authenticates, and is listed without its key.
      expect((await h.request('GET', GENERATIONS, { key: created.body.key })).status).toBe(200);
      const listed = await checked(h.request('GET', KEYS, { key: created.body.key }), 'listApiKeys');
      expect(listed.body.data.some((k: { id: string }) => k.id === created.body.id)).toBe(true);
      expect(JSON.stringify(listed.body)).not.toContain(created.body.key);
    }
  });

  it.skipIf(skip)('issues a narrower key with a name and an expiry; a live key may issue a test key', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const live = await anotherKey(h, caller.accountId, MANAGER, 'live');
    const created = await checked(
      h.request('POST', KEYS, { key: live.key, body: { name: 'Dashboard (read-only)', scopes: ['tasks:read'], mode: 'test', expiresInDays: 90 } }),
      'createApiKey',
      'POST',
    );
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'Dashboard (read-only)', scopes: ['tasks:read'], mode: 'test' });
    expect(created.body.expiresAt).toBe(new Date(h.clock.now().getTime() + 90 * DAY_MS).toISOString());
    // Read-only: it may list tasks, not submit nor manage keys.
    expect((await h.request('GET', GENERATIONS, { key: created.body.key })).status).toBe(200);
    expect((await h.request('POST', GENERATIONS, { key: created.body.key, body: {} })).status).toBe(403);
    expect((await h.request('GET', KEYS, { key: created.body.key })).status).toBe(403);
    // And it stops working when it expires.
    h.clock.advance(90 * DAY_MS);
    expect((await h.request('GET', GENERATIONS, { key: created.body.key })).status).toBe(401);
  });

  it.skipIf(skip)('refuses scopes the calling key lacks (naming /scopes/<i>) and a live key from a test key (naming /mode)', async () => {
    const h = await setUp();
    const caller = await h.account(0, ['tasks:read', 'keys:manage']);
    const wider = await checked(
      h.request('POST', KEYS, { key: caller.key, body: { scopes: ['tasks:read', 'tasks:write', 'webhooks:manage'] } }),
      'createApiKey',
      'POST',
    );
    expect(wider.status).toBe(403);
    expect(wider.body.error).toMatchObject({ code: 'forbidden', message: 'a key cannot issue a key with scopes it lacks itself' });
    expect(wider.body.error.details).toEqual([
      { field: '/scopes/1', message: 'the calling key lacks this scope', value: 'tasks:write' },
      { field: '/scopes/2', message: 'the calling key lacks this scope', value: 'webhooks:manage' },
    ]);
    const live = await checked(h.request('POST', KEYS, { key: caller.key, body: { mode: 'live' } }), 'createApiKey', 'POST');
    expect(live.status).toBe(403);
    expect(live.body.error.details).toEqual([{ field: '/mode', message: 'a test key issues only test keys', value: 'live' }]);
    const both = await checked(h.request('POST', KEYS, { key: caller.key, body: { mode: 'live', scopes: ['webhooks:manage'] } }), 'createApiKey', 'POST');
    expect(both.status).toBe(403);
    expect(both.body.error.details.map((d: { field: string }) => d.field)).toEqual(['/scopes/0', '/mode']);
    // Nothing was issued.
    expect(await h.store.listApiKeys(caller.accountId)).toHaveLength(1);
  });

  it.skipIf(skip)('refuses bodies the spec does not allow: 400, 415, 413', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const cases: [unknown, string][] = [
      [{ scopes: ['tasks:read'], admin: true }, '/admin'],
      [{ scopes: ['tasks:read', 'tasks:read'] }, '/scopes'],
      [{ scopes: [] }, '/scopes'],
      [{ scopes: ['tasks:admin'] }, '/scopes/0'],
      [{ expiresInDays: 0 }, '/expiresInDays'],
      [{ expiresInDays: 3651 }, '/expiresInDays'],
      [{ name: '' }, '/name'],
      [{ mode: 'prod' }, '/mode'],
      [[], ''],
      ['{"name":', ''],
    ];
    for (const [body, field] of cases) {
      const res = await checked(h.request('POST', KEYS, { key: caller.key, body }), 'createApiKey', 'POST');
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    const plain = await checked(h.request('POST', KEYS, { key: caller.key, body: '{}', headers: { 'Content-Type': 'text/plain' } }), 'createApiKey', 'POST');
    expect(plain.status).toBe(415);
    const big = await checked(h.request('POST', KEYS, { key: caller.key, body: { name: 'x'.repeat(70_000) } }), 'createApiKey', 'POST');
    expect(big.status).toBe(413);
    expect(await h.store.listApiKeys(caller.accountId)).toHaveLength(1);
  });

  it.skipIf(skip)('revokes a key: refused at once by this process (its cached record dropped), again 200 with the first revokedAt', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const victim = await anotherKey(h, caller.accountId);
    // The victim's record is now in the key cache (kept a minute).
    expect((await h.request('GET', GENERATIONS, { key: victim.key })).status).toBe(200);
    h.clock.advance(1000);
    const revokedAt = h.clock.now().toISOString();
    const revoked = await checked(h.request('POST', revokePath(victim.keyId), { key: caller.key }), 'revokeApiKey', 'POST');
    expect(revoked.status).toBe(200);
    expect(revoked.body).toMatchObject({ success: true, key: { id: victim.keyId, revokedAt, scopes: ['tasks:read'] } });
    const refused = await h.request('GET', GENERATIONS, { key: victim.key });
    expect(refused.status).toBe(401);
    // The caller's own cached record is untouched.
    expect((await h.request('GET', GENERATIONS, { key: caller.key })).status).toBe(200);

    h.clock.advance(5000);
    const again = await checked(h.request('POST', revokePath(victim.keyId), { key: caller.key, body: { ignored: true } }), 'revokeApiKey', 'POST');
    expect(again.status).toBe(200);
    expect(again.body.key.revokedAt).toBe(revokedAt);
  });

  it.skipIf(skip)('revokes an expired key too', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const { record } = await issueApiKey(h.store, {
      accountId: caller.accountId,
      mode: 'test',
      scopes: ['tasks:read'],
      name: null,
      expiresAt: new Date(h.clock.now().getTime() + 1000),
      now: h.clock.now(),
    });
    h.clock.advance(2000);
    const revoked = await checked(h.request('POST', revokePath(record.id), { key: caller.key }), 'revokeApiKey', 'POST');
    expect(revoked.status).toBe(200);
    expect(revoked.body.key.revokedAt).toBe(h.clock.now().toISOString());
  });

  it.skipIf(skip)('a key cannot revoke itself: 409 invalid_state naming keyId, and it still works', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const res = await checked(h.request('POST', revokePath(caller.keyId), { key: caller.key }), 'revokeApiKey', 'POST');
    expect(res.status).toBe(409);
    expect(res.body.error).toMatchObject({ code: 'invalid_state', details: [{ field: 'keyId', message: 'is the key making this request', value: caller.keyId }] });
    expect((await h.request('GET', KEYS, { key: caller.key })).status).toBe(200);
    expect((await h.store.listApiKeys(caller.accountId))[0]!.revokedAt).toBeNull();
  });

  it.skipIf(skip)('answers another account’s key, an unknown id and ids of any shape 404 alike, revoking nothing', async () => {
    const h = await setUp();
    const caller = await h.account(0, MANAGER);
    const other = await h.account(0, MANAGER);
    const unknown = `key_${'0'.repeat(26)}`;
    for (const id of [other.keyId, unknown, 'x', 'key_\u0000', 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', `key_${'A'.repeat(200)}`, ' ', '%']) {
      const res = await checked(h.request('POST', revokePath(id), { key: caller.key }), 'revokeApiKey', 'POST');
      expect(res.status, id).toBe(404);
      expect(res.body.error.code).toBe('not_found');
      expect(res.body.error.message).toBe(`no key ${id}`);
    }
    // The other account's key still works.
    expect((await h.request('GET', KEYS, { key: other.key })).status).toBe(200);
  });

  it.skipIf(skip)('answers 403 to a key without keys:manage on every operation, and 401 without a key', async () => {
    const h = await setUp();
    const caller = await h.account(0, ['tasks:read', 'tasks:write', 'webhooks:manage']);
    const victim = await anotherKey(h, caller.accountId);
    const operations: [string, string, string][] = [
      ['GET', KEYS, 'listApiKeys'],
      ['POST', KEYS, 'createApiKey'],
      ['POST', revokePath(victim.keyId), 'revokeApiKey'],
    ];
    for (const [method, path, operationId] of operations) {
      const forbidden = await checked(h.request(method, path, { key: caller.key }), operationId, method);
      expect(forbidden.status).toBe(403);
      expect(forbidden.body.error.message).toBe('this API key lacks the keys:manage scope');
      const anonymous = await checked(h.request(method, path, {}), operationId, method);
      expect(anonymous.status).toBe(401);
    }
    expect(await h.store.listApiKeys(caller.accountId)).toHaveLength(2);
    expect((await h.request('GET', GENERATIONS, { key: victim.key })).status).toBe(200);
  });
});
