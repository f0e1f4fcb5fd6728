/** Request budgets shared by several API processes: one atomic upsert per request. */
import type pg from 'pg';
import type { RateLimiter } from '../../http/rate-limit.js';

export function createPgRateLimiter(pool: pg.Pool): RateLimiter {
  let sweptBefore = 0;
  return {
    async hit(key, windowStart) {
      const start = windowStart.getTime();
      if (start > sweptBefore) {
        // The first hit of a new window (in this process) drops the counters of older ones.
        sweptBefore = start;
        await pool.query('DELETE FROM rate_limit_windows WHERE window_start < $1', [windowStart]);
      }
      const { rows } = await pool.query(
        `INSERT INTO rate_limit_windows (key, window_start, count) VALUES ($1, $2, 1)
         ON CONFLICT (key, window_start) DO UPDATE SET count = rate_limit_windows.count + 1
         RETURNING count`,
        [key, windowStart],
      );
      return rows[0].count as number;
    },
  };
}
