/** Task ids: `gen_` + a ULID (48-bit milliseconds, 80 random bits, Crockford base32). */
import { randomBytes } from 'node:crypto';

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function newUlid(nowMs: number): string {
  let time = '';
  for (let n = nowMs, i = 0; i < 10; i++, n = Math.floor(n / 32)) time = CROCKFORD[n % 32] + time;
  let random = '';
  for (const byte of randomBytes(16)) random += CROCKFORD[byte % 32];
  return time + random;
}

export const newRequestId = (now: Date): string => `gen_${newUlid(now.getTime())}`;
export const newAccountId = (now: Date): string => `acc_${newUlid(now.getTime())}`;
export const newKeyId = (now: Date): string => `key_${newUlid(now.getTime())}`;
export const newCorrelationId = (now: Date): string => newUlid(now.getTime());
