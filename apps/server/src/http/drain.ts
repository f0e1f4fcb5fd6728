/**
 * Draining for shutdown (SIGTERM): once `shutdown` is aborted, readiness
 * fails (routes/service.ts), new requests are answered 503 `unavailable`
 * with `Connection: close` so clients go to another instance, long polls
 * answer at once (routes/generations.ts), and requests already running
 * finish. Liveness and metrics keep answering: the process is alive.
 */
import { ApiError } from './errors.js';

const STILL_SERVED = new Set(['/healthz', '/readyz', '/metrics']);

/** The refusal of a request for `path` while draining (the request frame answers it, http/frame.ts); undefined otherwise. */
export function refusalWhileDraining(shutdown: AbortSignal | undefined, path: string): ApiError | undefined {
  if (!shutdown?.aborted || STILL_SERVED.has(path)) return undefined;
  return new ApiError('unavailable', 'the service is shutting down; retry on another instance', undefined, { 'Retry-After': '1', Connection: 'close' });
}

/** Requests being answered (long polls included), so that a drain knows when the last one is done. */
export class RequestsInFlight {
  #count = 0;
  #idle: (() => void)[] = [];

  get count(): number {
    return this.#count;
  }

  started(): void {
    this.#count++;
  }

  ended(): void {
    if (--this.#count === 0 && this.#idle.length) for (const resolve of this.#idle.splice(0)) resolve();
  }

  /** Resolves once no request is being answered (at once when none is). */
  idle(): Promise<void> {
    return this.#count === 0 ? Promise.resolve() : new Promise((resolve) => this.#idle.push(resolve));
  }
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
