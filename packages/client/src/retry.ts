import { VidgenError } from './errors.js';
import { setLongTimeout } from './timers.js';

export interface RetryOptions {
  /** Attempts after the first. Default 3. */
  retries?: number;
  /** The backoff's base: attempt n waits a random time in [0, min(maxDelayMs, minDelayMs × 2ⁿ)]. Default 500. */
  minDelayMs?: number;
  /** The backoff's cap. A `Retry-After` longer than this is not waited for: the error is thrown. Default 20 000. */
  maxDelayMs?: number;
}

export type RetryPolicy = Required<RetryOptions>;

export const DEFAULT_RETRY: RetryPolicy = Object.freeze({ retries: 3, minDelayMs: 500, maxDelayMs: 20_000 });

export function retryPolicy(option: RetryOptions | false | undefined): RetryPolicy {
  if (option === false) return { ...DEFAULT_RETRY, retries: 0 };
  return { ...DEFAULT_RETRY, ...option };
}

/**
 * Which failures of an operation the client may retry by itself:
 * - `'any'`: the request is safe to repeat (reads, idempotent writes, submissions with an
 *   `Idempotency-Key`): network errors, `429`, `5xx` and `409 idempotency_in_progress`.
 * - `'refused'`: the request is not safe to repeat, because a repeat after a lost answer would do
 *   it twice (`createApiKey`, `rotateWebhookSecret`). Only an answer that proves it was not
 *   carried out is retried: `429` (the service's rate limit turns a request away before anything
 *   else looks at it). Never a network error or a `5xx`: the request may have been carried out
 *   and only its answer lost.
 */
export type Retryable = 'any' | 'refused';

/** Answers worth trying again: the service asked to (429, 409 `idempotency_in_progress`) or failed (5xx). */
export function isRetryable(error: VidgenError, retryable: Retryable = 'any'): boolean {
  if (retryable === 'refused') return error.status === 429;
  return error.code === 'network_error' || error.status === 429 || error.status >= 500 || error.code === 'idempotency_in_progress';
}

/** Full jitter (AWS's "Exponential Backoff and Jitter"), never sooner than `Retry-After`. */
export function backoffMs(policy: RetryPolicy, attempt: number, retryAfterSeconds: number | undefined, random = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.minDelayMs * 2 ** attempt);
  return Math.max(random() * ceiling, (retryAfterSeconds ?? 0) * 1000);
}

/**
 * Resolves after `ms` (any length: longer than `setTimeout` takes is waited out in chunks, and
 * `Infinity` never resolves), or rejects with the signal's reason once it aborts.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      cancel();
      reject(signal!.reason);
    };
    const cancel = setLongTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds, fails with an answer not worth retrying, or the retries are
 * used up. Only callers whose request is safe to repeat pass `retryable: 'any'`; the others pass
 * `'refused'` (see `Retryable`).
 */
export async function withRetries<T>(attempt: () => Promise<T>, options: { policy: RetryPolicy; retryable: Retryable; signal?: AbortSignal | undefined }): Promise<T> {
  const { policy, retryable, signal } = options;
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (!(error instanceof VidgenError) || n >= policy.retries || !isRetryable(error, retryable)) throw error;
      if (error.retryAfter !== undefined && error.retryAfter * 1000 > policy.maxDelayMs) throw error;
      await sleep(backoffMs(policy, n, error.retryAfter), signal);
    }
  }
}
