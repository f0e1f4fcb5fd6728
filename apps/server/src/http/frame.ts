/**
 * The frame around every request, in one middleware: its correlation id
 * (echoed or made), the headers every JSON answer carries (security headers
 * by place, answer.ts), the refusal while draining (drain.ts), the count of
 * requests in flight, the request's metrics and its log line, and, for an
 * answer not built by `answer()` (a file, the docs, Hono's own), its headers
 * set afterwards. One layer rather than three: each middleware layer costs a
 * dispatch and two promises per request, and this one runs for every request
 * (with the answer headers built in one object literal, the frame cost a task
 * query about a fifth of its CPU as three layers; BENCHMARKS.md).
 */
import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { newCorrelationId } from '../domain/ids.js';
import type { Clock } from '../interfaces.js';
import { redactSecrets } from '../logging.js';
import { answer, carriesAnswerHeaders } from './answer.js';
import { requestHeader, type AppEnv } from './context.js';
import { refusalWhileDraining, type RequestsInFlight } from './drain.js';
import type { Metrics } from './metrics.js';
import { setCorrelationIdOfResponse } from './node-server.js';
import { requestLogWriter } from './request-log.js';
import { jsonAnswerHeaders, securingOtherAnswers } from './security-headers.js';

const CORRELATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface FrameDeps {
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  requests: RequestsInFlight;
  shutdown?: AbortSignal;
  docsHtml?: () => string | undefined;
  consoleMediaOrigins?: () => Promise<string[]>;
}

export function requestFrame(deps: FrameDeps): MiddlewareHandler<AppEnv> {
  const logRequest = requestLogWriter(deps.logger);
  const secureOther = securingOtherAnswers(deps);
  const { shutdown, requests, metrics } = deps;
  return async (c, next) => {
    const started = performance.now();
    const given = requestHeader(c, 'x-correlation-id');
    // Echoed and logged, so it may not be (or hold) a key: a key-shaped one is replaced like a malformed one.
    const correlationId = given && CORRELATION_ID.test(given) && redactSecrets(given) === given ? given : newCorrelationId(deps.clock.now());
    const path = c.req.path;
    c.set('correlationId', correlationId);
    c.set('answerHeaders', jsonAnswerHeaders(path, correlationId));
    // The Node response this answers (absent in tests without a server): a request Node cuts later is refused under this id.
    const outgoing = (c.env as { outgoing?: object } | undefined)?.outgoing;
    if (outgoing) setCorrelationIdOfResponse(outgoing, correlationId);
    requests.started();
    try {
      const refusal = refusalWhileDraining(shutdown, path);
      if (refusal) c.res = answer(c, refusal.toBody(), refusal.status, refusal.headers);
      else await next();
      if (!carriesAnswerHeaders(c.res)) {
        c.res.headers.set('X-Correlation-Id', correlationId);
        await secureOther(c, path);
      }
      // An answer finished during the drain closes its connection: the next request goes elsewhere.
      if (shutdown?.aborted) c.res.headers.set('Connection', 'close');
    } finally {
      requests.ended();
    }
    const seconds = (performance.now() - started) / 1000;
    const route = c.req.routePath === '/*' ? 'unmatched' : c.req.routePath;
    metrics.observeRequest(c.req.method, route, c.res.status, seconds);
    // The line is built only when it is written (VIDGEN_LOG_LEVEL=warn or above writes none).
    if (logRequest) {
      const key = c.get('apiKey');
      logRequest({
        correlationId,
        method: c.req.method,
        route,
        // The path only (a query string may hold anything), with anything shaped like a secret masked.
        path: redactSecrets(path),
        status: c.res.status,
        durationMs: Math.round(seconds * 1000 * 10) / 10,
        accountId: key?.accountId,
        keyId: key?.id,
      });
    }
  };
}
