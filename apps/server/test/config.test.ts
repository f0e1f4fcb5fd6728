import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { ConfigError, loadConfig } from '../src/config.js';
import { openBackend } from '../src/store/open.js';
import type { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

describe('configuration', () => {
  it('has defaults that run on one machine', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.dataDir).toBe(resolve('./data'));
    expect(config.database).toEqual({ kind: 'sqlite', path: resolve('./data/vidgen.db'), cacheMb: 2, mmapMb: 0 });
    expect(config.devBootstrap).toBe(true);
    expect(config.idempotencyTtlMs).toBe(24 * 3600_000);
  });

  it('reads a PostgreSQL URL, its pool size and the role', () => {
    const config = loadConfig({
      VIDGEN_DATABASE_URL: 'postgres://vidgen@db.internal:5432/vidgen',
      VIDGEN_DATABASE_POOL_SIZE: '25',
      VIDGEN_ROLE: 'worker',
      // A worker with local storage must know where the api serves its outputs (test/worker-output-urls.test.ts).
      VIDGEN_PUBLIC_BASE_URL: 'https://vidgen.example.com',
    });
    expect(config.database).toEqual({ kind: 'postgres', url: 'postgres://vidgen@db.internal:5432/vidgen', poolSize: 25, keepPlans: true });
    expect(config.role).toBe('worker');
    expect(loadConfig({}).role).toBe('all');
  });

  it('keeps PostgreSQL plans unless VIDGEN_DATABASE_KEEP_PLANS turns it off, and refuses a value that is not a boolean', () => {
    const database = (value: string) => loadConfig({ VIDGEN_DATABASE_URL: 'postgres://vidgen@db.internal:5432/vidgen', VIDGEN_DATABASE_KEEP_PLANS: value }).database;
    expect(database('false')).toMatchObject({ keepPlans: false });
    expect(database('true')).toMatchObject({ keepPlans: true });
    expect(() => database('sometimes')).toThrow(/VIDGEN_DATABASE_KEEP_PLANS/);
  });

  it('spaces claims under load by 25 ms on PostgreSQL and not at all on SQLite unless VIDGEN_CLAIM_INTERVAL_MS says otherwise', () => {
    const postgres = { VIDGEN_DATABASE_URL: 'postgres://vidgen@db.internal:5432/vidgen' };
    expect(loadConfig(postgres).claimIntervalMs).toBe(25);
    expect(loadConfig({}).claimIntervalMs).toBe(0);
    expect(loadConfig({ ...postgres, VIDGEN_CLAIM_INTERVAL_MS: '0' }).claimIntervalMs).toBe(0);
    expect(loadConfig({ VIDGEN_CLAIM_INTERVAL_MS: '10' }).claimIntervalMs).toBe(10);
  });

  it('gives SQLite the page cache VIDGEN_SQLITE_CACHE_MB asks for, and the store opens with it', async () => {
    expect(loadConfig({ VIDGEN_SQLITE_CACHE_MB: '128' }).database).toMatchObject({ kind: 'sqlite', cacheMb: 128 });
    expect(loadConfig({ VIDGEN_DATABASE_URL: 'sqlite::memory:', VIDGEN_SQLITE_CACHE_MB: '16' }).database).toEqual({ kind: 'sqlite', path: ':memory:', cacheMb: 16, mmapMb: 0 });
    const cacheOf = async (env: Record<string, string>) => {
      const backend = await openBackend(loadConfig({ VIDGEN_DATABASE_URL: 'sqlite::memory:', ...env }), { logger: pino({ level: 'silent' }), listen: false, supervise: false });
      try {
        // Negative: KiB.
        return (backend.store as SqliteStore).db.pragma('cache_size', { simple: true });
      } finally {
        await backend.close();
      }
    };
    expect(await cacheOf({ VIDGEN_SQLITE_CACHE_MB: '128' })).toBe(-128 * 1024);
    expect(await cacheOf({})).toBe(-2 * 1024);
  });

  it('maps as much of the SQLite file as VIDGEN_SQLITE_MMAP_MB asks for (none by default), and the store opens with it', async () => {
    expect(loadConfig({}).database).toMatchObject({ kind: 'sqlite', mmapMb: 0 });
    expect(loadConfig({ VIDGEN_SQLITE_MMAP_MB: '1024' }).database).toMatchObject({ kind: 'sqlite', mmapMb: 1024 });
    const dir = mkdtempSync(join(tmpdir(), 'vidgen-mmap-'));
    const mmapOf = async (env: Record<string, string>) => {
      const backend = await openBackend(loadConfig({ VIDGEN_DATABASE_URL: `sqlite:${join(dir, `${Object.keys(env).length}.db`)}`, ...env }), {
        logger: pino({ level: 'silent' }),
        listen: false,
        supervise: false,
      });
      try {
        return (backend.store as SqliteStore).db.pragma('mmap_size', { simple: true });
      } finally {
        await backend.close();
      }
    };
    try {
      expect(await mmapOf({ VIDGEN_SQLITE_MMAP_MB: '256' })).toBe(256 * 1024 * 1024);
      expect(await mmapOf({})).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('turns the development bootstrap off in production', () => {
    expect(loadConfig({ NODE_ENV: 'production' }).devBootstrap).toBe(false);
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT must be a whole number/],
    [{ PORT: '70000' }, /PORT/],
    [{ VIDGEN_DATABASE_URL: 'mysql://x' }, /must start with sqlite: or postgres:\/\//],
    [{ VIDGEN_DATABASE_URL: 'mysql://user:secret@host/x' }, /mysql:\/\/…@host/],
    [{ VIDGEN_DATABASE_URL: 'postgres://localhost/x', VIDGEN_DATABASE_POOL_SIZE: '0' }, /VIDGEN_DATABASE_POOL_SIZE must be a whole number from 1 to 500/],
    [{ VIDGEN_SQLITE_CACHE_MB: '0' }, /VIDGEN_SQLITE_CACHE_MB must be a whole number from 1 to 65536/],
    [{ VIDGEN_SQLITE_CACHE_MB: 'lots' }, /VIDGEN_SQLITE_CACHE_MB must be a whole number/],
    [{ VIDGEN_SQLITE_MMAP_MB: '4096' }, /VIDGEN_SQLITE_MMAP_MB must be a whole number from 0 to 2047/],
    [{ VIDGEN_SQLITE_MMAP_MB: '-1' }, /VIDGEN_SQLITE_MMAP_MB must be a whole number/],
    [{ VIDGEN_ROLE: 'api' }, /needs PostgreSQL/],
    [{ VIDGEN_ROLE: 'scheduler', VIDGEN_DATABASE_URL: 'postgres://localhost/x' }, /VIDGEN_ROLE \(or --role\) must be one of all, api, worker/],
    [{ VIDGEN_PRICES: '{"vidgen-9":{}}' }, /VIDGEN_PRICES: unknown model/],
    [{ VIDGEN_LOG_LEVEL: 'loud' }, /VIDGEN_LOG_LEVEL/],
    [{ VIDGEN_DEV_BOOTSTRAP: 'maybe' }, /VIDGEN_DEV_BOOTSTRAP must be true or false/],
    [{ VIDGEN_CLAIM_INTERVAL_MS: '5000' }, /VIDGEN_CLAIM_INTERVAL_MS must be a whole number from 0 to 1000/],
  ])('refuses %o with a clear message', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
