/** Correlation ids, the request log line and metrics, authentication and scopes, the body rules. */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { Logger } from 'pino';
import { hashApiKey, isWellFormedApiKey } from '../domain/keys.js';
import { newCorrelationId } from '../domain/ids.js';
import type { Clock } from '../interfaces.js';
import type { Store } from '../store/store.js';
import type { AppEnv } from './context.js';
import { ApiError } from './errors.js';
import type { Metrics } from './metrics.js';

const CORRELATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;
export const BODY_LIMIT_BYTES = 64 * 1024;

/** Echoes a usable X-Correlation-Id or makes one; logs one line per request and counts it. */
export function observe(deps: { clock: Clock; logger: Logger; metrics: Metrics }): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const started = performance.now();
    const given = c.req.header('x-correlation-id');
    const correlationId = given && CORRELATION_ID.test(given) ? given : newCorrelationId(deps.clock.now());
    c.set('correlationId', correlationId);
    const answered = deps.metrics.requestStarted();
    try {
      await next();
    } finally {
      answered();
    }
    c.res.headers.set('X-Correlation-Id', correlationId);
    const seconds = (performance.now() - started) / 1000;
    const route = c.req.routePath === '/*' ? 'unmatched' : c.req.routePath;
    deps.metrics.observeRequest(c.req.method, route, c.res.status, seconds);
    deps.logger.info(
      {
        correlationId,
        method: c.req.method,
        route,
        path: c.req.path,
        status: c.res.status,
        durationMs: Math.round(seconds * 1000 * 10) / 10,
        accountId: c.get('apiKey')?.accountId,
        keyId: c.get('apiKey')?.id,
      },
      'request',
    );
  };
}

const unauthorized = (message: string, error?: string) =>
  new ApiError('unauthorized', message, undefined, {
    'WWW-Authenticate': `Bearer realm="vidgen"${error ? `, error="${error}"` : ''}`,
  });

/** Resolves the bearer key (only its hash is looked up) and checks the operation's scopes. */
export function authenticate(deps: { store: Store; clock: Clock }, scopes: string[]): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    const header = c.req.header('authorization');
    if (!header) throw unauthorized('missing API key: send Authorization: Bearer <key>');
    const match = /^Bearer +(\S+) *$/i.exec(header);
    if (!match) throw unauthorized('the Authorization header must be "Bearer <API key>"', 'invalid_request');
    const key = match[1]!;
    if (!isWellFormedApiKey(key)) throw unauthorized('the API key is invalid, revoked or expired', 'invalid_token');
    const record = await deps.store.findApiKeyByHash(hashApiKey(key));
    const now = deps.clock.now();
    if (!record || record.revokedAt || (record.expiresAt && record.expiresAt <= now)) {
      throw unauthorized('the API key is invalid, revoked or expired', 'invalid_token');
    }
    c.set('apiKey', record);
    const missing = scopes.filter((scope) => !record.scopes.includes(scope as never));
    if (missing.length) throw new ApiError('forbidden', `this API key lacks the ${missing.join(' and ')} scope`);
    await next();
  };
}

/** JSON bodies only (415), at most 64 KiB, refused without reading it whole (413). */
export function jsonBody(): MiddlewareHandler<AppEnv>[] {
  const contentType: MiddlewareHandler<AppEnv> = async (c, next) => {
    const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== 'application/json') throw new ApiError('unsupported_media_type', 'send the body as Content-Type: application/json');
    await next();
  };
  const size = bodyLimit({
    maxSize: BODY_LIMIT_BYTES,
    onError: () => {
      throw new ApiError('payload_too_large', `the request body is over ${BODY_LIMIT_BYTES} bytes`);
    },
  });
  return [contentType, size as MiddlewareHandler<AppEnv>];
}

/** The parsed JSON body, or 400 naming the problem. */
export async function readJson(c: Context<AppEnv>): Promise<unknown> {
  const text = await c.req.text();
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new ApiError('invalid_request', 'the request body is not valid JSON', [
      { field: '', message: error instanceof SyntaxError ? error.message : 'not JSON' },
    ]);
  }
}
