/**
 * Webhook signing and delivery attempts against real HTTPS receivers on loopback. Signatures are
 * checked with the `standardwebhooks` library, as a receiver would. No test touches the real
 * network: host names are answered by an injected lookup.
 */
import type { IncomingHttpHeaders } from 'node:http';
import net, { isIP, type AddressInfo, type LookupFunction, type Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createWebhookSender, parseRetryAfter, type WebhookSenderOptions } from '../src/webhooks/sender.js';
import { newWebhookSecret, signWebhook, webhookHeaders } from '../src/webhooks/signing.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

const SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const OTHER_SECRET = 'whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD';

/** A fixed table of addresses, answering asynchronously like DNS. */
function tableLookup(table: Record<string, string[]>): LookupFunction {
  return (hostname, options, callback) => {
    setImmediate(() => {
      const addresses = (table[hostname] ?? []).map((address) => ({ address, family: isIP(address) }));
      const [first] = addresses;
      if (!first) return callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), '');
      if (options.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

describe('signWebhook', () => {
  const id = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f1W';
  const timestamp = 1_674_087_231;
  const body = '{"type":"video.generation.succeeded","data":{"prompt":"ünïcödé \\"quoted\\""}}';

  it('matches the standardwebhooks library for one secret', () => {
    const expected = new Webhook(SECRET).sign(id, new Date(timestamp * 1000), body);
    expect(signWebhook({ id, timestamp, body, secrets: [SECRET] })).toBe(expected);
  });

  it('carries one v1 entry per secret during a rotation, each verifiable alone', () => {
    const header = signWebhook({ id, timestamp, body, secrets: [SECRET, OTHER_SECRET] });
    const entries = header.split(' ');
    expect(entries).toEqual([
      new Webhook(SECRET).sign(id, new Date(timestamp * 1000), body),
      new Webhook(OTHER_SECRET).sign(id, new Date(timestamp * 1000), body),
    ]);
  });

  it('signs the exact body text: a re-serialized body does not match', () => {
    const a = signWebhook({ id, timestamp, body: '{"a":1}', secrets: [SECRET] });
    const b = signWebhook({ id, timestamp, body: '{ "a": 1 }', secrets: [SECRET] });
    expect(a).not.toBe(b);
  });

  it('builds the delivery headers', () => {
    const headers = webhookHeaders({ id, timestamp, body, secrets: [SECRET] });
    expect(headers).toEqual({
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook({ id, timestamp, body, secrets: [SECRET] }),
      'content-type': 'application/json',
      'user-agent': 'vidgen-webhooks/1',
    });
  });

  it('makes fresh whsec_ secrets of 24 random bytes that the library accepts', () => {
    const a = newWebhookSecret();
    const b = newWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(24);
    expect(a).not.toBe(b);
    const header = signWebhook({ id, timestamp, body, secrets: [a] });
    expect(header).toBe(new Webhook(a).sign(id, new Date(timestamp * 1000), body));
  });

  it('refuses a malformed secret or none, without quoting it', () => {
    expect(() => signWebhook({ id, timestamp, body, secrets: [] })).toThrow(/at least one secret/);
    const bare = 'not-a-secret-value';
    expect(() => signWebhook({ id, timestamp, body, secrets: [bare] })).toThrow(/does not start with whsec_/);
    try {
      signWebhook({ id, timestamp, body, secrets: [bare] });
    } catch (error) {
      expect((error as Error).message).not.toContain(bare);
    }
  });
});

describe('parseRetryAfter', () => {
  const now = new Date('2025-01-01T00:00:00Z');
  it.each([
    ['7', 7000],
    ['0', 0],
    ['Wed, 01 Jan 2025 00:00:30 GMT', 30_000],
    ['Tue, 31 Dec 2024 23:00:00 GMT', 0],
    ['soon', undefined],
    ['', undefined],
    [undefined, undefined],
  ])('%s → %s', (value, expected) => expect(parseRetryAfter(value, now)).toBe(expected));
});

interface Received {
  path: string;
  socket: Socket;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

describe('webhook sender', () => {
  let fixture: HttpsFixture;
  let received: Received[];
  let onHang: (() => void) | undefined;
  const answeredOn = new WeakSet<object>();
  const id = 'msg_delivery_1';
  const body = JSON.stringify({ type: 'video.generation.succeeded', timestamp: '2025-01-01T00:00:00.000Z', data: { prompt: 'a café 🌅' } });

  beforeAll(async () => {
    fixture = await startHttpsFixture((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const path = req.url ?? '';
        received.push({ path, socket: req.socket, headers: req.headers, body: Buffer.concat(chunks) });
        const [, status = '200'] = /^\/status\/(\d+)/.exec(path) ?? [];
        if (path === '/hang') return onHang?.();
        if (path === '/redirect') return res.writeHead(302, { location: '/target' }).end();
        if (path === '/big') return res.writeHead(200).end(Buffer.alloc(1024 * 1024, 120));
        if (path === '/busy') return res.writeHead(429, { 'retry-after': '7' }).end('slow down');
        if (path === '/down') return res.writeHead(503, { 'retry-after': 'Wed, 01 Jan 2025 00:01:00 GMT' }).end();
        if (path === '/slow') return void setTimeout(() => res.writeHead(200).end('ok'), 200);
        // A 2xx whose body never ends.
        if (path === '/stall') return void res.writeHead(200).write('partial');
        // The receiver closes a kept connection as it is reused: only a connection's first request is answered.
        if (path === '/first-on-connection') {
          if (answeredOn.has(req.socket)) return req.socket.destroy();
          answeredOn.add(req.socket);
        }
        res.writeHead(Number(status)).end(status === '204' ? undefined : 'ok');
      });
    });
  });
  afterAll(() => fixture.close());
  beforeEach(() => {
    received = [];
    onHang = undefined;
  });

  const sender = (options: WebhookSenderOptions = {}) => createWebhookSender({ allowLoopback: true, ca: fixture.ca, ...options });
  const send = (path: string, options: WebhookSenderOptions = {}, secrets = [SECRET]) =>
    sender(options).send({ url: fixture.url(path), id, body, secrets });

  it('delivers a signed POST that the standardwebhooks library verifies', async () => {
    const result = await send('/status/200');
    expect(result).toMatchObject({ outcome: 'delivered', status: 200 });
    expect(result.durationMs).toBeGreaterThanOrEqual(0);
    expect(received).toHaveLength(1);
    const [hit] = received;
    expect(hit!.headers['content-type']).toBe('application/json');
    expect(hit!.headers['user-agent']).toBe('vidgen-webhooks/1');
    expect(hit!.headers['webhook-id']).toBe(id);
    expect(hit!.body.equals(Buffer.from(body, 'utf8'))).toBe(true);
    expect(new Webhook(SECRET).verify(hit!.body.toString('utf8'), hit!.headers as Record<string, string>)).toEqual(JSON.parse(body));
  });

  it('keeps the connection to a receiver for the next attempts: one connection, one handshake', async () => {
    const one = sender();
    const before = fixture.connections;
    for (let i = 0; i < 3; i++) expect(await one.send({ url: fixture.url('/status/200'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'delivered' });
    expect(await one.send({ url: fixture.url('/status/500'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'retry', status: 500 });
    expect(fixture.connections - before).toBe(1);
    expect(received).toHaveLength(4);
  });

  it('sends again on a connection of its own when the receiver closed the kept one as it was reused', async () => {
    const one = sender();
    const before = fixture.connections;
    expect(await one.send({ url: fixture.url('/first-on-connection'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'delivered', status: 200 });
    expect(await one.send({ url: fixture.url('/first-on-connection'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'delivered', status: 200 });
    expect(fixture.connections - before).toBe(2);
  });

  it('closes a kept connection left unused for idleConnectionMs, and never one still waiting for its answer', async () => {
    const one = sender({ idleConnectionMs: 50 });
    const before = fixture.connections;
    // The answer takes 200 ms, four times the idle time: the attempt is timed by its deadline only.
    expect(await one.send({ url: fixture.url('/slow'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'delivered', status: 200 });
    const [hit] = received;
    if (!hit!.socket.destroyed) await new Promise<void>((resolve) => hit!.socket.once('close', () => resolve()));
    expect(await one.send({ url: fixture.url('/status/200'), id, body, secrets: [SECRET] })).toMatchObject({ outcome: 'delivered' });
    expect(fixture.connections - before).toBe(2);
  });

  it('signs with every secret during a rotation: each one alone verifies', async () => {
    await send('/status/204', {}, [SECRET, OTHER_SECRET]);
    const [hit] = received;
    const raw = hit!.body.toString('utf8');
    const headers = hit!.headers as Record<string, string>;
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(() => new Webhook(SECRET).verify(raw, headers)).not.toThrow();
    expect(() => new Webhook(OTHER_SECRET).verify(raw, headers)).not.toThrow();
    expect(() => new Webhook(newWebhookSecret()).verify(raw, headers)).toThrow();
  });

  it('stamps webhook-timestamp from the clock, in seconds', async () => {
    const now = new Date(Date.now() - 61_500);
    await send('/status/200', { clock: { now: () => now } });
    expect(received[0]!.headers['webhook-timestamp']).toBe(String(Math.floor(now.getTime() / 1000)));
  });

  it.each([200, 201, 204, 299])('counts HTTP %i as delivered', async (status) => {
    expect(await send(`/status/${status}`)).toMatchObject({ outcome: 'delivered', status });
  });

  it('stops on 410 Gone', async () => {
    expect(await send('/status/410')).toMatchObject({ outcome: 'gone', status: 410 });
  });

  it.each([500, 404, 400, 401])('retries after HTTP %i', async (status) => {
    const result = await send(`/status/${status}`);
    expect(result).toMatchObject({ outcome: 'retry', status });
    expect(result).not.toHaveProperty('retryAfterMs');
  });

  it('retries a 429 when its Retry-After says (seconds)', async () => {
    expect(await send('/busy')).toMatchObject({ outcome: 'retry', status: 429, retryAfterMs: 7000 });
  });

  it('retries a 503 when its Retry-After says (an HTTP date, against the clock)', async () => {
    const now = new Date('2025-01-01T00:00:00Z');
    expect(await send('/down', { clock: { now: () => now } })).toMatchObject({ outcome: 'retry', status: 503, retryAfterMs: 60_000 });
  });

  it('does not follow a redirect: a 302 is a failed attempt and its target is never requested', async () => {
    expect(await send('/redirect')).toMatchObject({ outcome: 'retry', status: 302 });
    expect(received.map((r) => r.path)).toEqual(['/redirect']);
  });

  it('reads a large answer only up to its cap and still counts the 2xx', async () => {
    expect(await send('/big')).toMatchObject({ outcome: 'delivered', status: 200 });
  });

  it('cuts a receiver that never answers at timeoutMs', async () => {
    const result = await send('/hang', { timeoutMs: 300 });
    expect(result).toMatchObject({ outcome: 'retry', error: 'timed out after 300 ms' });
    expect(result).not.toHaveProperty('status');
    expect(received.map((r) => r.path)).toEqual(['/hang']);
  });

  it('counts a 2xx whose body never ends as delivered, the attempt cut at timeoutMs', async () => {
    const result = await send('/stall', { timeoutMs: 300 });
    expect(result).toMatchObject({ outcome: 'delivered', status: 200 });
    expect(result.durationMs).toBeGreaterThanOrEqual(250);
  });

  it('sends nothing when the caller has aborted already', async () => {
    const result = await sender().send({ url: fixture.url('/status/200'), id, body, secrets: [SECRET], signal: AbortSignal.abort() });
    expect(result).toMatchObject({ outcome: 'retry', error: 'cancelled' });
    expect(received).toEqual([]);
  });

  it('gives up when the caller aborts', async () => {
    const controller = new AbortController();
    onHang = () => controller.abort();
    const result = await sender().send({ url: fixture.url('/hang'), id, body, secrets: [SECRET], signal: controller.signal });
    expect(result).toMatchObject({ outcome: 'retry', error: 'cancelled' });
  });

  it('retries when the connection is refused', async () => {
    const closed = net.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const result = await sender().send({ url: `https://127.0.0.1:${port}/`, id, body, secrets: [SECRET] });
    expect(result).toMatchObject({ outcome: 'retry' });
    expect((result as { error?: string }).error).toMatch(/ECONNREFUSED/);
  });

  it('retries when the certificate is not trusted, without the secret in the error', async () => {
    const result = await createWebhookSender({ allowLoopback: true }).send({ url: fixture.url('/status/200'), id, body, secrets: [SECRET] });
    expect(result).toMatchObject({ outcome: 'retry' });
    expect(JSON.stringify(result)).not.toContain(SECRET.slice(6));
    expect(received).toHaveLength(0);
  });

  describe('address rules (D5)', () => {
    const refusedWithoutConnecting = async (url: string, options: WebhookSenderOptions, error: RegExp | string) => {
      const before = fixture.connections;
      const result = await createWebhookSender({ ca: fixture.ca, ...options }).send({ url, id, body, secrets: [SECRET] });
      expect(result).toMatchObject({ outcome: 'retry' });
      expect(result).not.toHaveProperty('status');
      expect((result as { error?: string }).error).toMatch(error);
      expect(fixture.connections - before).toBe(0);
      expect(received).toHaveLength(0);
    };

    it('refuses a loopback literal when loopback is not allowed', async () => {
      await refusedWithoutConnecting(`https://127.0.0.1:${fixture.port}/status/200`, {}, 'address 127.0.0.1 is not public');
    });

    it('refuses a name that resolves to a private address', async () => {
      const lookup = tableLookup({ 'hooks.example.com': ['10.0.0.5'] });
      await refusedWithoutConnecting(`https://hooks.example.com:${fixture.port}/`, { lookup }, /10\.0\.0\.5.*not public/);
    });

    it('refuses a name that resolves to loopback when loopback is not allowed', async () => {
      const lookup = tableLookup({ 'rebind.example.com': ['8.8.8.8', '127.0.0.1'] });
      await refusedWithoutConnecting(`https://rebind.example.com:${fixture.port}/`, { lookup }, /127\.0\.0\.1.*not public/);
    });

    it('refuses a private address even when loopback is allowed', async () => {
      await refusedWithoutConnecting('https://10.0.0.5/', { allowLoopback: true }, 'address 10.0.0.5 is not public');
    });

    it('refuses http://', async () => {
      await refusedWithoutConnecting(`http://127.0.0.1:${fixture.port}/`, { allowLoopback: true }, 'must be an https:// URL');
    });

    it('refuses a URL with credentials', async () => {
      await refusedWithoutConnecting(fixture.url('/status/200').replace('https://', 'https://user:pw@'), { allowLoopback: true }, /user name or password/);
    });

    it('refuses a malformed URL', async () => {
      await refusedWithoutConnecting('not a url', { allowLoopback: true }, 'is not a valid URL');
    });

    it('cuts an attempt whose name never resolves at timeoutMs, without connecting', async () => {
      const lookup = (() => {}) as unknown as LookupFunction;
      await refusedWithoutConnecting(`https://slow-dns.example.com:${fixture.port}/`, { lookup, timeoutMs: 300 }, 'timed out after 300 ms');
    });

    it('delivers to a name that resolves to the loopback fixture when loopback is allowed', async () => {
      const lookup = tableLookup({ localhost: ['127.0.0.1'] });
      expect(await createWebhookSender({ allowLoopback: true, ca: fixture.ca, lookup }).send({ url: fixture.url('/status/200'), id, body, secrets: [SECRET] })).toMatchObject({
        outcome: 'delivered',
      });
    });
  });
});
