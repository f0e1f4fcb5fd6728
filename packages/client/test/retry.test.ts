import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createClient, VidgenError } from '../src/index.js';
import { cli, json, taskIn } from './helpers.js';

const fixture = inject('fixture');

/**
 * A TCP proxy on loopback in front of the real server that lets the first submission through
 * to the server and then, once the server has answered it, destroys the caller's connection
 * instead of passing the answer on: the task exists, but the caller never heard so.
 */
async function startDroppingProxy(target: URL): Promise<{ url: string; submissions: string[]; close: () => Promise<void> }> {
  const submissions: string[] = [];
  let dropped = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port) });
    sockets.add(downstream).add(upstream);
    let dropThisAnswer = false;
    downstream.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      if (text.startsWith('POST /api/open/v1/video/generations ')) {
        submissions.push(/^idempotency-key: *(.+?)\r$/im.exec(text)?.[1] ?? '(none)');
        if (!dropped) dropThisAnswer = dropped = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropThisAnswer) {
        downstream.destroy();
        upstream.destroy();
        return;
      }
      downstream.write(chunk);
    });
    downstream.on('close', () => upstream.destroy());
    upstream.on('close', () => downstream.destroy());
    downstream.on('error', () => {});
    upstream.on('error', () => {});
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}`,
    submissions,
    close: () =>
      new Promise((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  };
}

describe('a submission retried after a dropped connection', () => {
  let proxy: Awaited<ReturnType<typeof startDroppingProxy>>;
  beforeAll(async () => {
    proxy = await startDroppingProxy(new URL(fixture.baseUrl));
  });
  afterAll(() => proxy.close());

  it('creates exactly one task and one charge', async () => {
    const client = createClient({ baseUrl: proxy.url, apiKey: fixture.retry.apiKey, retry: { minDelayMs: 10, maxDelayMs: 100 } });
    const submitted = await client.submit({ model: 'vidgen-2.0-fast', prompt: 'Exactly once', duration: 15, resolution: '1080p' });

    // The first attempt reached the server; the retry carried the same key and got its answer.
    expect(proxy.submissions).toHaveLength(2);
    expect(proxy.submissions[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(proxy.submissions[1]).toBe(proxy.submissions[0]);

    const tasks = (await client.list()).data;
    expect(tasks.map((task) => task.requestId)).toEqual([submitted.requestId]);
    const ledger = await cli(fixture.dataDir, 'ledger', '--account', fixture.retry.accountId);
    const charges = ledger.entries.filter((entry: { kind: string }) => entry.kind === 'charge');
    expect(charges).toHaveLength(1);
    expect(charges[0]).toMatchObject({ taskId: submitted.requestId, amount: -submitted.creditsCharged });
    expect(ledger.consistent).toBe(true);
    await client.cancel(submitted.requestId);
  });
});

describe('the retry policy', () => {
  const task = taskIn('processing');
  const script = (answers: (() => Response | Promise<Response>)[]) => {
    const requests: Request[] = [];
    const fetch = async (request: Request) => {
      requests.push(request.clone());
      const next = answers.shift();
      if (!next) throw new Error('no more scripted answers');
      return next();
    };
    return { fetch, requests };
  };
  const fast = { minDelayMs: 1, maxDelayMs: 5 };
  const unavailable = () => json({ success: false, error: { code: 'unavailable', message: 'draining' } }, 503);
  const networkError = () => Promise.reject(new TypeError('fetch failed'));

  it('retries a GET after 5xx and network errors, then returns the answer', async () => {
    const { fetch, requests } = script([unavailable, networkError, () => json(task)]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: fast });
    expect(await client.get(task.requestId)).toEqual(task);
    expect(requests).toHaveLength(3);
  });

  it('sends a submission with a generated Idempotency-Key and repeats that same key on every retry', async () => {
    const accepted = { success: true, requestId: task.requestId, status: 'queued', creditsCharged: 100 };
    const { fetch, requests } = script([networkError, unavailable, () => json(accepted, 202)]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: fast });
    expect(await client.submit({ model: 'vidgen-2.0', prompt: 'x' })).toEqual(accepted);
    const keys = requests.map((request) => request.headers.get('Idempotency-Key'));
    expect(keys[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
    expect(await requests[2]!.json()).toEqual({ model: 'vidgen-2.0', prompt: 'x' });
  });

  it('retries a 409 idempotency_in_progress', async () => {
    const inProgress = () => json({ success: false, error: { code: 'idempotency_in_progress', message: 'still running' } }, 409, { 'Retry-After': '0' });
    const accepted = { success: true, requestId: task.requestId, status: 'queued', creditsCharged: 100 };
    const { fetch, requests } = script([inProgress, () => json(accepted, 202)]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: fast });
    await client.submit({ model: 'vidgen-2.0', prompt: 'x' }, { idempotencyKey: 'mine' });
    expect(requests.map((request) => request.headers.get('Idempotency-Key'))).toEqual(['mine', 'mine']);
  });

  it('waits at least Retry-After before retrying a 429', async () => {
    const limited = () => json({ success: false, error: { code: 'rate_limited', message: 'slow down' } }, 429, { 'Retry-After': '1' });
    const { fetch, requests } = script([limited, () => json(task)]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: { minDelayMs: 1, maxDelayMs: 5_000 } });
    const started = Date.now();
    await client.get(task.requestId);
    expect(Date.now() - started).toBeGreaterThanOrEqual(990);
    expect(requests).toHaveLength(2);
  });

  it('throws at once when Retry-After is longer than maxDelayMs, carrying retryAfter', async () => {
    const limited = () => json({ success: false, error: { code: 'too_many_active_tasks', message: 'wait' } }, 429, { 'Retry-After': '60' });
    const { fetch, requests } = script([limited]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: fast });
    const error = (await client.submit({ model: 'vidgen-2.0', prompt: 'x' }).catch((e: unknown) => e)) as VidgenError;
    expect(error).toMatchObject({ status: 429, code: 'too_many_active_tasks', retryAfter: 60, correlationId: 'corr-stub' });
    expect(requests).toHaveLength(1);
  });

  it('gives up after `retries` retries with the last error', async () => {
    const { fetch, requests } = script([unavailable, unavailable, unavailable]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: { ...fast, retries: 2 } });
    expect(await client.models().catch((e: unknown) => e)).toMatchObject({ status: 503, code: 'unavailable' });
    expect(requests).toHaveLength(3);
  });

  it('does not retry with retry: false, and reports no answer as network_error', async () => {
    const { fetch, requests } = script([networkError]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: false });
    const error = (await client.cancel(task.requestId).catch((e: unknown) => e)) as VidgenError;
    expect(error).toBeInstanceOf(VidgenError);
    expect(error).toMatchObject({ status: 0, code: 'network_error' });
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(requests).toHaveLength(1);
  });

  it('an answer without the envelope is unexpected_response', async () => {
    const { fetch } = script([() => new Response('<html>bad gateway</html>', { status: 502, headers: { 'Content-Type': 'text/html' } })]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: false });
    expect(await client.models().catch((e: unknown) => e)).toMatchObject({ status: 502, code: 'unexpected_response' });
  });

  it('stops retrying when the signal aborts, rejecting with its reason', async () => {
    const controller = new AbortController();
    const { fetch } = script([
      () => {
        controller.abort(new Error('caller gave up'));
        return unavailable();
      },
    ]);
    const client = createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch, retry: { minDelayMs: 1_000, maxDelayMs: 1_000 } });
    await expect(client.get(task.requestId, { signal: controller.signal })).rejects.toThrow('caller gave up');
  });
});
