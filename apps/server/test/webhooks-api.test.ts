/**
 * The account's webhooks through the API (listWebhookDeliveries, getWebhookDelivery,
 * redeliverWebhook, getWebhookSecret, rotateWebhookSecret), on both stores: every answer checked
 * against the spec; filters and cursors; another account's deliveries never seen; a redelivery
 * pending with its job; the secret rotated with and without an overlap.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Scope } from '../src/domain/keys.js';
import type { Backend } from '../src/store/open.js';
import type { DeliveryStatus, Store } from '../src/store/store.js';
import { SUBMIT, testConfig, validSubmit, type Harness } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { checkedAnswer, type CheckedAnswer } from './support/spec-responses.js';

const DELIVERIES = '/api/open/v1/account/webhooks/deliveries';
const deliveryPath = (id: string) => `${DELIVERIES}/${encodeURIComponent(id)}`;
const SECRET = '/api/open/v1/account/webhooks/secret';
const ROTATE = `${SECRET}/rotate`;
const HOOKS: Scope[] = ['tasks:read', 'tasks:write', 'webhooks:manage'];
const HOUR_MS = 3_600_000;

/** The answer, after checking it against what the spec documents for the operation. */
const checked = checkedAnswer;

describe.each(backendKinds)('webhooks through the API on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });

  interface Setup {
    h: Harness<Store>;
    backend: Backend;
    wakes: { count: number };
  }

  async function setUp(): Promise<Setup> {
    const backend = await opened.fresh();
    const wakes = { count: 0 };
    const h = backendHarness(backend, { wakeWorkers: () => wakes.count++, config: testConfig({ webhooks: { allowLoopback: true } }) });
    return { h, backend, wakes };
  }

  /** A task with a webhookUrl that ended (failed, a second later than the last): its delivery exists. Returns the task id. */
  async function endedTask(h: Harness<Store>, key: string, path = '/hook'): Promise<string> {
    h.clock.advance(1000);
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ webhookUrl: `https://127.0.0.1:8443${path}` }) });
    expect(res.status).toBe(202);
    const { requestId } = (await res.json()) as { requestId: string };
    h.clock.advance(1000);
    expect((await h.store.failTask({ id: requestId, now: h.clock.now(), code: 'internal_error', message: 'the provider failed' })).kind).toBe('failed');
    return requestId;
  }

  /** An attempt recorded as a worker would, leaving the delivery `status`. */
  async function attempt(h: Harness<Store>, taskId: string, status: DeliveryStatus, statusCode: number | null) {
    const delivery = (await h.store.getDeliveryForTask(taskId))!;
    h.clock.advance(500);
    await h.store.recordDeliveryAttempt({
      deliveryId: delivery.id,
      redeliveries: delivery.redeliveries,
      attempt: { attemptedAt: h.clock.now(), statusCode, error: statusCode === null ? 'timed out after 15000 ms' : null, durationMs: 42 },
      status,
      nextAttemptAt: status === 'pending' ? new Date(h.clock.now().getTime() + 60_000) : null,
    });
    return delivery.id;
  }

  it.skipIf(skip)('lists the account’s deliveries newest first, page by page with a cursor, checked against the spec', async () => {
    const { h } = await setUp();
    const { key } = await h.account(1_000_000, HOOKS);
    const tasks: string[] = [];
    for (let i = 0; i < 5; i++) tasks.push(await endedTask(h, key, `/hook/${i}`));
    const other = await h.account(1_000_000, HOOKS);
    await endedTask(h, other.key);

    const all = await checked(h.request('GET', `${DELIVERIES}?limit=100`, { key }), 'listWebhookDeliveries');
    expect(all.status).toBe(200);
    expect(all.body.nextCursor).toBeNull();
    expect(all.body.data.map((d: { requestId: string }) => d.requestId)).toEqual([...tasks].reverse());
    expect(all.body.data[0]).toMatchObject({
      url: 'https://127.0.0.1:8443/hook/4',
      eventType: 'video.generation.failed',
      status: 'pending',
      attempts: 0,
      lastAttemptAt: null,
    });
    expect(all.body.data[0].id).toMatch(/^msg_/);

    const paged: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: CheckedAnswer = await checked(
        h.request('GET', `${DELIVERIES}?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { key }),
        'listWebhookDeliveries',
      );
      expect(page.status).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      paged.push(...page.body.data.map((d: { id: string }) => d.id));
      cursor = page.body.nextCursor;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(paged).toEqual(all.body.data.map((d: { id: string }) => d.id));
  });

  it.skipIf(skip)('filters by status and by requestId, keeps the filters with the cursor, and refuses bad queries', async () => {
    const { h } = await setUp();
    const { key } = await h.account(1_000_000, HOOKS);
    const [a, b, c, d] = [await endedTask(h, key), await endedTask(h, key), await endedTask(h, key), await endedTask(h, key)];
    await attempt(h, a!, 'delivered', 204);
    await attempt(h, b!, 'failed', 410);
    await attempt(h, c!, 'delivered', 200);
    const other = await h.account(1_000_000, HOOKS);
    const othersTask = await endedTask(h, other.key);

    const ids = (body: any) => body.data.map((x: { requestId: string }) => x.requestId);
    const delivered = await checked(h.request('GET', `${DELIVERIES}?status=delivered`, { key }), 'listWebhookDeliveries');
    expect(ids(delivered.body)).toEqual([c, a]);
    expect(delivered.body.data.every((x: { nextAttemptAt: unknown }) => x.nextAttemptAt === null)).toBe(true);
    expect(ids((await checked(h.request('GET', `${DELIVERIES}?status=failed`, { key }), 'listWebhookDeliveries')).body)).toEqual([b]);
    expect(ids((await checked(h.request('GET', `${DELIVERIES}?status=pending`, { key }), 'listWebhookDeliveries')).body)).toEqual([d]);
    expect(ids((await checked(h.request('GET', `${DELIVERIES}?requestId=${b}`, { key }), 'listWebhookDeliveries')).body)).toEqual([b]);
    expect(ids((await checked(h.request('GET', `${DELIVERIES}?requestId=${b}&status=delivered`, { key }), 'listWebhookDeliveries')).body)).toEqual([]);
    // Another account's task, and a requestId of no task's shape, match nothing.
    for (const requestId of [othersTask, 'nope', 'gen_\u0000']) {
      const res = await checked(h.request('GET', `${DELIVERIES}?requestId=${encodeURIComponent(requestId)}`, { key }), 'listWebhookDeliveries');
      expect(res.status).toBe(200);
      expect(res.body.data).toEqual([]);
    }

    // A cursor keeps its filters: page through `delivered` one at a time.
    const first = await checked(h.request('GET', `${DELIVERIES}?status=delivered&limit=1`, { key }), 'listWebhookDeliveries');
    expect(ids(first.body)).toEqual([c]);
    const cursor = encodeURIComponent(first.body.nextCursor);
    const second = await checked(h.request('GET', `${DELIVERIES}?status=delivered&limit=1&cursor=${cursor}`, { key }), 'listWebhookDeliveries');
    expect(ids(second.body)).toEqual([a]);
    expect(second.body.nextCursor).toBeNull();
    for (const query of [`cursor=${cursor}`, `status=failed&cursor=${cursor}`, `status=delivered&requestId=${a}&cursor=${cursor}`]) {
      const res = await checked(h.request('GET', `${DELIVERIES}?${query}`, { key }), 'listWebhookDeliveries');
      expect(res.status, query).toBe(400);
      expect(res.body.error.details[0].field).toBe('cursor');
    }
    // A task list's cursor, made-up cursors, and parameters out of range.
    const tasksPage = (await (await h.request('GET', `${SUBMIT}?limit=1`, { key })).json()) as { nextCursor: string };
    for (const query of [`cursor=${encodeURIComponent(tasksPage.nextCursor)}`, 'cursor=garbage', 'limit=0', 'limit=101', 'status=lost', 'requestId=']) {
      const res = await checked(h.request('GET', `${DELIVERIES}?${query}`, { key }), 'listWebhookDeliveries');
      expect(res.status, query).toBe(400);
    }
  });

  it.skipIf(skip)('shows a delivery with its attempts, oldest first', async () => {
    const { h } = await setUp();
    const { key } = await h.account(1_000_000, HOOKS);
    const task = await endedTask(h, key);
    await attempt(h, task, 'pending', 503);
    const first = h.clock.now().toISOString();
    await attempt(h, task, 'pending', null);
    const id = await attempt(h, task, 'failed', 500);

    const res = await checked(h.request('GET', deliveryPath(id), { key }), 'getWebhookDelivery');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: true, id, requestId: task, status: 'failed', attempts: 3, nextAttemptAt: null, lastAttemptAt: h.clock.now().toISOString() });
    expect(res.body.attemptHistory).toEqual([
      { attemptedAt: first, statusCode: 503, error: null, durationMs: 42 },
      { attemptedAt: new Date(Date.parse(first) + 500).toISOString(), statusCode: null, error: 'timed out after 15000 ms', durationMs: 42 },
      { attemptedAt: h.clock.now().toISOString(), statusCode: 500, error: null, durationMs: 42 },
    ]);
    // Before any attempt: an empty history.
    const fresh = (await h.store.getDeliveryForTask(await endedTask(h, key)))!;
    const none = await checked(h.request('GET', deliveryPath(fresh.id), { key }), 'getWebhookDelivery');
    expect(none.body).toMatchObject({ status: 'pending', attempts: 0, attemptHistory: [] });
    expect(none.body.nextAttemptAt).not.toBeNull();
  });

  it.skipIf(skip)('sends a delivery again: 202, pending and due now, with its job, and workers woken', async () => {
    const { h, backend, wakes } = await setUp();
    const { key } = await h.account(1_000_000, HOOKS);
    const task = await endedTask(h, key);
    // The first chain of attempts ran and failed for good: its job is done.
    const jobs = await backend.queue.claim({ workerId: 'test', now: h.clock.now(), leaseMs: 60_000, provider: 'webhooks', limit: 10 });
    expect(jobs.map((job) => job.taskId)).toEqual([task]);
    await backend.queue.complete(jobs[0]!.id, h.clock.now());
    const id = await attempt(h, task, 'failed', 410);
    expect(await backend.queue.claim({ workerId: 'test', now: h.clock.now(), leaseMs: 60_000, provider: 'webhooks', limit: 10 })).toEqual([]);

    h.clock.advance(60_000);
    const woken = wakes.count;
    const res = await checked(h.request('POST', `${deliveryPath(id)}/redeliver`, { key }), 'redeliverWebhook', 'POST');
    expect(res.status).toBe(202);
    expect(res.body).toEqual({
      success: true,
      delivery: expect.objectContaining({ id, requestId: task, status: 'pending', attempts: 1, nextAttemptAt: h.clock.now().toISOString() }),
    });
    expect(wakes.count).toBe(woken + 1);
    const again = await backend.queue.claim({ workerId: 'test', now: h.clock.now(), leaseMs: 60_000, provider: 'webhooks', limit: 10 });
    expect(again.map((job) => [job.taskId, job.kind])).toEqual([[task, 'deliver']]);
    // The history is kept.
    const shown = await checked(h.request('GET', deliveryPath(id), { key }), 'getWebhookDelivery');
    expect(shown.body).toMatchObject({ status: 'pending', attempts: 1 });
    expect(shown.body.attemptHistory).toHaveLength(1);
    // A body that is sent is ignored.
    const withBody = await checked(h.request('POST', `${deliveryPath(id)}/redeliver`, { key, body: { anything: true } }), 'redeliverWebhook', 'POST');
    expect(withBody.status).toBe(202);
  });

  it.skipIf(skip)('answers another account’s delivery, an unknown id and ids of any shape 404 alike, redelivering nothing', async () => {
    const { h, wakes } = await setUp();
    const { key } = await h.account(1_000_000, HOOKS);
    const other = await h.account(1_000_000, HOOKS);
    const othersId = await attempt(h, await endedTask(h, other.key), 'failed', 410);
    const woken = wakes.count;
    for (const id of [othersId, `msg_${'0'.repeat(26)}`, 'x', 'msg_\u0000', `msg_${'A'.repeat(200)}`, ' ', '%']) {
      const shown = await checked(h.request('GET', deliveryPath(id), { key }), 'getWebhookDelivery');
      expect(shown.status, id).toBe(404);
      expect(shown.body.error).toMatchObject({ code: 'not_found', message: `no webhook delivery ${id}` });
      const redelivered = await checked(h.request('POST', `${deliveryPath(id)}/redeliver`, { key }), 'redeliverWebhook', 'POST');
      expect(redelivered.status, id).toBe(404);
      expect(redelivered.body.error).toMatchObject({ code: 'not_found', message: `no webhook delivery ${id}` });
    }
    expect((await h.store.getDelivery(othersId))!.status).toBe('failed');
    expect(wakes.count).toBe(woken);
  });

  it.skipIf(skip)('shows the signing secret, rotates it with an overlap (the default 24 hours) or none, with no-store', async () => {
    const { h } = await setUp();
    const { key, accountId } = await h.account(0, HOOKS);
    const shown = await checked(h.request('GET', SECRET, { key }), 'getWebhookSecret');
    expect(shown.status).toBe(200);
    expect(shown.headers.get('cache-control')).toBe('no-store');
    expect(shown.body).toEqual({ success: true, secret: expect.stringMatching(/^whsec_/), previousSecretValidUntil: null });
    expect(await h.store.webhookSecrets(accountId, h.clock.now())).toEqual([shown.body.secret]);

    // No body: a 24-hour overlap.
    const rotated = await checked(h.request('POST', ROTATE, { key }), 'rotateWebhookSecret', 'POST');
    expect(rotated.status).toBe(200);
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    const until = new Date(h.clock.now().getTime() + 24 * HOUR_MS).toISOString();
    expect(rotated.body).toEqual({ success: true, secret: expect.stringMatching(/^whsec_/), previousSecretValidUntil: until });
    expect(rotated.body.secret).not.toBe(shown.body.secret);
    const after = await checked(h.request('GET', SECRET, { key }), 'getWebhookSecret');
    expect(after.body).toEqual({ success: true, secret: rotated.body.secret, previousSecretValidUntil: until });
    expect(await h.store.webhookSecrets(accountId, h.clock.now())).toEqual([rotated.body.secret, shown.body.secret]);
    // Once the overlap is over, only the new one signs.
    h.clock.advance(24 * HOUR_MS);
    expect((await checked(h.request('GET', SECRET, { key }), 'getWebhookSecret')).body.previousSecretValidUntil).toBeNull();

    const twoHours = await checked(h.request('POST', ROTATE, { key, body: { overlapHours: 2 } }), 'rotateWebhookSecret', 'POST');
    expect(twoHours.body.previousSecretValidUntil).toBe(new Date(h.clock.now().getTime() + 2 * HOUR_MS).toISOString());

    // 0: the old secret is retired at once.
    const immediate = await checked(h.request('POST', ROTATE, { key, body: { overlapHours: 0 } }), 'rotateWebhookSecret', 'POST');
    expect(immediate.status).toBe(200);
    expect(immediate.body.previousSecretValidUntil).toBeNull();
    const now = await checked(h.request('GET', SECRET, { key }), 'getWebhookSecret');
    expect(now.body).toEqual({ success: true, secret: immediate.body.secret, previousSecretValidUntil: null });
    expect(await h.store.webhookSecrets(accountId, h.clock.now())).toEqual([immediate.body.secret]);

    // `{}` is the default overlap too.
    const empty = await checked(h.request('POST', ROTATE, { key, body: {} }), 'rotateWebhookSecret', 'POST');
    expect(empty.body.previousSecretValidUntil).toBe(new Date(h.clock.now().getTime() + 24 * HOUR_MS).toISOString());
  });

  it.skipIf(skip)('refuses rotation bodies the spec does not allow, rotating nothing', async () => {
    const { h } = await setUp();
    const { key } = await h.account(0, HOOKS);
    const secretOf = async () => ((await (await h.request('GET', SECRET, { key })).json()) as { secret: string }).secret;
    const before = await secretOf();
    for (const [body, field] of [
      [{ overlapHours: 169 }, '/overlapHours'],
      [{ overlapHours: -1 }, '/overlapHours'],
      [{ overlapHours: 1.5 }, '/overlapHours'],
      [{ overlapHours: '24' }, '/overlapHours'],
      [{ overlap: 24 }, '/overlap'],
      ['not json', ''],
    ] as [unknown, string][]) {
      const res = await checked(h.request('POST', ROTATE, { key, body }), 'rotateWebhookSecret', 'POST');
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain(field);
    }
    expect((await checked(h.request('POST', ROTATE, { key, body: '{}', headers: { 'Content-Type': 'text/plain' } }), 'rotateWebhookSecret', 'POST')).status).toBe(415);
    expect((await checked(h.request('POST', ROTATE, { key, body: { overlapHours: 1, pad: 'x'.repeat(70_000) } }), 'rotateWebhookSecret', 'POST')).status).toBe(413);
    expect(await secretOf()).toBe(before);
  });

  it.skipIf(skip)('answers 403 to a key without webhooks:manage on every operation, and 401 without a key', async () => {
    const { h, wakes } = await setUp();
    const { key, accountId } = await h.account(1_000_000, ['tasks:read', 'tasks:write', 'keys:manage']);
    const id = (await h.store.getDeliveryForTask(await endedTask(h, key)))!.id;
    const secrets = await h.store.webhookSecrets(accountId, h.clock.now());
    const operations: [string, string, string][] = [
      ['GET', DELIVERIES, 'listWebhookDeliveries'],
      ['GET', deliveryPath(id), 'getWebhookDelivery'],
      ['POST', `${deliveryPath(id)}/redeliver`, 'redeliverWebhook'],
      ['GET', SECRET, 'getWebhookSecret'],
      ['POST', ROTATE, 'rotateWebhookSecret'],
    ];
    for (const [method, path, operationId] of operations) {
      const forbidden = await checked(h.request(method, path, { key }), operationId, method);
      expect(forbidden.status, operationId).toBe(403);
      expect(forbidden.body.error.message).toBe('this API key lacks the webhooks:manage scope');
      expect(JSON.stringify(forbidden.body)).not.toContain('whsec_');
      const anonymous = await checked(h.request(method, path, {}), operationId, method);
      expect(anonymous.status, operationId).toBe(401);
    }
    expect(await h.store.webhookSecrets(accountId, h.clock.now())).toEqual(secrets);
    expect(wakes.count).toBe(1); // the submission's own
  });
});
