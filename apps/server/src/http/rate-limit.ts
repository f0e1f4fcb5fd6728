/**
 * Per-key request budgets (D10): `submit` for submissions, `read` for every
 * other operation, each a number of requests per fixed window. The counter
 * lives in memory when one process serves the API and in PostgreSQL when
 * several do (store/postgres/pg-rate-limiter.ts), so the budget is the key's,
 * not each process's. Headers follow the IETF httpapi RateLimit draft.
 */
import type { Clock } from '../interfaces.js';
import { answerHeaders } from './answer.js';
import { ApiError } from './errors.js';
import type { Guard } from './middleware.js';

export type Budget = 'submit' | 'read';

export interface RateLimiter {
  /** Counts one request of `key` in the window starting at `windowStart`; returns the count so far, this one included. */
  hit(key: string, windowStart: Date, windowMs: number): Promise<number>;
}

export interface RateLimits {
  /** Requests per window per key; 0 turns the budget off. */
  submit: number;
  read: number;
  windowMs: number;
}

/** One process: a map of counters, each dropped once its window is over. */
export function createMemoryRateLimiter(): RateLimiter {
  const counters = new Map<string, { windowStart: number; count: number }>();
  let lastSweep = 0;
  return {
    async hit(key, windowStart) {
      const start = windowStart.getTime();
      if (start !== lastSweep) {
        // A new window: forget every counter of older ones (bounded memory: the keys active in one window).
        for (const [k, counter] of counters) if (counter.windowStart < start) counters.delete(k);
        lastSweep = start;
      }
      const counter = counters.get(key);
      if (counter && counter.windowStart === start) return ++counter.count;
      counters.set(key, { windowStart: start, count: 1 });
      return 1;
    },
  };
}

/**
 * Charges the request to the authenticated key's `budget`; 429 `rate_limited` past it. Every answer carries the
 * headers (they join the request's answer headers, which answer() and the error answers use). Undefined (no guard
 * at all, see `guarded`) when the budget is off.
 */
export function rateLimit(deps: { rateLimiter?: RateLimiter; clock: Clock; rateLimits?: RateLimits }, budget: Budget): Guard | undefined {
  const limits = deps.rateLimits;
  const quota = limits?.[budget] ?? 0;
  const rateLimiter = deps.rateLimiter;
  if (!rateLimiter || !limits || quota <= 0) return undefined;
  return async (c) => {
    const now = deps.clock.now().getTime();
    const windowStart = Math.floor(now / limits.windowMs) * limits.windowMs;
    const count = await rateLimiter.hit(`${budget}:${c.get('apiKey').id}`, new Date(windowStart), limits.windowMs);
    const resetSeconds = Math.max(1, Math.ceil((windowStart + limits.windowMs - now) / 1000));
    const headers = {
      'RateLimit-Policy': `"${budget}";q=${quota};w=${limits.windowMs / 1000}`,
      RateLimit: `"${budget}";r=${Math.max(0, quota - count)};t=${resetSeconds}`,
    };
    if (count > quota) {
      throw new ApiError('rate_limited', `this API key is over its ${budget} budget of ${quota} requests per ${limits.windowMs / 1000} s`, undefined, {
        ...headers,
        'Retry-After': String(resetSeconds),
      });
    }
    Object.assign(answerHeaders(c), headers);
  };
}
