/**
 * How the floors (floor.ts, pipeline-floor.ts) find a request's key: its SHA-256 looked up once, the key's account and
 * id then kept for good (the server's cache keeps them for `VIDGEN_KEY_CACHE_SECONDS` and checks expiry; a floor
 * does the least).
 */
import type Database from 'better-sqlite3';
import { hashApiKey } from '../../src/domain/keys.js';

export interface FloorKey {
  accountId: string;
  id: string;
}

/** The key of an `Authorization: Bearer …` header, when the store has it unrevoked. */
export function floorKeys(db: Database.Database): (authorization: string | undefined) => FloorKey | undefined {
  const find = db.prepare('SELECT account_id AS accountId, id FROM api_keys WHERE hash = ? AND revoked_at IS NULL');
  const kept = new Map<string, FloorKey>();
  return (authorization) => {
    if (!authorization?.startsWith('Bearer ')) return undefined;
    const hash = hashApiKey(authorization.slice(7));
    let key = kept.get(hash);
    if (key === undefined) {
      key = find.get(hash) as FloorKey | undefined;
      if (key === undefined) return undefined;
      kept.set(hash, key);
    }
    return key;
  };
}
