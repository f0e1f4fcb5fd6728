/**
 * Every documented error the target can be made to produce, checked against
 * the spec: status, code, envelope, required headers. Against the mock, errors
 * it cannot produce by itself are asked for with Prism's `Prefer: code=…`
 * header (so the documented answer's shape is still validated); errors only a
 * real server can produce (unknown route, 405, tenant isolation) run against
 * the server only.
 */
import { describe, expect, it } from 'vitest';
import { minimalSubmit, UNKNOWN_TASK_ID } from '../src/fixtures.js';
import { call, expectEnvelope, expectError, send, untilTerminal, type CallOptions } from '../src/http.js';
import { isMock, target } from '../src/target.js';

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
  /** Needs a key the server harness may not provide. */
  needs?: keyof typeof target;
}

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
  ...(['submitGeneration', 'listGenerations', 'getGeneration', 'cancelGeneration', 'listModels'] as const).flatMap((operationId): ErrorCase[] => {
    const base = operationId === 'submitGeneration' ? { body: minimalSubmit() } : operationId.endsWith('Generation') ? { path: { requestId: UNKNOWN_TASK_ID } } : {};
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
  'an unexpected failure': 'needs a failing store; apps/server/test/http.test.ts shows it',
  'a draining service': 'needs a draining process; apps/server/test/http.test.ts shows it',
};

function skipReason(c: ErrorCase): string | undefined {
  if (isMock && typeof c.onMock === 'object') return c.onMock.skip;
  if (!isMock && SERVER_SIDE_ONLY[c.name]) return SERVER_SIDE_ONLY[c.name];
  if (!isMock && c.needs && !target[c.needs]) return `needs VIDGEN_${c.needs.replace(/[A-Z]/g, (l) => `_${l}`).toUpperCase()}`;
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
