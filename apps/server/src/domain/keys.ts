/**
 * API keys: `vg_live_` or `vg_test_`, 32 random base62 characters, then a
 * 6-character base62 CRC32 of everything before it. The checksum lets a typo
 * or a truncated key be refused without a database lookup; only the SHA-256
 * of a key is ever stored.
 */
import { hash, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { components } from '@vidgen/types';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const RANDOM_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = /^vg_(live|test)_([0-9A-Za-z]{38})$/;

export type KeyMode = components['schemas']['ApiKeyMode'];
export type Scope = components['schemas']['Scope'];
/** Every scope the spec defines (`Scope`), in its order: a scope added there fails the typecheck here until listed. */
export const SCOPES = ['tasks:read', 'tasks:write', 'keys:manage', 'webhooks:manage'] as const satisfies readonly Scope[];
type Unlisted = Exclude<Scope, (typeof SCOPES)[number]>;
const everyScopeListed: Unlisted extends never ? true : false = true;
void everyScopeListed;

function toBase62(value: number, width: number): string {
  let out = '';
  for (let n = value; out.length < width; n = Math.floor(n / 62)) out = BASE62[n % 62] + out;
  return out;
}

function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length)) {
      // 248 = 4 × 62: rejecting the rest keeps every character equally likely.
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

const checksum = (body: string) => toBase62(crc32(body), CHECKSUM_LENGTH);

export function generateApiKey(mode: KeyMode): string {
  const body = `vg_${mode}_${randomBase62(RANDOM_LENGTH)}`;
  return `${body}${checksum(body)}`;
}

/** Whether the text has the shape and checksum of a key (says nothing of whether it exists). */
export function isWellFormedApiKey(key: string): boolean {
  const match = KEY_PATTERN.exec(key);
  if (!match) return false;
  const body = key.slice(0, -CHECKSUM_LENGTH);
  return checksum(body) === key.slice(-CHECKSUM_LENGTH);
}

/** Once per authenticated request: the one-shot `hash` (no Hash object), a quarter of `createHash`'s time. */
export const hashApiKey = (key: string): string => hash('sha256', key, 'hex');

/**
 * Whether a stored key hash equals the one computed from a presented key, in
 * constant time. The secret itself is never compared at all: the store is
 * searched by its SHA-256, so an index lookup's timing can at most reveal a
 * prefix of the hash of a guess, which says nothing about any real key. This
 * final check makes authentication hold on its own, whatever a store's lookup
 * does (collation, truncated index), without an early-exit string compare.
 */
export function sameApiKeyHash(stored: string, computed: string): boolean {
  const a = Buffer.from(stored, 'hex');
  const b = Buffer.from(computed, 'hex');
  return a.length === 32 && b.length === 32 && timingSafeEqual(a, b);
}

/** A short, non-secret label to show in listings: the prefix and the last 4 characters. */
export const apiKeyHint = (key: string): string => `${key.slice(0, 8)}…${key.slice(-4)}`;

export const isScope = (value: string): value is Scope => (SCOPES as readonly string[]).includes(value);
