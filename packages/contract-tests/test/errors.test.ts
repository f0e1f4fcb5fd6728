/**
 * Every documented error the target can be made to produce, checked against
 * the spec: status, code, envelope, required headers. Against the mock, errors
 * it cannot produce by itself are asked for with Prism's `Prefer: code=…`
 * header (so the documented answer's shape is still validated); errors only a
 * real server can produce (unknown route, 405, tenant isolation) run against
 * the server only.
 */
import { describe, expect, it } from 'vitest';
import { endedWebhookTask, endWebhookTask, keyWith, mintKey, ownKeyId } from '../src/account.js';
import { minimalSubmit, UNKNOWN_DELIVERY_ID, UNKNOWN_KEY_ID, UNKNOWN_TASK_ID } from '../src/fixtures.js';
import { call, expectEnvelope, expectError, send, untilTerminal, type CallOptions } from '../src/http.js';
import { isMock, target, type Target } from '../src/target.js';

/** How the mock is brought to give this answer. */
type OnMock = 'natural' | 'prefer' | { skip: string };

interface ErrorCase {
  name: string;
  operationId: string;
  options: () => CallOptions | Promise<CallOptions>;
  status: number;
  code: string;
  onMock: OnMock;
  /** The field `error.details` must name (server only; the mock answers a fixed example). */
  field?: string;
  /** Needs a key (or a webhookUrl) the server harness may not provide. */
  needs?: keyof Target | (keyof Target)[];
}

/** A well-formed request to each of the account holder's operations (ids that name nothing). */
const ACCOUNT_BASE = {
  getAccount: {},
  listLedgerEntries: {},
  getUsage: {},
  listApiKeys: {},
  createApiKey: { body: {} },
  revokeApiKey: { path: { keyId: UNKNOWN_KEY_ID } },
  listWebhookDeliveries: {},
  getWebhookDelivery: { path: { deliveryId: UNKNOWN_DELIVERY_ID } },
  redeliverWebhook: { path: { deliveryId: UNKNOWN_DELIVERY_ID } },
  getWebhookSecret: {},
  rotateWebhookSecret: { body: {} },
} satisfies Record<string, CallOptions>;

/** The variable each optional target setting is read from (target.ts). */
const ENV_OF: Partial<Record<keyof Target, string>> = { webhookUrl: 'VIDGEN_CONTRACT_WEBHOOK_URL' };

const submitWith = (patch: Record<string, unknown>, drop: string[] = []): (() => CallOptions) => () => {
  const body: Record<string, unknown> = { ...minimalSubmit(), ...patch };
  for (const key of drop) delete body[key];
  return { body };
};
const invalidSubmit = (name: string, patch: Record<string, unknown>, field: string, onMock: OnMock = 'natural', drop: string[] = []): ErrorCase => ({
  name,
  operationId: 'submitGeneration',
  options: submitWith(patch, drop),
  status: 400,
  code: 'invalid_request',
  onMock,
  field,
});
const img = (n: number) => `https://cdn.example.com/refs/${n}.png`;

const cases: ErrorCase[] = [
  // 400: the submission battery
  { name: 'malformed JSON', operationId: 'submitGeneration', options: () => ({ rawBody: '{"model": "vidgen-2.0",', headers: { 'Content-Type': 'application/json' } }), status: 400, code: 'invalid_request', onMock: { skip: 'Prism answers malformed JSON in its own format' }, field: '' },
  { name: 'a JSON array body', operationId: 'submitGeneration', options: () => ({ body: [minimalSubmit()] }), status: 400, code: 'invalid_request', onMock: 'natural', field: '' },
  invalidSubmit('missing model', {}, '/model', 'natural', ['model']),
  invalidSubmit('missing prompt', {}, '/prompt', 'natural', ['prompt']),
  invalidSubmit('prompt of the wrong type', { prompt: 5 }, '/prompt'),
  invalidSubmit('blank prompt', { prompt: '   ' }, '/prompt'),
  invalidSubmit('prompt of 5001 characters', { prompt: 'x'.repeat(5001) }, '/prompt'),
  invalidSubmit('unknown model', { model: 'vidgen-9' }, '/model'),
  invalidSubmit('duration 3 for vidgen-2.0', { model: 'vidgen-2.0', duration: 3 }, '/duration'),
  invalidSubmit('duration 16 for vidgen-2.0', { model: 'vidgen-2.0', duration: 16 }, '/duration'),
  invalidSubmit('duration 3 for vidgen-2.0-fast', { model: 'vidgen-2.0-fast', duration: 3 }, '/duration'),
  invalidSubmit('duration 16 for vidgen-2.0-fast', { model: 'vidgen-2.0-fast', duration: 16 }, '/duration'),
  invalidSubmit('duration 7 for vidgen-1.5-pro', { model: 'vidgen-1.5-pro', duration: 7 }, '/duration'),
  invalidSubmit('duration 4 for vidgen-1.5-pro', { model: 'vidgen-1.5-pro', duration: 4 }, '/duration'),
  invalidSubmit('a fractional duration', { duration: 5.5 }, '/duration'),
  invalidSubmit('duration as a string', { duration: '5' }, '/duration'),
  invalidSubmit('0 media URLs', { mediaUrls: [] }, '/mediaUrls'),
  invalidSubmit('6 media URLs', { mediaUrls: [1, 2, 3, 4, 5, 6].map(img) }, '/mediaUrls'),
  invalidSubmit('an http:// media URL', { mediaUrls: ['http://cdn.example.com/refs/a.png'] }, '/mediaUrls/0'),
  invalidSubmit('a media URL with user:password', { mediaUrls: ['https://user:secret@cdn.example.com/a.png'] }, '/mediaUrls/0'),
  invalidSubmit('a media URL of 2049 characters', { mediaUrls: [`https://cdn.example.com/${'a'.repeat(2030)}.png`] }, '/mediaUrls/0'),
  invalidSubmit('an unknown media extension', { mediaUrls: ['https://cdn.example.com/refs/notes.txt'] }, '/mediaUrls/0'),
  invalidSubmit('a media URL without extension', { mediaUrls: ['https://cdn.example.com/refs/clip'] }, '/mediaUrls/0'),
  invalidSubmit('a video for vidgen-1.5-pro', { model: 'vidgen-1.5-pro', duration: 5, mediaUrls: ['https://cdn.example.com/refs/a.mp4'] }, '/mediaUrls/0'),
  invalidSubmit('audio for vidgen-1.5-pro', { model: 'vidgen-1.5-pro', duration: 5, mediaUrls: [img(1), 'https://cdn.example.com/refs/a.mp3'] }, '/mediaUrls/1'),
  invalidSubmit('3 images for vidgen-1.5-pro', { model: 'vidgen-1.5-pro', duration: 5, mediaUrls: [img(1), img(2), img(3)] }, '/mediaUrls'),
  invalidSubmit('audio only', { mediaUrls: ['https://cdn.example.com/refs/beat.mp3'] }, '/mediaUrls', 'prefer'),
  invalidSubmit('an unknown aspect ratio', { aspectRatio: '4:3' }, '/aspectRatio'),
  invalidSubmit('an unknown resolution', { resolution: '4k' }, '/resolution'),
  invalidSubmit('an http:// webhookUrl', { webhookUrl: 'http://hooks.example.com/x' }, '/webhookUrl'),
  invalidSubmit('metadata that is not an object', { metadata: ['a'] }, '/metadata'),
  invalidSubmit('metadata over 4 KiB', { metadata: { blob: 'x'.repeat(4100) } }, '/metadata', 'prefer'),
  invalidSubmit('an unknown field', { aspect_ratio: '16:9' }, '/aspect_ratio'),
  // 400: parameters
  { name: 'limit 0', operationId: 'listGenerations', options: () => ({ query: { limit: 0 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'limit' },
  { name: 'limit 101', operationId: 'listGenerations', options: () => ({ query: { limit: 101 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'limit' },
  { name: 'limit not a number', operationId: 'listGenerations', options: () => ({ query: { limit: 'ten' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'limit' },
  { name: 'an unknown status filter', operationId: 'listGenerations', options: () => ({ query: { status: 'done' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'status' },
  { name: 'a forged cursor', operationId: 'listGenerations', options: () => ({ query: { cursor: 'bm90LWEtY3Vyc29y' } }), status: 400, code: 'invalid_request', onMock: 'prefer', field: 'cursor' },
  { name: 'wait 0', operationId: 'getGeneration', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, query: { wait: 0 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'wait' },
  { name: 'wait 31', operationId: 'getGeneration', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, query: { wait: 31 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'wait' },
  // 401 on every authenticated operation
  ...(['submitGeneration', 'listGenerations', 'getGeneration', 'cancelGeneration', 'listModels', ...(Object.keys(ACCOUNT_BASE) as (keyof typeof ACCOUNT_BASE)[])] as const).flatMap((operationId): ErrorCase[] => {
    const base: CallOptions =
      operationId in ACCOUNT_BASE
        ? ACCOUNT_BASE[operationId as keyof typeof ACCOUNT_BASE]
        : operationId === 'submitGeneration'
          ? { body: minimalSubmit() }
          : operationId.endsWith('Generation')
            ? { path: { requestId: UNKNOWN_TASK_ID } }
            : {};
    return [
      { name: `${operationId} without a key`, operationId, options: () => ({ ...base, apiKey: null }), status: 401, code: 'unauthorized', onMock: 'natural' },
      { name: `${operationId} with an unknown key`, operationId, options: () => ({ ...base, apiKey: 'vg_live_0000000000000000000000000000000' }), status: 401, code: 'unauthorized', onMock: 'prefer' },
      { name: `${operationId} with a malformed key`, operationId, options: () => ({ ...base, apiKey: 'not a key' }), status: 401, code: 'unauthorized', onMock: 'prefer' },
      { name: `${operationId} with Basic auth`, operationId, options: () => ({ ...base, apiKey: null, headers: { Authorization: 'Basic dXNlcjpwYXNz' } }), status: 401, code: 'unauthorized', onMock: 'natural' },
    ];
  }),
  { name: 'a revoked key', operationId: 'listModels', options: () => ({ apiKey: target.revokedApiKey }), status: 401, code: 'unauthorized', onMock: 'prefer', needs: 'revokedApiKey' },
  // 402, 403
  { name: 'a submission beyond the balance', operationId: 'submitGeneration', options: () => ({ body: minimalSubmit(), apiKey: target.noCreditsApiKey }), status: 402, code: 'insufficient_credits', onMock: 'prefer', needs: 'noCreditsApiKey' },
  { name: 'a read-only key submitting', operationId: 'submitGeneration', options: () => ({ body: minimalSubmit(), apiKey: target.readOnlyApiKey }), status: 403, code: 'forbidden', onMock: 'prefer', needs: 'readOnlyApiKey' },
  { name: 'a read-only key cancelling', operationId: 'cancelGeneration', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, apiKey: target.readOnlyApiKey }), status: 403, code: 'forbidden', onMock: 'prefer', needs: 'readOnlyApiKey' },
  // 404
  { name: 'querying an unknown task', operationId: 'getGeneration', options: () => ({ path: { requestId: UNKNOWN_TASK_ID } }), status: 404, code: 'not_found', onMock: 'prefer' },
  { name: 'querying an id of another shape', operationId: 'getGeneration', options: () => ({ path: { requestId: 'not-a-task-id' } }), status: 404, code: 'not_found', onMock: 'prefer' },
  { name: 'cancelling an unknown task', operationId: 'cancelGeneration', options: () => ({ path: { requestId: UNKNOWN_TASK_ID } }), status: 404, code: 'not_found', onMock: 'prefer' },
  ...(['getGeneration', 'cancelGeneration'] as const).map(
    (operationId): ErrorCase => ({
      name: `${operationId === 'getGeneration' ? 'querying' : 'cancelling'} another account’s task`,
      operationId,
      options: async () => {
        const theirs = await call('submitGeneration', { body: minimalSubmit(), apiKey: target.otherApiKey });
        return { path: { requestId: theirs.json.requestId } };
      },
      status: 404,
      code: 'not_found',
      onMock: { skip: 'the mock has no accounts' },
      needs: 'otherApiKey',
    }),
  ),
  // 409, 413, 415, 422
  {
    name: 'cancelling a finished task',
    operationId: 'cancelGeneration',
    options: async () => {
      if (isMock) return { path: { requestId: UNKNOWN_TASK_ID } };
      const { requestId } = (await call('submitGeneration', { body: minimalSubmit() })).json;
      await untilTerminal(requestId);
      return { path: { requestId } };
    },
    status: 409,
    code: 'invalid_state',
    onMock: 'prefer',
  },
  { name: 'an Idempotency-Key still in progress', operationId: 'submitGeneration', options: () => ({ body: minimalSubmit() }), status: 409, code: 'idempotency_in_progress', onMock: 'prefer' },
  { name: 'a body over 64 KiB', operationId: 'submitGeneration', options: () => ({ body: { ...minimalSubmit(), metadata: { blob: 'x'.repeat(70_000) } } }), status: 413, code: 'payload_too_large', onMock: 'prefer' },
  { name: 'a body that is not declared JSON', operationId: 'submitGeneration', options: () => ({ rawBody: JSON.stringify(minimalSubmit()), headers: { 'Content-Type': 'text/plain' } }), status: 415, code: 'unsupported_media_type', onMock: 'natural' },
  { name: 'a body without Content-Type', operationId: 'submitGeneration', options: () => ({ rawBody: JSON.stringify(minimalSubmit()) }), status: 415, code: 'unsupported_media_type', onMock: 'prefer' },
  {
    name: 'an Idempotency-Key reused with another body',
    operationId: 'submitGeneration',
    options: async () => {
      const key = `contract-${crypto.randomUUID()}`;
      if (!isMock) await call('submitGeneration', { body: minimalSubmit(), headers: { 'Idempotency-Key': key } });
      return { body: { ...minimalSubmit(), prompt: 'a different prompt' }, headers: { 'Idempotency-Key': key } };
    },
    status: 422,
    code: 'idempotency_key_reused',
    onMock: 'prefer',
  },
  // The upstream's callbacks: no key; the harness's server asks for none, so it answers every one 404
  { name: 'a callback without a token', operationId: 'receiveUpstreamCallback', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, body: {}, apiKey: null }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'token' },
  { name: 'a callback with a token not issued for the task', operationId: 'receiveUpstreamCallback', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, query: { token: 'not-a-token' }, body: {}, apiKey: null }), status: 404, code: 'not_found', onMock: 'prefer' },
  { name: 'a callback body over 64 KiB', operationId: 'receiveUpstreamCallback', options: () => ({ path: { requestId: UNKNOWN_TASK_ID }, query: { token: 'not-a-token' }, body: { blob: 'x'.repeat(70_000) }, apiKey: null }), status: 413, code: 'payload_too_large', onMock: 'prefer' },
  // The account holder's operations
  // 400: parameters of the ledger, usage and deliveries
  ...(['listLedgerEntries', 'listWebhookDeliveries'] as const).flatMap((operationId): ErrorCase[] => [
    { name: `${operationId}: limit 0`, operationId, options: () => ({ query: { limit: 0 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'limit' },
    { name: `${operationId}: limit 101`, operationId, options: () => ({ query: { limit: 101 } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'limit' },
    { name: `${operationId}: a requestId of 129 characters`, operationId, options: () => ({ query: { requestId: 'g'.repeat(129) } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'requestId' },
    { name: `${operationId}: a forged cursor`, operationId, options: () => ({ query: { cursor: 'bm90LWEtY3Vyc29y' } }), status: 400, code: 'invalid_request', onMock: 'prefer', field: 'cursor' },
  ]),
  { name: 'an unknown ledger kind', operationId: 'listLedgerEntries', options: () => ({ query: { kind: 'bonus' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'kind' },
  {
    name: 'a ledger cursor followed with other filters',
    operationId: 'listLedgerEntries',
    options: async (): Promise<CallOptions> => {
      if (isMock) return { query: { kind: 'refund', cursor: 'eyJpIjo1NH0' } };
      for (let i = 0; i < 2; i++) await call('submitGeneration', { body: minimalSubmit() });
      const first = await call('listLedgerEntries', { query: { kind: 'charge', limit: 1 } });
      return { query: { kind: 'refund', limit: 1, cursor: first.json.nextCursor } };
    },
    status: 400,
    code: 'invalid_request',
    onMock: 'prefer',
    field: 'cursor',
  },
  { name: 'an unknown delivery status', operationId: 'listWebhookDeliveries', options: () => ({ query: { status: 'sent' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'status' },
  {
    name: 'a delivery cursor followed with other filters',
    operationId: 'listWebhookDeliveries',
    options: async (): Promise<CallOptions> => {
      if (isMock) return { query: { status: 'failed', cursor: 'eyJjIjoiMjAyNi0xMS0yMlQxMDowMTowMi4wMDBaIiwiaSI6Im1zZ18wMUpENlpGMCJ9' } };
      for (let i = 0; i < 2; i++) await endWebhookTask();
      const first = await call('listWebhookDeliveries', { query: { limit: 1 } });
      return { query: { status: 'failed', limit: 1, cursor: first.json.nextCursor } };
    },
    status: 400,
    code: 'invalid_request',
    onMock: 'prefer',
    field: 'cursor',
    needs: 'webhookUrl',
  },
  { name: 'usage from a date without time and offset', operationId: 'getUsage', options: () => ({ query: { from: '2026-11-20' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'from' },
  { name: 'usage to that is not a date', operationId: 'getUsage', options: () => ({ query: { to: 'yesterday' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'to' },
  { name: 'usage from not before to', operationId: 'getUsage', options: () => ({ query: { from: '2026-11-23T00:00:00Z', to: '2026-11-20T00:00:00Z' } }), status: 400, code: 'invalid_request', onMock: 'prefer', field: 'from' },
  { name: 'usage by the hour over 31 days', operationId: 'getUsage', options: () => ({ query: { granularity: 'hour', from: '2026-10-01T00:00:00Z', to: '2026-11-10T00:00:00Z' } }), status: 400, code: 'invalid_request', onMock: 'prefer', field: 'from' },
  { name: 'usage by the day over 366 days', operationId: 'getUsage', options: () => ({ query: { from: '2024-01-01T00:00:00Z', to: '2026-01-01T00:00:00Z' } }), status: 400, code: 'invalid_request', onMock: 'prefer', field: 'from' },
  { name: 'an unknown usage granularity', operationId: 'getUsage', options: () => ({ query: { granularity: 'week' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'granularity' },
  { name: 'an unknown usage groupBy', operationId: 'getUsage', options: () => ({ query: { groupBy: 'key' } }), status: 400, code: 'invalid_request', onMock: 'natural', field: 'groupBy' },
  // 400: the bodies of createApiKey and rotateWebhookSecret
  ...(
    [
      ['createApiKey', 'expiresInDays 3651', { expiresInDays: 3651 }, '/expiresInDays'],
      ['createApiKey', 'expiresInDays 0', { expiresInDays: 0 }, '/expiresInDays'],
      ['createApiKey', 'a fractional expiresInDays', { expiresInDays: 1.5 }, '/expiresInDays'],
      ['createApiKey', 'an unknown scope', { scopes: ['tasks:read', 'tasks:admin'] }, '/scopes/1'],
      ['createApiKey', 'a duplicate scope', { scopes: ['tasks:read', 'tasks:read'] }, '/scopes'],
      ['createApiKey', 'no scopes', { scopes: [] }, '/scopes'],
      ['createApiKey', 'an empty name', { name: '' }, '/name'],
      ['createApiKey', 'a name of 101 characters', { name: 'n'.repeat(101) }, '/name'],
      ['createApiKey', 'an unknown mode', { mode: 'staging' }, '/mode'],
      ['createApiKey', 'an unknown field', { label: 'x' }, '/label'],
      ['rotateWebhookSecret', 'overlapHours 169', { overlapHours: 169 }, '/overlapHours'],
      ['rotateWebhookSecret', 'overlapHours -1', { overlapHours: -1 }, '/overlapHours'],
      ['rotateWebhookSecret', 'overlapHours as a string', { overlapHours: '24' }, '/overlapHours'],
      ['rotateWebhookSecret', 'an unknown field', { overlap: 24 }, '/overlap'],
    ] as const
  ).map(
    ([operationId, what, body, field]): ErrorCase => ({ name: `${operationId}: ${what}`, operationId, options: () => ({ body }), status: 400, code: 'invalid_request', onMock: 'natural', field }),
  ),
  ...(['createApiKey', 'rotateWebhookSecret'] as const).flatMap((operationId): ErrorCase[] => [
    { name: `${operationId}: malformed JSON`, operationId, options: () => ({ rawBody: '{"name": ', headers: { 'Content-Type': 'application/json' } }), status: 400, code: 'invalid_request', onMock: { skip: 'Prism answers malformed JSON in its own format' }, field: '' },
    { name: `${operationId}: a JSON array body`, operationId, options: () => ({ body: [] }), status: 400, code: 'invalid_request', onMock: 'natural', field: '' },
  ]),
  // 401: a key revoked through the API itself, refused from the next request on
  {
    name: 'a key revoked with revokeApiKey',
    operationId: 'getAccount',
    options: async () => {
      const minted = await mintKey({ scopes: ['tasks:read'] });
      if (!isMock) expect((await call('revokeApiKey', { path: { keyId: minted.id } })).status).toBe(200);
      return { apiKey: minted.key };
    },
    status: 401,
    code: 'unauthorized',
    onMock: 'prefer',
  },
  // 403: a key without the operation's scope (minted through createApiKey, or the read-only key)
  ...(['getAccount', 'listLedgerEntries', 'getUsage'] as const).map(
    (operationId): ErrorCase => ({
      name: `${operationId} with a key lacking tasks:read`,
      operationId,
      options: async () => ({ apiKey: (await keyWith('tasks:write', 'keys:manage', 'webhooks:manage')).key }),
      status: 403,
      code: 'forbidden',
      onMock: 'prefer',
    }),
  ),
  ...(['listApiKeys', 'createApiKey', 'revokeApiKey', 'listWebhookDeliveries', 'getWebhookDelivery', 'redeliverWebhook', 'getWebhookSecret', 'rotateWebhookSecret'] as const).map(
    (operationId): ErrorCase => ({
      name: `${operationId} with a read-only key`,
      operationId,
      options: () => ({ ...ACCOUNT_BASE[operationId], apiKey: target.readOnlyApiKey }),
      status: 403,
      code: 'forbidden',
      onMock: 'prefer',
      needs: 'readOnlyApiKey',
    }),
  ),
  ...(
    [
      ['listApiKeys', 'webhooks:manage'],
      ['createApiKey', 'webhooks:manage'],
      ['getWebhookSecret', 'keys:manage'],
      ['rotateWebhookSecret', 'keys:manage'],
    ] as const
  ).map(
    ([operationId, scope]): ErrorCase => ({
      name: `${operationId} with a key of every scope but ${operationId.includes('Webhook') ? 'webhooks:manage' : 'keys:manage'}`,
      operationId,
      options: async () => ({ ...ACCOUNT_BASE[operationId], apiKey: (await keyWith('tasks:read', 'tasks:write', scope)).key }),
      status: 403,
      code: 'forbidden',
      onMock: 'prefer',
    }),
  ),
  {
    name: 'a key issuing a key with scopes it lacks',
    operationId: 'createApiKey',
    options: async () => ({ body: { scopes: ['keys:manage', 'tasks:write'] }, apiKey: (await keyWith('keys:manage')).key }),
    status: 403,
    code: 'forbidden',
    onMock: 'prefer',
    field: '/scopes/1',
  },
  {
    name: 'a test key issuing a live key',
    operationId: 'createApiKey',
    options: async () => ({ body: { mode: 'live' }, apiKey: (await mintKey({ mode: 'test', scopes: ['keys:manage'] })).key }),
    status: 403,
    code: 'forbidden',
    onMock: 'prefer',
    field: '/mode',
  },
  // 404: ids that are not the account's (unknown, of another shape, another account's)
  ...(
    [
      ['revokeApiKey', 'keyId', UNKNOWN_KEY_ID, 'not-a-key-id'],
      ['getWebhookDelivery', 'deliveryId', UNKNOWN_DELIVERY_ID, 'not-a-delivery-id'],
      ['redeliverWebhook', 'deliveryId', UNKNOWN_DELIVERY_ID, 'not-a-delivery-id'],
    ] as const
  ).flatMap(([operationId, param, unknown, otherShape]): ErrorCase[] => [
    { name: `${operationId}: an unknown id`, operationId, options: () => ({ path: { [param]: unknown } }), status: 404, code: 'not_found', onMock: 'prefer' },
    { name: `${operationId}: an id of another shape`, operationId, options: () => ({ path: { [param]: otherShape } }), status: 404, code: 'not_found', onMock: 'prefer' },
  ]),
  {
    name: 'revoking another account’s key',
    operationId: 'revokeApiKey',
    options: async () => ({ path: { keyId: await ownKeyId(target.otherApiKey!) } }),
    status: 404,
    code: 'not_found',
    onMock: { skip: 'the mock has no accounts' },
    needs: 'otherApiKey',
  },
  ...(['getWebhookDelivery', 'redeliverWebhook'] as const).map(
    (operationId): ErrorCase => ({
      name: `${operationId}: another account’s delivery`,
      operationId,
      options: async () => ({ path: { deliveryId: (await endedWebhookTask(target.otherApiKey)).deliveryId } }),
      status: 404,
      code: 'not_found',
      onMock: { skip: 'the mock has no accounts' },
      needs: ['otherApiKey', 'webhookUrl'],
    }),
  ),
  // 409: a key revoking itself (a fresh one, so nothing is lost should it succeed)
  {
    name: 'a key revoking itself',
    operationId: 'revokeApiKey',
    options: async () => {
      const minted = await mintKey({ scopes: ['keys:manage'] });
      return { path: { keyId: minted.id }, apiKey: minted.key };
    },
    status: 409,
    code: 'invalid_state',
    onMock: 'prefer',
    field: 'keyId',
  },
  // 413, 415 on the bodies
  ...(['createApiKey', 'rotateWebhookSecret'] as const).flatMap((operationId): ErrorCase[] => [
    // Valid otherwise (the schemas allow no large value): `{}` padded with whitespace.
    { name: `${operationId}: a body over 64 KiB`, operationId, options: () => ({ rawBody: `{${' '.repeat(70_000)}}`, headers: { 'Content-Type': 'application/json' } }), status: 413, code: 'payload_too_large', onMock: 'prefer' },
    { name: `${operationId}: a body that is not declared JSON`, operationId, options: () => ({ rawBody: '{}', headers: { 'Content-Type': 'text/plain' } }), status: 415, code: 'unsupported_media_type', onMock: 'natural' },
    { name: `${operationId}: a form body`, operationId, options: () => ({ rawBody: 'overlapHours=24', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } }), status: 415, code: 'unsupported_media_type', onMock: 'natural' },
  ]),
  // 429: the read budget all of them share (documented shape; the server's own tests provoke it)
  ...(Object.keys(ACCOUNT_BASE) as (keyof typeof ACCOUNT_BASE)[]).map(
    (operationId): ErrorCase => ({ name: `${operationId}: read rate over the limit`, operationId, options: () => ({ ...ACCOUNT_BASE[operationId] }), status: 429, code: 'rate_limited', onMock: 'prefer', needs: 'baseUrl' }),
  ),
  // 429, 500, 503: documented shapes (the server's own tests provoke them)
  { name: 'submission rate over the limit', operationId: 'submitGeneration', options: () => ({ body: minimalSubmit() }), status: 429, code: 'rate_limited', onMock: 'prefer', needs: 'baseUrl' },
  { name: 'read rate over the limit', operationId: 'listModels', options: () => ({}), status: 429, code: 'rate_limited', onMock: 'prefer', needs: 'baseUrl' },
  { name: 'an unexpected failure', operationId: 'listModels', options: () => ({}), status: 500, code: 'internal_error', onMock: 'prefer', needs: 'baseUrl' },
  { name: 'a draining service', operationId: 'getReadiness', options: () => ({ apiKey: null }), status: 503, code: 'unavailable', onMock: 'prefer', needs: 'baseUrl' },
];

/** Cases the real server cannot be driven into from outside, and where they are shown instead. */
const SERVER_SIDE_ONLY: Record<string, string> = {
  'a callback without a token': 'the harness asks for no callbacks (no VIDGEN_PUBLIC_BASE_URL), so its server answers 404; apps/server/test/upstream-callbacks.test.ts shows it',
  'an Idempotency-Key still in progress': 'a claim and its answer commit together; apps/server/test/store.test.ts shows it',
  'submission rate over the limit': 'rate limits arrive with the hardening issue',
  'read rate over the limit': 'rate limits arrive with the hardening issue',
  ...Object.fromEntries(
    Object.keys(ACCOUNT_BASE).map((operationId) => [
      `${operationId}: read rate over the limit`,
      'the harness sets the read budget (VIDGEN_RATE_LIMIT_READS) above the suite’s pace; operations.test.ts shows these operations spend it (RateLimit-Policy "read") and apps/server/test/limits.test.ts refuses past it',
    ]),
  ),
  'an unexpected failure': 'needs a failing store; apps/server/test/http.test.ts shows it',
  'a draining service': 'needs a draining process; apps/server/test/http.test.ts shows it',
};

function skipReason(c: ErrorCase): string | undefined {
  if (isMock && typeof c.onMock === 'object') return c.onMock.skip;
  if (!isMock && SERVER_SIDE_ONLY[c.name]) return SERVER_SIDE_ONLY[c.name];
  const missing = (Array.isArray(c.needs) ? c.needs : c.needs ? [c.needs] : []).filter((need) => !target[need]);
  if (!isMock && missing.length) return `needs ${missing.map((need) => ENV_OF[need] ?? `VIDGEN_${need.replace(/[A-Z]/g, (l) => `_${l}`).toUpperCase()}`).join(' and ')}`;
  return undefined;
}

describe('documented errors', () => {
  for (const c of cases) {
    const reason = skipReason(c);
    it.skipIf(reason !== undefined)(`${c.status} ${c.code}: ${c.name}${reason ? ` (skipped: ${reason})` : ''}`, async () => {
      const options = await c.options();
      if (isMock && c.onMock === 'prefer') options.prefer = `code=${c.status}`;
      const reply = await call(c.operationId, options);
      expectError(c.operationId, reply, c.status, c.code);
      if (c.status === 401) expect(reply.headers.get('www-authenticate')).toMatch(/^Bearer/);
      if (!isMock && c.field !== undefined) {
        expect(reply.json.error.details.map((d: { field?: string }) => d.field)).toContain(c.field);
      }
    });
  }
});

describe.skipIf(isMock)('answers outside the operations (server only: Prism uses its own format here)', () => {
  it('404 not_found for an unknown route', async () => {
    expectEnvelope(await send('GET', '/api/open/v1/nothing-here', { headers: { Authorization: `Bearer ${target.apiKey}` } }), 404, 'not_found');
  });

  it('405 method_not_allowed with Allow for a known path', async () => {
    const reply = await send('DELETE', '/api/open/v1/video/generations', { headers: { Authorization: `Bearer ${target.apiKey}` } });
    expectEnvelope(reply, 405, 'method_not_allowed');
    expect(reply.headers.get('allow')).toMatch(/GET/);
    expect(reply.headers.get('allow')).toMatch(/POST/);
  });

  it('never answers 5xx for a battery of bad input', async () => {
    for (const c of cases.filter((x) => x.status === 400)) {
      const reply = await call(c.operationId, await c.options());
      expect(reply.status, c.name).toBeLessThan(500);
    }
  });
});
