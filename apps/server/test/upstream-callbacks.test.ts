/** POST /upstream/callbacks/{requestId}: the upstream's hint that a task changed, taken only with its token. */
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { AppDeps } from '../src/http/deps.js';
import { upstreamCallbackToken, upstreamCallbackUrl } from '../src/upstream/callback-token.js';
import { harness, SUBMIT, validSubmit } from './support.js';

const SECRET = 'c2VjcmV0LWZvci11cHN0cmVhbS1jYWxsYmFja3M=';
const NEXT_CHECK_IN_MS = 60_000;

function setup(overrides: Partial<AppDeps> = {}) {
  let wakes = 0;
  const h = harness({ upstreamCallbackSecret: SECRET, wakeWorkers: () => void wakes++, ...overrides });
  return {
    h,
    /** How many times the workers were woken since the last followedTask (its submission wakes them too). */
    wakes: () => wakes,
    /** A submitted task created upstream: `following`, its next check a minute away. */
    async followedTask(): Promise<{ id: string; nextCheckAt: Date }> {
      const { key } = await h.account();
      const res = await h.request('POST', SUBMIT, { key, body: validSubmit() });
      expect(res.status).toBe(202);
      const id = ((await res.json()) as { requestId: string }).requestId;
      const now = h.clock.now();
      expect((await h.store.reserveUpstream({ taskId: id, channels: [{ name: 'ch_a', limit: 10 }], now })).kind).toBe('reserved');
      const nextCheckAt = new Date(now.getTime() + NEXT_CHECK_IN_MS);
      expect((await h.store.recordUpstreamCreated({ taskId: id, upstreamId: `cgt-${id}`, now, nextCheckAt })).started).toBe(true);
      expect(await h.store.getUpstreamTask(id)).toMatchObject({ state: 'following', nextCheckAt });
      wakes = 0;
      return { id, nextCheckAt };
    },
  };
}

/** The path and query of the callback URL the service gives the upstream for `id`. */
function callbackPath(id: string, secret = SECRET): string {
  const url = new URL(upstreamCallbackUrl('https://vidgen.example.com/', secret, id));
  return url.pathname + url.search;
}

const path = (id: string, token?: string) => `/upstream/callbacks/${encodeURIComponent(id)}${token === undefined ? '' : `?token=${encodeURIComponent(token)}`}`;
const upstreamBody = (id: string) => ({ id: `cgt-${id}`, model: 'seedance-1-0-pro-250528', status: 'succeeded', content: { video_url: 'https://upstream.example.com/v.mp4' } });

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(res.headers.get('x-correlation-id')).toBeTruthy();
  const json = (await res.json()) as { success: boolean; error: { code: string } };
  expect(json).toMatchObject({ success: false, error: { code } });
  return json;
}

describe('upstream callbacks', () => {
  it('takes a genuine callback as a hint: 204 without a body, the task checked now and the workers woken', async () => {
    const { h, wakes, followedTask } = setup();
    const { id } = await followedTask();
    h.clock.advance(5_000);
    // No API key: the token in the URL is the credential.
    const res = await h.request('POST', callbackPath(id), { body: upstreamBody(id), headers: { 'X-Correlation-Id': 'upstream-cb-1' } });
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect(res.headers.get('x-correlation-id')).toBe('upstream-cb-1');
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toEqual(h.clock.now());
    expect(wakes()).toBe(1);
  });

  it('refuses a wrong token, or another task’s, with 404 and leaves the task alone', async () => {
    const { h, wakes, followedTask } = setup();
    const { id, nextCheckAt } = await followedTask();
    const other = await followedTask();
    h.clock.advance(5_000);
    for (const token of ['x', upstreamCallbackToken(SECRET, other.id), upstreamCallbackToken('another-secret', id), upstreamCallbackToken(SECRET, id).slice(1), '']) {
      const json = await expectError(await h.request('POST', path(id, token), { body: upstreamBody(id) }), 404, 'not_found');
      expect(JSON.stringify(json)).not.toContain(upstreamCallbackToken(SECRET, id));
    }
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toEqual(nextCheckAt);
    expect(wakes()).toBe(0);
  });

  it('answers a missing or over-long token 400 naming it', async () => {
    const { h, wakes, followedTask } = setup();
    const { id, nextCheckAt } = await followedTask();
    for (const url of [path(id), path(id, 'x'.repeat(129))]) {
      const json = (await expectError(await h.request('POST', url, { body: upstreamBody(id) }), 400, 'invalid_request')) as any;
      expect(json.error.details.map((d: { field: string }) => d.field)).toEqual(['token']);
    }
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toEqual(nextCheckAt);
    expect(wakes()).toBe(0);
  });

  it('answers 204 for a task it does not follow (unknown, or ended) when the token is the one issued for it', async () => {
    const { h, wakes, followedTask } = setup();
    const unknown = 'gen_00000000000000000000000000';
    expect((await h.request('POST', callbackPath(unknown), { body: upstreamBody(unknown) })).status).toBe(204);
    expect(await h.store.getUpstreamTask(unknown)).toBeUndefined();

    const { id } = await followedTask();
    h.clock.advance(5_000);
    await h.store.endUpstream({ taskId: id, now: h.clock.now(), outcome: 'expired', fail: { code: 'timeout', message: 'expired upstream' } });
    h.clock.advance(5_000);
    expect((await h.request('POST', callbackPath(id), { body: upstreamBody(id) })).status).toBe(204);
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toBeNull();
    expect(wakes()).toBe(0);
  });

  it('answers 404 to everything when no secret is configured (no callbacks asked for)', async () => {
    const { h, wakes, followedTask } = setup({ upstreamCallbackSecret: undefined });
    const { id, nextCheckAt } = await followedTask();
    for (const url of [callbackPath(id), path(id)]) {
      await expectError(await h.request('POST', url, { body: upstreamBody(id) }), 404, 'not_found');
    }
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toEqual(nextCheckAt);
    expect(wakes()).toBe(0);
  });

  it('never reads the body: any Content-Type, bad JSON or none at all is a hint all the same', async () => {
    const { h, wakes, followedTask } = setup();
    const { id } = await followedTask();
    const bodies: { body?: string; headers?: Record<string, string> }[] = [
      { body: '{"id": "cgt-1", "status":', headers: { 'Content-Type': 'application/json' } },
      { body: 'status=succeeded', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } },
      { body: '\u0000\u0001 not json', headers: { 'Content-Type': 'application/octet-stream' } },
      { body: 'no content type' },
      {},
    ];
    for (const init of bodies) {
      const res = await h.app.request(callbackPath(id), { method: 'POST', ...init });
      expect(res.status, JSON.stringify(init)).toBe(204);
    }
    expect(wakes()).toBe(bodies.length);
  });

  it('refuses a body over 64 KiB with 413, declared or streamed, and asks for no check', async () => {
    const { h, wakes, followedTask } = setup();
    const { id, nextCheckAt } = await followedTask();
    const big = JSON.stringify({ ...upstreamBody(id), padding: 'x'.repeat(65 * 1024) });
    await expectError(await h.request('POST', callbackPath(id), { body: big, headers: { 'Content-Length': String(big.length) } }), 413, 'payload_too_large');

    const chunk = new TextEncoder().encode('x'.repeat(16 * 1024));
    let sent = 0;
    const stream = new ReadableStream({
      pull(controller) {
        sent += 1;
        controller.enqueue(chunk);
        if (sent > 64) controller.close();
      },
    });
    const res = await h.app.request(callbackPath(id), { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: stream, duplex: 'half' } as RequestInit);
    await expectError(res, 413, 'payload_too_large');
    expect(sent).toBeLessThan(64);
    expect((await h.store.getUpstreamTask(id))!.nextCheckAt).toEqual(nextCheckAt);
    expect(wakes()).toBe(0);
  });

  it('answers 503 with Retry-After when the store is unreachable, so the upstream may try again', async () => {
    const { h, wakes, followedTask } = setup();
    const { id } = await followedTask();
    h.store.requestUpstreamCheck = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    const res = await h.request('POST', callbackPath(id), { body: upstreamBody(id) });
    await expectError(res, 503, 'unavailable');
    expect(res.headers.get('retry-after')).toBe('1');
    expect(wakes()).toBe(0);
  });

  it('logs a callback at debug, never its token', async () => {
    const lines: string[] = [];
    const logger = pino({ level: 'debug' }, { write: (line: string) => void lines.push(line) });
    const { h, followedTask } = setup({ logger });
    const { id } = await followedTask();
    const token = upstreamCallbackToken(SECRET, id);
    expect((await h.request('POST', callbackPath(id), { body: upstreamBody(id) })).status).toBe(204);
    expect((await h.request('POST', path(id, `${token}x`), { body: upstreamBody(id) })).status).toBe(404);
    const callbackLines = lines.map((line) => JSON.parse(line)).filter((line) => line.msg === 'upstream callback');
    expect(callbackLines).toHaveLength(1);
    expect(callbackLines[0]).toMatchObject({ level: 20, taskId: id, followed: true });
    expect(lines.join('\n')).not.toContain(token);
  });

  it('answers another method on the path 405 with Allow: POST', async () => {
    const { h } = setup();
    const res = await h.request('GET', callbackPath('gen_00000000000000000000000000'));
    await expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('POST');
  });
});
