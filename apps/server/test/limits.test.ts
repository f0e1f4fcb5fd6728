/** D10 limits over HTTP on both stores: per-key submit and read budgets with their headers, and the active-task cap. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppConfig } from '../src/http/deps.js';
import { SUBMIT, testConfig, validSubmit } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';

describe.each(backendKinds)('limits on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => opened?.done());

  const harness = async (config: Partial<AppConfig>) => backendHarness(await opened.fresh(), { config: testConfig(config) });
  const limited = (submit: number, read: number) => harness({ rateLimits: { submit, read, windowMs: 60_000 } });

describe.skipIf(skip)('per-key rate limits', () => {
  it('announces the submit budget on every answer and refuses past it with 429 rate_limited and Retry-After', async () => {
    const h = await limited(3, 100);
    const { key, accountId } = await h.account();
    const answers: Response[] = [];
    for (let i = 0; i < 3; i++) answers.push(await h.request('POST', SUBMIT, { key, body: validSubmit() }));
    expect(answers.map((r) => r.status)).toEqual([202, 202, 202]);
    expect(answers.map((r) => r.headers.get('ratelimit'))).toEqual(['"submit";r=2;t=60', '"submit";r=1;t=60', '"submit";r=0;t=60']);
    expect(answers[0]!.headers.get('ratelimit-policy')).toBe('"submit";q=3;w=60');

    h.clock.advance(15_000);
    const refused = await h.request('POST', SUBMIT, { key, body: validSubmit() });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('45');
    expect(refused.headers.get('ratelimit')).toBe('"submit";r=0;t=45');
    const body = (await refused.json()) as { success: boolean; error: { code: string; message: string } };
    expect(body).toMatchObject({ success: false, error: { code: 'rate_limited' } });
    expect(body.error.message).toMatch(/submit budget of 3 requests per 60 s/);
    // Nothing was charged or created for the refused submission.
    expect(await h.store.listTasks({ accountId, limit: 10 })).toHaveLength(3);

    h.clock.advance(45_000);
    expect((await h.request('POST', SUBMIT, { key, body: validSubmit() })).status).toBe(202);
  });

  it('counts reads (query, list, cancel, models) in their own budget, apart from submissions', async () => {
    const h = await limited(100, 2);
    const { key } = await h.account();
    const submitted = (await (await h.request('POST', SUBMIT, { key, body: validSubmit() })).json()) as { requestId: string };
    expect((await h.request('GET', `${SUBMIT}/${submitted.requestId}`, { key })).headers.get('ratelimit')).toBe('"read";r=1;t=60');
    expect((await h.request('GET', '/api/open/v1/models', { key })).status).toBe(200);
    const refused = await h.request('GET', `${SUBMIT}?limit=5`, { key });
    expect(refused.status).toBe(429);
    expect((await h.request('POST', `${SUBMIT}/${submitted.requestId}/cancel`, { key })).status).toBe(429);
    // Submissions still have their budget.
    expect((await h.request('POST', SUBMIT, { key, body: validSubmit() })).status).toBe(202);
  });

  it('keeps budgets per key: another key of the same account is not held back', async () => {
    const h = await limited(1, 100);
    const first = await h.account();
    expect((await h.request('POST', SUBMIT, { key: first.key, body: validSubmit() })).status).toBe(202);
    expect((await h.request('POST', SUBMIT, { key: first.key, body: validSubmit() })).status).toBe(429);
    const second = await h.account();
    expect((await h.request('POST', SUBMIT, { key: second.key, body: validSubmit() })).status).toBe(202);
  });

  it('carries the headers on an error answer too (a bad body still spends the budget)', async () => {
    const h = await limited(5, 100);
    const { key } = await h.account();
    const bad = await h.request('POST', SUBMIT, { key, body: { model: 'vidgen-9', prompt: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.headers.get('ratelimit')).toBe('"submit";r=4;t=60');
  });

  it('refuses no one when the budget is 0 (off)', async () => {
    const h = await limited(0, 0);
    const { key } = await h.account();
    const res = await h.request('GET', '/api/open/v1/models', { key });
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit')).toBeNull();
  });
});

describe.skipIf(skip)('the active-task cap', () => {
  it('refuses a submission past the cap with 429 too_many_active_tasks, charging nothing, and accepts again once one ends', async () => {
    const h = await harness({ maxActiveTasks: 2 });
    const { key, accountId } = await h.account(1_000);
    const ids: string[] = [];
    for (let i = 0; i < 2; i++) ids.push(((await (await h.request('POST', SUBMIT, { key, body: validSubmit() })).json()) as { requestId: string }).requestId);
    const balance = (await h.store.getAccount(accountId))!.balance;
    const refused = await h.request('POST', SUBMIT, { key, body: validSubmit() });
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('too_many_active_tasks');
    expect((await h.store.getAccount(accountId))!.balance).toBe(balance);

    await h.request('POST', `${SUBMIT}/${ids[0]}/cancel`, { key });
    expect((await h.request('POST', SUBMIT, { key, body: validSubmit() })).status).toBe(202);
  });

  it('replays an Idempotency-Key even at the cap (the replay creates nothing)', async () => {
    const h = await harness({ maxActiveTasks: 1 });
    const { key } = await h.account(1_000);
    const first = await h.request('POST', SUBMIT, { key, body: validSubmit(), headers: { 'Idempotency-Key': 'once' } });
    const again = await h.request('POST', SUBMIT, { key, body: validSubmit(), headers: { 'Idempotency-Key': 'once' } });
    expect([first.status, again.status]).toEqual([202, 202]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});
});
