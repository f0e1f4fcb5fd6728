/**
 * The account holder's read operations (getAccount, listLedgerEntries, getUsage) over HTTP: every
 * answer checked against the spec, the values against the store, on both stores where the store
 * matters; paging, filters, cursors, the usage range rules, tenant isolation, scopes.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { issueApiKey } from '../src/accounts.js';
import { MODEL_IDS } from '../src/domain/catalog.js';
import type { Scope } from '../src/domain/keys.js';
import { createMemoryRateLimiter } from '../src/http/rate-limit.js';
import type { Store } from '../src/store/store.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { responseProblems } from './support/spec-responses.js';
import { harness, SUBMIT, testConfig, validSubmit, type Harness } from './support.js';

const ACCOUNT = '/api/open/v1/account';
const LEDGER = '/api/open/v1/account/ledger';
const USAGE = '/api/open/v1/account/usage';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

type Json = any;

/** The answer, checked against what the spec documents for the operation (status, headers, body). */
async function call(h: Harness<Store>, operationId: string, path: string, key: string | null, expectedStatus = 200): Promise<Json> {
  const res = await h.request('GET', path, { key });
  const text = await res.text();
  const problems = responseProblems({ status: res.status, headers: res.headers, text }, { operationId });
  expect(problems, `${path}: ${text.slice(0, 300)}`).toEqual([]);
  expect(res.status, `${path}: ${text.slice(0, 300)}`).toBe(expectedStatus);
  return JSON.parse(text);
}

async function submit(h: Harness<Store>, key: string, patch: Record<string, unknown> = {}): Promise<{ requestId: string; creditsCharged: number }> {
  const res = await h.request('POST', SUBMIT, { key, body: validSubmit(patch) });
  expect(res.status).toBe(202);
  return (await res.json()) as Json;
}

async function cancel(h: Harness<Store>, key: string, id: string): Promise<void> {
  const res = await h.request('POST', `${SUBMIT}/${id}/cancel`, { key });
  expect(res.status).toBe(200);
}

async function complete(h: Harness<Store>, id: string): Promise<void> {
  const now = h.clock.now();
  expect((await h.store.startTask({ id, now })).kind).toBe('started');
  const done = await h.store.completeTask({ id, now, outputKey: `${id}.mp4`, outputUrl: `https://files.example.com/${id}.mp4`, outputExpiresAt: new Date(now.getTime() + DAY) });
  expect(done.kind).toBe('succeeded');
}

async function fail(h: Harness<Store>, id: string): Promise<void> {
  expect((await h.store.failTask({ id, now: h.clock.now(), code: 'provider_error', message: 'the provider failed' })).kind).toBe('failed');
}

const query = (path: string, params: Record<string, string | number | undefined>) => {
  const search = new URLSearchParams(Object.entries(params).flatMap(([k, v]): [string, string][] => (v === undefined ? [] : [[k, String(v)]])));
  const text = search.toString();
  return text ? `${path}?${text}` : path;
};

/** Every page of the ledger, following nextCursor. */
async function walkLedger(h: Harness<Store>, key: string, params: Record<string, string | number | undefined>): Promise<{ pages: Json[][]; entries: Json[] }> {
  const pages: Json[][] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 100; i++) {
    const page = await call(h, 'listLedgerEntries', query(LEDGER, { ...params, cursor }), key);
    pages.push(page.data);
    if (page.nextCursor === null) return { pages, entries: pages.flat() };
    cursor = page.nextCursor;
  }
  throw new Error('the ledger walk did not end');
}

describe.each(backendKinds)('the account API on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  let h: Harness<Store>;

  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });
  beforeEach(async (context) => {
    if (skip) return context.skip();
    const backend = await opened.fresh();
    h = backendHarness(backend, { config: testConfig({ maxActiveTasks: 20, rateLimits: { submit: 60, read: 1000, windowMs: 60_000 } }) });
  });

  it('getAccount: the balance, credits held by queued and processing tasks, active tasks, limits and the calling key', async () => {
    const { accountId, key, keyId } = await h.account(1000, ['tasks:read', 'tasks:write']);
    const a = await submit(h, key);
    const b = await submit(h, key, { model: 'vidgen-2.0', duration: 5 });
    const c = await submit(h, key, { duration: 6 });
    await h.store.startTask({ id: b.requestId, now: h.clock.now() });
    await cancel(h, key, c.requestId);
    const d = await submit(h, key, { duration: 8 });
    await complete(h, d.requestId);

    const body = await call(h, 'getAccount', ACCOUNT, key);
    const held = a.creditsCharged + b.creditsCharged;
    expect(body).toMatchObject({
      success: true,
      id: accountId,
      name: 'test',
      balance: 1000 - held - d.creditsCharged,
      creditsHeld: held,
      activeTasks: 2,
      limits: { maxActiveTasks: 20, rateLimits: { submitsPerMinute: 60, readsPerMinute: 1000 } },
    });
    const stored = (await h.store.listApiKeys(accountId)).find((k) => k.id === keyId)!;
    expect(body.key).toEqual({
      id: keyId,
      hint: stored.hint,
      mode: 'test',
      scopes: ['tasks:read', 'tasks:write'],
      name: null,
      createdAt: stored.createdAt.toISOString(),
      expiresAt: null,
      revokedAt: null,
    });
    expect(body.key.hint).toBe(`${key.slice(0, 8)}…${key.slice(-4)}`);
    // The balance is the ledger's sum.
    expect(body.balance).toBe((await h.store.listLedger(accountId)).reduce((sum, e) => sum + e.amount, 0));

    // Another key of the same account: the same account, that key.
    const other = await issueApiKey(h.store, { accountId, mode: 'live', scopes: ['tasks:read'], name: 'Dashboard', expiresAt: new Date(h.clock.now().getTime() + 90 * DAY), now: h.clock.now() });
    const seen = await call(h, 'getAccount', ACCOUNT, other.key);
    expect(seen.id).toBe(accountId);
    expect(seen.key).toMatchObject({ id: other.record.id, mode: 'live', scopes: ['tasks:read'], name: 'Dashboard', expiresAt: other.record.expiresAt!.toISOString() });
  });

  it('listLedgerEntries: newest first, balanceAfter consistent, pages linked by cursor, new entries never mid-walk', async () => {
    const { accountId, key } = await h.account(5000);
    const tasks: string[] = [];
    for (let i = 0; i < 6; i++) {
      const t = await submit(h, key, { duration: 4 + i });
      tasks.push(t.requestId);
      h.clock.advance(60_000);
    }
    await cancel(h, key, tasks[1]!);
    await fail(h, tasks[3]!);
    await h.store.grantCredits({ accountId, amount: 250, note: 'November top-up', now: h.clock.now() });

    const stored = (await h.store.listLedger(accountId)).reverse();
    expect(stored).toHaveLength(1 + 6 + 2 + 1);
    const { pages, entries } = await walkLedger(h, key, { limit: 3 });
    expect(pages.map((p) => p.length)).toEqual([3, 3, 3, 1]);
    expect(entries.map((e) => e.id)).toEqual(stored.map((e) => `led_${e.id}`));
    expect(entries[0]).toMatchObject({ kind: 'grant', amount: 250, requestId: null, note: 'November top-up' });
    expect(entries.at(-1)).toMatchObject({ kind: 'grant', amount: 5000, balanceAfter: 5000, requestId: null });
    // Refunds and charges carry no note (the store's internal reason is not the operator's note).
    for (const e of entries.filter((x) => x.kind !== 'grant')) expect(e.note).toBeNull();
    for (let i = 0; i + 1 < entries.length; i++) expect(entries[i].balanceAfter - entries[i].amount).toBe(entries[i + 1].balanceAfter);
    expect(entries[0].balanceAfter).toBe((await h.store.getAccount(accountId))!.balance);
    for (const e of entries) expect(e.amount < 0).toBe(e.kind === 'charge');

    // A walk begun before new entries are made does not see them, and sees everything else once.
    const first = await call(h, 'listLedgerEntries', query(LEDGER, { limit: 4 }), key);
    expect(JSON.parse(Buffer.from(first.nextCursor, 'base64url').toString())).toEqual({ i: Number(first.data.at(-1).id.slice(4)) });
    await submit(h, key);
    await submit(h, key);
    let rest: Json[] = [];
    let cursor = first.nextCursor;
    while (cursor) {
      const page = await call(h, 'listLedgerEntries', query(LEDGER, { limit: 4, cursor }), key);
      rest = rest.concat(page.data);
      cursor = page.nextCursor;
    }
    expect([...first.data, ...rest].map((e: Json) => e.id)).toEqual(stored.map((e) => `led_${e.id}`));
    // The default page size is the spec's (20): all 12 now fit on one page.
    const all = await call(h, 'listLedgerEntries', LEDGER, key);
    expect(all.data).toHaveLength(12);
    expect(all.nextCursor).toBeNull();
  });

  it('listLedgerEntries: kind and requestId filters, kept while following a cursor', async () => {
    const { key } = await h.account(5000);
    const tasks: string[] = [];
    for (let i = 0; i < 5; i++) tasks.push((await submit(h, key)).requestId);
    await cancel(h, key, tasks[0]!);
    await fail(h, tasks[2]!);
    await cancel(h, key, tasks[4]!);

    const charges = await walkLedger(h, key, { kind: 'charge', limit: 2 });
    expect(charges.entries.map((e) => e.requestId)).toEqual([...tasks].reverse());
    expect(charges.entries.every((e) => e.kind === 'charge')).toBe(true);
    const refunds = await walkLedger(h, key, { kind: 'refund', limit: 1 });
    expect(refunds.entries.map((e) => e.requestId)).toEqual([tasks[4], tasks[2], tasks[0]]);
    expect((await walkLedger(h, key, { kind: 'grant' })).entries).toHaveLength(1);

    const one = await call(h, 'listLedgerEntries', query(LEDGER, { requestId: tasks[2] }), key);
    expect(one.data.map((e: Json) => [e.kind, e.requestId])).toEqual([
      ['refund', tasks[2]],
      ['charge', tasks[2]],
    ]);
    expect(one.data[0].amount).toBe(-one.data[1].amount);
    expect(one.nextCursor).toBeNull();
    const both = await call(h, 'listLedgerEntries', query(LEDGER, { requestId: tasks[2], kind: 'charge' }), key);
    expect(both.data.map((e: Json) => e.kind)).toEqual(['charge']);
    // A requestId naming no task (or not shaped like one) matches nothing.
    for (const id of ['gen_00000000000000000000000000', 'not-a-task', 'gen_\u0000x']) {
      expect((await call(h, 'listLedgerEntries', query(LEDGER, { requestId: id }), key)).data).toEqual([]);
    }

    // A cursor is refused with other filters than it was issued for.
    const page = await call(h, 'listLedgerEntries', query(LEDGER, { kind: 'charge', limit: 2 }), key);
    for (const other of [{}, { kind: 'refund' }, { kind: 'charge', requestId: tasks[0] }]) {
      const refused = await call(h, 'listLedgerEntries', query(LEDGER, { ...other, limit: 2, cursor: page.nextCursor }), key, 400);
      expect(refused.error.code).toBe('invalid_request');
      expect(refused.error.details[0].field).toBe('cursor');
    }
    const byTask = await call(h, 'listLedgerEntries', query(LEDGER, { requestId: tasks[0], limit: 1 }), key);
    expect(byTask.nextCursor).not.toBeNull();
    expect((await call(h, 'listLedgerEntries', query(LEDGER, { limit: 1, cursor: byTask.nextCursor }), key, 400)).error.details[0].field).toBe('cursor');
    const next = await call(h, 'listLedgerEntries', query(LEDGER, { requestId: tasks[0], limit: 1, cursor: byTask.nextCursor }), key);
    expect(next.data.map((e: Json) => e.kind)).toEqual(['charge']);
    // A cursor at the largest position the cursor can name: the store takes it (a bigint on PostgreSQL), everything follows it.
    const far = Buffer.from(JSON.stringify({ i: Number.MAX_SAFE_INTEGER, k: 'charge' })).toString('base64url');
    expect((await call(h, 'listLedgerEntries', query(LEDGER, { kind: 'charge', limit: 100, cursor: far }), key)).data).toHaveLength(5);
  });

  it('getUsage: day and hour buckets, by model, charges where made and outcomes where the task ended', async () => {
    const { accountId, key } = await h.account(100_000);
    // 2026-11-22T10:00Z: two tasks accepted; one succeeds at 10:30.
    const t1 = await submit(h, key); // vidgen-2.0-fast, 4 s
    const t2 = await submit(h, key, { model: 'vidgen-2.0', duration: 5 });
    h.clock.advance(30 * 60_000);
    await complete(h, t1.requestId);
    // 23:59: one accepted, cancelled at 00:01 the next day, when t2 fails too.
    h.clock.advance(13 * HOUR + 29 * 60_000);
    const t3 = await submit(h, key, { model: 'vidgen-1.5-pro', duration: 10 });
    h.clock.advance(2 * 60_000);
    await cancel(h, key, t3.requestId);
    await fail(h, t2.requestId);
    expect(h.clock.now().toISOString()).toBe('2026-11-23T00:01:00.000Z');

    const daily = await call(h, 'getUsage', query(USAGE, { from: '2026-11-21T12:00:00Z', to: '2026-11-23T05:00:00+02:00' }), key);
    expect(daily).toMatchObject({ success: true, from: '2026-11-21T00:00:00.000Z', to: '2026-11-24T00:00:00.000Z', granularity: 'day', groupBy: null });
    const zeros = { tasks: { succeeded: 0, failed: 0, cancelled: 0 }, secondsDelivered: 0, creditsCharged: 0, creditsRefunded: 0, creditsNet: 0 };
    const charged = t1.creditsCharged + t2.creditsCharged + t3.creditsCharged;
    expect(daily.data).toEqual([
      { start: '2026-11-21T00:00:00.000Z', end: '2026-11-22T00:00:00.000Z', ...zeros },
      {
        start: '2026-11-22T00:00:00.000Z',
        end: '2026-11-23T00:00:00.000Z',
        tasks: { succeeded: 1, failed: 0, cancelled: 0 },
        secondsDelivered: 4,
        creditsCharged: charged,
        creditsRefunded: 0,
        creditsNet: charged,
      },
      {
        start: '2026-11-23T00:00:00.000Z',
        end: '2026-11-24T00:00:00.000Z',
        tasks: { succeeded: 0, failed: 1, cancelled: 1 },
        secondsDelivered: 0,
        creditsCharged: 0,
        creditsRefunded: t2.creditsCharged + t3.creditsCharged,
        creditsNet: -(t2.creditsCharged + t3.creditsCharged),
      },
    ]);
    // creditsNet summed is minus the ledger's charges and refunds in the range.
    const ledger = await h.store.listLedger(accountId);
    const usageAmounts = ledger.filter((e) => e.kind !== 'grant').reduce((sum, e) => sum + e.amount, 0);
    expect(daily.data.reduce((sum: number, b: Json) => sum + b.creditsNet, 0)).toBe(-usageAmounts);

    const hourly = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-11-22T09:30:00Z', to: '2026-11-22T11:10:00Z' }), key);
    expect(hourly).toMatchObject({ from: '2026-11-22T09:00:00.000Z', to: '2026-11-22T12:00:00.000Z', granularity: 'hour', groupBy: null });
    expect(hourly.data.map((b: Json) => [b.start, b.end, b.creditsCharged, b.tasks.succeeded, b.secondsDelivered])).toEqual([
      ['2026-11-22T09:00:00.000Z', '2026-11-22T10:00:00.000Z', 0, 0, 0],
      ['2026-11-22T10:00:00.000Z', '2026-11-22T11:00:00.000Z', t1.creditsCharged + t2.creditsCharged, 1, 4],
      ['2026-11-22T11:00:00.000Z', '2026-11-22T12:00:00.000Z', 0, 0, 0],
    ]);

    const byModel = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', groupBy: 'model', from: '2026-11-22T23:00:00Z', to: '2026-11-23T00:30:00Z' }), key);
    expect(byModel.groupBy).toBe('model');
    expect(byModel.data).toHaveLength(2 * MODEL_IDS.length);
    expect(byModel.data.map((b: Json) => `${b.start} ${b.model}`)).toEqual(
      ['2026-11-22T23:00:00.000Z', '2026-11-23T00:00:00.000Z'].flatMap((start) => MODEL_IDS.map((m) => `${start} ${m}`)),
    );
    const cell = (start: string, model: string) => byModel.data.find((b: Json) => b.start.startsWith(start) && b.model === model);
    expect(cell('2026-11-22T23', 'vidgen-1.5-pro')).toMatchObject({ creditsCharged: t3.creditsCharged, creditsRefunded: 0, tasks: { cancelled: 0 } });
    expect(cell('2026-11-23T00', 'vidgen-1.5-pro')).toMatchObject({ creditsCharged: 0, creditsRefunded: t3.creditsCharged, creditsNet: -t3.creditsCharged, tasks: { cancelled: 1 } });
    expect(cell('2026-11-23T00', 'vidgen-2.0')).toMatchObject({ creditsRefunded: t2.creditsCharged, tasks: { failed: 1, succeeded: 0, cancelled: 0 } });
    expect(cell('2026-11-23T00', 'vidgen-2.0-fast')).toEqual({ start: '2026-11-23T00:00:00.000Z', end: '2026-11-23T01:00:00.000Z', model: 'vidgen-2.0-fast', ...zeros });
    // Without groupBy there is no model.
    expect(hourly.data.every((b: Json) => !('model' in b))).toBe(true);
    // Daily by model: each model's days sum to the day.
    const dailyByModel = await call(h, 'getUsage', query(USAGE, { groupBy: 'model', from: '2026-11-21T12:00:00Z', to: '2026-11-23T05:00:00Z' }), key);
    expect(dailyByModel.data).toHaveLength(3 * MODEL_IDS.length);
    for (const day of daily.data) {
      const parts = dailyByModel.data.filter((b: Json) => b.start === day.start);
      expect(parts.reduce((s: number, b: Json) => s + b.creditsCharged, 0)).toBe(day.creditsCharged);
      expect(parts.reduce((s: number, b: Json) => s + b.creditsRefunded, 0)).toBe(day.creditsRefunded);
    }
  });

  it('tenant isolation: another account sees only its own account, ledger and usage', async () => {
    const a = await h.account(1000);
    const b = await h.account(2000);
    const ta = await submit(h, a.key);
    await cancel(h, a.key, ta.requestId);
    const tb = await submit(h, b.key, { duration: 10 });

    expect((await call(h, 'getAccount', ACCOUNT, b.key)).id).toBe(b.accountId);
    expect((await call(h, 'getAccount', ACCOUNT, b.key)).balance).toBe(2000 - tb.creditsCharged);
    const ledger = await call(h, 'listLedgerEntries', LEDGER, b.key);
    expect(ledger.data.map((e: Json) => e.kind)).toEqual(['charge', 'grant']);
    expect(ledger.data[0].requestId).toBe(tb.requestId);
    expect((await call(h, 'listLedgerEntries', query(LEDGER, { requestId: ta.requestId }), b.key)).data).toEqual([]);
    expect((await call(h, 'listLedgerEntries', query(LEDGER, { kind: 'refund' }), b.key)).data).toEqual([]);
    // A cursor of A's walk only moves B's position: never A's entries.
    const aPage = await call(h, 'listLedgerEntries', query(LEDGER, { limit: 1 }), a.key);
    const bFollow = await call(h, 'listLedgerEntries', query(LEDGER, { limit: 100, cursor: aPage.nextCursor }), b.key);
    expect(bFollow.data.every((e: Json) => e.requestId === null || e.requestId === tb.requestId)).toBe(true);

    const usage = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-11-22T10:00:00Z', to: '2026-11-22T11:00:00Z' }), b.key);
    expect(usage.data).toHaveLength(1);
    expect(usage.data[0]).toMatchObject({ creditsCharged: tb.creditsCharged, creditsRefunded: 0, tasks: { cancelled: 0 } });
    const usageA = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-11-22T10:00:00Z', to: '2026-11-22T11:00:00Z' }), a.key);
    expect(usageA.data[0]).toMatchObject({ creditsCharged: ta.creditsCharged, creditsRefunded: ta.creditsCharged, creditsNet: 0, tasks: { cancelled: 1 } });
  });

  it('the read budget counts the account operations (RateLimit headers)', async () => {
    const { key } = await h.account();
    const res = await h.request('GET', ACCOUNT, { key });
    expect(res.headers.get('ratelimit-policy')).toBe('"read";q=1000;w=60');
    expect(res.headers.get('ratelimit')).toMatch(/^"read";r=999;t=\d+$/);
    const res2 = await h.request('GET', LEDGER, { key });
    expect(res2.headers.get('ratelimit')).toMatch(/^"read";r=998;t=\d+$/);
  });
});

describe('the account API without a store to compare', () => {
  const OPS = [
    ['getAccount', ACCOUNT],
    ['listLedgerEntries', LEDGER],
    ['getUsage', USAGE],
  ] as const;

  it.each(OPS)('%s: 401 without a key or with an unknown one, 403 without tasks:read', async (operationId, path) => {
    const h = harness();
    expect((await call(h, operationId, path, null, 401)).error.code).toBe('unauthorized');
    expect((await call(h, operationId, path, 'vg_test_notakeyatall', 401)).error.code).toBe('unauthorized');
    for (const scopes of [['tasks:write'], ['keys:manage', 'webhooks:manage']] as Scope[][]) {
      const { key } = await h.account(100, scopes);
      const body = await call(h, operationId, path, key, 403);
      expect(body.error.code).toBe('forbidden');
      expect(body.error.message).toContain('tasks:read');
    }
  });

  it('getAccount: no cap and no budgets are null', async () => {
    const h = harness();
    const { key } = await h.account(100, ['tasks:read']);
    const body = await call(h, 'getAccount', ACCOUNT, key);
    expect(body.limits).toEqual({ maxActiveTasks: null, rateLimits: { submitsPerMinute: null, readsPerMinute: null } });
    expect(body).toMatchObject({ balance: 100, creditsHeld: 0, activeTasks: 0 });
    // A budget of 0 is none; a cap of 0 is none.
    const h2 = harness({ rateLimiter: createMemoryRateLimiter(), config: testConfig({ maxActiveTasks: 0, rateLimits: { submit: 0, read: 120, windowMs: 60_000 } }) });
    const k2 = await h2.account(100, ['tasks:read']);
    expect((await call(h2, 'getAccount', ACCOUNT, k2.key)).limits).toEqual({ maxActiveTasks: null, rateLimits: { submitsPerMinute: null, readsPerMinute: 120 } });
  });

  it('listLedgerEntries: malformed cursors and parameters are 400 naming them', async () => {
    const h = harness();
    const { key } = await h.account();
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
    for (const cursor of ['abc', '!!!', b64({ i: 'x' }), b64({ i: 0 }), b64({ i: -3 }), b64({ i: 1.5 }), b64([1]), b64(null), b64({ i: 5, k: 'bonus' }), b64({ i: 5, r: 7 })]) {
      const body = await call(h, 'listLedgerEntries', query(LEDGER, { cursor }), key, 400);
      expect(body.error).toMatchObject({ code: 'invalid_request', message: 'cursor is not a cursor this service issued' });
      expect(body.error.details).toEqual([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
    }
    for (const [params, field] of [
      [{ limit: 0 }, 'limit'],
      [{ limit: 101 }, 'limit'],
      [{ limit: 'ten' }, 'limit'],
      [{ kind: 'bonus' }, 'kind'],
      [{ requestId: 'x'.repeat(129) }, 'requestId'],
      [{ cursor: 'x'.repeat(513) }, 'cursor'],
    ] as const) {
      const body = await call(h, 'listLedgerEntries', query(LEDGER, params), key, 400);
      expect(body.error.details.map((d: Json) => d.field)).toContain(field);
    }
    // The spec's own example cursor is one this service could have issued ({"i":54}): accepted.
    expect((await call(h, 'listLedgerEntries', query(LEDGER, { cursor: 'eyJpIjo1NH0' }), key)).data).toHaveLength(1);
  });

  it('getUsage: defaults, rounding and the range rules', async () => {
    const h = harness();
    const { key } = await h.account();
    h.clock.advance(5 * 60_000 + 7_000); // 2026-11-22T10:05:07Z

    // Defaults: by day, to now (rounded up), from 30 days before it (rounded down).
    const byDay = await call(h, 'getUsage', USAGE, key);
    expect(byDay).toMatchObject({ from: '2026-10-23T00:00:00.000Z', to: '2026-11-23T00:00:00.000Z', granularity: 'day', groupBy: null });
    expect(byDay.data).toHaveLength(31);
    expect(byDay.data[0]).toMatchObject({ start: '2026-10-23T00:00:00.000Z', end: '2026-10-24T00:00:00.000Z' });
    expect(byDay.data.at(-1)).toMatchObject({ start: '2026-11-22T00:00:00.000Z', end: '2026-11-23T00:00:00.000Z' });
    const byHour = await call(h, 'getUsage', query(USAGE, { granularity: 'hour' }), key);
    expect(byHour).toMatchObject({ from: '2026-10-23T10:00:00.000Z', to: '2026-11-22T11:00:00.000Z', granularity: 'hour' });
    expect(byHour.data).toHaveLength(30 * 24 + 1);
    // Only `to`: from is 30 days before the `to` given; only `from`: to is now.
    expect(await call(h, 'getUsage', query(USAGE, { to: '2026-11-01T00:00:00Z' }), key)).toMatchObject({ from: '2026-10-02T00:00:00.000Z', to: '2026-11-01T00:00:00.000Z' });
    expect(await call(h, 'getUsage', query(USAGE, { from: '2026-11-20T18:00:00Z' }), key)).toMatchObject({ from: '2026-11-20T00:00:00.000Z', to: '2026-11-23T00:00:00.000Z' });
    // Offsets are honoured: 01:30+02:00 is 23:30Z the day before.
    const offset = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-11-22T01:30:00+02:00', to: '2026-11-22T02:00:00+02:00' }), key);
    expect(offset).toMatchObject({ from: '2026-11-21T23:00:00.000Z', to: '2026-11-22T00:00:00.000Z' });
    expect(offset.data).toHaveLength(1);
    // Already whole buckets stay as they are; future buckets are zeros.
    const future = await call(h, 'getUsage', query(USAGE, { from: '2026-12-01T00:00:00Z', to: '2026-12-03T00:00:00Z' }), key);
    expect(future).toMatchObject({ from: '2026-12-01T00:00:00.000Z', to: '2026-12-03T00:00:00.000Z' });
    expect(future.data.map((b: Json) => b.creditsNet)).toEqual([0, 0]);

    // The longest ranges: 31 days by the hour, 366 by the day; one second more is refused.
    expect((await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-10-01T00:00:00Z', to: '2026-11-01T00:00:00Z' }), key)).data).toHaveLength(31 * 24);
    expect((await call(h, 'getUsage', query(USAGE, { from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:00Z' }), key)).data).toHaveLength(366);
    const tooLongHour = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-10-01T00:00:00Z', to: '2026-11-01T00:00:01Z' }), key, 400);
    expect(tooLongHour.error).toEqual({
      code: 'invalid_request',
      message: 'an hourly range may span at most 31 days',
      details: [{ field: 'from', message: 'must be at most 31 days before to with granularity=hour' }],
    });
    const tooLongDay = await call(h, 'getUsage', query(USAGE, { from: '2025-01-01T00:00:00Z', to: '2026-01-02T00:00:01Z' }), key, 400);
    expect(tooLongDay.error).toMatchObject({ message: 'a daily range may span at most 366 days', details: [{ field: 'from' }] });
    // Hourly defaults are fine, but hourly from long ago is too long.
    expect((await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2026-09-01T00:00:00Z' }), key, 400)).error.details[0].field).toBe('from');

    // from not before to.
    for (const [from, to] of [
      ['2026-11-20T00:00:00Z', '2026-11-20T00:00:00Z'],
      ['2026-11-21T00:00:00Z', '2026-11-20T00:00:00Z'],
      ['2026-11-20T10:45:00Z', '2026-11-20T10:15:00Z'],
      ['2026-11-20T10:30:00Z', '2026-11-20T10:30:00Z'],
    ]) {
      const body = await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from, to }), key, 400);
      expect(body.error).toEqual({ code: 'invalid_request', message: 'from must be before to', details: [{ field: 'from', message: 'must be before to' }] });
    }
    // Only from, after now.
    expect((await call(h, 'getUsage', query(USAGE, { from: '2026-12-01T00:00:00Z' }), key, 400)).error.details[0].field).toBe('from');

    // A leap second is the instant after 23:59:59.
    expect(await call(h, 'getUsage', query(USAGE, { granularity: 'hour', from: '2016-12-31T22:30:00Z', to: '2016-12-31T23:59:60Z' }), key)).toMatchObject({
      from: '2016-12-31T22:00:00.000Z',
      to: '2017-01-01T00:00:00.000Z',
    });
    // Bounds an RFC 3339 date-time cannot name once rounded (past 9999, before 0000) are refused, naming them.
    expect((await call(h, 'getUsage', query(USAGE, { from: '9999-12-30T00:00:00Z', to: '9999-12-31T23:59:59-10:00' }), key, 400)).error.details[0].field).toBe('to');
    expect((await call(h, 'getUsage', query(USAGE, { to: '0000-01-10T00:00:00Z' }), key, 400)).error.details[0].field).toBe('from');
    expect((await call(h, 'getUsage', query(USAGE, { from: '0000-01-01T00:00:00Z', to: '0000-01-03T00:00:00+01:00' }), key)).data).toHaveLength(2);

    // Malformed parameters.
    for (const [params, field] of [
      [{ from: '2026-11-20' }, 'from'],
      [{ from: '2026-11-20T00:00:00' }, 'from'],
      [{ to: 'yesterday' }, 'to'],
      [{ granularity: 'week' }, 'granularity'],
      [{ groupBy: 'status' }, 'groupBy'],
    ] as const) {
      const body = await call(h, 'getUsage', query(USAGE, params), key, 400);
      expect(body.error.code).toBe('invalid_request');
      expect(body.error.details.map((d: Json) => d.field)).toContain(field);
    }
    const notADate = await call(h, 'getUsage', query(USAGE, { from: '2026-11-20' }), key, 400);
    expect(notADate.error.details).toEqual([{ field: 'from', message: 'must match format "date-time"' }]);
  });
});
