/**
 * JSON answers built in one step. The request frame (frame.ts) puts the
 * headers that every JSON answer to a request carries (its Content-Type, the
 * correlation id, the security headers; rate limiting adds its own) in one
 * plain object, `answerHeaders(c)`, before the route runs; `answer()` builds
 * the route's Response with that very object, or a copy with its own headers
 * added. Such a Response stays on @hono/node-server's fast path, a plain
 * object handed to `writeHead`: setting headers on `c.res` afterwards, as the
 * middleware did, made a web `Headers` for every answer and converted it back
 * (a third of the CPU of a task query, measured with wrk). Any other answer (a
 * file, the docs, Hono's own) still gets those headers set afterwards:
 * `carriesAnswerHeaders` tells the two apart.
 */
import type { Context } from 'hono';
import type { AppEnv } from './context.js';

const BUILT = Symbol('vidgen.answer');
const JSON_TYPE = { 'Content-Type': 'application/json' } as const;

/** The headers every JSON answer to this request carries; middleware adds to them before `next()`. */
export function answerHeaders(c: Context<AppEnv>): Record<string, string> {
  let headers = c.get('answerHeaders');
  if (!headers) {
    headers = { ...JSON_TYPE };
    c.set('answerHeaders', headers);
  }
  return headers;
}

/** `body` as JSON with the request's answer headers and `headers` (which win). */
export function answer(c: Context<AppEnv>, body: unknown, status: number, headers?: Record<string, string>): Response {
  return answerJson(c, JSON.stringify(body), status, headers);
}

/** `answer()` for a body already serialised: `json` must be the JSON of a value the operation's spec allows. */
export function answerJson(c: Context<AppEnv>, json: string, status: number, headers?: Record<string, string>): Response {
  const common = answerHeaders(c);
  // Object.assign, not a spread: spreading the request's header object (ten names with dashes) took ≈ 0.7 µs, this ≈ 0.2.
  const response = new Response(json, { status, headers: headers ? Object.assign({}, common, headers) : common });
  // A mark on the answer itself rather than a WeakSet entry per request.
  (response as Response & { [BUILT]?: true })[BUILT] = true;
  return response;
}

/** Whether `response` was built by `answer()`, with the answer headers already in it. */
export const carriesAnswerHeaders = (response: Response): boolean => (response as Response & { [BUILT]?: true })[BUILT] === true;
