/**
 * Fuzzing from the spec: request bodies and parameters made from the bundled
 * spec's schemas, valid and mutated (support/spec-arbitraries.ts), sent as raw
 * HTTP to the app on a loopback server, on either store. Each run is a
 * sequence of steps (fast-check commands): submit, query (with long poll),
 * list (following cursors), cancel, models, output files, health, plus the
 * task lifecycle driven through the store and the clock moved on. Every answer
 * must be one the spec documents for its operation (status, headers, body),
 * never a 5xx, the D2 envelope on every error, and the one a small model of
 * the account predicts; after every step the balance equals grants plus
 * ledger and the model's sum of charges and refunds.
 *
 * Seeded and replayable: VIDGEN_FUZZ_SEED (a number; `random` for a new one),
 * VIDGEN_FUZZ_RUNS (how many sequences; `pnpm fuzz` runs many) and
 * VIDGEN_FUZZ_PATH (the path fast-check prints with a failure).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { isIP, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve, type ServerType } from '@hono/node-server';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, issueApiKey } from '../src/accounts.js';
import { isPublicUnicast } from '../src/domain/address-policy.js';
import { DEFAULT_PRICES, type ModelId, type Resolution } from '../src/domain/catalog.js';
import { generateApiKey, type Scope } from '../src/domain/keys.js';
import { createLocalOutputFiles, type OutputFiles } from '../src/files/storage.js';
import type { Store } from '../src/store/store.js';
import { testConfig, type Harness } from './support.js';
import { backendHarness, backendKinds } from './support/backends.js';
import { mutantsOf, validates, validFor } from './support/spec-arbitraries.js';
import { at, parameterSchemaPointer, requestBodyPointer, requiredScopes, responseProblems, type CapturedResponse } from './support/spec-responses.js';

// --- settings ---------------------------------------------------------------

const RUNS = Number(process.env.VIDGEN_FUZZ_RUNS) || 50;
const SEED = process.env.VIDGEN_FUZZ_SEED === 'random' ? Date.now() ^ (Math.random() * 2 ** 31) : Number(process.env.VIDGEN_FUZZ_SEED) || 20261122;
const PATH = process.env.VIDGEN_FUZZ_PATH;
const STEPS = 40;

/**
 * Runs a property with the suite's seed; a failure says how to replay it. Runs and
 * shrinking stop at `timeLimitMs` (a failure found by then is still reported, shrunk as
 * far as it got; runs cut short are said on the console).
 */
async function check<Ts extends [unknown, ...unknown[]]>(property: fc.IAsyncProperty<Ts>, numRuns: number, timeLimitMs: number, examples: Ts[] = []): Promise<void> {
  const details = await fc.check(property, {
    seed: SEED,
    numRuns,
    examples,
    ...(PATH ? { path: PATH } : {}),
    endOnFailure: !!process.env.VIDGEN_FUZZ_NO_SHRINK,
    plugins: [fc.interruptAfterTimeLimit(timeLimitMs)],
  });
  if (details.failed) {
    throw new Error(
      `${fc.defaultReportMessage(details)}\n\n${details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)}\n\nReplay: VIDGEN_FUZZ_SEED=${details.seed} VIDGEN_FUZZ_PATH=${details.counterexamplePath} VIDGEN_FUZZ_RUNS=${numRuns}`,
    );
  }
  if (details.interrupted) console.warn(`fuzzing stopped at the time limit after ${details.numRuns} of ${numRuns} runs (seed ${details.seed})`);
}

// --- the spec's facts -------------------------------------------------------

const BASE = '/api/open/v1/video/generations';
const SUBMIT_BODY = requestBodyPointer('submitGeneration');
const resolved = (ref: string) => at(ref.replace(/^#/, '')) as any;
const submitSchema = resolved((at(SUBMIT_BODY) as any).$ref ?? `#${SUBMIT_BODY}`);
const DEFAULTS = {
  duration: submitSchema.properties.duration.default as number,
  resolution: submitSchema.properties.resolution.default as Resolution,
  aspectRatio: submitSchema.properties.aspectRatio.default as string,
};
const TASK_STATES = resolved('#/components/schemas/TaskStatus').enum as string[];
const idempotencyKeyIsValid = validates({ $ref: `#${parameterSchemaPointer('submitGeneration', 'Idempotency-Key')}` });
const bodyIsValid = validates({ $ref: `#${SUBMIT_BODY}` });
const BODY_LIMIT = 64 * 1024;
const METADATA_LIMIT = 4096;
/** Ids the spec's description promises to echo (CorrelationId parameter). */
const ECHOED_CORRELATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

const KIND_BY_EXTENSION: Record<string, 'image' | 'video' | 'audio'> = Object.fromEntries([
  ...['jpg', 'jpeg', 'png', 'webp', 'gif', 'bmp'].map((e) => [e, 'image']),
  ...['mp4', 'mov', 'm4v'].map((e) => [e, 'video']),
  ...['mp3', 'wav'].map((e) => [e, 'audio']),
]);
/** D5: the kind by the extension of the URL's path, case-insensitive, query and fragment ignored. */
const kindOf = (url: string) => KIND_BY_EXTENSION[/\.([A-Za-z0-9]+)$/.exec(url.split(/[?#]/)[0]!)?.[1]?.toLowerCase() ?? ''];

function expectedMode(urls: string[]): string {
  const kinds = urls.map(kindOf);
  const images = kinds.filter((k) => k === 'image').length;
  if (kinds.length === 0) return 'text_to_video';
  if (images === kinds.length && images <= 2) return images === 1 ? 'first_frame' : 'first_last_frame';
  return 'multimodal_reference';
}

/** Every key and string inside a JSON value (iterative: a body may nest thousands of levels deep). */
function stringsIn(root: unknown): string[] {
  const found: string[] = [];
  for (const stack = [root]; stack.length; ) {
    const value = stack.pop();
    if (typeof value === 'string') found.push(value);
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) found.push(k), stack.push(v);
  }
  return found;
}

/**
 * D5 rules beyond the schema: audio needs an image or video beside it; metadata at most 4 KiB;
 * the prompt and metadata are text (no U+0000, no unpaired surrogate: PostgreSQL cannot store them).
 */
/** D5: a host that is plainly not public (a literal address outside public unicast, or localhost) is refused at submission. */
function hostIsPlainlyPrivate(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1').replace(/\.+$/, '').toLowerCase();
  } catch {
    return false;
  }
  if (isIP(host)) return !isPublicUnicast(host);
  return host === 'localhost' || host.endsWith('.localhost');
}

function breaksModelRules(body: { prompt?: unknown; mediaUrls?: string[]; metadata?: unknown; webhookUrl?: string }): boolean {
  if ([...stringsIn(body.prompt), ...stringsIn(body.metadata)].some((text) => text.includes('\u0000') || LONE_SURROGATE.test(text))) return true;
  if ([...(body.mediaUrls ?? []), ...(body.webhookUrl === undefined ? [] : [body.webhookUrl])].some(hostIsPlainlyPrivate)) return true;
  const kinds = (body.mediaUrls ?? []).map(kindOf);
  if (kinds.includes('audio') && !kinds.some((k) => k === 'image' || k === 'video')) return true;
  if (body.metadata === undefined) return false;
  try {
    return Buffer.byteLength(JSON.stringify(body.metadata)) > METADATA_LIMIT;
  } catch {
    return true; // too deep to serialize here, so far over 4 KiB
  }
}

function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '[' || ch === '{') deepest = Math.max(deepest, ++depth);
    else if (ch === ']' || ch === '}') depth--;
  }
  return deepest;
}

/** Key-order-independent JSON: two bodies that differ only in key order are the same request. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const wellFormed = (s: string) => s.replace(new RegExp(LONE_SURROGATE, 'g'), '\ufffd');
/** Characters a header value may carry through fetch (Latin-1, no controls). */
const headerSafe = (s: string) => s.replace(/[^\t\x20-\x7e\x80-\xff]/g, '');

// --- the server -------------------------------------------------------------

interface Fixture {
  kind: 'SQLite' | 'PostgreSQL';
  h: Harness<Store>;
  base: string;
  files: OutputFiles;
  dir: string;
  cap: number | undefined;
  close(): Promise<void>;
}

async function startFixture(kind: Fixture['kind'], backend: Parameters<typeof backendHarness>[0], cap?: number): Promise<Fixture> {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-fuzz-'));
  let base = '';
  const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: () => base, secret: Buffer.from('fuzz-secret') });
  const h = backendHarness(backend, {
    config: testConfig(cap ? { maxActiveTasks: cap } : {}),
    files,
    docsHtml: () => '<!doctype html><title>vidgen</title>',
  });
  const server: ServerType = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    kind,
    h,
    base,
    files,
    dir,
    cap,
    async close() {
      (server as { closeAllConnections?: () => void }).closeAllConnections?.();
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Reply extends CapturedResponse {
  bytes: Uint8Array;
  json: any;
}

// --- one run's world and model ----------------------------------------------

type KeyName = 'full' | 'read' | 'write' | 'revoked' | 'expiring';
const KEY_SCOPES: Record<KeyName, Scope[]> = {
  full: ['tasks:read', 'tasks:write'],
  read: ['tasks:read'],
  write: ['tasks:write'],
  revoked: ['tasks:read', 'tasks:write'],
  expiring: ['tasks:read', 'tasks:write'],
};

interface ModelTask {
  id: string;
  status: string;
  charged: number;
  refunded: number;
  body: any;
  deadline: number;
  errorCode?: string;
  file?: { key: string; url: string; bytes: Uint8Array; expiresAt: number };
}

interface World {
  fx: Fixture;
  accountId: string;
  grant: number;
  keys: Record<KeyName, { key: string; expiresAt: number | null }>;
  /** Another account with one task, `queued` until this run cancels or expires it. */
  other: { accountId: string; key: string; taskId: string; status: string };
  tasks: ModelTask[];
  /** Idempotency keys that created a task, with the canonical body and the answer. */
  idempotency: Map<string, { fingerprint: string; requestId: string; expiresAt: number }>;
  sentKeys: string[];
  cursors: { status: string | null; cursor: string }[];
}

const now = (w: World) => w.fx.h.clock.now().getTime();
const balanceOf = (w: World) => w.grant - w.tasks.reduce((sum, t) => sum + t.charged - t.refunded, 0);
const isActive = (status: string) => status === 'queued' || status === 'processing';
const priceOf = (body: any) => DEFAULT_PRICES[body.model as ModelId][(body.resolution ?? DEFAULTS.resolution) as Resolution] * (body.duration ?? DEFAULTS.duration);

async function newWorld(fx: Fixture, grant: number): Promise<World> {
  const { store, clock } = fx.h;
  const at = clock.now();
  const account = await createAccount(store, { name: 'fuzz', credits: grant, now: at });
  const keys = {} as World['keys'];
  for (const name of Object.keys(KEY_SCOPES) as KeyName[]) {
    const expiresAt = name === 'expiring' ? new Date(at.getTime() + 3600_000) : null;
    const { key, record } = await issueApiKey(store, { accountId: account.id, mode: 'test', scopes: KEY_SCOPES[name], name, expiresAt, now: at });
    if (name === 'revoked') await store.revokeApiKey({ id: record.id, now: at });
    keys[name] = { key, expiresAt: expiresAt?.getTime() ?? null };
  }
  const other = await createAccount(store, { name: 'fuzz-other', credits: 1_000, now: at });
  const { key: otherKey } = await issueApiKey(store, { accountId: other.id, mode: 'test', scopes: KEY_SCOPES.full, name: null, expiresAt: null, now: at });
  const world: World = {
    fx,
    accountId: account.id,
    grant,
    keys,
    other: { accountId: other.id, key: otherKey, taskId: '', status: 'queued' },
    tasks: [],
    idempotency: new Map(),
    sentKeys: [],
    cursors: [],
  };
  const submitted = await send(world, 'POST', BASE, {
    headers: { authorization: `Bearer ${otherKey}`, 'content-type': 'application/json' },
    body: new TextEncoder().encode(JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'the other account', duration: 4, resolution: '480p' })),
  });
  expect(submitted.status).toBe(202);
  world.other.taskId = submitted.json.requestId;
  return world;
}

async function send(w: World, method: string, path: string, init: { headers?: Record<string, string>; body?: Uint8Array } = {}): Promise<Reply> {
  const res = await fetch(w.fx.base + path, { method, headers: init.headers, body: init.body, redirect: 'manual' });
  return capture(res);
}

async function capture(res: Response): Promise<Reply> {
  const bytes = new Uint8Array(await res.arrayBuffer());
  const text = Buffer.from(bytes).toString(res.headers.get('content-type')?.startsWith('video/') ? 'latin1' : 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, bytes, json };
}

/** What a failure message shows of an answer. */
const summary = (r: Reply) => `${r.status} ${r.text.slice(0, 300)}`;

/** Answers seen, by operation and status, for the summary of a long run. */
const seen = new Map<string, number>();

function conforms(w: World, reply: Reply, target: { operationId: string } | { code: string }, method = 'GET'): void {
  const label = `${'operationId' in target ? target.operationId : target.code} ${reply.status}`;
  seen.set(label, (seen.get(label) ?? 0) + 1);
  const problems = responseProblems(reply, target, method);
  if (problems.length) throw new Error(`the answer departs from the spec:\n  ${problems.join('\n  ')}\nanswer: ${summary(reply)}`);
}

function expectStatus(reply: Reply, allowed: number | number[], why: string): void {
  const statuses = [allowed].flat();
  if (!statuses.includes(reply.status)) throw new Error(`expected ${statuses.join(' or ')} (${why}), got ${summary(reply)}`);
}

// --- what the steps send ----------------------------------------------------

type Auth = { kind: 'key'; name: KeyName; form: number } | { kind: 'none' } | { kind: 'raw'; value: string } | { kind: 'unknown' } | { kind: 'other' };
/** Ways to send a key: the first three are accepted (the scheme is case-insensitive, spaces are allowed). */
const AUTH_FORMS: ((key: string) => string)[] = [
  (k) => `Bearer ${k}`,
  (k) => `bearer ${k}`,
  (k) => `Bearer    ${k}  `,
  (k) => `Basic ${k}`,
  (k) => k,
  (k) => `Bearer ${k}x`,
  (k) => `Bearer ${k.slice(0, -1)}`,
  (k) => `Bearer ${k} ${k}`,
  (k) => `Bearer\t${k}`,
];

const authArb: fc.Arbitrary<Auth> = fc.oneof(
  { weight: 24, arbitrary: fc.constant<Auth>({ kind: 'key', name: 'full', form: 0 }) },
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('key' as const), name: fc.constantFrom<KeyName>('full', 'read', 'write', 'revoked', 'expiring'), form: fc.nat(AUTH_FORMS.length - 1) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'none' } as Auth) },
  { weight: 1, arbitrary: fc.constant({ kind: 'unknown' } as Auth) },
  { weight: 1, arbitrary: fc.constant({ kind: 'other' } as Auth) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', maxLength: 60 }).map((value) => ({ kind: 'raw', value }) as Auth) },
);

function authHeader(w: World, auth: Auth): string | undefined {
  switch (auth.kind) {
    case 'none':
      return undefined;
    case 'raw':
      return headerSafe(auth.value).trim() || undefined;
    case 'unknown':
      return `Bearer ${generateApiKey('test')}`;
    case 'other':
      return `Bearer ${w.other.key}`;
    case 'key':
      return AUTH_FORMS[auth.form]!(w.keys[auth.name].key).trim();
  }
}

/** The 401 or 403 the operation's security calls for, or undefined when the key passes. */
function authRefusal(w: World, header: string | undefined, operationId: string): number | undefined {
  const scopes = requiredScopes(operationId);
  if (!scopes) return undefined;
  const token = header === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(header)?.[1];
  if (token === w.other.key) return undefined;
  const name = (Object.keys(w.keys) as KeyName[]).find((n) => w.keys[n].key === token);
  if (!name || name === 'revoked') return 401;
  const expiresAt = w.keys[name].expiresAt;
  if (expiresAt !== null && now(w) >= expiresAt) return 401;
  return scopes.every((scope) => KEY_SCOPES[name].includes(scope as Scope)) ? undefined : 403;
}
const actsAsOther = (w: World, header: string | undefined) => header !== undefined && /^Bearer +(\S+) *$/i.exec(header)?.[1] === w.other.key;

const correlationArb = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.stringMatching(ECHOED_CORRELATION_ID) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 140 }).map((s) => headerSafe(s).trim() || undefined) },
);

function checkCorrelation(reply: Reply, sent: string | undefined): void {
  const answered = reply.headers.get('x-correlation-id');
  if (sent !== undefined && ECHOED_CORRELATION_ID.test(sent) && !sent.includes('vg_')) {
    if (answered !== sent) throw new Error(`X-Correlation-Id ${JSON.stringify(sent)} was not echoed: ${answered}`);
  } else if (!answered || !ECHOED_CORRELATION_ID.test(answered)) throw new Error(`a generated X-Correlation-Id looks wrong: ${answered}`);
}

const encoder = new TextEncoder();
const deepBody = (depth: number) => `{"model":"vidgen-2.0-fast","prompt":"deep","metadata":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`;

/** Raw bodies: JSON of valid or mutated values, and bytes no schema describes. */
const bodyArb: fc.Arbitrary<{ note: string; bytes: Uint8Array }> = fc.oneof(
  { weight: 6, arbitrary: validFor(SUBMIT_BODY).map((v) => ({ note: 'valid', bytes: encoder.encode(JSON.stringify(v)) })) },
  { weight: 5, arbitrary: mutantsOf(SUBMIT_BODY).map((m) => ({ note: m.note, bytes: encoder.encode(JSON.stringify(m.value) ?? '') })) },
  {
    weight: 1,
    arbitrary: validFor(SUBMIT_BODY).chain((v) => {
      const json = JSON.stringify(v);
      return fc.oneof(
        fc.nat(json.length - 1).map((n) => ({ note: 'truncated JSON', bytes: encoder.encode(json.slice(0, n)) })),
        fc.constantFrom(BODY_LIMIT - 1, BODY_LIMIT, BODY_LIMIT + 1, 200_000).map((size) => ({ note: `padded to ${size} bytes`, bytes: encoder.encode(json.padEnd(size, ' ')) })),
        fc.constant({ note: 'with a byte order mark', bytes: encoder.encode(`\ufeff${json}`) }),
        fc.constant({ note: 'a duplicate key', bytes: encoder.encode(`${json.slice(0, -1)},"model":"vidgen-9"}`) }),
      );
    }),
  },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ note: 'random bytes', bytes })),
      fc.constantFrom(2, 31, 32, 33, 100, 2_000, 30_000).map((depth) => ({ note: `metadata ${depth} levels deep`, bytes: encoder.encode(deepBody(depth)) })),
      fc.constant({ note: 'invalid UTF-8', bytes: Uint8Array.from([...encoder.encode('{"model":"vidgen-2.0","prompt":"'), 0xff, 0xfe, 0xc3, ...encoder.encode('"}')]) }),
      fc.constantFrom('', 'null', '[]', '"x"', '{}', '1e999', '{"model":"vidgen-2.0","prompt":"a","duration":5.0}', '{"model":"vidgen-2.0","prompt":"a","duration":1e1}').map((text) => ({ note: `the text ${text}`, bytes: encoder.encode(text) })),
    ),
  },
);

const contentTypeArb = fc.oneof(
  { weight: 20, arbitrary: fc.constant('application/json' as string | undefined) },
  { weight: 3, arbitrary: fc.constantFrom(undefined, '', 'text/plain', 'application/json; charset=utf-8', 'Application/JSON', ' application/json ', 'application/json;', 'application/json-patch+json', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x') },
);

type IdempotencyChoice = { kind: 'none' } | { kind: 'value'; value: string } | { kind: 'reuse'; index: number };
const idempotencyArb: fc.Arbitrary<IdempotencyChoice> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ kind: 'none' } as IdempotencyChoice) },
  { weight: 2, arbitrary: validFor(parameterSchemaPointer('submitGeneration', 'Idempotency-Key')).map((value) => ({ kind: 'value', value: String(value) }) as IdempotencyChoice) },
  { weight: 3, arbitrary: fc.nat().map((index) => ({ kind: 'reuse', index }) as IdempotencyChoice) },
  { weight: 1, arbitrary: mutantsOf(parameterSchemaPointer('submitGeneration', 'Idempotency-Key')).map((m) => ({ kind: 'value', value: String(m.value) }) as IdempotencyChoice) },
);

type Target = { kind: 'own'; index: number } | { kind: 'other' } | { kind: 'id'; id: string };
const targetArb: fc.Arbitrary<Target> = fc.oneof(
  { weight: 8, arbitrary: fc.nat().map((index) => ({ kind: 'own', index }) as Target) },
  { weight: 1, arbitrary: fc.constant({ kind: 'other' } as Target) },
  { weight: 1, arbitrary: validFor(parameterSchemaPointer('getGeneration', 'requestId')).map((id) => ({ kind: 'id', id: String(id) }) as Target) },
  { weight: 1, arbitrary: mutantsOf(parameterSchemaPointer('getGeneration', 'requestId')).map((m) => ({ kind: 'id', id: String(m.value) }) as Target) },
);

function targetId(w: World, target: Target): { id: string; task?: ModelTask } {
  if (target.kind === 'own' && w.tasks.length) {
    const task = w.tasks[target.index % w.tasks.length]!;
    return { id: task.id, task };
  }
  if (target.kind === 'other') return { id: w.other.taskId };
  if (target.kind === 'id') return { id: target.id };
  return { id: 'gen_0000000000000000' };
}

/** A path segment for an id: all but unreserved characters escaped, so no id reaches another route. */
const segment = (id: string) =>
  Array.from(wellFormed(id))
    .map((ch) => (/[A-Za-z0-9_~-]/.test(ch) ? ch : encodeURIComponent(ch).replace(/^\.$/, '%2E')))
    .join('') || 'x';

/** Query parameter values: valid per the spec, at and past its bounds, and junk. */
const numberParamArb = (min: number, max: number) =>
  fc.option(
    fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min, max }).map(String) },
      { weight: 2, arbitrary: fc.constantFrom(String(min - 1), String(max + 1), '0', '-1', '', 'abc', '1.5', '1e1', ' 5', '+5', '05', '0x10', 'NaN', 'Infinity', '99999999999999999999') },
    ),
    { freq: 2 },
  );

// --- the steps ----------------------------------------------------------------

type Step =
  | { op: 'submit'; auth: Auth; contentType: string | undefined; body: { note: string; bytes: Uint8Array }; idempotency: IdempotencyChoice; correlation: string | undefined }
  | { op: 'get'; auth: Auth; target: Target; wait: string | null; change: 'none' | 'start' | 'fail'; correlation: string | undefined }
  | { op: 'list'; auth: Auth; limit: string | null; status: string | null; cursor: { kind: 'none' } | { kind: 'issued'; index: number } | { kind: 'junk'; value: string } | { kind: 'forged'; position: unknown } }
  | { op: 'cancel'; auth: Auth; target: Target; correlation: string | undefined }
  | { op: 'models'; auth: Auth }
  | { op: 'file'; index: number; link: number; range: string | null; method: 'GET' | 'HEAD' }
  | { op: 'service'; method: string; path: string }
  | { op: 'lifecycle'; action: 'start' | 'complete' | 'fail'; index: number; size: number; keepMs: number }
  | { op: 'clock'; ms: number }
  | { op: 'expire' };

const statusParamArb = fc.option(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...TASK_STATES) }, { weight: 1, arbitrary: fc.constantFrom('QUEUED', 'done', '', 'queued,failed') }), {
  freq: 2,
});
const RANGES = ['bytes=0-0,5-6', 'bytes=', 'bytes=-', 'items=0-1', 'bytes=abc', 'bytes=5-2', 'bytes=00-01', 'bytes=99999999999999999999-', 'bytes=-0'];
const rangeArb = fc.option(
  fc.oneof(
    fc.tuple(fc.nat(3000), fc.nat(3000)).map(([a, b]) => `bytes=${a}-${b}`),
    fc.nat(3000).map((a) => `bytes=${a}-`),
    fc.nat(3000).map((b) => `bytes=-${b}`),
    fc.constantFrom(...RANGES),
  ),
  { freq: 2 },
);

const full: Auth = { kind: 'key', name: 'full', form: 0 };
/** A plain submission of a body: with a good key, as JSON, no Idempotency-Key. */
const submitting = (body: unknown): Step => ({
  op: 'submit',
  auth: full,
  contentType: 'application/json',
  body: { note: 'valid', bytes: encoder.encode(JSON.stringify(body)) },
  idempotency: { kind: 'none' },
  correlation: undefined,
});
/** A submission that should be accepted (or refused for credits or the cap): it moves the state on. */
const plainSubmitArb: fc.Arbitrary<Step> = validFor(SUBMIT_BODY).map(submitting);

const stepArbs: fc.Arbitrary<Step>[] = [
  plainSubmitArb,
  fc.record({ op: fc.constant('submit' as const), auth: authArb, contentType: contentTypeArb, body: bodyArb, idempotency: idempotencyArb, correlation: correlationArb }),
  fc.record({ op: fc.constant('submit' as const), auth: authArb, contentType: contentTypeArb, body: bodyArb, idempotency: idempotencyArb, correlation: correlationArb }),
  fc.record({
    op: fc.constant('get' as const),
    auth: authArb,
    target: targetArb,
    wait: numberParamArb(1, 30),
    change: fc.constantFrom('none' as const, 'start' as const, 'fail' as const),
    correlation: correlationArb,
  }),
  fc.record({
    op: fc.constant('list' as const),
    auth: authArb,
    limit: numberParamArb(1, 100),
    status: statusParamArb,
    cursor: fc.oneof(
      fc.constant({ kind: 'none' as const }),
      fc.nat().map((index) => ({ kind: 'issued' as const, index })),
      fc.string({ maxLength: 40 }).map((value) => ({ kind: 'junk' as const, value })),
      // Shaped like the service's cursors (base64url JSON of time, id, status), holding anything.
      fc.record({ t: fc.oneof(fc.integer(), fc.double()), i: fc.oneof(fc.string({ unit: 'binary', maxLength: 130 }), fc.constant('\u0000')), s: fc.oneof(fc.constant(null), fc.string()) })
        .map((position) => ({ kind: 'forged' as const, position })),
    ),
  }),
  fc.record({ op: fc.constant('cancel' as const), auth: authArb, target: targetArb, correlation: correlationArb }),
  fc.record({ op: fc.constant('models' as const), auth: authArb }),
  fc.record({ op: fc.constant('file' as const), index: fc.nat(), link: fc.oneof(fc.constant(0), fc.nat(7)), range: rangeArb, method: fc.constantFrom('GET' as const, 'HEAD' as const) }),
  fc.record({
    op: fc.constant('service' as const),
    method: fc.constantFrom('GET', 'GET', 'POST', 'DELETE', 'PUT', 'PATCH'),
    path: fc.constantFrom('/healthz', '/readyz', '/metrics', '/openapi.json', '/docs', '/api/open/v1/models', BASE, `${BASE}/x/cancel`, '/nope', '/api/open/v2/models', '/files/'),
  }),
  fc.record({
    op: fc.constant('lifecycle' as const),
    action: fc.constantFrom('start' as const, 'start' as const, 'complete' as const, 'fail' as const),
    index: fc.nat(),
    size: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 3000 })),
    keepMs: fc.constantFrom(60_000, 3600_000, 7 * 24 * 3600_000),
  }),
  fc.record({ op: fc.constant('clock' as const), ms: fc.oneof(fc.integer({ min: 1, max: 5000 }), fc.constantFrom(60_000, 31 * 60_000, 25 * 3600_000, 8 * 24 * 3600_000)) }),
  fc.constant({ op: 'expire' as const }),
];

const describeStep = (step: Step) =>
  JSON.stringify(step, (key, value) => (value instanceof Uint8Array ? `${value.length} bytes: ${Buffer.from(value.subarray(0, 160)).toString('utf8')}` : value));

// --- the model's predictions and checks ---------------------------------------

function checkTaskResource(resource: any, task: ModelTask): void {
  const body = task.body;
  const expected = {
    requestId: task.id,
    status: task.status,
    model: body.model,
    duration: body.duration ?? DEFAULTS.duration,
    resolution: body.resolution ?? DEFAULTS.resolution,
    aspectRatio: body.aspectRatio ?? DEFAULTS.aspectRatio,
    mediaUrls: body.mediaUrls ?? [],
    mode: expectedMode(body.mediaUrls ?? []),
    creditsCharged: task.charged,
    creditsRefunded: task.refunded,
  };
  const actual = Object.fromEntries(Object.keys(expected).map((k) => [k, resource[k]]));
  if (JSON.stringify(actual) !== JSON.stringify(expected)) throw new Error(`task ${task.id} is ${JSON.stringify(actual)}, the model has ${JSON.stringify(expected)}`);
  expect(resource.prompt).toBe(body.prompt);
  expect(resource.metadata).toEqual(body.metadata ?? null);
  if (task.status === 'succeeded') expect(resource.output?.url).toBe(task.file?.url);
  else expect(resource.output).toBeNull();
  if (task.status === 'failed') expect(resource.error?.code).toBe(task.errorCode);
  else expect(resource.error).toBeNull();
}

async function audit(w: World): Promise<void> {
  for (const [accountId, expected] of [
    [w.accountId, balanceOf(w)],
    [w.other.accountId, undefined],
  ] as const) {
    const found = await w.fx.h.store.auditBalance(accountId);
    if (!found) throw new Error(`account ${accountId} is gone`);
    if (found.balance !== found.ledgerSum) throw new Error(`balance ${found.balance} is not grants plus ledger ${found.ledgerSum}`);
    if (found.balance < 0) throw new Error(`balance ${found.balance} is below zero`);
    if (expected !== undefined && found.balance !== expected) throw new Error(`balance ${found.balance}, the model expects ${expected}`);
  }
}

/** The ledger at the end: the opening grant, one charge per task, one refund per failed or cancelled task, never two. */
async function auditLedger(w: World): Promise<void> {
  const ledger = await w.fx.h.store.listLedger(w.accountId);
  const rows = (taskId: string, kind: string) => ledger.filter((e) => e.taskId === taskId && e.kind === kind).map((e) => e.amount);
  for (const task of w.tasks) {
    expect(rows(task.id, 'charge'), `charges of ${task.id}`).toEqual([-task.charged]);
    expect(rows(task.id, 'refund'), `refunds of ${task.id}`).toEqual(task.refunded ? [task.refunded] : []);
  }
  expect(ledger.filter((e) => e.kind === 'grant').reduce((sum, e) => sum + e.amount, 0), 'grants').toBe(w.grant);
}

function refund(task: ModelTask, status: string, errorCode?: string): void {
  task.status = status;
  task.refunded = task.charged;
  if (errorCode) task.errorCode = errorCode;
}

// --- running a step ---------------------------------------------------------

async function submit(w: World, step: Extract<Step, { op: 'submit' }>): Promise<void> {
  const headers: Record<string, string> = {};
  const auth = authHeader(w, step.auth);
  if (auth !== undefined) headers.authorization = auth;
  if (step.contentType !== undefined) headers['content-type'] = step.contentType;
  if (step.correlation !== undefined) headers['x-correlation-id'] = step.correlation;
  let key: string | undefined;
  if (step.idempotency.kind === 'value') key = headerSafe(step.idempotency.value).trim();
  if (step.idempotency.kind === 'reuse' && w.sentKeys.length) key = w.sentKeys[step.idempotency.index % w.sentKeys.length];
  if (key !== undefined) {
    headers['idempotency-key'] = key;
    w.sentKeys.push(key);
  }
  const reply = await send(w, 'POST', BASE, { headers, body: step.body.bytes });
  conforms(w, reply, { operationId: 'submitGeneration' }, 'POST');
  checkCorrelation(reply, step.correlation);

  // The answer the spec calls for, in the order the checks apply.
  const refusal = authRefusal(w, auth, 'submitGeneration');
  if (refusal) return expectStatus(reply, refusal, 'the key');
  if ((step.contentType ?? '').split(';')[0]!.trim().toLowerCase() !== 'application/json') return expectStatus(reply, 415, 'not JSON');
  if (step.body.bytes.length > BODY_LIMIT) return expectStatus(reply, 413, 'over 64 KiB');
  if (key !== undefined && !idempotencyKeyIsValid(key)) return expectStatus(reply, 400, 'a bad Idempotency-Key');
  const text = new TextDecoder().decode(step.body.bytes);
  let body: any;
  try {
    body = JSON.parse(text);
  } catch {
    return expectStatus(reply, 400, 'malformed JSON');
  }
  if (!bodyIsValid(body) || breaksModelRules(body)) return expectStatus(reply, 400, 'the schema or a model rule');
  const other = actsAsOther(w, auth);
  const expected = ((): number => {
    if (other) return reply.status;
    const claimed = key !== undefined ? w.idempotency.get(key) : undefined;
    if (claimed && claimed.expiresAt > now(w)) return claimed.fingerprint === canonical(body) ? 202 : 422;
    const capped = w.fx.cap !== undefined && w.tasks.filter((t) => isActive(t.status)).length >= w.fx.cap;
    const short = priceOf(body) > balanceOf(w);
    // Over the cap and short of credits: the spec does not rank the two (SQLite checks the cap first, PostgreSQL the credits).
    return capped && short ? (reply.status === 402 ? 402 : 429) : capped ? 429 : short ? 402 : 202;
  })();
  // A body nesting deeper than 32 levels may be refused for that alone, before anything walks it.
  if (nestingDepth(text) > 32 && reply.status === 400) return;
  expectStatus(reply, expected, 'the model');
  if (other) return;
  if (reply.status === 402) {
    expect(reply.json.error.details).toEqual(
      expect.arrayContaining([expect.objectContaining({ field: 'credits.required', value: priceOf(body) }), expect.objectContaining({ field: 'credits.available', value: balanceOf(w) })]),
    );
  }
  if (reply.status !== 202) return;
  const claimed = key !== undefined ? w.idempotency.get(key) : undefined;
  if (claimed && claimed.expiresAt > now(w)) {
    expect(reply.headers.get('idempotent-replayed')).toBe('true');
    expect(reply.json.requestId).toBe(claimed.requestId);
    return;
  }
  expect(reply.headers.get('idempotent-replayed')).toBeNull();
  expect(reply.json).toMatchObject({ success: true, status: 'queued', creditsCharged: priceOf(body) });
  expect(reply.headers.get('location')).toBe(`${BASE}/${reply.json.requestId}`);
  w.tasks.push({ id: reply.json.requestId, status: 'queued', charged: priceOf(body), refunded: 0, body, deadline: now(w) + 30 * 60_000 });
  if (key !== undefined) w.idempotency.set(key, { fingerprint: canonical(body), requestId: reply.json.requestId, expiresAt: now(w) + 24 * 3600_000 });
}

/**
 * Plain integers in range pass, plain integers out of range and non-numbers fail. Other
 * spellings of a number (`1e1`, ` 5`, `0x10`, `1.0`) and the empty string may go either
 * way: the server coerces parameters as Ajv does, which accepts some of them.
 */
function numberParamVerdict(value: string | null, min: number, max: number): 'ok' | 'bad' | 'either' {
  if (value === null) return 'ok';
  if (/^(0|[1-9]\d*|-[1-9]\d*)$/.test(value)) return Number(value) >= min && Number(value) <= max ? 'ok' : 'bad';
  return value.trim() === '' || Number.isFinite(Number(value)) ? 'either' : 'bad';
}

async function get(w: World, step: Extract<Step, { op: 'get' }>): Promise<void> {
  const { id, task } = targetId(w, step.target);
  const auth = authHeader(w, step.auth);
  const headers: Record<string, string> = auth !== undefined ? { authorization: auth } : {};
  if (step.correlation !== undefined) headers['x-correlation-id'] = step.correlation;
  const query = step.wait === null ? '' : `?${new URLSearchParams({ wait: step.wait })}`;
  const { h } = w.fx;
  const timersBefore = h.clock.pendingTimers;
  const pending = send(w, 'GET', `${BASE}/${segment(id)}${query}`, { headers });
  // A long poll holds the answer on the manual clock: change the task (or not), then let the wait run out.
  let settled = false;
  void pending.then(
    () => (settled = true),
    () => (settled = true),
  );
  let changed = false;
  while (!settled) {
    if (h.clock.pendingTimers > timersBefore) {
      if (!changed && task && step.change !== 'none' && isActive(task.status)) {
        changed = true;
        await lifecycle(w, { op: 'lifecycle', action: step.change, index: w.tasks.indexOf(task), size: 0, keepMs: 0 });
        await new Promise((resolve) => setTimeout(resolve, 1));
        continue;
      }
      h.clock.advance(30_000);
    }
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
  const reply = await pending;
  conforms(w, reply, { operationId: 'getGeneration' });
  checkCorrelation(reply, step.correlation);
  const refusal = authRefusal(w, auth, 'getGeneration');
  if (refusal) return expectStatus(reply, refusal, 'the key');
  const verdict = numberParamVerdict(step.wait, 1, 30);
  if (verdict === 'bad') return expectStatus(reply, 400, `wait=${step.wait}`);
  if (verdict === 'either' && reply.status === 400) return;
  if (actsAsOther(w, auth)) return expectStatus(reply, id === w.other.taskId ? 200 : 404, 'the other account');
  if (!task) return expectStatus(reply, 404, 'not a task of this account');
  expectStatus(reply, 200, 'a task of this account');
  checkTaskResource(reply.json, task);
  expect(reply.headers.get('retry-after') !== null, 'a poll hint while active').toBe(isActive(task.status));
}

async function list(w: World, step: Extract<Step, { op: 'list' }>): Promise<void> {
  const params = new URLSearchParams();
  if (step.limit !== null) params.set('limit', step.limit);
  if (step.status !== null) params.set('status', step.status);
  let cursorFor: string | null | undefined;
  let sentCursor = false;
  if (step.cursor.kind === 'issued' && w.cursors.length) {
    const issued = w.cursors[step.cursor.index % w.cursors.length]!;
    params.set('cursor', issued.cursor);
    cursorFor = issued.status;
    sentCursor = true;
  } else if (step.cursor.kind === 'junk') {
    params.set('cursor', step.cursor.value);
    sentCursor = true;
  } else if (step.cursor.kind === 'forged') {
    params.set('cursor', Buffer.from(JSON.stringify(step.cursor.position)).toString('base64url'));
    sentCursor = true;
  }
  const auth = authHeader(w, step.auth);
  const reply = await send(w, 'GET', `${BASE}?${params}`, { headers: auth !== undefined ? { authorization: auth } : {} });
  conforms(w, reply, { operationId: 'listGenerations' });
  const refusal = authRefusal(w, auth, 'listGenerations');
  if (refusal) return expectStatus(reply, refusal, 'the key');
  const limitVerdict = numberParamVerdict(step.limit, 1, 100);
  const statusOk = step.status === null || TASK_STATES.includes(step.status);
  const cursorOk = !sentCursor || (cursorFor !== undefined ? cursorFor === step.status : undefined);
  if (limitVerdict === 'bad' || !statusOk || cursorOk === false) return expectStatus(reply, 400, 'a bad parameter');
  if (limitVerdict === 'either' || cursorOk === undefined || actsAsOther(w, auth)) return expectStatus(reply, [200, 400], 'an odd parameter');
  expectStatus(reply, 200, 'a valid listing');
  const page = reply.json.data as any[];
  const limit = step.limit === null ? 20 : Number(step.limit);
  const matching = w.tasks.filter((t) => step.status === null || t.status === step.status);
  expect(page.length).toBeLessThanOrEqual(limit);
  for (const resource of page) {
    const task = w.tasks.find((t) => t.id === resource.requestId);
    if (!task) throw new Error(`the listing shows ${resource.requestId}, not a task of this account`);
    checkTaskResource(resource, task);
  }
  const order = page.map((t) => `${t.createdAt} ${t.requestId}`);
  expect(order, 'newest first').toEqual([...order].sort().reverse());
  if (!sentCursor) {
    expect(page.length).toBe(Math.min(limit, matching.length));
    expect(reply.json.nextCursor === null).toBe(matching.length <= limit);
  }
  if (reply.json.nextCursor) w.cursors.push({ status: step.status, cursor: reply.json.nextCursor });
}

async function cancel(w: World, step: Extract<Step, { op: 'cancel' }>): Promise<void> {
  const { id, task } = targetId(w, step.target);
  const auth = authHeader(w, step.auth);
  const headers: Record<string, string> = auth !== undefined ? { authorization: auth } : {};
  if (step.correlation !== undefined) headers['x-correlation-id'] = step.correlation;
  const reply = await send(w, 'POST', `${BASE}/${segment(id)}/cancel`, { headers });
  conforms(w, reply, { operationId: 'cancelGeneration' }, 'POST');
  checkCorrelation(reply, step.correlation);
  const refusal = authRefusal(w, auth, 'cancelGeneration');
  if (refusal) return expectStatus(reply, refusal, 'the key');
  // The other account may cancel its own task (unless it has failed), and nothing of this one.
  if (actsAsOther(w, auth)) {
    if (id !== w.other.taskId) return expectStatus(reply, 404, 'not a task of the other account');
    expectStatus(reply, w.other.status === 'failed' ? 409 : 200, `the other account's ${w.other.status} task`);
    if (reply.status === 200) w.other.status = 'cancelled';
    return;
  }
  if (!task) return expectStatus(reply, 404, 'not a task of this account');
  if (task.status === 'succeeded' || task.status === 'failed') {
    expectStatus(reply, 409, `cancel of a ${task.status} task`);
    expect(reply.json.error).toMatchObject({ code: 'invalid_state', details: [expect.objectContaining({ value: task.status })] });
    return;
  }
  expectStatus(reply, 200, `cancel of a ${task.status} task`);
  expect(reply.json).toEqual({ success: true, requestId: task.id, status: 'cancelled' });
  if (task.status !== 'cancelled') refund(task, 'cancelled');
}

async function models(w: World, step: Extract<Step, { op: 'models' }>): Promise<void> {
  const auth = authHeader(w, step.auth);
  const reply = await send(w, 'GET', '/api/open/v1/models', { headers: auth !== undefined ? { authorization: auth } : {} });
  conforms(w, reply, { operationId: 'listModels' });
  const refusal = authRefusal(w, auth, 'listModels');
  if (refusal) return expectStatus(reply, refusal, 'the key');
  expectStatus(reply, 200, 'the models');
  for (const model of reply.json.data) {
    const prices = Object.fromEntries(model.prices.map((p: any) => [p.resolution, p.creditsPerSecond]));
    expect(prices).toEqual(DEFAULT_PRICES[model.id as ModelId]);
  }
}

async function file(w: World, step: Extract<Step, { op: 'file' }>): Promise<void> {
  const withFiles = w.tasks.filter((t) => t.file);
  const task = withFiles.length ? withFiles[step.index % withFiles.length] : undefined;
  const key = task?.file?.key ?? 'gen_0000000000000000.mp4';
  const issued = task?.file ? new URL(task.file.url) : new URL(await w.fx.files.urlFor(key, new Date(now(w) + 60_000)));
  const expires = issued.searchParams.get('expires')!;
  const sig = issued.searchParams.get('sig')!;
  const expired = new URL(await w.fx.files.urlFor(key, new Date(now(w) - 1000)));
  // The link as issued, then each kind of wrong one.
  const links: [string, 'issued' | 'forbidden'][] = [
    [`/files/${key}?expires=${expires}&sig=${sig}`, 'issued'],
    [`/files/${key}?expires=${expires}&sig=${sig.slice(1)}A`, 'forbidden'],
    [`/files/${key}?expires=${Number(expires) + 1}&sig=${sig}`, 'forbidden'],
    [`/files/${key}?expires=${expires}`, 'forbidden'],
    [`${expired.pathname}${expired.search}`, 'forbidden'],
    [`/files/..%2F..%2Fetc%2Fpasswd?expires=${expires}&sig=${sig}`, 'forbidden'],
    [`/files/${'g'.repeat(200)}.mp4?expires=${expires}&sig=${sig}`, 'forbidden'],
    [`/files/${key}`, 'forbidden'],
  ];
  const [path, kind] = links[step.link % links.length]!;
  const headers: Record<string, string> = step.range !== null ? { range: step.range } : {};
  const reply = await send(w, step.method, path, { headers });
  conforms(w, reply, { operationId: 'getOutputFile' }, step.method);
  const live = kind === 'issued' && Number(expires) * 1000 > now(w);
  if (!live) return expectStatus(reply, 403, `a ${kind === 'issued' ? 'expired' : kind} link`);
  if (!task?.file) return expectStatus(reply, 404, 'no such file');
  const bytes = task.file.bytes;
  const size = bytes.length;
  const range = step.range === null ? undefined : /^bytes=(\d+)-(\d*)$/.exec(step.range);
  if (step.range === null) {
    expectStatus(reply, 200, 'the whole file');
    if (step.method === 'GET') expect(Buffer.from(reply.bytes).equals(Buffer.from(bytes))).toBe(true);
  } else if (range && Number(range[1]) >= size) {
    expectStatus(reply, 416, `a range past the end of ${size} bytes`);
  } else if (range && (range[2] === '' || Number(range[2]) >= Number(range[1]))) {
    const start = Number(range[1]);
    const end = range[2] === '' ? size - 1 : Math.min(Number(range[2]), size - 1);
    expectStatus(reply, 206, 'a satisfiable range');
    expect(reply.headers.get('content-range')).toBe(`bytes ${start}-${end}/${size}`);
    if (step.method === 'GET') expect(Buffer.from(reply.bytes).equals(Buffer.from(bytes.subarray(start, end + 1)))).toBe(true);
  } else expectStatus(reply, [200, 206, 416], `the range ${step.range}`);
}

const SERVICE_OPERATIONS: Record<string, string> = { '/healthz': 'getHealth', '/readyz': 'getReadiness', '/metrics': 'getMetrics', '/openapi.json': 'getOpenApiDocument', '/docs': 'getReference', '/console': 'getConsole' };

async function service(w: World, step: Extract<Step, { op: 'service' }>): Promise<void> {
  const reply = await send(w, step.method, step.path);
  const get = step.method === 'GET';
  const post = step.method === 'POST';
  // Without a key, the API's own operations answer 401; the service's answer 200; other methods 405; other paths 404.
  const operationId =
    SERVICE_OPERATIONS[step.path] && get
      ? SERVICE_OPERATIONS[step.path]
      : step.path === '/api/open/v1/models' && get
        ? 'listModels'
        : step.path === BASE
          ? ({ GET: 'listGenerations', POST: 'submitGeneration' } as Record<string, string>)[step.method]
          : step.path.endsWith('/cancel') && post
            ? 'cancelGeneration'
            : undefined;
  if (operationId) {
    conforms(w, reply, { operationId }, step.method);
    return expectStatus(reply, SERVICE_OPERATIONS[step.path] ? 200 : 401, step.path);
  }
  const known = step.path === BASE || step.path === '/api/open/v1/models' || step.path.endsWith('/cancel') || SERVICE_OPERATIONS[step.path];
  conforms(w, reply, { code: known ? 'method_not_allowed' : 'not_found' }, step.method);
  expectStatus(reply, known ? 405 : 404, `${step.method} ${step.path}`);
  if (known) expect(reply.headers.get('allow')).toBeTruthy();
}

async function lifecycle(w: World, step: Extract<Step, { op: 'lifecycle' }>): Promise<void> {
  if (!w.tasks.length) return;
  const task = w.tasks[step.index % w.tasks.length]!;
  const { store, clock, deps } = w.fx.h;
  const at = clock.now();
  if (step.action === 'start') {
    const outcome = await store.startTask({ id: task.id, now: at });
    expect(outcome.kind).toBe(isActive(task.status) ? 'started' : 'not_startable');
    // The task as a read answers it, whatever came before (a start again, a redelivery elsewhere): a start reads back
    // only the columns an active task can hold.
    if (outcome.kind === 'started') {
      expect(outcome.task).toEqual(await store.findTask(task.id));
      task.status = 'processing';
    }
  } else if (step.action === 'fail') {
    const outcome = await store.failTask({ id: task.id, now: at, code: 'provider_error', message: 'the fuzz failed it' });
    expect(outcome.kind).toBe(isActive(task.status) ? 'failed' : 'already_terminal');
    if (outcome.kind === 'failed') refund(task, 'failed', 'provider_error');
  } else {
    // Complete: a queued task is started first, as a worker would.
    if (task.status === 'queued' && (await store.startTask({ id: task.id, now: at })).kind === 'started') task.status = 'processing';
    const expected = task.status === 'processing' ? 'succeeded' : 'discarded';
    let file: ModelTask['file'];
    if (expected === 'succeeded') {
      const bytes = Uint8Array.from({ length: step.size }, (_, i) => (i * 31 + step.size) & 0xff);
      const source = join(w.fx.dir, `${task.id}.part`);
      writeFileSync(source, bytes);
      const key = await w.fx.files.put(task.id, source);
      const expiresAt = at.getTime() + step.keepMs;
      file = { key, bytes, expiresAt, url: await w.fx.files.urlFor(key, new Date(expiresAt)) };
    }
    const outcome = await store.completeTask({
      id: task.id,
      now: at,
      outputKey: file?.key ?? `${task.id}.mp4`,
      outputUrl: file?.url ?? 'https://unused.example/x.mp4',
      outputExpiresAt: new Date(file?.expiresAt ?? at.getTime()),
    });
    expect(outcome.kind).toBe(expected);
    if (outcome.kind === 'succeeded') {
      task.status = 'succeeded';
      task.file = file;
    }
  }
  deps.events.publish(task.id, task.status as never);
}

async function expire(w: World): Promise<void> {
  const expired = new Set((await w.fx.h.store.expireOverdueTasks({ now: w.fx.h.clock.now(), limit: 100_000 })).map((t) => t.id));
  if (expired.has(w.other.taskId)) w.other.status = 'failed';
  for (const task of w.tasks) {
    const due = isActive(task.status) && task.deadline <= now(w);
    expect(expired.has(task.id), `${task.id} (${task.status}) overdue`).toBe(due);
    if (due) refund(task, 'failed', 'timeout');
  }
}

const RUNNERS: { [Op in Step['op']]: (w: World, step: Extract<Step, { op: Op }>) => Promise<void> } = {
  submit,
  get,
  list,
  cancel,
  models,
  file,
  service,
  lifecycle,
  clock: async (w, step) => w.fx.h.clock.advance(step.ms),
  expire: (w) => expire(w),
};
const runStep = (w: World, step: Step) => (RUNNERS[step.op] as (w: World, step: Step) => Promise<void>)(w, step);

class StepCommand implements fc.AsyncCommand<object, World> {
  constructor(readonly step: Step) {}
  check = () => true;
  async run(_model: object, w: World): Promise<void> {
    await runStep(w, this.step);
    await audit(w);
  }
  toString = () => describeStep(this.step);
}

const sequenceArb = fc.commands(
  stepArbs.map((arb) => arb.map((step) => new StepCommand(step))),
  { maxCommands: STEPS, size: 'max' },
);
const grantArb = fc.oneof(fc.integer({ min: 0, max: 400 }), fc.integer({ min: 400, max: 5_000 }));

const own = (index: number): Target => ({ kind: 'own', index });

/** Sequences that once failed: every run tries them first. */
const REGRESSIONS: [number, StepCommand[]][] = (
  [
    // A reference on a host that WHATWG URL parsing refuses (`08`): the mode still follows the extensions.
    [
      submitting({ model: 'vidgen-1.5-pro', prompt: 'x', mediaUrls: ['https://08/a.png', 'https://cdn.example.com/b.png'] }),
      { op: 'get', auth: full, target: own(0), wait: null, change: 'none', correlation: undefined },
    ],
    // The last bytes of an empty output file: the whole (empty) file, not `Content-Range: bytes 0--1/0`.
    [
      submitting({ model: 'vidgen-2.0-fast', prompt: 'x', duration: 4, resolution: '480p' }),
      { op: 'lifecycle', action: 'complete', index: 0, size: 0, keepMs: 60_000 },
      { op: 'file', index: 0, link: 0, range: 'bytes=-1', method: 'GET' },
    ],
    // Ids PostgreSQL cannot take (NUL), in the path and inside a cursor: 404 and 400, not 500.
    [
      { op: 'get', auth: full, target: { kind: 'id', id: '\u0000' }, wait: null, change: 'none', correlation: undefined },
      { op: 'cancel', auth: full, target: { kind: 'id', id: '\u0000' }, correlation: undefined },
      { op: 'list', auth: full, limit: null, status: null, cursor: { kind: 'forged', position: { t: 0, i: '\u0000', s: null } } },
    ],
  ] as Step[][]
).map((steps) => [1_000, steps.map((step) => new StepCommand(step))]);

function fuzzProperty(fixture: () => Fixture) {
  return fc.asyncProperty(grantArb, sequenceArb, async (grant, commands) => {
    const w = await newWorld(fixture(), grant);
    await fc.asyncModelRun(() => ({ model: {}, real: w }), commands);
    await auditLedger(w);
  });
}

// --- the suites -----------------------------------------------------------------

describe.each(backendKinds)('fuzzing from the spec on $name', ({ name, skip, open }) => {
  let opened: Awaited<ReturnType<typeof open>> | undefined;
  let plain: Fixture;
  let capped: Fixture;
  beforeAll(async () => {
    if (skip) return;
    opened = await open();
    const backend = await opened.fresh();
    plain = await startFixture(name, backend);
    capped = await startFixture(name, backend, 2);
  });
  afterAll(async () => {
    if (process.env.VIDGEN_FUZZ_RUNS) console.log([...seen].sort().map(([label, n]) => `${label}: ${n}`).join('\n'));
    seen.clear();
    await plain?.close();
    await capped?.close();
    await opened?.done();
  });
  // Generous: a failure's shrinking replays sequences many times; runs and shrinking stop 10 s before.
  const timeout = 60_000 + RUNS * 1_000;

  describe.skipIf(skip)('', () => {
    it(`answers every request as the spec says and keeps balance = grants + ledger (seed ${SEED}, ${RUNS} runs)`, () => check(fuzzProperty(() => plain), RUNS, timeout - 10_000, REGRESSIONS), timeout);
    it('does the same under an active-task cap of 2', () => check(fuzzProperty(() => capped), Math.max(5, Math.round(RUNS / 3)), timeout - 10_000), timeout);
  });
});
