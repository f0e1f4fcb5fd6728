/**
 * The frame around every request: its correlation id (echoed or made), the
 * headers every JSON answer carries (security headers by place, answer.ts),
 * the refusal while draining (drain.ts), the count of requests in flight, the
 * answer to an error its route threw (app.ts's), the request's metrics and
 * its log line, and, for an answer not built by `answer()` (a file, the docs,
 * Hono's own), its headers set afterwards.
 *
 * It wraps each route's handler (`frame(route, handler)`, which `Routes`
 * does for every route registered) rather than running as a middleware
 * before them: with one handler for a request Hono calls it at once, where a
 * middleware in front makes it compose the two, an async dispatch a layer
 * and two promises each (BENCHMARKS.md, twenty-second pass). Each layer
 * costs that on every request, so the route's guards are calls too
 * (middleware.ts's `guarded`).
 */
import type { Context } from 'hono';
import type { Logger } from 'pino';
import { newCorrelationId } from '../domain/ids.js';
import type { Clock } from '../interfaces.js';
import { redactSecrets } from '../logging.js';
import { answer, carriesAnswerHeaders } from './answer.js';
import { requestHeader, type AppEnv } from './context.js';
import type { RouteHandler } from './middleware.js';
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
  /** The answer to an error a route threw (an `Error`; anything else is Hono's to handle). */
  answerError: (error: Error, c: Context<AppEnv>) => Response | Promise<Response>;
}

/** A route's handler inside the request frame. `route`: its label in the metrics and the log line (the route's pattern). */
export type Frame = (route: string, handler: RouteHandler) => RouteHandler;

/** Where the route modules register their routes (app.ts), each inside the request frame. */
export interface Routes {
  get(path: string, handler: RouteHandler): void;
  post(path: string, handler: RouteHandler): void;
}

export function requestFrame(deps: FrameDeps): Frame {
  const logRequest = requestLogWriter(deps.logger);
  const secureOther = securingOtherAnswers(deps);
  const { shutdown, requests, metrics, answerError } = deps;
  return (route, handler) => async (c) => {
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
    let res: Response;
    try {
      const refusal = refusalWhileDraining(shutdown, path);
      if (refusal) res = answer(c, refusal.toBody(), refusal.status, refusal.headers);
      else {
        try {
          res = await handler(c);
        } catch (error) {
          if (!(error instanceof Error)) throw error;
          c.error = error;
          res = await answerError(error, c);
        }
      }
      c.res = res;
      if (!carriesAnswerHeaders(res)) {
        c.res.headers.set('X-Correlation-Id', correlationId);
        await secureOther(c, path);
        res = c.res;
      }
      // An answer finished during the drain closes its connection: the next request goes elsewhere.
      if (shutdown?.aborted) res.headers.set('Connection', 'close');
    } finally {
      requests.ended();
    }
    const seconds = (performance.now() - started) / 1000;
    metrics.observeRequest(c.req.method, route, res.status, seconds);
    // The line is built only when it is written (VIDGEN_LOG_LEVEL=warn or above writes none).
    if (logRequest) {
      const key = c.get('apiKey');
      logRequest({
        correlationId,
        method: c.req.method,
        route,
        // The path only (a query string may hold anything), with anything shaped like a secret masked.
        path: redactSecrets(path),
        status: res.status,
        durationMs: Math.round(seconds * 1000 * 10) / 10,
        accountId: key?.accountId,
        keyId: key?.id,
      });
    }
    return res;
  };
}
