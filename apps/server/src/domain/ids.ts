/** Task ids: `gen_` + a ULID (48-bit milliseconds, 80 random bits, Crockford base32). */
import { randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/**
 * The random part comes from a pool of CSPRNG bytes refilled 256 ids at a
 * time: every request makes an id (its correlation id), and a randomBytes()
 * call of its own per id cost more than the rest of the id.
 */
const pool = Buffer.alloc(16 * 256);
let used = pool.length;
let lastMs = -1;
let lastTime = '';

export function newUlid(nowMs: number): string {
  if (nowMs !== lastMs) {
    let time = '';
    for (let n = nowMs, i = 0; i < 10; i++, n = Math.floor(n / 32)) time = CROCKFORD[n % 32] + time;
    lastMs = nowMs;
    lastTime = time;
  }
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  let random = '';
  for (const end = used + 16; used < end; used++) random += CROCKFORD[pool[used]! % 32];
  return lastTime + random;
}

export const newRequestId = (now: Date): string => `gen_${newUlid(now.getTime())}`;
export const newAccountId = (now: Date): string => `acc_${newUlid(now.getTime())}`;
export const newKeyId = (now: Date): string => `key_${newUlid(now.getTime())}`;
export const newCorrelationId = (now: Date): string => newUlid(now.getTime());
