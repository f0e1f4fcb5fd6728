/**
 * Every operation of the spec, called the way a client would, with each answer
 * validated against the spec. Against the real server the answers' meaning is
 * checked too (defaults applied, price, lifecycle, pagination, the account's
 * ledger, keys and webhook deliveries, tenant isolation); against the mock, only
 * their shape.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { endedWebhookTask, keyWith, mintKey, ownKeyId } from '../src/account.js';
import { minimalSubmit, MOCK_TASK_ID, submitExamples } from '../src/fixtures.js';
import { call, exercised, expectConforms, send, untilTerminal } from '../src/http.js';
import { bundleText, operations } from '../src/spec.js';
import { isMock, target } from '../src/target.js';

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** A task that takes seconds to render, so a cancel sent right after submitting finds it active. */
const longRender = () => ({ ...minimalSubmit(), model: 'vidgen-2.0', duration: 15, resolution: '1080p' });



async function submitted(body = minimalSubmit()) {
  const reply = await call('submitGeneration', { body });
  expectConforms('submitGeneration', reply, 202);
  return reply.json as { requestId: string; creditsCharged: number };
}

describe('operations', () => {
  afterAll(() => {
    const missing = operations.filter((op) => !op.webhook && !exercised.has(op.operationId)).map((op) => op.operationId);
    expect(missing, 'operations this suite never called').toEqual([]);
  });

  describe('submitGeneration', () => {
    it.each(Object.entries(submitExamples))('accepts the %s example with 202 and a Location', async (_, body) => {
      const { webhookUrl: _hook, ...withoutWebhook } = body;
      const reply = await call('submitGeneration', { body: isMock ? body : withoutWebhook });
      expectConforms('submitGeneration', reply, 202);
      expect(reply.json.status).toBe('queued');
      expect(reply.headers.get('location')).toBe(`/api/open/v1/video/generations/${reply.json.requestId}`);
    });

    it.skipIf(isMock)('charges the published price: creditsPerSecond(resolution) × duration', async () => {
      const models = await call('listModels');
      const rate = models.json.data
        .find((m: { id: string }) => m.id === 'vidgen-2.0-fast')
        .prices.find((p: { resolution: string }) => p.resolution === '480p').creditsPerSecond;
      const { creditsCharged } = await submitted({ ...minimalSubmit(), duration: 7 });
      expect(creditsCharged).toBe(rate * 7);
    });

    it.skipIf(isMock)('echoes the caller’s X-Correlation-Id', async () => {
      const reply = await call('submitGeneration', { body: minimalSubmit(), headers: { 'X-Correlation-Id': 'contract-suite-42' } });
      expectConforms('submitGeneration', reply, 202);
      expect(reply.headers.get('x-correlation-id')).toBe('contract-suite-42');
    });

    it.skipIf(isMock)('replays an Idempotency-Key with the same body: same answer, no second charge', async () => {
      const key = `contract-${crypto.randomUUID()}`;
      const first = await call('submitGeneration', { body: minimalSubmit(), headers: { 'Idempotency-Key': key } });
      const again = await call('submitGeneration', { body: minimalSubmit(), headers: { 'Idempotency-Key': key } });
      expectConforms('submitGeneration', first, 202);
      expectConforms('submitGeneration', again, 202);
      expect(again.json).toEqual(first.json);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(again.headers.get('idempotent-replayed')).toBe('true');
    });
  });

  describe('getGeneration', () => {
    it('answers the task with 200', async () => {
      const requestId = isMock ? MOCK_TASK_ID : (await submitted()).requestId;
      const reply = await call('getGeneration', { path: { requestId } });
      expectConforms('getGeneration', reply, 200);
      expect(reply.json.requestId).toBe(requestId);
    });

    it.skipIf(isMock)('stores the defaults with the task and hints when to poll again', async () => {
      const { requestId, creditsCharged } = await submitted({ model: 'vidgen-2.0', prompt: 'defaults please' });
      const reply = await call('getGeneration', { path: { requestId } });
      expectConforms('getGeneration', reply, 200);
      // A worker may already have started it.
      expect(['queued', 'processing']).toContain(reply.json.status);
      expect(reply.json).toMatchObject({
        duration: 5,
        resolution: '720p',
        aspectRatio: '16:9',
        mode: 'text_to_video',
        mediaUrls: [],
        metadata: null,
        output: null,
        error: null,
        creditsCharged,
        creditsRefunded: 0,
      });
      expect(Number(reply.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    });

    it('long-polls with wait', async () => {
      const requestId = isMock ? MOCK_TASK_ID : (await submitted()).requestId;
      const reply = await call('getGeneration', { path: { requestId }, query: { wait: 1 } });
      expectConforms('getGeneration', reply, 200);
    });
  });

  describe('cancelGeneration', () => {
    it('cancels a queued task with 200', async () => {
      const requestId = isMock ? MOCK_TASK_ID : (await submitted(longRender())).requestId;
      const reply = await call('cancelGeneration', { path: { requestId } });
      expectConforms('cancelGeneration', reply, 200);
      expect(reply.json).toEqual({ success: true, requestId, status: 'cancelled' });
    });

    it.skipIf(isMock)('is idempotent and refunds exactly once', async () => {
      const { requestId, creditsCharged } = await submitted(longRender());
      expectConforms('cancelGeneration', await call('cancelGeneration', { path: { requestId } }), 200);
      expectConforms('cancelGeneration', await call('cancelGeneration', { path: { requestId } }), 200);
      const task = await call('getGeneration', { path: { requestId } });
      expectConforms('getGeneration', task, 200);
      expect(task.json).toMatchObject({ status: 'cancelled', creditsRefunded: creditsCharged });
      expect(TERMINAL.has(task.json.status)).toBe(true);
      expect(task.headers.get('retry-after')).toBeNull();
    });
  });

  describe('listGenerations', () => {
    it('answers a page with 200', async () => {
      const reply = await call('listGenerations', { query: { limit: 2 } });
      expectConforms('listGenerations', reply, 200);
      // The mock answers its example page whatever the limit.
      if (!isMock) expect(reply.json.data.length).toBeLessThanOrEqual(2);
    });

    it.skipIf(isMock)('walks every page newest first without repeats', async () => {
      const mine = [] as string[];
      for (let i = 0; i < 5; i++) mine.push((await submitted()).requestId);
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const reply = await call('listGenerations', { query: { limit: 2, ...(cursor ? { cursor } : {}) } });
        expectConforms('listGenerations', reply, 200);
        seen.push(...reply.json.data.map((t: { requestId: string }) => t.requestId));
        cursor = reply.json.nextCursor ?? undefined;
      } while (cursor && seen.length < 10_000);
      expect(new Set(seen).size).toBe(seen.length);
      const positions = mine.map((id) => seen.indexOf(id));
      expect(positions.every((p) => p >= 0)).toBe(true);
      expect([...positions].sort((a, b) => b - a)).toEqual(positions);
    });

    it.skipIf(isMock)('filters by status', async () => {
      const { requestId } = await submitted(longRender());
      await call('cancelGeneration', { path: { requestId } });
      const reply = await call('listGenerations', { query: { status: 'cancelled', limit: 100 } });
      expectConforms('listGenerations', reply, 200);
      expect(reply.json.data.every((t: { status: string }) => t.status === 'cancelled')).toBe(true);
      expect(reply.json.data.map((t: { requestId: string }) => t.requestId)).toContain(requestId);
    });
  });

  describe('getOutputFile', () => {
    it('serves the video of a succeeded task, whole and in ranges', async () => {
      let path: string;
      if (isMock) {
        path = '/files/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0.mp4?expires=1764410462&sig=6q1oVbQf3WcR0m2xk3P9';
      } else {
        const { requestId } = await submitted();
        const task = await untilTerminal(requestId);
        expect(task.status, JSON.stringify(task.error)).toBe('succeeded');
        const url = new URL(task.output.url);
        path = url.pathname + url.search;
      }
      const [fileName, query] = path.slice('/files/'.length).split('?') as [string, string];
      const params = Object.fromEntries(new URLSearchParams(query));
      const whole = await call('getOutputFile', { path: { fileName }, query: params, apiKey: null });
      expectConforms('getOutputFile', whole, 200);
      const ranged = await call('getOutputFile', { path: { fileName }, query: params, apiKey: null, headers: { Range: 'bytes=0-99' }, prefer: isMock ? 'code=206' : undefined });
      expectConforms('getOutputFile', ranged, 206);
      if (!isMock) {
        expect(ranged.headers.get('content-range')).toMatch(/^bytes 0-99\/\d+$/);
        const forged = await call('getOutputFile', { path: { fileName }, query: { ...params, sig: 'forged' }, apiKey: null });
        expectConforms('getOutputFile', forged, 403);
      }
    });
  });

  describe('listModels', () => {
    it('lists the three models with their prices', async () => {
      const reply = await call('listModels');
      expectConforms('listModels', reply, 200);
      expect(reply.json.data.map((m: { id: string }) => m.id).sort()).toEqual(['vidgen-1.5-pro', 'vidgen-2.0', 'vidgen-2.0-fast']);
    });
  });

  describe('getAccount', () => {
    it('answers the account and the calling key with 200', async () => {
      const reply = await call('getAccount');
      expectConforms('getAccount', reply, 200);
      if (!isMock) {
        // The hint shows the key's last characters; the key itself is never answered.
        expect(target.apiKey.endsWith(reply.json.key.hint.slice(-4))).toBe(true);
        expect(reply.text).not.toContain(target.apiKey);
        expect(reply.json.key.scopes).toEqual(expect.arrayContaining(['tasks:read', 'tasks:write', 'keys:manage', 'webhooks:manage']));
      }
    });

    it.skipIf(isMock)('holds the credits of an active task and counts it', async () => {
      const { creditsCharged } = await submitted(longRender());
      const reply = await call('getAccount');
      expectConforms('getAccount', reply, 200);
      expect(reply.json.creditsHeld).toBeGreaterThanOrEqual(creditsCharged);
      expect(reply.json.activeTasks).toBeGreaterThanOrEqual(1);
    });

    it.skipIf(isMock || !target.otherApiKey)('answers only the calling key’s own account', async () => {
      const mine = await call('getAccount');
      const theirs = await call('getAccount', { apiKey: target.otherApiKey });
      expectConforms('getAccount', theirs, 200);
      expect(theirs.json.id).not.toBe(mine.json.id);
      expect(theirs.json.key.id).not.toBe(mine.json.key.id);
    });
  });

  describe('listLedgerEntries', () => {
    it('answers a page with 200', async () => {
      const reply = await call('listLedgerEntries', { query: { limit: 2 } });
      expectConforms('listLedgerEntries', reply, 200);
      // The mock answers its example page whatever the limit.
      if (!isMock) expect(reply.json.data.length).toBeLessThanOrEqual(2);
    });

    it.skipIf(isMock)('shows a cancelled task’s charge and its refund, filtered by requestId', async () => {
      const { requestId, creditsCharged } = await submitted(longRender());
      expectConforms('cancelGeneration', await call('cancelGeneration', { path: { requestId } }), 200);
      const reply = await call('listLedgerEntries', { query: { requestId } });
      expectConforms('listLedgerEntries', reply, 200);
      expect(reply.json.data.map((e: { kind: string; amount: number; requestId: string }) => [e.kind, e.amount, e.requestId])).toEqual([
        ['refund', creditsCharged, requestId],
        ['charge', -creditsCharged, requestId],
      ]);
      expect(reply.json.nextCursor).toBeNull();
    });

    it.skipIf(isMock)('walks pages of one kind, newest first, keeping the filter in the cursor', async () => {
      for (let i = 0; i < 3; i++) await submitted();
      const seen: { id: string; kind: string; createdAt: string }[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 3; page++) {
        const reply = await call('listLedgerEntries', { query: { limit: 2, kind: 'charge', ...(cursor ? { cursor } : {}) } });
        expectConforms('listLedgerEntries', reply, 200);
        seen.push(...reply.json.data);
        cursor = reply.json.nextCursor ?? undefined;
        if (!cursor) break;
      }
      expect(seen.length).toBeGreaterThanOrEqual(3);
      expect(seen.every((e) => e.kind === 'charge')).toBe(true);
      expect(new Set(seen.map((e) => e.id)).size).toBe(seen.length);
      const times = seen.map((e) => Date.parse(e.createdAt));
      expect([...times].sort((a, b) => b - a)).toEqual(times);
    });

    it.skipIf(isMock || !target.otherApiKey)('matches nothing for another account’s task', async () => {
      const theirs = await call('submitGeneration', { body: minimalSubmit(), apiKey: target.otherApiKey });
      expectConforms('submitGeneration', theirs, 202);
      const reply = await call('listLedgerEntries', { query: { requestId: theirs.json.requestId } });
      expectConforms('listLedgerEntries', reply, 200);
      expect(reply.json).toEqual({ success: true, data: [], nextCursor: null });
    });
  });

  describe('getUsage', () => {
    it('answers the last 30 days, day by day, with 200', async () => {
      const reply = await call('getUsage');
      expectConforms('getUsage', reply, 200);
      if (!isMock) {
        expect(reply.json).toMatchObject({ granularity: 'day', groupBy: null });
        expect(reply.json.data.length).toBeGreaterThanOrEqual(30);
        expect(reply.json.data[0].start).toBe(reply.json.from);
        expect(reply.json.data.at(-1).end).toBe(reply.json.to);
      }
    });

    it('answers hours by model', async () => {
      const charged = isMock ? 0 : (await submitted()).creditsCharged;
      const now = Date.now();
      const query = { granularity: 'hour', groupBy: 'model', from: new Date(now - 3_600_000).toISOString(), to: new Date(now).toISOString() };
      const reply = await call('getUsage', { query });
      expectConforms('getUsage', reply, 200);
      if (!isMock) {
        expect(reply.json).toMatchObject({ granularity: 'hour', groupBy: 'model' });
        const models = new Set(reply.json.data.map((b: { model: string }) => b.model));
        expect([...models].sort()).toEqual(['vidgen-1.5-pro', 'vidgen-2.0', 'vidgen-2.0-fast']);
        for (const b of reply.json.data) expect(b.creditsNet).toBe(b.creditsCharged - b.creditsRefunded);
        // The task just accepted is charged within the range, on its model.
        const fast = reply.json.data.filter((b: { model: string }) => b.model === 'vidgen-2.0-fast');
        expect(fast.reduce((sum: number, b: { creditsCharged: number }) => sum + b.creditsCharged, 0)).toBeGreaterThanOrEqual(charged);
      }
    });
  });

  describe('listApiKeys', () => {
    it('lists the account’s keys with 200', async () => {
      const reply = await call('listApiKeys');
      expectConforms('listApiKeys', reply, 200);
      if (!isMock) {
        const minted = await keyWith('tasks:read');
        const ids = reply.json.data.map((k: { id: string }) => k.id);
        expect(ids).toContain(await ownKeyId(target.apiKey));
        const again = await call('listApiKeys');
        expect(again.json.data.map((k: { id: string }) => k.id)).toContain(minted.id);
        // Hints only, never a key.
        expect(again.text).not.toContain(minted.key);
        const times = again.json.data.map((k: { createdAt: string }) => Date.parse(k.createdAt));
        expect([...times].sort((a, b) => b - a)).toEqual(times);
      }
    });

    it.skipIf(isMock || !target.otherApiKey)('lists no key of another account', async () => {
      const theirs = await ownKeyId(target.otherApiKey!);
      const reply = await call('listApiKeys');
      expectConforms('listApiKeys', reply, 200);
      expect(reply.json.data.map((k: { id: string }) => k.id)).not.toContain(theirs);
    });
  });

  describe('createApiKey', () => {
    it('issues a narrower key with 201, shown once', async () => {
      const body = { name: 'contract suite: read-only', scopes: ['tasks:read'], expiresInDays: 90 };
      const reply = await call('createApiKey', { body });
      expectConforms('createApiKey', reply, 201);
      if (!isMock) {
        expect(reply.headers.get('cache-control')).toBe('no-store');
        expect(reply.json).toMatchObject({ name: body.name, scopes: ['tasks:read'], revokedAt: null });
        expect(reply.json.key.endsWith(reply.json.hint.slice(-4))).toBe(true);
        const expires = Date.parse(reply.json.expiresAt) - Date.parse(reply.json.createdAt);
        expect(expires).toBe(90 * 86_400_000);
        // It works, as itself, with the scopes asked for.
        const account = await call('getAccount', { apiKey: reply.json.key });
        expectConforms('getAccount', account, 200);
        expect(account.json.key).toMatchObject({ id: reply.json.id, scopes: ['tasks:read'] });
        expectConforms('submitGeneration', await call('submitGeneration', { body: minimalSubmit(), apiKey: reply.json.key }), 403);
      }
    });

    it('issues a key like the calling one without a body', async () => {
      const reply = await call('createApiKey');
      expectConforms('createApiKey', reply, 201);
      if (!isMock) {
        const caller = (await call('getAccount')).json.key;
        expect(reply.json).toMatchObject({ mode: caller.mode, scopes: caller.scopes, name: null, expiresAt: null });
      }
    });
  });

  describe('revokeApiKey', () => {
    it('revokes a key with 200', async () => {
      const minted = await mintKey({ scopes: ['tasks:read'] });
      const reply = await call('revokeApiKey', { path: { keyId: minted.id } });
      expectConforms('revokeApiKey', reply, 200);
      expect(reply.json.key.id).toBe(minted.id);
      if (!isMock) {
        expect(reply.json.key.revokedAt).not.toBeNull();
        // Refused at once, and answered 200 again with the same revokedAt.
        expectConforms('getAccount', await call('getAccount', { apiKey: minted.key }), 401);
        const again = await call('revokeApiKey', { path: { keyId: minted.id } });
        expectConforms('revokeApiKey', again, 200);
        expect(again.json.key.revokedAt).toBe(reply.json.key.revokedAt);
        const listed = (await call('listApiKeys')).json.data.find((k: { id: string }) => k.id === minted.id);
        expect(listed.revokedAt).toBe(reply.json.key.revokedAt);
      }
    });
  });

  describe('listWebhookDeliveries', () => {
    it('answers a page with 200', async () => {
      const reply = await call('listWebhookDeliveries', { query: { limit: 1 } });
      expectConforms('listWebhookDeliveries', reply, 200);
      if (!isMock) expect(reply.json.data.length).toBeLessThanOrEqual(1);
    });

    it.skipIf(isMock || !target.webhookUrl)('lists the delivery of a task that ended with a webhookUrl, by requestId and by status', async () => {
      const { requestId, deliveryId } = await endedWebhookTask();
      const reply = await call('listWebhookDeliveries', { query: { requestId } });
      expectConforms('listWebhookDeliveries', reply, 200);
      expect(reply.json.data).toHaveLength(1);
      const delivery = reply.json.data[0];
      expect(delivery).toMatchObject({ id: deliveryId, requestId, url: target.webhookUrl, eventType: 'video.generation.cancelled' });
      const byStatus = await call('listWebhookDeliveries', { query: { status: delivery.status, limit: 100 } });
      expectConforms('listWebhookDeliveries', byStatus, 200);
      expect(byStatus.json.data.every((d: { status: string }) => d.status === delivery.status)).toBe(true);
    });

    it.skipIf(isMock || !target.webhookUrl || !target.otherApiKey)('walks pages newest first without repeats', async () => {
      await endedWebhookTask();
      await endedWebhookTask(target.otherApiKey);
      const seen: { id: string; createdAt: string }[] = [];
      let cursor: string | undefined;
      do {
        const reply = await call('listWebhookDeliveries', { query: { limit: 1, ...(cursor ? { cursor } : {}) } });
        expectConforms('listWebhookDeliveries', reply, 200);
        seen.push(...reply.json.data);
        cursor = reply.json.nextCursor ?? undefined;
      } while (cursor && seen.length < 1_000);
      expect(new Set(seen.map((d) => d.id)).size).toBe(seen.length);
      const times = seen.map((d) => Date.parse(d.createdAt));
      expect([...times].sort((a, b) => b - a)).toEqual(times);
      // Only the account's own: the other account's delivery is not among them.
      const theirs = await endedWebhookTask(target.otherApiKey);
      expect(seen.map((d) => d.id)).not.toContain(theirs.deliveryId);
    });
  });

  describe('getWebhookDelivery', () => {
    it.skipIf(!isMock && !target.webhookUrl)('answers a delivery and its attempts with 200', async () => {
      const { requestId, deliveryId } = await endedWebhookTask();
      const reply = await call('getWebhookDelivery', { path: { deliveryId } });
      expectConforms('getWebhookDelivery', reply, 200);
      expect(reply.json.id).toBe(deliveryId);
      if (!isMock) {
        expect(reply.json.requestId).toBe(requestId);
        expect(reply.json.attemptHistory).toHaveLength(reply.json.attempts);
      }
    });
  });

  describe('redeliverWebhook', () => {
    it.skipIf(!isMock && !target.webhookUrl)('schedules a delivery again with 202', async () => {
      const { deliveryId } = await endedWebhookTask();
      const reply = await call('redeliverWebhook', { path: { deliveryId } });
      expectConforms('redeliverWebhook', reply, 202);
      expect(reply.json.delivery.id).toBe(deliveryId);
      if (!isMock) {
        expect(reply.json.delivery.status).toBe('pending');
        expect(reply.json.delivery.nextAttemptAt).not.toBeNull();
        expectConforms('getWebhookDelivery', await call('getWebhookDelivery', { path: { deliveryId } }), 200);
      }
    });
  });

  describe('getWebhookSecret and rotateWebhookSecret', () => {
    it('getWebhookSecret answers the signing secret with 200', async () => {
      const reply = await call('getWebhookSecret');
      expectConforms('getWebhookSecret', reply, 200);
      expect(reply.json.secret).toMatch(/^whsec_/);
      if (!isMock) expect(reply.headers.get('cache-control')).toBe('no-store');
    });

    it('rotateWebhookSecret answers a new secret with 200', async () => {
      const before = await call('getWebhookSecret');
      const reply = await call('rotateWebhookSecret', { body: { overlapHours: 24 } });
      expectConforms('rotateWebhookSecret', reply, 200);
      if (!isMock) {
        expect(reply.headers.get('cache-control')).toBe('no-store');
        expect(reply.json.secret).not.toBe(before.json.secret);
        const overlap = Date.parse(reply.json.previousSecretValidUntil) - Date.now();
        expect(overlap).toBeGreaterThan(23 * 3_600_000);
        expect(overlap).toBeLessThanOrEqual(24 * 3_600_000);
        const after = await call('getWebhookSecret');
        expectConforms('getWebhookSecret', after, 200);
        expect(after.json).toEqual(reply.json);
      }
    });

    it.skipIf(isMock)('rotates with overlapHours 0 (the old secret retired) and with no body (24 hours)', async () => {
      const now = await call('rotateWebhookSecret', { body: { overlapHours: 0 } });
      expectConforms('rotateWebhookSecret', now, 200);
      expect(now.json.previousSecretValidUntil).toBeNull();
      const byDefault = await call('rotateWebhookSecret');
      expectConforms('rotateWebhookSecret', byDefault, 200);
      expect(byDefault.json.secret).not.toBe(now.json.secret);
      expect(Date.parse(byDefault.json.previousSecretValidUntil) - Date.now()).toBeGreaterThan(23 * 3_600_000);
    });
  });

  it.skipIf(isMock)('the account holder’s operations spend the read budget, and say so', async () => {
    const deliveryId = target.webhookUrl ? (await endedWebhookTask()).deliveryId : 'msg_00000000000000000000000000';
    const replies = [
      await call('getAccount'),
      await call('listLedgerEntries'),
      await call('getUsage'),
      await call('listApiKeys'),
      await call('createApiKey', { body: { scopes: ['tasks:read'], name: 'contract suite: budget' } }),
      await call('revokeApiKey', { path: { keyId: 'key_00000000000000000000000000' } }),
      await call('listWebhookDeliveries'),
      await call('getWebhookDelivery', { path: { deliveryId } }),
      await call('redeliverWebhook', { path: { deliveryId } }),
      await call('getWebhookSecret'),
      await call('rotateWebhookSecret'),
    ];
    for (const reply of replies) {
      expect(reply.status, reply.text.slice(0, 200)).toBeLessThan(500);
      expect(reply.headers.get('ratelimit-policy'), reply.text.slice(0, 200)).toMatch(/^"read";/);
      expect(reply.headers.get('ratelimit')).toMatch(/^"read";r=\d+;t=\d+$/);
    }
  });

  describe('receiveUpstreamCallback', () => {
    // The harness's server has no public base URL, so it asks the upstream for no callbacks and answers every one 404.
    it('takes a callback without a key: 204 on the mock, 404 from a server that issued no such token', async () => {
      const reply = await call('receiveUpstreamCallback', {
        path: { requestId: MOCK_TASK_ID },
        query: { token: 'not-a-token-this-server-issued' },
        body: { id: 'cgt-20261122100000-abcde', status: 'succeeded' },
        apiKey: null,
      });
      expectConforms('receiveUpstreamCallback', reply, isMock ? 204 : 404);
      if (isMock) expect(reply.text).toBe('');
    });
  });

  describe('service endpoints', () => {
    it.each(['getHealth', 'getReadiness', 'getMetrics', 'getReference', 'getConsole'])('%s answers 200 without a key', async (operationId) => {
      const reply = await call(operationId, { apiKey: null });
      expectConforms(operationId, reply, 200);
    });

    it('getOpenApiDocument answers the bundled spec', async () => {
      const reply = await call('getOpenApiDocument', { apiKey: null });
      expectConforms('getOpenApiDocument', reply, 200);
      if (!isMock) expect(reply.json).toEqual(JSON.parse(bundleText));
    });
  });

  it.skipIf(isMock)('sends X-Correlation-Id on every answer, also on errors', async () => {
    for (const reply of [await send('GET', '/healthz'), await send('GET', '/api/open/v1/models'), await send('GET', '/nowhere')]) {
      expect(reply.headers.get('x-correlation-id'), `${reply.status}`).toBeTruthy();
    }
  });
});
