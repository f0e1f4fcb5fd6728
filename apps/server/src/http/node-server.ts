/**
 * Options for the Node HTTP server behind `serve()`: how long a client may
 * take to send a request, so that slow-loris clients (headers or a body sent a
 * byte at a time) cannot hold sockets open. Spread into `serve({ … })`.
 *
 * Node's `headersTimeout` and `requestTimeout` cover *receiving* a request
 * only: once its last byte has arrived the connection is no longer timed, so a
 * long poll (`?wait=30`) answering 30 s later is unaffected. A client past
 * either gets `408 Request Timeout` and the socket is closed (answered by
 * `answerClientErrors` below, in the JSON envelope).
 *
 * There is deliberately no idle-socket timeout (`server.timeout`): a long poll
 * is idle for up to 30 s by design; keep-alive idleness has its own timeout.
 */
import { maxHeaderSize, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { HttpTimeouts } from '../config.js';
import { newCorrelationId } from '../domain/ids.js';
import { systemClock, type Clock } from '../interfaces.js';
import { ApiError, type ErrorCode } from './errors.js';
import { LOCKED_DOWN_CSP } from './security-headers.js';

export function nodeServerOptions(timeouts: HttpTimeouts): { serverOptions: ServerOptions } {
  return {
    serverOptions: {
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      keepAliveTimeout: timeouts.keepAliveTimeoutMs,
      // Node checks the two timeouts above only this often (default 30 s, which would let a slow
      // client keep its socket up to 30 s past the deadline): a few times per headers timeout.
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.headersTimeoutMs / 4))),
    },
  };
}

const CORRELATION_ID = Symbol('vidgen.correlationId');

/**
 * The correlation id of the answer an in-flight ServerResponse is for (set by the request frame,
 * http/frame.ts): a request cut while its body arrives is refused under the id its log line has.
 * A property of the response itself, not a WeakMap entry: one per request, gone with it.
 */
export function setCorrelationIdOfResponse(response: object, correlationId: string): void {
  (response as { [CORRELATION_ID]?: string })[CORRELATION_ID] = correlationId;
}

export const correlationIdOfResponse = (response: object): string | undefined => (response as { [CORRELATION_ID]?: string })[CORRELATION_ID];

interface Refusal {
  status: number;
  reason: string;
  code: ErrorCode;
  message: string;
}

/** What the server answers a client whose request Node could not take, by the error Node raised. */
function refusalFor(error: NodeJS.ErrnoException & { reason?: string }, server: Server): Refusal {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        reason: 'Request Header Fields Too Large',
        code: 'invalid_request',
        message: `the request line and headers are over ${maxHeaderSize} bytes`,
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return {
        status: 408,
        reason: 'Request Timeout',
        code: 'invalid_request',
        message: `the request was sent too slowly: the headers must arrive within ${server.headersTimeout} ms and the whole request within ${server.requestTimeout} ms`,
      };
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return { status: 413, reason: 'Payload Too Large', code: 'payload_too_large', message: 'the chunk extensions of the request body are too large' };
    default: {
      // llhttp's reasons are fixed phrases ("Invalid char in url path"), never the request's bytes.
      const why = typeof error.reason === 'string' && error.reason ? `: ${error.reason.charAt(0).toLowerCase()}${error.reason.slice(1)}` : '';
      return { status: 400, reason: 'Bad Request', code: 'invalid_request', message: `the request is not well-formed HTTP/1.1${why}` };
    }
  }
}

/** Errors of a connection the client broke: there is no one to answer. */
const GONE = new Set(['ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ECONNABORTED', 'HPE_INVALID_EOF_STATE']);

/**
 * Answers what Node refuses before the app sees a request — headers over Node's limit (431),
 * bytes that are not HTTP (400), a request too slow to arrive (408), chunk extensions over
 * Node's limit (413) — in the API's JSON envelope (D2), with an `X-Correlation-Id`, the JSON
 * security headers and `Connection: close`, instead of Node's bare status line; one log line
 * each. Nothing is written when the socket can no longer take it, or when an answer to the
 * request already began (Node's own rule); the socket is closed either way. A malformed request
 * pipelined behind a complete one is answered after that one's answer, not in its place.
 */
export function answerClientErrors(server: unknown, deps: { logger: Logger; clock?: Clock }): void {
  const http = server as Server;
  const clock = deps.clock ?? systemClock;
  // Node reports every later parse error of a refused connection again; one answer is enough.
  const answered = new WeakSet<Socket>();
  http.on('clientError', (error: NodeJS.ErrnoException & { reason?: string }, socket: Socket) => {
    if (answered.has(socket)) return;
    answered.add(socket);
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
    if (GONE.has(error.code ?? '') || !socket.writable || inFlight?.headersSent) {
      deps.logger.debug({ code: error.code }, 'connection closed by a client error');
      socket.destroy();
      return;
    }
    const refusal = refusalFor(error, http);
    // The request being answered is the one refused when it has not arrived whole (its body too slow, or
    // malformed); a complete one is answered first, and the refusal is for what was pipelined behind it.
    const behind = inFlight !== undefined && inFlight.req.complete && error.code !== 'ERR_HTTP_REQUEST_TIMEOUT';
    const refuse = () => {
      if (!socket.writable) return void socket.destroy();
      const correlationId = (inFlight && !behind && correlationIdOfResponse(inFlight)) || newCorrelationId(clock.now());
      const body = JSON.stringify(new ApiError(refusal.code, refusal.message).toBody());
      const head = [
        `HTTP/1.1 ${refusal.status} ${refusal.reason}`,
        'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `X-Correlation-Id: ${correlationId}`,
        'X-Content-Type-Options: nosniff',
        'Referrer-Policy: no-referrer',
        'X-Frame-Options: DENY',
        'Cross-Origin-Opener-Policy: same-origin',
        `Content-Security-Policy: ${LOCKED_DOWN_CSP}`,
        'Cross-Origin-Resource-Policy: same-origin',
        'Cache-Control: no-store',
        'Connection: close',
      ];
      // Closed once the answer is handed to the kernel (before the parser could read another
      // request from the socket), or after a second if the client does not read it.
      const cutOff = setTimeout(() => socket.destroy(), 1000).unref();
      socket.once('close', () => clearTimeout(cutOff));
      socket.end(`${head.join('\r\n')}\r\n\r\n${body}`, () => socket.destroy());
      deps.logger.info({ correlationId, status: refusal.status, code: error.code }, 'request refused before routing');
    };
    if (behind) inFlight.once('finish', refuse);
    else refuse();
  });
}
