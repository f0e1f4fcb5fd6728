/**
 * The edge of the HTTP server: what Node itself refuses before the app sees a
 * request (431, 400, 408, 413) answered in the D2 envelope with a correlation
 * id, over real sockets; and request bodies that are not UTF-8, refused whole
 * instead of stored altered.
 */
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { answerClientErrors, nodeServerOptions } from '../src/http/node-server.js';
import { firstInvalidUtf8 } from '../src/http/middleware.js';
import { harness, SUBMIT, until, validSubmit, type Harness } from './support.js';

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const TIMEOUTS = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300 };
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** A real server for the harness's app on port 0, wired as main.ts wires it; its log lines are kept. */
async function listen(h: Harness, lines: string[] = []): Promise<number> {
  const server: ServerType = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1', ...nodeServerOptions(TIMEOUTS) });
  answerClientErrors(server, { logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

interface Raw {
  status: number;
  headers: Record<string, string>;
  body: string;
  elapsedMs: number;
}

/** Writes each part in turn (`gapMs` apart) on one socket and reads until the server closes it. */
function exchange(port: number, parts: (string | Buffer)[], gapMs = 0): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let timer: NodeJS.Timeout | undefined;
    const guard = setTimeout(() => socket.destroy(new Error('the server did not close the connection')), 10_000);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('error', () => {});
    socket.on('connect', () => {
      let i = 0;
      const next = () => {
        if (i < parts.length && !socket.destroyed) socket.write(parts[i++]!);
        if (i < parts.length) timer = setTimeout(next, gapMs);
      };
      next();
    });
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(guard);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      if (split < 0) return reject(new Error(`no answer: ${JSON.stringify(text)}`));
      const [statusLine, ...headerLines] = text.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(statusLine!)?.[1]), headers, body: text.slice(split + 4), elapsedMs: performance.now() - started });
    });
  });
}

const head = (method: string, path: string, headers: Record<string, string> = {}) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}`;

/** The answer is the D2 envelope with `code`, closed, correlated, locked down; returns its correlation id. */
function expectEnvelope(raw: Raw, status: number, code: string, message: RegExp): string {
  expect(raw.status).toBe(status);
  expect(raw.headers['content-type']).toBe('application/json');
  expect(raw.headers.connection).toBe('close');
  expect(raw.headers['x-content-type-options']).toBe('nosniff');
  expect(raw.headers['content-security-policy']).toMatch(/default-src 'none'/);
  expect(Number(raw.headers['content-length'])).toBe(Buffer.byteLength(raw.body));
  expect(JSON.parse(raw.body)).toEqual({ success: false, error: { code, message: expect.stringMatching(message) } });
  return raw.headers['x-correlation-id']!;
}

type LogLine = { msg: string; correlationId?: string; status?: number; code?: string };
const parsed = (lines: string[]) => lines.map((line) => JSON.parse(line) as LogLine);

describe("Node's own refusals carry the JSON envelope and a correlation id", () => {
  it('431 for headers over the limit (20 KiB), logged once under the id it answered with', async () => {
    const lines: string[] = [];
    const port = await listen(harness(), lines);
    const raw = await exchange(port, [`${head('GET', '/healthz', { 'X-Big': 'a'.repeat(20 * 1024) })}\r\n`]);
    const id = expectEnvelope(raw, 431, 'invalid_request', /headers are over \d+ bytes/);
    expect(id).toMatch(ULID);
    await until(() => lines.length > 0);
    expect(parsed(lines)).toEqual([expect.objectContaining({ msg: 'request refused before routing', correlationId: id, status: 431, code: 'HPE_HEADER_OVERFLOW' })]);
  });

  it('400 for raw non-ASCII bytes in the request line', async () => {
    const port = await listen(harness());
    const raw = await exchange(port, [Buffer.concat([Buffer.from('GET /api/open/v1/models/'), Buffer.from([0xff, 0xfe]), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')])]);
    expect(expectEnvelope(raw, 400, 'invalid_request', /^the request is not well-formed HTTP\/1\.1: invalid char in url path$/)).toMatch(ULID);
  });

  it.each([
    ['a request line that is not one', 'GARBAGE\r\n\r\n'],
    ['a bad HTTP version', 'GET / HTTP/9.9\r\nHost: x\r\n\r\n'],
    ['two Content-Lengths', 'POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'],
    ['a header name with a space', 'GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n'],
  ])('400 for %s', async (_, request) => {
    const port = await listen(harness());
    expectEnvelope(await exchange(port, [request]), 400, 'invalid_request', /^the request is not well-formed HTTP\/1\.1/);
  });

  it('408 for headers slower than the headers timeout, and the connection closed', async () => {
    const port = await listen(harness());
    const dripped = `${head('GET', '/healthz')}X-Slow: ${'a'.repeat(300)}\r\n\r\n`.split('');
    const raw = await exchange(port, dripped, 20);
    expectEnvelope(raw, 408, 'invalid_request', /sent too slowly: the headers must arrive within 300 ms and the whole request within 600 ms/);
    expect(raw.elapsedMs).toBeLessThan(3_000); // the drip alone would take ~6 s
  });

  it("408 for a body slower than the request timeout, under the id of the request's own log line", async () => {
    const lines: string[] = [];
    const h = harness({ logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) });
    const { key, accountId } = await h.account();
    const port = await listen(h, lines);
    const body = JSON.stringify(validSubmit({ prompt: 'x'.repeat(300) }));
    const prelude = `${head('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': String(body.length), 'X-Correlation-Id': 'caller-id-1' })}\r\n`;
    const raw = await exchange(port, [prelude, ...body.split('')], 20);
    expect(expectEnvelope(raw, 408, 'invalid_request', /sent too slowly/)).toBe('caller-id-1');
    await until(() => lines.length >= 2);
    expect(parsed(lines).map(({ msg, correlationId, status }) => ({ msg, correlationId, status })).sort((a, b) => a.msg.localeCompare(b.msg))).toEqual([
      { msg: 'request', correlationId: 'caller-id-1', status: 400 },
      { msg: 'request refused before routing', correlationId: 'caller-id-1', status: 408 },
    ]);
    expect(await h.store.listTasks({ accountId, limit: 5 })).toEqual([]);
  });

  it("413 for chunk extensions over Node's limit: the one 413 Node makes itself", async () => {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h);
    const prelude = `${head('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' })}\r\n`;
    const raw = await exchange(port, [prelude, `1;${'e'.repeat(20 * 1024)}\r\n{\r\n0\r\n\r\n`]);
    expectEnvelope(raw, 413, 'payload_too_large', /chunk extensions/);
  });

  it('a declared Content-Length over 64 KiB is refused by the app (413, envelope), not by Node', async () => {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h);
    const raw = await exchange(port, [`${head('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': String(65 * 1024), Connection: 'close' })}\r\n`]);
    expect(raw.status).toBe(413);
    expect(JSON.parse(raw.body)).toMatchObject({ success: false, error: { code: 'payload_too_large' } });
    expect(raw.headers['x-correlation-id']).toMatch(ULID);
  });

  it('answers a malformed request that follows a good one on a kept-alive connection', async () => {
    const port = await listen(harness());
    const socketText = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(`${head('GET', '/healthz')}\r\nGARBAGE\r\n\r\n`));
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
    });
    expect(socketText).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(socketText).toMatch(/HTTP\/1\.1 400 Bad Request\r\n[^]*\{"success":false,"error":\{"code":"invalid_request"/);
  });
});

describe("headers read from Node's parsed headers (a served request) as Hono reads them (in process)", () => {
  /** The same submission sent over a socket with `headers` and in process with `inProcess` (what Node hands on for them). */
  async function both(headers: Record<string, string>, rawHeaders: string[], inProcess: Record<string, string>) {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h);
    const body = JSON.stringify(validSubmit());
    const lines = [`POST ${SUBMIT} HTTP/1.1`, 'Host: 127.0.0.1', `authorization: Bearer ${key}`, `Content-Length: ${body.length}`, 'Connection: close'];
    for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
    const raw = await exchange(port, [`${[...lines, ...rawHeaders].join('\r\n')}\r\n\r\n${body}`]);
    const local = await h.app.request(SUBMIT, { method: 'POST', headers: { Authorization: `Bearer ${key}`, ...inProcess }, body });
    return { raw, local, localBody: (await local.json()) as { success: boolean; error?: { code: string; message: string } } };
  }

  it('a lower-case Authorization, a Content-Type with parameters and case, a correlation id with spaces around it: accepted alike', async () => {
    const { raw, local } = await both(
      { 'Content-Type': 'Application/JSON; charset=utf-8', 'X-Correlation-Id': '   caller-7   ' },
      [],
      { 'Content-Type': 'Application/JSON; charset=utf-8', 'X-Correlation-Id': 'caller-7' },
    );
    expect([raw.status, local.status]).toEqual([202, 202]);
    expect([raw.headers['x-correlation-id'], local.headers.get('x-correlation-id')]).toEqual(['caller-7', 'caller-7']);
  });

  it('a repeated Idempotency-Key is one value joined by a comma, refused alike (400 naming the header)', async () => {
    const { raw, local, localBody } = await both({ 'Content-Type': 'application/json' }, ['Idempotency-Key: first', 'Idempotency-Key: second'], {
      'Content-Type': 'application/json',
      'Idempotency-Key': 'first, second',
    });
    expect([raw.status, local.status]).toEqual([400, 400]);
    expect(JSON.parse(raw.body)).toEqual(localBody);
    expect(localBody.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/Idempotency-Key/) });
  });

  it('no Content-Type: 415 alike', async () => {
    const { raw, local, localBody } = await both({}, [], {});
    expect([raw.status, local.status]).toEqual([415, 415]);
    expect(JSON.parse(raw.body)).toEqual(localBody);
  });
});

describe('a request body that is not UTF-8', () => {
  const encode = (parts: (string | number[])[]) => Buffer.concat(parts.map((part) => (typeof part === 'string' ? Buffer.from(part, 'utf8') : Buffer.from(part))));

  it('finds the first byte that is not UTF-8', () => {
    expect(firstInvalidUtf8(encode(['abc']))).toBe(-1);
    expect(firstInvalidUtf8(encode(['é😀日本\uFFFD']))).toBe(-1);
    expect(firstInvalidUtf8(encode(['ab', [0xff]]))).toBe(2);
    expect(firstInvalidUtf8(encode(['é', [0xc0, 0xaf]]))).toBe(2); // overlong "/"
    expect(firstInvalidUtf8(encode(['a', [0xed, 0xa0, 0x80]]))).toBe(1); // a surrogate
    expect(firstInvalidUtf8(encode(['a', [0xf4, 0x90, 0x80, 0x80]]))).toBe(1); // past U+10FFFF
    expect(firstInvalidUtf8(encode(['a', [0xf0, 0x9f, 0x98]]))).toBe(1); // cut short
    expect(firstInvalidUtf8(encode(['a', [0xf0, 0x9f, 0x98], 'b']))).toBe(1);
  });

  it.each([
    ['the prompt', (bad: number[]) => ['{"model":"vidgen-2.0-fast","duration":4,"resolution":"480p","prompt":"bad ', bad, '"}']],
    ['metadata', (bad: number[]) => ['{"model":"vidgen-2.0-fast","duration":4,"resolution":"480p","prompt":"ok","metadata":{"note":"bad ', bad, '"}}']],
    ['a metadata key', (bad: number[]) => ['{"model":"vidgen-2.0-fast","duration":4,"resolution":"480p","prompt":"ok","metadata":{"k', bad, '":1}}']],
  ])('in %s: 400 naming where, nothing stored or charged (app and real server)', async (_, body) => {
    const h = harness();
    const { key, accountId } = await h.account(1_000);
    const port = await listen(h);
    for (const bad of [[0xff, 0xfe], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf0, 0x9f, 0x98]]) {
      const bytes = encode(body(bad));
      const offset = bytes.indexOf(Buffer.from(bad));
      const expected = { success: false, error: { code: 'invalid_request', message: `the request body is not valid UTF-8 (byte offset ${offset})`, details: [{ field: '', message: `is not valid UTF-8 (byte offset ${offset})` }] } };
      const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
      const viaApp = await h.app.request(SUBMIT, { method: 'POST', headers, body: bytes });
      expect(viaApp.status).toBe(400);
      expect(await viaApp.json()).toEqual(expected);
      const viaServer = await fetch(`http://127.0.0.1:${port}${SUBMIT}`, { method: 'POST', headers, body: bytes });
      expect(viaServer.status).toBe(400);
      expect(await viaServer.json()).toEqual(expected);
    }
    expect(await h.store.listTasks({ accountId, limit: 5 })).toEqual([]);
    expect(await h.store.listLedger(accountId)).toHaveLength(1); // the opening grant only
    expect(await h.store.auditBalance(accountId)).toEqual({ balance: 1_000, ledgerSum: 1_000 });
  });

  it('accepts multi-byte UTF-8 (a 4-byte character split across chunks too) and returns it byte for byte', async () => {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h);
    const prompt = 'emoji 😀🎬, CJK 日本語の動画, combining é, U+FFFD \uFFFD itself';
    const metadata = { note: '𝄞 clef', '键': ['ü', '👍🏽'] };
    const bytes = Buffer.from(JSON.stringify(validSubmit({ prompt, metadata })), 'utf8');
    // Chunk boundaries inside 😀 (F0 9F 98 80) and inside 𝄞.
    const cuts = [bytes.indexOf(Buffer.from('😀')) + 2, bytes.indexOf(Buffer.from('𝄞')) + 1, bytes.indexOf(Buffer.from('𝄞')) + 3];
    const chunks = [0, ...cuts].map((start, i) => bytes.subarray(start, [...cuts, bytes.length][i]));
    const prelude = `${head('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', Connection: 'close' })}\r\n`;
    const raw = await exchange(port, [prelude, ...chunks.map((chunk) => Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')])), '0\r\n\r\n'], 30);
    expect(raw.status, raw.body).toBe(202);
    const { requestId } = JSON.parse(raw.body) as { requestId: string };
    const res = await fetch(`http://127.0.0.1:${port}${SUBMIT}/${requestId}`, { headers: { Authorization: `Bearer ${key}` } });
    const text = Buffer.from(await res.arrayBuffer());
    // Byte for byte: the UTF-8 of what was sent appears in the answer as is.
    expect(text.includes(Buffer.from(JSON.stringify(prompt).slice(1, -1), 'utf8'))).toBe(true);
    expect((JSON.parse(text.toString('utf8')) as { prompt: string; metadata: unknown }).prompt).toBe(prompt);
    expect((JSON.parse(text.toString('utf8')) as { metadata: unknown }).metadata).toEqual(metadata);
    expect(Buffer.from(JSON.stringify((JSON.parse(text.toString('utf8')) as { metadata: unknown }).metadata))).toEqual(Buffer.from(JSON.stringify(metadata)));
  });
});
