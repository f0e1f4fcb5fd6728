/**
 * Options for the Node HTTP server behind `serve()`: how long a client may
 * take to send a request, so that slow-loris clients (headers or a body sent a
 * byte at a time) cannot hold sockets open. Spread into `serve({ … })`.
 *
 * Node's `headersTimeout` and `requestTimeout` cover *receiving* a request
 * only: once its last byte has arrived the connection is no longer timed, so a
 * long poll (`?wait=30`) answering 30 s later is unaffected. A client past
 * either gets `408 Request Timeout` from Node itself (no JSON envelope: the
 * request never reached the app) and the socket is closed.
 *
 * There is deliberately no idle-socket timeout (`server.timeout`): a long poll
 * is idle for up to 30 s by design; keep-alive idleness has its own timeout.
 */
import type { ServerOptions } from 'node:http';
import type { HttpTimeouts } from '../config.js';

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
