/** The HTTP layer through app.request: errors, long poll, service endpoints. */
import { describe, expect, it } from 'vitest';
import { RequestsInFlight } from '../src/http/drain.js';
import { createMetrics } from '../src/http/metrics.js';
import { bundleText } from '../src/http/spec.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { Store } from '../src/store/store.js';
import { harness, SUBMIT, validSubmit, until } from './support.js';

async function submitted(h: ReturnType<typeof harness>, key: string) {
  const res = await h.request('POST', SUBMIT, { key, body: validSubmit() });
  expect(res.status).toBe(202);
  return ((await res.json()) as any) as { requestId: string; creditsCharged: number };
}

describe('submission errors', () => {
  it.each([
    ['malformed JSON', '{"model":', 400, 'invalid_request', ''],
    ['a prompt of the wrong type', { ...validSubmit(), prompt: 5 }, 400, 'invalid_request', '/prompt'],
    ['an unknown model', { ...validSubmit(), model: 'vidgen-3' }, 400, 'invalid_request', '/model'],
    ['duration 16 for vidgen-2.0', { ...validSubmit(), model: 'vidgen-2.0', duration: 16 }, 400, 'invalid_request', '/duration'],
    ['duration 7 for vidgen-1.5-pro', { ...validSubmit(), model: 'vidgen-1.5-pro', duration: 7 }, 400, 'invalid_request', '/duration'],
    ['6 media URLs', { ...validSubmit(), mediaUrls: [1, 2, 3, 4, 5, 6].map((n) => `https://x.com/${n}.png`) }, 400, 'invalid_request', '/mediaUrls'],
    ['a video for vidgen-1.5-pro', { ...validSubmit(), model: 'vidgen-1.5-pro', duration: 5, mediaUrls: ['https://x.com/a.mp4'] }, 400, 'invalid_request', '/mediaUrls/0'],
    ['audio only', { ...validSubmit(), mediaUrls: ['https://x.com/a.mp3'] }, 400, 'invalid_request', '/mediaUrls'],
    ['metadata over 4 KiB', { ...validSubmit(), metadata: { a: 'x'.repeat(5000) } }, 400, 'invalid_request', '/metadata'],
  ])('%s → %s %s naming %s', async (_, body, status, code, field) => {
    const h = harness();
    const { key } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body });
    expect(res.status).toBe(status);
    const json = (await res.json()) as any;
    expect(json.error.code).toBe(code);
    expect(json.error.details.map((d: { field: string }) => d.field)).toContain(field);
  });

  it('explains model rules in words', async () => {
    const h = harness();
    const { key } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body: { ...validSubmit(), model: 'vidgen-1.5-pro', duration: 7, mediaUrls: ['https://x.com/a.mov'] } });
    const json = (await res.json()) as any;
    expect(json.error.message).toBe('duration must be one of 5, 10 for vidgen-1.5-pro (and 1 more problem)');
    expect(json.error.details).toContainEqual({ field: '/mediaUrls/0', message: 'is a video; vidgen-1.5-pro accepts images only' });
  });

  it("says what is wrong with a malformed reference URL, not another model's kind rule", async () => {
    const h = harness();
    const { key } = await h.account();
    for (const [model, url] of [
      ['vidgen-2.0', 'HTTPS://cdn.example.com/a.png'],
      ['vidgen-2.0', 'https:///x.png'],
      ['vidgen-1.5-pro', 'HTTPS://cdn.example.com/a.png'],
    ]) {
      const res = await h.request('POST', SUBMIT, { key, body: { ...validSubmit(), model, duration: 5, mediaUrls: [url] } });
      expect(res.status).toBe(400);
      const details = ((await res.json()) as any).error.details as { field: string; message: string }[];
      expect(details, `${model} ${url}`).toContainEqual({ field: '/mediaUrls/0', message: 'must be a URL of the form https://host/path.ext, in lower-case https' });
      expect(details.some((d) => d.message.includes('accepts images only')), `${model} ${url}`).toBe(false);
    }
  });

  it('refuses a body over 64 KiB without a Content-Length, as it streams in', async () => {
    const h = harness();
    const { key } = await h.account();
    const chunk = new TextEncoder().encode(`{"prompt":"${'x'.repeat(16 * 1024)}`);
    let sent = 0;
    const body = new ReadableStream({
      pull(controller) {
        sent += 1;
        controller.enqueue(chunk);
        if (sent > 64) controller.close();
      },
    });
    const res = await h.app.request(SUBMIT, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
    expect(((await res.json()) as any).error.code).toBe('payload_too_large');
    expect(sent).toBeLessThan(64);
  });

  it('refuses an expired key', async () => {
    const h = harness();
    const { accountId } = await h.account();
    const { issueApiKey } = await import('../src/accounts.js');
    const { key } = await issueApiKey(h.store, { accountId, mode: 'live', scopes: ['tasks:read'], name: null, expiresAt: new Date(h.clock.now().getTime() + 1000), now: h.clock.now() });
    expect((await h.request('GET', '/api/open/v1/models', { key })).status).toBe(200);
    h.clock.advance(1000);
    const res = await h.request('GET', '/api/open/v1/models', { key });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe('Bearer realm="vidgen", error="invalid_token"');
  });

  it('answers 409 idempotency_in_progress while another claim of the key is open', async () => {
    const h = harness();
    const { key, accountId } = await h.account();
    h.store.db
      .prepare("INSERT INTO idempotency_keys (account_id, key, fingerprint, state, created_at, expires_at) VALUES (?, 'k1', 'f', 'in_progress', 0, ?)")
      .run(accountId, h.clock.now().getTime() + 3600_000);
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit(), headers: { 'Idempotency-Key': 'k1' } });
    expect(res.status).toBe(409);
    expect(((await res.json()) as any).error.code).toBe('idempotency_in_progress');
    expect(res.headers.get('retry-after')).toBe('1');
  });

  it('refuses an Idempotency-Key that is not printable ASCII', async () => {
    const h = harness();
    const { key } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit(), headers: { 'Idempotency-Key': 'x'.repeat(300) } });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.details[0].field).toBe('Idempotency-Key');
  });
});

describe('cancel', () => {
  it('answers 409 invalid_state with the status for a finished task, refunding nothing', async () => {
    const h = harness();
    const { key, accountId } = await h.account(100);
    const { requestId } = await submitted(h, key);
    h.store.db.prepare("UPDATE tasks SET status = 'succeeded' WHERE id = ?").run(requestId);
    const res = await h.request('POST', `${SUBMIT}/${requestId}/cancel`, { key });
    expect(res.status).toBe(409);
    expect(((await res.json()) as any).error).toMatchObject({ code: 'invalid_state', details: [{ field: 'status', value: 'succeeded' }] });
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 100 - 12, ledgerSum: 100 - 12 });
  });
});

describe('long poll', () => {
  it('answers as soon as the status changes', async () => {
    const h = harness();
    const { key } = await h.account();
    const { requestId } = await submitted(h, key);
    const polling = h.request('GET', `${SUBMIT}/${requestId}?wait=30`, { key });
    await until(() => h.clock.pendingTimers === 1);
    await h.request('POST', `${SUBMIT}/${requestId}/cancel`, { key });
    const res = await polling;
    expect(((await res.json()) as any).status).toBe('cancelled');
    expect(res.headers.get('retry-after')).toBeNull();
    expect(h.clock.pendingTimers).toBe(0);
  });

  it('answers with the unchanged task after the wait, with a poll hint', async () => {
    const h = harness();
    const { key } = await h.account();
    const { requestId } = await submitted(h, key);
    const polling = h.request('GET', `${SUBMIT}/${requestId}?wait=5`, { key });
    await until(() => h.clock.pendingTimers === 1);
    h.clock.advance(5000);
    const res = await polling;
    expect(((await res.json()) as any).status).toBe('queued');
    expect(res.headers.get('retry-after')).toBe('2');
  });

  it('does not wait for a terminal task', async () => {
    const h = harness();
    const { key } = await h.account();
    const { requestId } = await submitted(h, key);
    await h.request('POST', `${SUBMIT}/${requestId}/cancel`, { key });
    const res = await h.request('GET', `${SUBMIT}/${requestId}?wait=30`, { key });
    expect(((await res.json()) as any).status).toBe('cancelled');
    expect(h.clock.pendingTimers).toBe(0);
  });
});

describe('failures inside the service', () => {
  it('answers 500 internal_error without internals, logging the correlation id', async () => {
    const logged: string[] = [];
    const pino = (await import('pino')).default;
    const logger = pino({ level: 'error' }, { write: (line: string) => logged.push(line) });
    const h = harness({ logger });
    const { key } = await h.account();
    const broken = Object.create(h.store) as Store;
    broken.getTask = async () => {
      throw new Error('disk I/O error at /var/lib/secret/path');
    };
    const { createApp } = await import('../src/app.js');
    const app = createApp({ ...h.deps, store: broken, logger });
    const res = await app.request(`${SUBMIT}/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0`, { headers: { Authorization: `Bearer ${key}`, 'X-Correlation-Id': 'trace-500' } });
    expect(res.status).toBe(500);
    const text = await res.text();
    expect(JSON.parse(text).error.code).toBe('internal_error');
    expect(text).not.toMatch(/secret|disk I\/O|at .*\.ts/);
    expect(text).toContain('trace-500');
    expect(logged.join('\n')).toMatch(/trace-500/);
    expect(logged.join('\n')).not.toContain(key);
  });

  it('is not ready when the store is unreachable, while still alive', async () => {
    const h = harness();
    expect((await h.request('GET', '/readyz')).status).toBe(200);
    await h.store.close();
    expect((await h.request('GET', '/readyz')).status).toBe(503);
    expect((await h.request('GET', '/healthz')).status).toBe(200);
  });
});

describe('service endpoints', () => {
  it('serves the bundle byte for byte and the reference when built', async () => {
    const h = harness({ docsHtml: () => '<!DOCTYPE html><title>ref</title>' });
    const spec = await h.request('GET', '/openapi.json');
    expect(await spec.text()).toBe(bundleText);
    const docs = await h.request('GET', '/docs');
    expect(docs.headers.get('content-type')).toMatch(/text\/html/);
    await expect(harness().request('GET', '/docs').then((r) => r.status)).resolves.toBe(503);
  });

  it('counts requests and credits in /metrics', async () => {
    const h = harness();
    const { key } = await h.account();
    await submitted(h, key);
    const text = await (await h.request('GET', '/metrics')).text();
    expect(text).toMatch(/vidgen_http_requests_total\{method="POST",route="\/api\/open\/v1\/video\/generations",status="202"\} 1/);
    expect(text).toMatch(/vidgen_credits_charged_total 12/);
    expect(text).toMatch(/vidgen_tasks\{status="queued"\} 1/);
  });

  it('writes the request counts and the latency histogram per method and route, cumulative by bucket, with the requests in flight', async () => {
    const store = new SqliteStore(':memory:');
    const requests = new RequestsInFlight();
    const metrics = createMetrics(store, { processMetrics: false, requestsInFlight: requests });
    const route = '/api/open/v1/video/generations/:requestId';
    metrics.observeRequest('GET', route, 200, 0.0007);
    metrics.observeRequest('GET', route, 200, 0.003);
    metrics.observeRequest('GET', route, 404, 0.001); // on a bound: counted in it (le)
    metrics.observeRequest('GET', route, 200, 45);
    metrics.observeRequest('GET', 'a "quoted\\ route', 500, 0.2);
    requests.started();
    requests.started();
    requests.ended();
    const text = await metrics.exposition();
    const labels = `method="GET",route="${route}"`;
    expect(text).toContain(`vidgen_http_requests_total{${labels},status="200"} 3\n`);
    expect(text).toContain(`vidgen_http_requests_total{${labels},status="404"} 1\n`);
    const buckets = [...text.matchAll(/^vidgen_http_request_duration_seconds_bucket\{le="([^"]+)",method="GET",route="\/api[^"]*"\} (\d+)$/gm)].map(([, le, n]) => [le, Number(n)]);
    expect(buckets).toEqual([
      ['0.001', 2], ['0.0025', 2], ['0.005', 3], ['0.01', 3], ['0.025', 3], ['0.05', 3], ['0.1', 3], ['0.25', 3], ['0.5', 3], ['1', 3],
      ['2.5', 3], ['5', 3], ['10', 3], ['30', 3], ['+Inf', 4],
    ]);
    expect(text).toContain(`vidgen_http_request_duration_seconds_sum{${labels}} ${0.0007 + 0.003 + 0.001 + 45}\n`);
    expect(text).toContain(`vidgen_http_request_duration_seconds_count{${labels}} 4\n`);
    expect(text).toContain('vidgen_http_requests_total{method="GET",route="a \\"quoted\\\\ route",status="500"} 1\n');
    expect(text).toMatch(/^# TYPE vidgen_http_request_duration_seconds histogram$/m);
    expect(text).toMatch(/^vidgen_http_requests_in_flight 1$/m);
    // Each metric once, after the registry's own.
    expect(text.match(/^# TYPE vidgen_http_requests_total /gm)).toHaveLength(1);
    await store.close();
  });

  it('labels an unknown path unmatched and a known path with a method it lacks by its pattern, each answered in the frame', async () => {
    const lines: string[] = [];
    const pino = (await import('pino')).default;
    const h = harness({ logger: pino({ level: 'info' }, { write: (line: string) => lines.push(line) }) });
    const missing = await h.request('GET', '/api/open/v1/nothing-here', { headers: { 'X-Correlation-Id': 'unmatched-1' } });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('x-correlation-id')).toBe('unmatched-1');
    expect(missing.headers.get('cache-control')).toBe('no-store');
    const wrongMethod = await h.request('DELETE', '/api/open/v1/video/generations/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, HEAD');
    expect(wrongMethod.headers.get('x-correlation-id')).toMatch(/^[0-9A-Z]{26}$/);
    expect(((await wrongMethod.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
    // One more segment is another path: not found, not 405.
    expect((await h.request('DELETE', '/api/open/v1/video/generations/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0/x')).status).toBe(404);
    const text = await (await h.request('GET', '/metrics')).text();
    expect(text).toContain('vidgen_http_requests_total{method="GET",route="unmatched",status="404"} 1\n');
    expect(text).toContain('vidgen_http_requests_total{method="DELETE",route="/api/open/v1/video/generations/:requestId",status="405"} 1\n');
    expect(text).toContain('vidgen_http_requests_total{method="DELETE",route="unmatched",status="404"} 1\n');
    const logged = lines.map((line) => JSON.parse(line) as { route: string; status: number; correlationId: string });
    expect(logged.slice(0, 3).map(({ route, status }) => [route, status])).toEqual([
      ['unmatched', 404],
      ['/api/open/v1/video/generations/:requestId', 405],
      ['unmatched', 404],
    ]);
    expect(logged[0]!.correlationId).toBe('unmatched-1');
  });

  it('echoes a usable correlation id and replaces an unusable one', async () => {
    const h = harness();
    expect((await h.request('GET', '/healthz', { headers: { 'X-Correlation-Id': 'abc-123' } })).headers.get('x-correlation-id')).toBe('abc-123');
    const replaced = (await h.request('GET', '/healthz', { headers: { 'X-Correlation-Id': 'bad id with spaces' } })).headers.get('x-correlation-id');
    expect(replaced).toMatch(/^[0-9A-Z]{26}$/);
  });
});

describe('the request log', () => {
  it('writes one line per request with the correlation id, and never the key', async () => {
    const lines: string[] = [];
    const pino = (await import('pino')).default;
    const logger = pino({ level: 'info' }, { write: (line: string) => lines.push(line) });
    const h = harness({ logger });
    const { key, accountId } = await h.account();
    await h.request('POST', SUBMIT, { key, body: validSubmit(), headers: { 'X-Correlation-Id': 'log-line-1' } });
    await h.request('GET', '/api/open/v1/models', { key: 'vg_live_wrong' });
    expect(lines).toHaveLength(2);
    const first = JSON.parse(lines[0]!);
    expect(first).toMatchObject({ correlationId: 'log-line-1', method: 'POST', route: SUBMIT, status: 202, accountId });
    expect(JSON.parse(lines[1]!)).toMatchObject({ status: 401, route: '/api/open/v1/models' });
    expect(lines.join('\n')).not.toContain(key);
    expect(lines.join('\n')).not.toContain('vg_live_wrong');
  });
});

describe('idempotency keys', () => {
  it('are scoped per account: the same key on two accounts makes two tasks', async () => {
    const h = harness();
    const a = await h.account();
    const b = await h.account();
    const headers = { 'Idempotency-Key': 'shared-key' };
    const first = (await (await h.request('POST', SUBMIT, { key: a.key, body: validSubmit(), headers })).json()) as any;
    const second = await h.request('POST', SUBMIT, { key: b.key, body: validSubmit(), headers });
    expect(second.status).toBe(202);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(((await second.json()) as any).requestId).not.toBe(first.requestId);
  });

  it('treat the same body with keys in another order as the same request', async () => {
    const h = harness();
    const { key } = await h.account();
    const headers = { 'Idempotency-Key': 'order-insensitive' };
    const body = validSubmit();
    const reordered = Object.fromEntries(Object.entries(body).reverse());
    const first = (await (await h.request('POST', SUBMIT, { key, body, headers })).json()) as any;
    const again = await h.request('POST', SUBMIT, { key, body: reordered, headers });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(((await again.json()) as any).requestId).toBe(first.requestId);
  });

  it('expire after the configured time', async () => {
    const h = harness();
    const { key } = await h.account();
    const headers = { 'Idempotency-Key': 'short-lived' };
    const first = (await (await h.request('POST', SUBMIT, { key, body: validSubmit(), headers })).json()) as any;
    h.clock.advance(24 * 3600_000);
    const later = (await (await h.request('POST', SUBMIT, { key, body: validSubmit({ prompt: 'another' }), headers })).json()) as any;
    expect(later.requestId).not.toBe(first.requestId);
  });
});
