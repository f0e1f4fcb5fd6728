/**
 * PostgreSQL for tests: each test file makes its own database and drops it.
 * Without a reachable server the PostgreSQL tests skip themselves — except
 * under CI=true, where a missing PostgreSQL is a failure, not a skip.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The server tests create their databases on (VIDGEN_TEST_POSTGRES_URL, default the local trust-auth server). */
export const POSTGRES_ADMIN_URL = process.env.VIDGEN_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres';

async function reachable(): Promise<boolean> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** Whether to run the PostgreSQL tests; throws under CI when the server is missing. */
export async function postgresAvailable(): Promise<boolean> {
  const ok = await reachable();
  if (!ok && process.env.CI === 'true') throw new Error(`CI=true and PostgreSQL is not reachable at ${POSTGRES_ADMIN_URL}: the PostgreSQL tests must run`);
  return ok;
}

/** Evaluated once per test file at import (top-level await), for `describe.skipIf`. */
export const hasPostgres = await postgresAvailable();

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A fresh, empty database; `drop()` removes it (ending any connection left to it). */
export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `vidgen_test_${randomBytes(6).toString('hex')}`;
  await admin((client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(POSTGRES_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}
