/**
 * The account holder's API (account, ledger, usage, keys, webhook deliveries and secret) against
 * a loopback HTTP stub: each answer is the spec's own example for the operation (read from the
 * bundled document), and each request the client sends is checked for its method, path, query,
 * body, `Content-Type` and `Authorization`. Then the retry decisions: reads and idempotent writes
 * are retried after a 503 or a reset connection; `createApiKey` and `rotateWebhookSecret` are not
 * (only after a 429, which proves the request was turned away).
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, expectTypeOf, it } from 'vitest';
import {
  createClient,
  VidgenError,
  type AccountSummary,
  type ApiKeyList,
  type CreatedApiKey,
  type LedgerEntry,
  type LedgerEntryList,
  type RedeliverWebhookResponse,
  type RevokeApiKeyResponse,
  type UsageReport,
  type VidgenClient,
  type WebhookDelivery,
  type WebhookDeliveryDetail,
  type WebhookDeliveryList,
  type WebhookSecret,
} from '../src/index.js';

const API_KEY = 'vg_test_stubstubstubstubstubstub0';
const bundle = JSON.parse(readFileSync(resolve(import.meta.dirname, '../../../spec/dist/openapi.json'), 'utf8'));

/** The spec's example answer of an operation (the named one, or its first), `$ref`s resolved. */
function example(path: string, method: string, status: number, name?: string): any {
  const content = bundle.paths[path]?.[method]?.responses?.[String(status)]?.content?.['application/json'];
  if (!content?.examples) throw new Error(`the spec has no example for ${method.toUpperCase()} ${path} ${status}`);
  const chosen = name ? content.examples[name] : Object.values(content.examples)[0];
  if (!chosen) throw new Error(`the spec has no example ${name} for ${method.toUpperCase()} ${path} ${status}`);
  const resolved = chosen.$ref ? bundle.components.examples[String(chosen.$ref).replace('#/components/examples/', '')] : chosen;
  return structuredClone(resolved.value);
}

const P = {
  account: '/api/open/v1/account',
  ledger: '/api/open/v1/account/ledger',
  usage: '/api/open/v1/account/usage',
  keys: '/api/open/v1/account/keys',
  revoke: '/api/open/v1/account/keys/{keyId}/revoke',
  deliveries: '/api/open/v1/account/webhooks/deliveries',
  delivery: '/api/open/v1/account/webhooks/deliveries/{deliveryId}',
  redeliver: '/api/open/v1/account/webhooks/deliveries/{deliveryId}/redeliver',
  secret: '/api/open/v1/account/webhooks/secret',
  rotate: '/api/open/v1/account/webhooks/secret/rotate',
} as const;

/** A spec path template as a pattern of concrete (still percent-encoded) paths. */
const templatePattern = (template: string) => new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);

interface Seen {
  method: string;
  path: string;
  /** The spec's path template the path matched. */
  route: string;
  query: Record<string, string>;
  contentType: string | undefined;
  body: unknown;
}

/** What the stub does with a request: answer JSON, or destroy the connection without answering. */
type Reply = { status: number; body: unknown; headers?: Record<string, string> } | 'reset';

/**
 * A loopback server that checks every request against the spec's routes (method and path), the
 * key (`Authorization: Bearer …`) and the body (JSON when there is one), records it, and answers
 * with what `reply` says. A request it cannot accept is answered 400 and fails the test.
 */
async function startStub() {
  const seen: Seen[] = [];
  const problems: string[] = [];
  let reply: (request: Seen) => Reply = () => ({ status: 500, body: { success: false, error: { code: 'internal_error', message: 'no reply set' } } });
  const server: Server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://stub');
    const method = req.method ?? '';
    const route = Object.values(P).find((template) => templatePattern(template).test(url.pathname) && bundle.paths[template]?.[method.toLowerCase()]);
    const contentType = req.headers['content-type'];
    const problem =
      req.headers.authorization !== `Bearer ${API_KEY}`
        ? `Authorization is ${req.headers.authorization}`
        : !route
          ? `${method} ${url.pathname} is no operation of the spec`
          : text && !contentType?.startsWith('application/json')
            ? `a body with Content-Type ${contentType}`
            : undefined;
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      problems.push(`${method} ${url.pathname}: the body is not JSON: ${text}`);
    }
    if (problem) {
      problems.push(`${method} ${url.pathname}: ${problem}`);
      res.writeHead(400, { 'Content-Type': 'application/json' }).end(JSON.stringify({ success: false, error: { code: 'invalid_request', message: problem } }));
      return;
    }
    const request: Seen = { method, path: url.pathname, route: route!, query: Object.fromEntries(url.searchParams), contentType, body };
    seen.push(request);
    const answer = reply(request);
    if (answer === 'reset') {
      req.socket.destroy();
      return;
    }
    res
      .writeHead(answer.status, { 'Content-Type': 'application/json', 'X-Correlation-Id': 'corr-stub', ...answer.headers })
      .end(JSON.stringify(answer.body));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    seen,
    problems,
    reply: (next: (request: Seen) => Reply) => {
      reply = next;
    },
    /** Replies in order, one per request (then fails the test). */
    script: (...replies: Reply[]) => {
      reply = () => replies.shift() ?? { status: 500, body: { success: false, error: { code: 'internal_error', message: 'no more scripted replies' } } };
    },
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      }),
  };
}

let stub: Awaited<ReturnType<typeof startStub>>;
let client: VidgenClient;
const fast = { minDelayMs: 1, maxDelayMs: 5 };
const ok = (body: unknown, status = 200): Reply => ({ status, body });
const unavailable: Reply = { status: 503, body: { success: false, error: { code: 'unavailable', message: 'draining' } } };

beforeAll(async () => {
  stub = await startStub();
});
afterAll(() => stub.close());
beforeEach(() => {
  stub.seen.length = 0;
  stub.problems.length = 0;
  client = createClient({ baseUrl: stub.baseUrl, apiKey: API_KEY, retry: fast });
});
afterEach(() => expect(stub.problems).toEqual([]));

describe('the account', () => {
  it('account() is GET /account, answering AccountSummary', async () => {
    const answer = example(P.account, 'get', 200);
    stub.script(ok(answer));
    const account = await client.account();
    expectTypeOf(account).toEqualTypeOf<AccountSummary>();
    expect(account).toEqual(answer);
    expect(stub.seen).toEqual([{ method: 'GET', path: P.account, route: P.account, query: {}, contentType: undefined, body: undefined }]);
  });

  it('ledger(options) sends the filters and the page as the query, answering a LedgerEntryList', async () => {
    const answer = example(P.ledger, 'get', 200, 'oneTask');
    stub.script(ok(answer));
    const page = await client.ledger({ kind: 'refund', requestId: 'gen_01JD6ZC3V2E8H5K9P1S4W7Y0A3', limit: 2, cursor: 'eyJpIjo1NH0' });
    expectTypeOf(page).toEqualTypeOf<LedgerEntryList>();
    expect(page).toEqual(answer);
    expect(stub.seen.map(({ method, path, query, body }) => ({ method, path, query, body }))).toEqual([
      { method: 'GET', path: P.ledger, query: { kind: 'refund', requestId: 'gen_01JD6ZC3V2E8H5K9P1S4W7Y0A3', limit: '2', cursor: 'eyJpIjo1NH0' }, body: undefined },
    ]);

    stub.script(ok(answer));
    await client.ledger();
    expect(stub.seen[1]!.query).toEqual({});
  });

  it('ledgerAll(options) follows nextCursor across pages, keeping the filters, until a page has none', async () => {
    const entries: LedgerEntry[] = example(P.ledger, 'get', 200, 'firstPage').data;
    expect(entries).toHaveLength(4);
    // Three pages (2, 1 and 1 entries), the cursors as opaque as the service's.
    const pages: Record<string, { data: LedgerEntry[]; nextCursor: string | null }> = {
      '': { data: entries.slice(0, 2), nextCursor: 'c-two' },
      'c-two': { data: entries.slice(2, 3), nextCursor: 'c-three' },
      'c-three': { data: entries.slice(3), nextCursor: null },
    };
    stub.reply((request) => {
      const page = pages[request.query.cursor ?? ''];
      return page ? ok({ success: true, ...page }) : { status: 400, body: { success: false, error: { code: 'invalid_request', message: 'unknown cursor' } } };
    });
    const all: LedgerEntry[] = [];
    const walk = client.ledgerAll({ kind: 'charge', limit: 2 });
    expectTypeOf(walk).toEqualTypeOf<AsyncGenerator<LedgerEntry, void, undefined>>();
    for await (const entry of walk) all.push(entry);
    expect(all).toEqual(entries);
    expect(stub.seen.map((request) => request.query)).toEqual([
      { kind: 'charge', limit: '2' },
      { kind: 'charge', limit: '2', cursor: 'c-two' },
      { kind: 'charge', limit: '2', cursor: 'c-three' },
    ]);
  });

  it('ledgerAll stops at the first page when it has no nextCursor, and is lazy', async () => {
    stub.script(ok(example(P.ledger, 'get', 200, 'grant')));
    const walk = client.ledgerAll();
    expect(stub.seen).toHaveLength(0);
    const entries: LedgerEntry[] = [];
    for await (const entry of walk) entries.push(entry);
    expect(entries.map((entry) => entry.kind)).toEqual(['grant']);
    expect(stub.seen).toHaveLength(1);
  });

  it('usage(options) sends from/to (Dates as RFC 3339), granularity and groupBy, answering a UsageReport', async () => {
    const answer = example(P.usage, 'get', 200, 'hourlyByModel');
    stub.script(ok(answer), ok(example(P.usage, 'get', 200, 'daily')));
    const report = await client.usage({ from: new Date('2026-11-22T10:00:00Z'), to: '2026-11-22T11:00:00+00:00', granularity: 'hour', groupBy: 'model' });
    expectTypeOf(report).toEqualTypeOf<UsageReport>();
    expect(report).toEqual(answer);
    expect(report.data.map((bucket) => bucket.model)).toEqual(['vidgen-2.0', 'vidgen-2.0-fast', 'vidgen-1.5-pro']);
    await client.usage();
    expect(stub.seen.map(({ method, path, query }) => ({ method, path, query }))).toEqual([
      { method: 'GET', path: P.usage, query: { from: '2026-11-22T10:00:00.000Z', to: '2026-11-22T11:00:00+00:00', granularity: 'hour', groupBy: 'model' } },
      { method: 'GET', path: P.usage, query: {} },
    ]);
    await expect(client.usage({ from: new Date('not a date') })).rejects.toThrow(TypeError);
  });
});

describe('keys', () => {
  it('keys.list() is GET /account/keys, answering an ApiKeyList', async () => {
    const answer = example(P.keys, 'get', 200);
    stub.script(ok(answer));
    const keys = await client.keys.list();
    expectTypeOf(keys).toEqualTypeOf<ApiKeyList>();
    expect(keys).toEqual(answer);
    expect(stub.seen.map(({ method, path, query, body }) => ({ method, path, query, body }))).toEqual([{ method: 'GET', path: P.keys, query: {}, body: undefined }]);
  });

  it('keys.create(body) POSTs the body as JSON and answers the CreatedApiKey; with no body, {}', async () => {
    const answer = example(P.keys, 'post', 201);
    stub.script(ok(answer, 201), ok(answer, 201));
    const created = await client.keys.create({ name: 'Dashboard (read-only)', scopes: ['tasks:read'], expiresInDays: 90 });
    expectTypeOf(created).toEqualTypeOf<CreatedApiKey>();
    expectTypeOf(created.key).toEqualTypeOf<string>();
    expect(created).toEqual(answer);
    await client.keys.create();
    expect(stub.seen.map(({ method, path, contentType, body }) => ({ method, path, contentType, body }))).toEqual([
      { method: 'POST', path: P.keys, contentType: 'application/json', body: { name: 'Dashboard (read-only)', scopes: ['tasks:read'], expiresInDays: 90 } },
      { method: 'POST', path: P.keys, contentType: 'application/json', body: {} },
    ]);
    const misuse = () => {
      // @ts-expect-error not a scope of the spec
      void client.keys.create({ scopes: ['admin'] });
    };
    void misuse;
  });

  it('keys.revoke(keyId) POSTs to the key (its id percent-encoded), with no body, answering RevokeApiKeyResponse', async () => {
    const answer = example(P.revoke, 'post', 200);
    stub.script(ok(answer), ok(answer));
    const revoked = await client.keys.revoke('key_01JD7A4C6E8G0J2K4M6P8R0T2V');
    expectTypeOf(revoked).toEqualTypeOf<RevokeApiKeyResponse>();
    expect(revoked).toEqual(answer);
    await client.keys.revoke('key/../x');
    expect(stub.seen.map(({ method, path, body }) => ({ method, path, body }))).toEqual([
      { method: 'POST', path: '/api/open/v1/account/keys/key_01JD7A4C6E8G0J2K4M6P8R0T2V/revoke', body: undefined },
      { method: 'POST', path: '/api/open/v1/account/keys/key%2F..%2Fx/revoke', body: undefined },
    ]);
  });

  it("a refusal becomes a VidgenError with the envelope's code, details and correlation id, not retried", async () => {
    stub.script({
      status: 409,
      body: {
        success: false,
        error: {
          code: 'invalid_state',
          message: 'a key cannot revoke itself; revoke it with another key',
          details: [{ field: 'keyId', message: 'is the key making this request', value: 'key_01JD6Y2M8Q4R6T8V0X2Z4B6D8F' }],
        },
      },
    });
    const error = (await client.keys.revoke('key_01JD6Y2M8Q4R6T8V0X2Z4B6D8F').catch((e: unknown) => e)) as VidgenError;
    expect(error).toBeInstanceOf(VidgenError);
    expect(error).toMatchObject({ status: 409, code: 'invalid_state', correlationId: 'corr-stub', details: [{ field: 'keyId' }] });
    expect(stub.seen).toHaveLength(1);
  });
});

describe('webhooks', () => {
  it('webhooks.deliveries(options) sends the filters and page, answering a WebhookDeliveryList', async () => {
    const answer = example(P.deliveries, 'get', 200);
    stub.script(ok(answer));
    const page = await client.webhooks.deliveries({ status: 'failed', requestId: 'gen_01JD6ZB7C9D1E3F5G7H9J1K3M5', limit: 5, cursor: 'c1' });
    expectTypeOf(page).toEqualTypeOf<WebhookDeliveryList>();
    expect(page).toEqual(answer);
    expect(stub.seen.map(({ method, path, query }) => ({ method, path, query }))).toEqual([
      { method: 'GET', path: P.deliveries, query: { status: 'failed', requestId: 'gen_01JD6ZB7C9D1E3F5G7H9J1K3M5', limit: '5', cursor: 'c1' } },
    ]);
  });

  it('webhooks.deliveriesAll(options) follows nextCursor, keeping the filters', async () => {
    const deliveries: WebhookDelivery[] = example(P.deliveries, 'get', 200).data;
    stub.reply((request) =>
      ok(request.query.cursor === 'next' ? { success: true, data: deliveries.slice(1), nextCursor: null } : { success: true, data: deliveries.slice(0, 1), nextCursor: 'next' }),
    );
    const all: WebhookDelivery[] = [];
    const walk = client.webhooks.deliveriesAll({ status: 'pending', limit: 1 });
    expectTypeOf(walk).toEqualTypeOf<AsyncGenerator<WebhookDelivery, void, undefined>>();
    for await (const delivery of walk) all.push(delivery);
    expect(all).toEqual(deliveries);
    expect(stub.seen.map((request) => request.query)).toEqual([
      { status: 'pending', limit: '1' },
      { status: 'pending', limit: '1', cursor: 'next' },
    ]);
  });

  it('webhooks.delivery(id) is GET of the delivery, answering WebhookDeliveryDetail', async () => {
    const answer = example(P.delivery, 'get', 200);
    stub.script(ok(answer));
    const delivery = await client.webhooks.delivery('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5');
    expectTypeOf(delivery).toEqualTypeOf<WebhookDeliveryDetail>();
    expect(delivery.attemptHistory).toHaveLength(3);
    expect(delivery).toEqual(answer);
    expect(stub.seen.map(({ method, path, route }) => ({ method, path, route }))).toEqual([
      { method: 'GET', path: '/api/open/v1/account/webhooks/deliveries/msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5', route: P.delivery },
    ]);
  });

  it('webhooks.redeliver(id) POSTs to the delivery with no body; the 202 answers RedeliverWebhookResponse', async () => {
    const answer = example(P.redeliver, 'post', 202);
    stub.script(ok(answer, 202));
    const redelivered = await client.webhooks.redeliver('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5');
    expectTypeOf(redelivered).toEqualTypeOf<RedeliverWebhookResponse>();
    expect(redelivered).toEqual(answer);
    expect(stub.seen.map(({ method, path, route, body }) => ({ method, path, route, body }))).toEqual([
      { method: 'POST', path: '/api/open/v1/account/webhooks/deliveries/msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5/redeliver', route: P.redeliver, body: undefined },
    ]);
  });

  it('webhooks.secret() and webhooks.rotateSecret(body) answer WebhookSecret; rotateSecret() sends {}', async () => {
    const current = example(P.secret, 'get', 200);
    const rotated = example(P.rotate, 'post', 200, 'retiredAtOnce');
    stub.script(ok(current), ok(rotated), ok(example(P.rotate, 'post', 200, 'rotated')));
    const secret = await client.webhooks.secret();
    expectTypeOf(secret).toEqualTypeOf<WebhookSecret>();
    expect(secret).toEqual(current);
    const next = await client.webhooks.rotateSecret({ overlapHours: 0 });
    expectTypeOf(next).toEqualTypeOf<WebhookSecret>();
    expect(next).toEqual(rotated);
    expect((await client.webhooks.rotateSecret()).previousSecretValidUntil).toBeTruthy();
    expect(stub.seen.map(({ method, path, contentType, body }) => ({ method, path, contentType, body }))).toEqual([
      { method: 'GET', path: P.secret, contentType: undefined, body: undefined },
      { method: 'POST', path: P.rotate, contentType: 'application/json', body: { overlapHours: 0 } },
      { method: 'POST', path: P.rotate, contentType: 'application/json', body: {} },
    ]);
  });
});

describe('retries of the account operations', () => {
  const createdKey = () => example(P.keys, 'post', 201);

  it('createApiKey is not retried after a 503: the key may have been issued', async () => {
    stub.script(unavailable, ok(createdKey(), 201));
    const error = (await client.keys.create({ name: 'once' }).catch((e: unknown) => e)) as VidgenError;
    expect(error).toBeInstanceOf(VidgenError);
    expect(error).toMatchObject({ status: 503, code: 'unavailable' });
    expect(stub.seen).toHaveLength(1);
  });

  it('createApiKey is not retried after a reset connection (no answer)', async () => {
    stub.script('reset', ok(createdKey(), 201));
    const error = (await client.keys.create({ name: 'once' }).catch((e: unknown) => e)) as VidgenError;
    expect(error).toBeInstanceOf(VidgenError);
    expect(error).toMatchObject({ status: 0, code: 'network_error' });
    expect(stub.seen).toHaveLength(1);
  });

  it('createApiKey is retried after a 429, which turns the request away before it is carried out', async () => {
    const limited: Reply = { status: 429, body: { success: false, error: { code: 'rate_limited', message: 'slow down' } }, headers: { 'Retry-After': '0' } };
    stub.script(limited, ok(createdKey(), 201));
    expect(await client.keys.create({ name: 'once' })).toEqual(createdKey());
    expect(stub.seen.map((request) => request.body)).toEqual([{ name: 'once' }, { name: 'once' }]);
  });

  it('rotateWebhookSecret is not retried after a 503 or a reset connection', async () => {
    stub.script(unavailable);
    expect(await client.webhooks.rotateSecret({ overlapHours: 24 }).catch((e: unknown) => e)).toMatchObject({ status: 503, code: 'unavailable' });
    stub.script('reset');
    expect(await client.webhooks.rotateSecret({ overlapHours: 24 }).catch((e: unknown) => e)).toMatchObject({ status: 0, code: 'network_error' });
    expect(stub.seen).toHaveLength(2);
  });

  it('every GET is retried after a 503 and a reset connection, then answers', async () => {
    const reads: [string, () => Promise<unknown>, unknown][] = [
      ['account', () => client.account(), example(P.account, 'get', 200)],
      ['ledger', () => client.ledger({ limit: 2 }), example(P.ledger, 'get', 200)],
      ['usage', () => client.usage(), example(P.usage, 'get', 200)],
      ['keys.list', () => client.keys.list(), example(P.keys, 'get', 200)],
      ['webhooks.deliveries', () => client.webhooks.deliveries(), example(P.deliveries, 'get', 200)],
      ['webhooks.delivery', () => client.webhooks.delivery('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5'), example(P.delivery, 'get', 200)],
      ['webhooks.secret', () => client.webhooks.secret(), example(P.secret, 'get', 200)],
    ];
    for (const [name, read, answer] of reads) {
      stub.seen.length = 0;
      stub.script(unavailable, 'reset', ok(answer));
      expect(await read(), name).toEqual(answer);
      expect(stub.seen.map((request) => request.method), name).toEqual(['GET', 'GET', 'GET']);
    }
  });

  it('ledgerAll retries a page, then goes on from the same cursor', async () => {
    const entries: LedgerEntry[] = example(P.ledger, 'get', 200).data;
    const replies: Reply[] = [ok({ success: true, data: entries.slice(0, 2), nextCursor: 'c2' }), 'reset', ok({ success: true, data: entries.slice(2), nextCursor: null })];
    stub.reply(() => replies.shift()!);
    const all: LedgerEntry[] = [];
    for await (const entry of client.ledgerAll({ limit: 2 })) all.push(entry);
    expect(all).toEqual(entries);
    expect(stub.seen.map((request) => request.query.cursor)).toEqual([undefined, 'c2', 'c2']);
  });

  it('revokeApiKey and redeliverWebhook are retried after a reset connection (a repeat is harmless)', async () => {
    stub.script('reset', unavailable, ok(example(P.revoke, 'post', 200)));
    expect(await client.keys.revoke('key_01JD7A4C6E8G0J2K4M6P8R0T2V')).toEqual(example(P.revoke, 'post', 200));
    stub.script('reset', ok(example(P.redeliver, 'post', 202), 202));
    expect(await client.webhooks.redeliver('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5')).toEqual(example(P.redeliver, 'post', 202));
    expect(stub.seen.map((request) => request.route)).toEqual([P.revoke, P.revoke, P.revoke, P.redeliver, P.redeliver]);
  });

  it('retry: false turns the retries of reads off too', async () => {
    const once = createClient({ baseUrl: stub.baseUrl, apiKey: API_KEY, retry: false });
    stub.script(unavailable);
    expect(await once.account().catch((e: unknown) => e)).toMatchObject({ status: 503 });
    expect(stub.seen).toHaveLength(1);
  });
});
