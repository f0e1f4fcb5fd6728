/**
 * JSON answers built in one step. Middleware puts the headers that every
 * answer to a request carries (correlation id, security headers, rate-limit
 * headers) in one plain object, `answerHeaders(c)`, before the route runs;
 * `answer()` builds the route's Response with them and its own. Such a
 * Response stays on @hono/node-server's fast path, a plain object handed to
 * `writeHead`: setting headers on `c.res` afterwards, as the middleware did,
 * made a web `Headers` for every answer and converted it back (a third of the
 * CPU of a task query, measured with wrk). Any other answer (a file, the
 * docs, Hono's own) still gets those headers set afterwards:
 * `carriesAnswerHeaders` tells the two apart.
 */
import type { Context } from 'hono';
import type { AppEnv } from './context.js';

const built = new WeakSet<Response>();

/** The headers every answer to this request carries; middleware adds to them before `next()`. */
export function answerHeaders(c: Context<AppEnv>): Record<string, string> {
  let headers = c.get('answerHeaders');
  if (!headers) {
    headers = {};
    c.set('answerHeaders', headers);
  }
  return headers;
}

/** `body` as JSON with the request's answer headers and `headers` (which win). */
export function answer(c: Context<AppEnv>, body: unknown, status: number, headers?: Record<string, string>): Response {
  const response = new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...answerHeaders(c), ...headers } });
  built.add(response);
  return response;
}

/** Whether `response` was built by `answer()`, with the answer headers already in it. */
export const carriesAnswerHeaders = (response: Response): boolean => built.has(response);
