/**
 * Both stores for tests that must hold on each (`describe.each(backendKinds)`):
 * a fresh in-memory SQLite backend, or a PostgreSQL one on a database made for
 * the test file and emptied between tests. The PostgreSQL kind is skipped
 * without a reachable server (a failure under CI=true, see ./postgres.ts).
 */
import type { AppDeps } from '../../src/http/deps.js';
import { openBackend, type Backend } from '../../src/store/open.js';
import type { PgStore } from '../../src/store/postgres/pg-store.js';
import type { Store } from '../../src/store/store.js';
import { harnessOver, silentLogger, type Harness } from '../support.js';
import { createTestDatabase, hasPostgres } from './postgres.js';

export interface OpenedBackend {
  /** An empty backend for the next test (the previous one's data is gone). */
  fresh(): Promise<Backend>;
  /** Closes it (and drops the PostgreSQL database). */
  done(): Promise<void>;
}

export interface BackendKind {
  name: 'SQLite' | 'PostgreSQL';
  skip: boolean;
  open(options?: { leaseMs?: number }): Promise<OpenedBackend>;
}

const PG_TABLES = 'accounts, api_keys, tasks, ledger_entries, idempotency_keys, webhook_deliveries, webhook_attempts, rate_limit_windows, upstream_tasks, upstream_channels';

export const backendKinds: BackendKind[] = [
  {
    name: 'SQLite',
    skip: false,
    async open({ leaseMs = 60_000 } = {}) {
      let current: Backend | undefined;
      return {
        async fresh() {
          await current?.close();
          current = await openBackend({ database: { kind: 'sqlite', path: ':memory:' }, jobLeaseMs: leaseMs }, { logger: silentLogger, listen: false, supervise: true });
          return current;
        },
        done: async () => current?.close(),
      };
    },
  },
  {
    name: 'PostgreSQL',
    skip: !hasPostgres,
    async open({ leaseMs = 60_000 } = {}) {
      const database = await createTestDatabase();
      const backend = await openBackend(
        { database: { kind: 'postgres', url: database.url, poolSize: 20 }, jobLeaseMs: leaseMs },
        { logger: silentLogger, listen: { api: true, worker: true }, supervise: true },
      );
      const pool = (backend.store as PgStore).pool;
      return {
        async fresh() {
          await pool.query(
            `TRUNCATE ${PG_TABLES} CASCADE;
             DELETE FROM pgboss.job WHERE name LIKE 'vidgen-%'; DELETE FROM pgboss.archive WHERE name LIKE 'vidgen-%'`,
          );
          return backend;
        },
        async done() {
          await backend.close();
          await database.drop();
        },
      };
    },
  },
];

/** An app over the backend's store, events and rate limiter. */
export function backendHarness(backend: Backend, overrides: Partial<AppDeps> = {}): Harness<Store> {
  return harnessOver(backend.store, { events: backend.events, rateLimiter: backend.rateLimiter, ...overrides });
}
