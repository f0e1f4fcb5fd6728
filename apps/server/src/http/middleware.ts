/**
 * Authentication and scopes, the body rules, as guards run by `guarded` (the
 * frame around every request is frame.ts).
 */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { hashApiKey, isWellFormedApiKey, sameApiKeyHash } from '../domain/keys.js';
import type { Clock } from '../interfaces.js';
import type { ApiKeyRecord, Store } from '../store/store.js';
import { requestHeader, type AppEnv } from './context.js';
import { ApiError } from './errors.js';

export const BODY_LIMIT_BYTES = 64 * 1024;
/** How deep a JSON body may nest arrays and objects (the submit body needs 3; metadata has the rest). */
export const MAX_JSON_DEPTH = 32;

const unauthorized = (message: string, error?: string) =>
  new ApiError('unauthorized', message, undefined, {
    'WWW-Authenticate': `Bearer realm="vidgen"${error ? `, error="${error}"` : ''}`,
  });

/**
 * Key records by key hash, each kept `ttlMs` after it was read from the store
 * and checked against the hash (at most `maxEntries`, the oldest dropped
 * first), so that a busy key is neither looked up nor checked again on every
 * request: a hit is answered without a promise. A key revoked (by any
 * process) is therefore still accepted here for at most `ttlMs`; expiry is
 * checked on every request against the clock. Only keys found are kept: an
 * unknown key is looked up every time, so made-up keys cannot fill the cache.
 * `ttlMs` 0: nothing is kept.
 */
export interface ApiKeyCache {
  /** The record kept for this key hash, while it is fresh. */
  get(hash: string): ApiKeyRecord | undefined;
  /** Keeps a record just read from the store and checked against `hash`. */
  set(hash: string, record: ApiKeyRecord): void;
  /** Drops the key's cached record (a key revoked through this process is refused by it at once). */
  forget(keyId: string): void;
}

export function createApiKeyCache(deps: { clock: Clock }, ttlMs: number, maxEntries = 10_000): ApiKeyCache {
  const entries = new Map<string, { record: ApiKeyRecord; until: number }>();
  return {
    get(hash) {
      if (ttlMs <= 0) return undefined;
      const cached = entries.get(hash);
      return cached && cached.until > deps.clock.now().getTime() ? cached.record : undefined;
    },
    set(hash, record) {
      if (ttlMs <= 0) return;
      entries.delete(hash);
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!);
      entries.set(hash, { record, until: deps.clock.now().getTime() + ttlMs });
    },
    forget(keyId) {
      // Rare (a revocation), so a scan: no second index to keep on every lookup.
      for (const [hash, entry] of entries) if (entry.record.id === keyId) entries.delete(hash);
    },
  };
}

/** The stored record of the key whose SHA-256 is `hash`, when the store has one and it matches (in constant time). */
async function storedKey(deps: { store: Store; apiKeyCache?: ApiKeyCache }, hash: string): Promise<ApiKeyRecord | undefined> {
  const found = await deps.store.findApiKeyByHash(hash);
  if (!found || !sameApiKeyHash(found.hash, hash)) return undefined;
  const { hash: _stored, ...record } = found;
  deps.apiKeyCache?.set(hash, record);
  return record;
}

/**
 * The key's record when it is genuine, not revoked and not expired; undefined
 * for every other key, whatever the reason, so that all of them get one answer.
 * A key whose shape or checksum is wrong is not looked up (the checksum is
 * public, so skipping the store reveals nothing and keeps garbage off it).
 */
function usableKey(deps: { store: Store; clock: Clock; apiKeyCache?: ApiKeyCache }, key: string): ApiKeyRecord | undefined | Promise<ApiKeyRecord | undefined> {
  const hash = hashApiKey(key);
  // A cached record matched this very hash when it was read (the cache's keys are the hashes): nothing to check again.
  const cached = deps.apiKeyCache?.get(hash);
  if (cached) return usableNow(cached, deps.clock);
  if (!isWellFormedApiKey(key)) return undefined;
  return storedKey(deps, hash).then((record) => record && usableNow(record, deps.clock));
}

const usableNow = (record: ApiKeyRecord, clock: Clock): ApiKeyRecord | undefined => {
  if (record.revokedAt) return undefined;
  return record.expiresAt && record.expiresAt <= clock.now() ? undefined : record;
};

/**
 * A check a route makes before its handler: it throws (an ApiError) to refuse
 * the request, and returns a promise only when it has to wait (a key not
 * cached, a shared rate limit, a body sent in chunks).
 */
export type Guard = (c: Context<AppEnv>) => void | Promise<void>;

/** A route's handler (its answer built with answer(), so that the guards' answer headers are in it). */
export type RouteHandler = (c: Context<AppEnv>) => Response | Promise<Response>;

/**
 * The route's handler behind its guards (undefined ones left out, in order),
 * as the route's one handler: the checks are calls, not middleware layers,
 * each of which cost a dispatch and two promises per request (a submission
 * 6–7 % of its throughput as two layers, BENCHMARKS.md). A guard that answers
 * at once costs no promise.
 */
export function guarded(guards: (Guard | undefined)[], handler: RouteHandler): RouteHandler {
  const checks = guards.filter((guard) => guard !== undefined);
  const from = (c: Context<AppEnv>, first: number): Response | Promise<Response> => {
    for (let i = first; i < checks.length; i++) {
      const pending = checks[i]!(c);
      if (pending) return pending.then(() => from(c, i + 1));
    }
    return handler(c);
  };
  return (c) => from(c, 0);
}

/** Resolves the bearer key (only its hash is looked up) and checks the operation's scopes. */
export function authenticate(deps: { store: Store; clock: Clock; apiKeyCache?: ApiKeyCache }, scopes: string[]): Guard {
  const admit = (c: Context<AppEnv>, record: ApiKeyRecord | undefined) => {
    // Malformed, unknown, revoked and expired keys: one answer, nothing to tell them apart.
    if (!record) throw unauthorized('the API key is invalid, revoked or expired', 'invalid_token');
    c.set('apiKey', record);
    const missing = scopes.filter((scope) => !record.scopes.includes(scope as never));
    if (missing.length) throw new ApiError('forbidden', `this API key lacks the ${missing.join(' and ')} scope`);
  };
  return (c) => {
    const header = requestHeader(c, 'authorization');
    if (!header) throw unauthorized('missing API key: send Authorization: Bearer <key>');
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) throw unauthorized('the Authorization header must be "Bearer <API key>"', 'invalid_request');
    const found = usableKey(deps, match[1]!);
    if (found instanceof Promise) return found.then((record) => admit(c, record));
    admit(c, found);
  };
}

/**
 * Reading a body fails when the client stops sending it: it went away, or the
 * server's request timeout cut it (http/node-server.ts). That is the client's
 * failure, answered (if anyone still listens) and logged as a 400, not a 500.
 */
const notReceivedWhole = (error: unknown) =>
  error instanceof ApiError ? error : new ApiError('invalid_request', 'the request body was not received whole');

/** JSON bodies only (415), at most 64 KiB (413, bodySizeLimit). */
export function jsonBody(): Guard {
  const size = bodySizeLimit();
  return (c) => {
    const given = requestHeader(c, 'content-type');
    // The usual header as it comes, else its media type without parameters, case and spaces.
    const type = given === 'application/json' ? given : (given ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') throw new ApiError('unsupported_media_type', 'send the body as Content-Type: application/json');
    return size(c);
  };
}

/**
 * At most 64 KiB (413), whatever the Content-Type: a declared Content-Length
 * over it is refused unread; a chunked body is counted as it arrives and
 * refused the moment it passes the limit (what follows is discarded, not kept).
 */
export function bodySizeLimit(): Guard {
  const limit = bodyLimit({
    maxSize: BODY_LIMIT_BYTES,
    onError: () => {
      throw new ApiError('payload_too_large', `the request body is over ${BODY_LIMIT_BYTES} bytes`);
    },
  }) as MiddlewareHandler<AppEnv>;
  const received = async () => {};
  return (c) => {
    // A declared length is checked here as bodyLimit would, without asking for the request's body
    // stream (which makes @hono/node-server build a whole web Request, and the body then be read through it).
    const declared = requestHeader(c, 'content-length');
    if (declared !== undefined && requestHeader(c, 'transfer-encoding') === undefined) {
      if (parseInt(declared, 10) > BODY_LIMIT_BYTES) throw new ApiError('payload_too_large', `the request body is over ${BODY_LIMIT_BYTES} bytes`);
      return;
    }
    // bodyLimit reads a chunked body whole (refusing it past the limit), puts it back as the request's, then goes on.
    return (limit(c, received) as Promise<unknown>).then(
      () => undefined,
      (error: unknown) => {
        throw notReceivedWhole(error);
      },
    );
  };
}

/**
 * Whether JSON text nests arrays and objects deeper than `limit`: one linear
 * pass that skips strings, so a 60 KiB `[[[[…` is refused before anything
 * recursive (validation, canonical JSON, serialization) walks it.
 */
export function jsonNestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // a backslash escapes the next character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > limit) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
}

/** Decodes UTF-8 and throws on any byte sequence that is not UTF-8, instead of putting U+FFFD in its place. */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The offset of the first byte of `bytes` that does not start or continue a well-formed UTF-8
 * sequence (Unicode's table 3-7: no overlong form, no surrogate, nothing past U+10FFFF, nothing
 * cut short); -1 when there is none. Run only on a body the decoder refused, to say where.
 */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    // The sequence's length and the range its second byte must fall in.
    let length: number;
    let low = 0x80;
    let high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) length = 2;
    else if (b >= 0xe0 && b <= 0xef) {
      length = 3;
      if (b === 0xe0) low = 0xa0;
      else if (b === 0xed) high = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      length = 4;
      if (b === 0xf0) low = 0x90;
      else if (b === 0xf4) high = 0x8f;
    } else return i;
    if (i + length > bytes.length) return i;
    const second = bytes[i + 1]!;
    if (second < low || second > high) return i;
    for (let k = 2; k < length; k++) {
      const next = bytes[i + k]!;
      if (next < 0x80 || next > 0xbf) return i;
    }
    i += length;
  }
  return -1;
}

/**
 * For an optional JSON body (readOptionalJson): a request that declares none (no Content-Type, and
 * no Content-Length or Transfer-Encoding; or Content-Length 0) passes; one that sends a body is held
 * to jsonBody()'s rules (415, 413).
 */
export function optionalJsonBody(): Guard {
  const rules = jsonBody();
  const size = bodySizeLimit();
  return (c) => {
    const declared = requestHeader(c, 'content-length');
    if (declared === '0') return;
    const undeclared = declared === undefined && requestHeader(c, 'transfer-encoding') === undefined;
    // Nothing declared (only in-process requests, where a body need not declare its length): readOptionalJson looks.
    return undeclared && requestHeader(c, 'content-type') === undefined ? size(c) : rules(c);
  };
}

/** An optional body (after optionalJsonBody()): undefined when none or an empty one came, else as readJson. */
export async function readOptionalJson(c: Context<AppEnv>): Promise<unknown> {
  if (requestHeader(c, 'content-length') === '0') return undefined;
  const bytes = await readBytes(c);
  if (bytes.byteLength === 0) return undefined;
  if (requestHeader(c, 'content-type') === undefined) throw new ApiError('unsupported_media_type', 'send the body as Content-Type: application/json');
  return parseJson(bytes);
}

async function readBytes(c: Context<AppEnv>): Promise<ArrayBuffer> {
  try {
    return await c.req.arrayBuffer();
  } catch (error) {
    throw notReceivedWhole(error);
  }
}

/** The parsed JSON body, or 400 naming the problem. */
export async function readJson(c: Context<AppEnv>): Promise<unknown> {
  return parseJson(await readBytes(c));
}

function parseJson(bytes: ArrayBuffer): unknown {
  // Decoded once, strictly: a byte that is not UTF-8 would otherwise become U+FFFD and be
  // stored altered, where the prompt and metadata must come back exactly as sent (D5).
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    const offset = firstInvalidUtf8(new Uint8Array(bytes));
    const where = offset >= 0 ? ` (byte offset ${offset})` : '';
    throw new ApiError('invalid_request', `the request body is not valid UTF-8${where}`, [{ field: '', message: `is not valid UTF-8${where}` }]);
  }
  if (jsonNestsDeeperThan(text, MAX_JSON_DEPTH)) {
    throw new ApiError('invalid_request', `the request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`, [
      { field: '', message: `nests more than ${MAX_JSON_DEPTH} levels deep` },
    ]);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError('invalid_request', 'the request body is not valid JSON', [
      { field: '', message: error instanceof SyntaxError ? error.message : 'not JSON' },
    ]);
  }
}
