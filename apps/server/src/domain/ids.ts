/** Task ids: `gen_` + a ULID (48-bit milliseconds, 80 random bits, Crockford base32). */
import { randomFillSync } from 'node:crypto';

/** Crockford's base32 alphabet, as character codes. */
const CROCKFORD = Array.from('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (c) => c.charCodeAt(0));

/**
 * The random part comes from a pool of CSPRNG bytes refilled 256 ids at a
 * time: every request makes an id (its correlation id), and a randomBytes()
 * call of its own per id cost more than the rest of the id. The id is made by
 * one `String.fromCharCode` of its 26 codes (the time's ten kept for the
 * millisecond), a flat string at once: appending a character at a time made
 * 26 strings and took three times as long (≈ 240 against 80 ns; BENCHMARKS.md,
 * fifteenth pass).
 */
const pool = Buffer.alloc(16 * 256);
let used = pool.length;
let lastMs = -1;
const time = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

export function newUlid(nowMs: number): string {
  if (nowMs !== lastMs) {
    for (let n = nowMs, i = 9; i >= 0; i--, n = Math.floor(n / 32)) time[i] = CROCKFORD[n % 32]!;
    lastMs = nowMs;
  }
  if (used === pool.length) {
    randomFillSync(pool);
    used = 0;
  }
  const p = pool;
  const u = used;
  used += 16;
  const c = CROCKFORD;
  const t = time;
  // A byte's low five bits: each of the 32 symbols equally likely.
  return String.fromCharCode(
    t[0]!, t[1]!, t[2]!, t[3]!, t[4]!, t[5]!, t[6]!, t[7]!, t[8]!, t[9]!,
    c[p[u]! & 31]!, c[p[u + 1]! & 31]!, c[p[u + 2]! & 31]!, c[p[u + 3]! & 31]!, c[p[u + 4]! & 31]!, c[p[u + 5]! & 31]!, c[p[u + 6]! & 31]!, c[p[u + 7]! & 31]!,
    c[p[u + 8]! & 31]!, c[p[u + 9]! & 31]!, c[p[u + 10]! & 31]!, c[p[u + 11]! & 31]!, c[p[u + 12]! & 31]!, c[p[u + 13]! & 31]!, c[p[u + 14]! & 31]!, c[p[u + 15]! & 31]!,
  );
}

export const newRequestId = (now: Date): string => `gen_${newUlid(now.getTime())}`;
export const newAccountId = (now: Date): string => `acc_${newUlid(now.getTime())}`;
export const newKeyId = (now: Date): string => `key_${newUlid(now.getTime())}`;
export const newCorrelationId = (now: Date): string => newUlid(now.getTime());
