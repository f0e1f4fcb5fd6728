/**
 * Every operation of the spec, called the way a client would, with each answer
 * validated against the spec. Against the real server the answers' meaning is
 * checked too (defaults applied, price, lifecycle, pagination); against the
 * mock, only their shape.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { minimalSubmit, MOCK_TASK_ID, submitExamples } from '../src/fixtures.js';
import { call, exercised, expectConforms, send, untilTerminal } from '../src/http.js';
import { bundleText, operations } from '../src/spec.js';
import { isMock } from '../src/target.js';

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
      expect(reply.json.data.length).toBeLessThanOrEqual(2);
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
    it.each(['getHealth', 'getReadiness', 'getMetrics', 'getReference'])('%s answers 200 without a key', async (operationId) => {
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
