/**
 * Abuse: slow clients cut by the server's timeouts (real sockets), bodies too
 * big or too deep, keys refused alike and compared in constant time, no secret
 * or stack in any answer or log line, security headers, and tenant isolation
 * for every operation on both stores.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { issueApiKey } from '../src/accounts.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { generateApiKey, hashApiKey, sameApiKeyHash } from '../src/domain/keys.js';
import { createLocalOutputFiles, type OutputFiles } from '../src/files/storage.js';
import { answerClientErrors, nodeServerOptions } from '../src/http/node-server.js';
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from '../src/http/middleware.js';
import { FILE_CSP, LOCKED_DOWN_CSP } from '../src/http/security-headers.js';
import { systemClock } from '../src/interfaces.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { Store } from '../src/store/store.js';
import { harness, harnessOver, silentLogger, SUBMIT, testConfig, until, validSubmit, type Harness } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';

const MODELS = '/api/open/v1/models';
type ErrorBody = { success: false; error: { code: string; message: string; details?: { field?: string; message: string }[] } };

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function listen(h: Harness, timeouts = { headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300 }): Promise<number> {
  const server: ServerType = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1', ...nodeServerOptions(timeouts) });
  // As main.ts serves: Node's own refusals (408, 431, 400) in the envelope.
  answerClientErrors(server, { logger: silentLogger });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

/** The store with some methods replaced (a fault, a lax lookup); everything else passes through. */
function storeWith(store: Store, replaced: Partial<Record<keyof Store, (...args: never[]) => Promise<unknown>>>): Store {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop in replaced) return replaced[prop as keyof Store];
      const value = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

interface Exchange {
  received: string;
  /** Whether the server closed the socket before everything was sent. */
  cutShort: boolean;
  bytesSent: number;
  elapsedMs: number;
}

/**
 * Sends `prelude` at once, then `drip` one byte every `gapMs`, and settles
 * when the server closes the socket (or, failing that, when the drip is done).
 */
function drip(port: number, prelude: string, dripped: string, gapMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    socket.on('data', (chunk) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('connect', () => {
      socket.write(prelude);
      timer = setInterval(() => {
        if (sent < dripped.length) socket.write(dripped[sent++]!);
        else socket.destroy();
      }, gapMs);
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ received, cutShort: sent < dripped.length, bytesSent: prelude.length + sent, elapsedMs: performance.now() - started });
    });
  });
}

const requestHead = (method: string, path: string, headers: Record<string, string>) =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')}`;

describe('slow clients are cut by the server timeouts', () => {
  it('answers 408 and closes a connection whose headers drip in slower than the headers timeout', async () => {
    const port = await listen(harness());
    const exchange = await drip(port, '', `${requestHead('GET', '/healthz', {})}X-Slow: ${'a'.repeat(400)}\r\n\r\n`, 20);
    expect(exchange.cutShort).toBe(true);
    expect(exchange.received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    // Cut near the 300 ms headers timeout, long before the ~9 s the drip would take.
    expect(exchange.elapsedMs).toBeLessThan(3_000);
  });

  it('answers 408 and closes a connection whose body drips in slower than the request timeout', async () => {
    const lines: string[] = [];
    const h = harness({ logger: pino({ level: 'info' }, { write: (line: string) => void lines.push(line) }) });
    const { key } = await h.account();
    const port = await listen(h);
    const body = JSON.stringify(validSubmit({ prompt: 'x'.repeat(400) }));
    const head = requestHead('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': String(body.length) });
    const exchange = await drip(port, `${head}\r\n`, body, 20);
    expect(exchange.cutShort).toBe(true);
    expect(exchange.received).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(exchange.elapsedMs).toBeLessThan(3_000);
    // Nothing was created from the half-sent submission, and the cut is the client's failure (400), not an internal error.
    expect(await h.store.listTasks({ accountId: (await h.store.listAccounts())[0]!.id, limit: 5 })).toEqual([]);
    await until(() => lines.length > 0);
    expect(lines.map((line) => JSON.parse(line) as { msg: string; status?: number }).map(({ msg, status }) => ({ msg, status }))).toEqual([{ msg: 'request', status: 400 }]);
  });

  it('lets a long poll answer after the request timeout: the timeout covers receiving the request only', async () => {
    const h = harness({ clock: systemClock });
    const { key } = await h.account();
    const { requestId } = (await (await h.request('POST', SUBMIT, { key, body: validSubmit() })).json()) as { requestId: string };
    const port = await listen(h);
    const started = performance.now();
    // ?wait=1 holds the answer for 1 s, past the 600 ms request timeout (checked every 75 ms).
    const res = await fetch(`http://127.0.0.1:${port}${SUBMIT}/${requestId}?wait=1`, { headers: { Authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe('queued');
    expect(performance.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('closes an idle kept-alive connection after the keep-alive timeout', async () => {
    const port = await listen(harness());
    const started = performance.now();
    const received = await new Promise<string>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(`${requestHead('GET', '/healthz', {})}\r\n`));
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
    });
    // One answer on a kept-alive connection, then the server closed it (300 ms keep-alive timeout).
    expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(received).toMatch(/\r\nConnection: keep-alive\r\n/i);
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it('derives the Node server options from configuration, with defaults that leave the long poll alone', () => {
    const defaults = loadConfig({});
    expect(defaults.http).toEqual({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, keepAliveTimeoutMs: 5_000 });
    expect(nodeServerOptions(defaults.http).serverOptions).toEqual({
      headersTimeout: 10_000,
      requestTimeout: 30_000,
      keepAliveTimeout: 5_000,
      connectionsCheckingInterval: 1_000,
    });
    const tuned = loadConfig({ VIDGEN_HEADERS_TIMEOUT_MS: '2000', VIDGEN_REQUEST_TIMEOUT_MS: '4000', VIDGEN_KEEP_ALIVE_TIMEOUT_MS: '65000' });
    expect(tuned.http).toEqual({ headersTimeoutMs: 2_000, requestTimeoutMs: 4_000, keepAliveTimeoutMs: 65_000 });
    expect(() => loadConfig({ VIDGEN_HEADERS_TIMEOUT_MS: '40000', VIDGEN_REQUEST_TIMEOUT_MS: '30000' })).toThrow(ConfigError);
  });
});

describe('bodies that are too big or too deep are refused cheaply', () => {
  const deepArray = '['.repeat(60 * 1024);
  const deepObject = `${'{"a":'.repeat(10 * 1024)}1${'}'.repeat(10 * 1024)}`;

  it.each([
    ['an array 60 KiB deep', deepArray],
    ['an object 10 Ki levels deep', deepObject],
    // Unguarded, metadata this deep parses but overflows the stack when serialized: a 500, not a 400.
    ['deep metadata in a valid submission', JSON.stringify(validSubmit({ metadata: JSON.parse(`${'{"a":'.repeat(MAX_JSON_DEPTH)}1${'}'.repeat(MAX_JSON_DEPTH)}`) }))],
  ])('refuses %s with 400 invalid_request before parsing it', async (_name, body) => {
    const h = harness();
    const { key, accountId } = await h.account();
    const res = await h.request('POST', SUBMIT, { key, body });
    expect(res.status).toBe(400);
    const answer = (await res.json()) as ErrorBody;
    expect(answer.error).toMatchObject({ code: 'invalid_request', message: `the request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep` });
    expect(await h.store.listTasks({ accountId, limit: 5 })).toEqual([]);
  });

  it('accepts nesting up to the limit, and brackets inside strings do not count', async () => {
    const h = harness();
    const { key } = await h.account();
    // The submission object is level 1, metadata level 2: 30 more levels inside it make 32.
    const metadata = JSON.parse(`${'{"a":'.repeat(MAX_JSON_DEPTH - 1)}1${'}'.repeat(MAX_JSON_DEPTH - 1)}`);
    const res = await h.request('POST', SUBMIT, { key, body: validSubmit({ metadata, prompt: `${'[{'.repeat(500)} "quoted \\" [[[" ${'}]'.repeat(500)}` }) });
    expect(res.status).toBe(202);
    expect(jsonNestsDeeperThan('{"a":"[[[[[[","b":[1,[2]]}', 3)).toBe(false);
    expect(jsonNestsDeeperThan('{"a":"\\"[[[[","b":[1,[2,[3]]]}', 3)).toBe(true);
  });

  it('refuses a chunked body over 64 KiB as soon as it passes the limit, without waiting for its end', async () => {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h, { headersTimeoutMs: 2_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 1_000 });
    const result = await new Promise<{ received: string; bytesSent: number; answeredAfter: number }>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      const chunk = `{"pad":"${'x'.repeat(16 * 1024)}"}`;
      let received = '';
      let bytesSent = 0;
      let answeredAfter = -1;
      let timer: NodeJS.Timeout | undefined;
      socket.on('error', () => {});
      socket.on('connect', () => {
        socket.write(`${requestHead('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' })}\r\n`);
        // Chunks keep coming and the terminating chunk is never sent: an endless upload.
        timer = setInterval(() => {
          socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
          bytesSent += chunk.length;
        }, 5);
      });
      socket.on('data', (data) => {
        received += data.toString();
        if (answeredAfter < 0) answeredAfter = bytesSent;
      });
      socket.on('close', () => {
        clearInterval(timer);
        resolve({ received, bytesSent, answeredAfter });
      });
    });
    expect(result.received).toMatch(/^HTTP\/1\.1 413 /);
    expect(JSON.parse(result.received.slice(result.received.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'payload_too_large' } });
    // Answered once a little over 64 KiB had arrived, then the socket was closed on the endless upload.
    expect(result.answeredAfter).toBeGreaterThan(64 * 1024);
    expect(result.answeredAfter).toBeLessThan(1024 * 1024);
    expect(result.bytesSent).toBeLessThan(64 * 1024 * 1024);
  });

  it('refuses a declared Content-Length over 64 KiB without reading the body', async () => {
    const h = harness();
    const { key } = await h.account();
    const port = await listen(h, { headersTimeoutMs: 2_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 1_000 });
    const received = await new Promise<string>((resolve) => {
      const head = requestHead('POST', SUBMIT, { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': String(10 * 1024 * 1024) });
      const socket = connect(port, '127.0.0.1', () => socket.write(`${head}\r\n`));
      let text = '';
      socket.on('error', () => {});
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('close', () => resolve(text));
    });
    const exchange = { received };
    expect(exchange.received).toMatch(/^HTTP\/1\.1 413 /);
  });
});

describe('keys', () => {
  it('refuses a key revoked by another process once the key cache time has passed, and looks unknown keys up every time', async () => {
    const store = new SqliteStore(':memory:');
    const h = harnessOver(store, { config: testConfig({ keyCacheMs: 5000 }) });
    const { key, keyId } = await h.account();
    expect((await h.request('GET', MODELS, { key })).status).toBe(200);
    let lookups = 0;
    const findApiKeyByHash = store.findApiKeyByHash.bind(store);
    store.findApiKeyByHash = (hash) => (lookups++, findApiKeyByHash(hash));
    // Revoked behind the app's back, as the CLI does: the cached record is still used for up to 5 s.
    await store.revokeApiKey({ id: keyId, now: h.clock.now() });
    h.clock.advance(4999);
    expect((await h.request('GET', MODELS, { key })).status).toBe(200);
    expect(lookups).toBe(0);
    h.clock.advance(1);
    expect((await h.request('GET', MODELS, { key })).status).toBe(401);
    // Its revoked record is what is cached now (a revocation is never undone).
    expect((await h.request('GET', MODELS, { key })).status).toBe(401);
    expect(lookups).toBe(1);
    const unknown = generateApiKey('live');
    for (let i = 0; i < 3; i++) expect((await h.request('GET', MODELS, { key: unknown })).status).toBe(401);
    expect(lookups).toBe(4);
  });

  it('reads the key on every request when the key cache is off', async () => {
    const h = harness({ config: testConfig({ keyCacheMs: 0 }) });
    const { key, keyId } = await h.account();
    expect((await h.request('GET', MODELS, { key })).status).toBe(200);
    await h.store.revokeApiKey({ id: keyId, now: h.clock.now() });
    expect((await h.request('GET', MODELS, { key })).status).toBe(401);
  });

  it('answers malformed, unknown, revoked and expired keys with the same status, header and body', async () => {
    const h = harness();
    const { key, accountId, keyId } = await h.account();
    await h.store.revokeApiKey({ id: keyId, now: h.clock.now() });
    const expiring = await issueApiKey(h.store, { accountId, mode: 'live', scopes: ['tasks:read'], name: null, expiresAt: new Date(h.clock.now().getTime() + 1000), now: h.clock.now() });
    h.clock.advance(1000);
    const lastChar = key.at(-1) === 'a' ? 'b' : 'a';
    const presented = {
      malformed: 'not-a-key',
      'bad checksum': `${key.slice(0, -1)}${lastChar}`,
      unknown: generateApiKey('live'),
      revoked: key,
      expired: expiring.key,
    };
    const answers = await Promise.all(
      Object.entries(presented).map(async ([kind, presentedKey]) => {
        const res = await h.request('GET', MODELS, { key: presentedKey });
        return { kind, status: res.status, challenge: res.headers.get('www-authenticate'), body: await res.text() };
      }),
    );
    const [first] = answers;
    expect(first).toMatchObject({ status: 401, challenge: 'Bearer realm="vidgen", error="invalid_token"' });
    expect(JSON.parse(first!.body)).toEqual({ success: false, error: { code: 'unauthorized', message: 'the API key is invalid, revoked or expired' } });
    for (const answer of answers) expect({ ...answer, kind: first!.kind }).toEqual(first);
  });

  it('compares the stored hash with the computed one in constant time, refusing a record a lax lookup returns for another key', async () => {
    const store = new SqliteStore(':memory:');
    // A store whose lookup is wrong (say, a collation that matches too much) returns some key for any hash.
    let anyKey: Awaited<ReturnType<Store['findApiKeyByHash']>>;
    const lax = storeWith(store, { findApiKeyByHash: async () => anyKey });
    const h = harnessOver(store, { store: lax });
    const { key } = await h.account();
    anyKey = await store.findApiKeyByHash(hashApiKey(key));
    expect((await h.request('GET', MODELS, { key })).status).toBe(200);
    expect((await h.request('GET', MODELS, { key: generateApiKey('test') })).status).toBe(401);

    expect(sameApiKeyHash(hashApiKey(key), hashApiKey(key))).toBe(true);
    expect(sameApiKeyHash(hashApiKey(key), hashApiKey(`${key}x`))).toBe(false);
    expect(sameApiKeyHash(hashApiKey(key).slice(0, 62), hashApiKey(key).slice(0, 62))).toBe(false);
    // The stored form never changes with how it is computed: keys already issued keep working (SHA-256, hex; FIPS 180-2 "abc").
    expect(hashApiKey('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

describe('no answer or log line holds a key, a webhook secret or a stack trace', () => {
  function capturingLogger(level: string) {
    const lines: string[] = [];
    return { lines, logger: pino({ level }, { write: (line: string) => void lines.push(line) }) };
  }
  const STACK_FRAME = /\n\s+at |\s{4}at /;

  it('drives every operation, its error paths and an internal error', async () => {
    const store = new SqliteStore(':memory:');
    const { lines, logger } = capturingLogger('info');
    let secret = '';
    // A store that breaks on listing and on ping, with an error that quotes a secret and has a stack.
    const explode = async () => {
      throw new Error(`store exploded near ${secret}`);
    };
    const broken = storeWith(store, { listTaskPage: explode, ping: explode });
    const h = harnessOver(store, { store: broken, logger, docsHtml: () => '<!DOCTYPE html><title>ref</title><script>1</script>' });
    const { key, accountId } = await h.account();
    secret = (await h.store.webhookSecrets(accountId, h.clock.now()))[0]!;
    expect(secret).toMatch(/^whsec_/);
    const altered = `${key.slice(0, -1)}${key.at(-1) === 'a' ? 'b' : 'a'}`;

    const submitted = await h.request('POST', SUBMIT, { key, body: validSubmit({ webhookUrl: 'https://hooks.example.com/vidgen', metadata: { note: 'hello' } }) });
    const { requestId } = (await submitted.clone().json()) as { requestId: string };
    const answers: Response[] = [
      submitted,
      await h.request('GET', `${SUBMIT}/${requestId}`, { key }),
      await h.request('POST', `${SUBMIT}/${requestId}/cancel`, { key }),
      await h.request('GET', MODELS, { key }),
      await h.request('GET', '/healthz'),
      await h.request('GET', '/openapi.json'),
      await h.request('GET', '/docs'),
      await h.request('GET', '/metrics'),
      // Keys where they do not belong, and keys that are not quite right.
      await h.request('GET', MODELS, { key: altered }),
      await h.request('GET', MODELS, { headers: { Authorization: `Basic ${key}` } }),
      await h.request('GET', MODELS, { headers: { Authorization: key } }),
      await h.request('GET', `${MODELS}?api_key=${key}&secret=${encodeURIComponent(secret)}`),
      await h.request('GET', MODELS, { key, headers: { 'X-Correlation-Id': key } }),
      await h.request('GET', `${SUBMIT}/${key}`, { key }),
      await h.request('POST', `${SUBMIT}/${key}/cancel`, { key }),
      await h.request('GET', `/${key}/${encodeURIComponent(secret)}`),
      await h.request('DELETE', MODELS, { key }),
      // Validation errors that would echo what they were given.
      await h.request('POST', SUBMIT, { key, body: { ...validSubmit(), [key]: secret } }),
      await h.request('POST', SUBMIT, { key, body: { ...validSubmit(), model: key, webhookUrl: `https://x:${secret}@hooks.example.com/` } }),
      await h.request('POST', SUBMIT, { key, body: `Bearer ${key} ${secret}` }),
      await h.request('GET', `${SUBMIT}?cursor=${key}`, { key }),
      // Internal errors: an unexpected one (500) and an unreachable store (503).
      await h.request('GET', SUBMIT, { key }),
      await h.request('GET', '/readyz'),
    ];
    const statuses = answers.map((res) => res.status);
    expect(statuses).toEqual([202, 200, 200, 200, 200, 200, 200, 200, 401, 401, 401, 401, 200, 404, 404, 404, 405, 400, 400, 400, 400, 500, 503]);

    const internal = (await answers.at(-2)!.clone().json()) as ErrorBody;
    const correlationId = answers.at(-2)!.headers.get('x-correlation-id')!;
    expect(internal.error).toEqual({ code: 'internal_error', message: `an unexpected error occurred; correlation id ${correlationId}` });
    // The echoes are masked, not dropped: the caller still sees what was wrong.
    expect(((await answers[13]!.clone().json()) as ErrorBody).error.message).toBe('no task vg_test_[redacted]');

    for (const [i, res] of answers.entries()) {
      const text = `${[...res.headers].map(([name, value]) => `${name}: ${value}`).join('\n')}\n\n${await res.text()}`;
      expect(text, `answer ${i}`).not.toContain(key);
      expect(text, `answer ${i}`).not.toContain(altered);
      expect(text, `answer ${i}`).not.toContain(secret);
      expect(text, `answer ${i}`).not.toContain(secret.slice('whsec_'.length));
      expect(text, `answer ${i}`).not.toMatch(STACK_FRAME);
    }

    expect(lines.length).toBeGreaterThan(answers.length);
    for (const line of lines) {
      expect(line).not.toContain(key);
      expect(line).not.toContain(altered);
      expect(line).not.toContain(secret.slice('whsec_'.length));
      expect(line).not.toMatch(STACK_FRAME);
      expect(line).not.toContain('"stack"');
    }
    // The unexpected error is logged with what operators need: its type, its message (masked) and the correlation id.
    const logged = lines.map((line) => JSON.parse(line) as Record<string, any>).find((entry) => entry.msg === 'unexpected error');
    expect(logged).toMatchObject({ level: 50, correlationId, err: { type: 'Error', message: 'store exploded near whsec_[redacted]' } });
  });

  it('logs the stack of an unexpected error only when the operator asks for debug', async () => {
    const store = new SqliteStore(':memory:');
    const { lines, logger } = capturingLogger('debug');
    const broken = storeWith(store, { listTaskPage: async () => Promise.reject(new Error('store exploded')) });
    const h = harnessOver(store, { store: broken, logger });
    const { key } = await h.account();
    const res = await h.request('GET', SUBMIT, { key });
    expect(res.status).toBe(500);
    expect(await res.text()).not.toMatch(STACK_FRAME);
    const logged = lines.map((line) => JSON.parse(line) as Record<string, any>).find((entry) => entry.msg === 'unexpected error');
    expect(logged?.err.stack).toMatch(/^Error: store exploded\n\s+at /);
  });
});

describe('security headers', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-abuse-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const require = createRequire(import.meta.url);
  const builtDocs = (() => {
    try {
      return readFileSync(require.resolve('@vidgen/spec/docs/index.html'), 'utf8');
    } catch {
      return undefined;
    }
  })();
  // The built reference when there is one (`pnpm docs`); a page with inline scripts like it otherwise.
  const docsHtml = builtDocs ?? '<!DOCTYPE html><script>var a = 1;</script><script type="module">\nconsole.log("b")\n</script><div id="root"></div>';

  const COMMON = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'x-frame-options': 'DENY' };

  it('locks down every JSON answer, success or error, and keeps task answers out of caches', async () => {
    const h = harness({ docsHtml: () => docsHtml });
    const { key } = await h.account();
    for (const [method, path, status] of [
      ['GET', '/healthz', 200],
      ['GET', MODELS, 200],
      ['GET', SUBMIT, 200],
      ['GET', `${SUBMIT}/gen_missing`, 404],
      ['PUT', MODELS, 405],
      ['GET', '/nowhere', 404],
    ] as const) {
      const res = await h.request(method, path, { key });
      expect(res.status).toBe(status);
      expect(Object.fromEntries(res.headers)).toMatchObject({
        ...COMMON,
        'content-security-policy': LOCKED_DOWN_CSP,
        'cross-origin-resource-policy': 'same-origin',
      });
      expect(res.headers.get('strict-transport-security')).toBeNull();
      if (path.startsWith('/api/')) expect(res.headers.get('cache-control')).toBe('no-store');
    }
    expect((await h.request('GET', SUBMIT)).headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('lets the reference page run exactly its own inline scripts', async () => {
    const h = harness({ docsHtml: () => docsHtml });
    const res = await h.request('GET', '/docs');
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy')!;
    const directives = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]));
    const scripts = [...(await res.text()).matchAll(/<script\b[^>]*>([\s\S]*?)<\/script>/gi)].map(([, body]) => body!);
    expect(scripts.length).toBeGreaterThan(0);
    expect(directives['script-src']!.sort()).toEqual(scripts.map((body) => `'sha256-${createHash('sha256').update(body).digest('base64')}'`).sort());
    expect(directives).toMatchObject({
      'default-src': ["'none'"],
      'style-src': ["'unsafe-inline'"],
      'img-src': ["'self'", 'data:'],
      'connect-src': ["'self'"],
      'frame-ancestors': ["'none'"],
      'base-uri': ["'none'"],
    });
    expect(csp).not.toContain('unsafe-eval');
    expect(Object.fromEntries(res.headers)).toMatchObject({ ...COMMON, 'cross-origin-resource-policy': 'same-origin' });
  });

  it('lets other sites play output files, with nosniff', async () => {
    const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
    const h = harness({ files });
    writeFileSync(join(dir, 'video.mp4'), 'mp4 bytes');
    const fileKey = await files.put('gen_0123456789abcdefXYZ', join(dir, 'video.mp4'));
    const url = new URL(await files.urlFor(fileKey, new Date(h.clock.now().getTime() + 3600_000)));
    const res = await h.request('GET', `${url.pathname}${url.search}`);
    expect(res.status).toBe(200);
    expect(Object.fromEntries(res.headers)).toMatchObject({
      ...COMMON,
      'content-type': 'video/mp4',
      'cross-origin-resource-policy': 'cross-origin',
      // media-src 'self': a browser opening the link directly plays it in a page that loads it from here.
      'content-security-policy': FILE_CSP,
    });
  });
});

describe.each(backendKinds)('tenant isolation on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'vidgen-tenants-'));
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
    rmSync(dir, { recursive: true, force: true });
  });

  async function setup() {
    const files: OutputFiles = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
    const h = backendHarness(await opened.fresh(), { files });
    const a = await h.account();
    const b = await h.account();
    const submit = async (key: string, patch: Record<string, unknown> = {}) => {
      const res = await h.request('POST', SUBMIT, { key, body: validSubmit(patch) });
      expect(res.status).toBe(202);
      h.clock.advance(1000);
      return ((await res.json()) as { requestId: string }).requestId;
    };
    return { h, files, a, b, submit };
  }

  /** The answer with the task id masked, to compare the answers for two ids. */
  const shape = async (res: Response, id: string) => ({ status: res.status, body: (await res.text()).replaceAll(id, '<id>') });

  it.skipIf(skip)('answers another account’s task like a missing one: query, long poll, cancel and its output', async () => {
    const { h, files, a, b, submit } = await setup();
    const queued = await submit(a.key);
    const done = await submit(a.key);
    await h.store.startTask({ id: done, now: h.clock.now() });
    writeFileSync(join(dir, `${done}.mp4`), 'mp4 bytes');
    const outputKey = await files.put(done, join(dir, `${done}.mp4`));
    const expiresAt = new Date(h.clock.now().getTime() + 3600_000);
    await h.store.completeTask({ id: done, now: h.clock.now(), outputKey, outputUrl: await files.urlFor(outputKey, expiresAt), outputExpiresAt: expiresAt });
    const missing = 'gen_01JZZZZZZZZZZZZZZZZZZZZZZZ';

    const asB = async (method: string, path: (id: string) => string, id: string) => shape(await h.request(method, path(id), { key: b.key }), id);
    for (const [method, path] of [
      ['GET', (id: string) => `${SUBMIT}/${id}`],
      // A long poll would wait for the (manual) clock: answering at all shows it did not wait.
      ['GET', (id: string) => `${SUBMIT}/${id}?wait=30`],
      ['POST', (id: string) => `${SUBMIT}/${id}/cancel`],
    ] as const) {
      const expected = await asB(method, path, missing);
      expect(expected.status).toBe(404);
      expect(JSON.parse(expected.body)).toEqual({ success: false, error: { code: 'not_found', message: 'no task <id>' } });
      expect(await asB(method, path, queued)).toEqual(expected);
      expect(await asB(method, path, done)).toEqual(expected);
    }
    // B's cancel changed nothing.
    expect(((await (await h.request('GET', `${SUBMIT}/${queued}`, { key: a.key })).json()) as { status: string }).status).toBe('queued');

    // The output is reachable only through its signed link, which only A's query gives out.
    const own = (await (await h.request('GET', `${SUBMIT}/${done}`, { key: a.key })).json()) as { status: string; output: { url: string } };
    expect(own.status).toBe('succeeded');
    const link = new URL(own.output.url);
    expect((await h.request('GET', `${link.pathname}${link.search}`)).status).toBe(200);
    // Without the signature, with B's key: the same refusal as for a file that does not exist.
    const unsigned = await shape(await h.request('GET', link.pathname, { key: b.key }), done);
    const nonexistent = await shape(await h.request('GET', `/files/${missing}.mp4`, { key: b.key }), missing);
    expect(unsigned).toEqual(nonexistent);
    expect(unsigned.status).toBe(403);
  });

  it.skipIf(skip)('never lists another account’s tasks, whatever the cursor or status filter', async () => {
    const { h, a, b, submit } = await setup();
    const ofA = [await submit(a.key), await submit(a.key), await submit(a.key)];
    const ofB = [await submit(b.key), await submit(b.key)];
    const ids = async (key: string, query: string) => ((await (await h.request('GET', `${SUBMIT}${query}`, { key })).json()) as { data: { requestId: string }[] }).data.map((t) => t.requestId);

    expect(await ids(b.key, '?limit=100')).toEqual([...ofB].reverse());
    expect(await ids(b.key, '?status=queued')).toEqual([...ofB].reverse());
    expect(await ids(a.key, '?limit=100')).toEqual([...ofA].reverse());
    // A's cursor is a position, not a pass: B following it sees only B's own tasks after that position.
    const { nextCursor } = (await (await h.request('GET', `${SUBMIT}?limit=1`, { key: a.key })).json()) as { nextCursor: string };
    expect(nextCursor).toBeTruthy();
    const followed = await ids(b.key, `?limit=100&cursor=${encodeURIComponent(nextCursor)}`);
    expect(followed.filter((id) => ofA.includes(id))).toEqual([]);
    expect(followed.every((id) => ofB.includes(id))).toBe(true);
  });

  it.skipIf(skip)('refuses reference and webhook URLs whose host is plainly not public (literal addresses, localhost) with 400, uncharged', async () => {
    const { h, a } = await setup();
    for (const [patch, field] of [
      [{ mediaUrls: ['https://127.0.0.1/a.png'] }, '/mediaUrls/0'],
      [{ mediaUrls: ['https://cdn.example.com/a.png', 'https://[::1]/b.png'] }, '/mediaUrls/1'],
      [{ mediaUrls: ['https://10.0.0.7/a.png'] }, '/mediaUrls/0'],
      [{ mediaUrls: ['https://0x7f000001/a.png'] }, '/mediaUrls/0'],
      [{ mediaUrls: ['https://Localhost/a.png'] }, '/mediaUrls/0'],
      [{ webhookUrl: 'https://169.254.169.254/latest' }, '/webhookUrl'],
      [{ webhookUrl: 'https://hooks.localhost/v' }, '/webhookUrl'],
      [{ webhookUrl: 'https://[fd00::1]/v' }, '/webhookUrl'],
    ] as const) {
      const res = await h.request('POST', SUBMIT, { key: a.key, body: validSubmit(patch) });
      expect(res.status, JSON.stringify(patch)).toBe(400);
      expect(await res.json()).toMatchObject({ error: { code: 'invalid_request', details: [{ field, message: expect.stringMatching(/not public/) }] } });
    }
    // A public literal address is a host like any other.
    expect((await h.request('POST', SUBMIT, { key: a.key, body: validSubmit({ mediaUrls: ['https://93.184.215.14/a.png'] }) })).status).toBe(202);
    // Only that one was charged.
    expect((await h.store.listLedger(a.accountId)).filter((e) => e.kind === 'charge')).toHaveLength(1);
  });

  it.skipIf(skip)('refuses a cursor whose time no date can hold with 400, not a 500 or the first page again', async () => {
    const { h, a, submit } = await setup();
    await submit(a.key);
    const { nextCursor } = (await (await h.request('GET', `${SUBMIT}?limit=1`, { key: a.key })).json()) as { nextCursor: string | null };
    const { i } = JSON.parse(Buffer.from(nextCursor ?? Buffer.from(JSON.stringify({ i: 'gen_01M84TY3PXJFSHFC99X43T274C' })).toString('base64url'), 'base64url').toString()) as { i: string };
    for (const t of [Number.MAX_SAFE_INTEGER, 8.64e15 + 1, -1, -8639999999999999]) {
      const cursor = Buffer.from(JSON.stringify({ t, i, s: null })).toString('base64url');
      const res = await h.request('GET', `${SUBMIT}?cursor=${cursor}`, { key: a.key });
      expect(res.status, `t = ${t}`).toBe(400);
      expect(await res.json()).toMatchObject({ success: false, error: { code: 'invalid_request', details: [expect.objectContaining({ field: 'cursor' })] } });
    }
  });

  it.skipIf(skip)('lists each account’s webhook deliveries only (the CLI’s `webhooks list`)', async () => {
    const { h, a, b, submit } = await setup();
    const hook = { webhookUrl: 'https://hooks.example.com/vidgen' };
    const ofA = await submit(a.key, hook);
    const ofB = await submit(b.key, hook);
    for (const [key, id] of [
      [a.key, ofA],
      [b.key, ofB],
    ] as const) {
      expect((await h.request('POST', `${SUBMIT}/${id}/cancel`, { key })).status).toBe(200);
    }
    expect((await h.store.listDeliveries(a.accountId, 100)).map((d) => [d.taskId, d.accountId])).toEqual([[ofA, a.accountId]]);
    expect((await h.store.listDeliveries(b.accountId, 100)).map((d) => [d.taskId, d.accountId])).toEqual([[ofB, b.accountId]]);
  });
});
