/**
 * Draining for shutdown (SIGTERM): once `shutdown` is aborted, readiness
 * fails (routes/service.ts), new requests are answered 503 `unavailable`
 * with `Connection: close` so clients go to another instance, long polls
 * answer at once (routes/generations.ts), and requests already running
 * finish. Liveness and metrics keep answering: the process is alive.
 */
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from './context.js';
import { ApiError } from './errors.js';

const STILL_SERVED = new Set(['/healthz', '/readyz', '/metrics']);

export function refuseWhileDraining(shutdown: AbortSignal | undefined): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    if (shutdown?.aborted && !STILL_SERVED.has(c.req.path)) {
      throw new ApiError('unavailable', 'the service is shutting down; retry on another instance', undefined, { 'Retry-After': '1', Connection: 'close' });
    }
    await next();
    // An answer finished during the drain closes its connection: the next request goes elsewhere.
    if (shutdown?.aborted) c.res.headers.set('Connection', 'close');
  };
}

/** Resolves when `shutdown` is aborted (never without one); `release` drops the listener. */
export function onShutdown(shutdown: AbortSignal | undefined, callback: () => void): () => void {
  if (!shutdown) return () => {};
  if (shutdown.aborted) {
    callback();
    return () => {};
  }
  shutdown.addEventListener('abort', callback, { once: true });
  return () => shutdown.removeEventListener('abort', callback);
}
