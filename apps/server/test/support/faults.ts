/**
 * Faults injected into the database itself, for tests of what a user sees
 * when the store fails in the middle of a transaction. A trigger raises on
 * one write (SQLite `RAISE(ABORT)`, PostgreSQL `RAISE EXCEPTION`), so the
 * transaction fails after the writes before it. On PostgreSQL a transaction
 * can also be held at that write while its backend is terminated, as a
 * failover or an operator's pg_terminate_backend would do.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import type { Backend } from '../../src/store/open.js';
import type { PgStore } from '../../src/store/postgres/pg-store.js';
import type { SqliteStore } from '../../src/store/sqlite/sqlite-store.js';
import { until } from '../support.js';

/** Where in a transaction the fault strikes. */
export type FaultPoint =
  /** The charge's ledger row, written by a submission after its task (and, on SQLite, its job). */
  | 'charge'
  /** A refund's ledger row: cancelTask and failTask, after the status change and the balance. */
  | 'refund'
  /** The task's generation job: on SQLite its jobs row; on PostgreSQL the task's row, which carries it (pg-generation-lane.ts). */
  | 'generation job'
  /** completeTask's status change to succeeded. */
  | 'task succeeded';

const SQLITE_TRIGGERS: Record<FaultPoint, { table: string; on: string }> = {
  charge: { table: 'ledger_entries', on: "BEFORE INSERT ON ledger_entries WHEN NEW.kind = 'charge'" },
  refund: { table: 'ledger_entries', on: "BEFORE INSERT ON ledger_entries WHEN NEW.kind = 'refund'" },
  'generation job': { table: 'jobs', on: "BEFORE INSERT ON jobs WHEN NEW.kind = 'generate'" },
  'task succeeded': { table: 'tasks', on: "BEFORE UPDATE OF status ON tasks WHEN NEW.status = 'succeeded'" },
};

const PG_TRIGGERS: Record<FaultPoint, { table: string; on: string }> = {
  charge: { table: 'ledger_entries', on: "BEFORE INSERT ON ledger_entries FOR EACH ROW WHEN (NEW.kind = 'charge')" },
  refund: { table: 'ledger_entries', on: "BEFORE INSERT ON ledger_entries FOR EACH ROW WHEN (NEW.kind = 'refund')" },
  'generation job': { table: 'tasks', on: "BEFORE INSERT ON tasks FOR EACH ROW WHEN (NEW.job_state = 'waiting')" },
  'task succeeded': { table: 'tasks', on: "BEFORE UPDATE OF status ON tasks FOR EACH ROW WHEN (NEW.status = 'succeeded')" },
};

/** The advisory lock a held transaction waits for (any constant no other code uses). */
const HOLD_LOCK = 74_210_519;

export interface HeldTransaction {
  /** Resolves once a transaction is waiting at the point. */
  reached(): Promise<void>;
  /** Terminates the waiting transaction's backend (its connection drops mid-transaction). */
  terminate(): Promise<void>;
}

export interface StoreFaults {
  /** Every write at `point` fails inside its transaction until `clear()`. */
  failAt(point: FaultPoint): Promise<void>;
  /** PostgreSQL: the next transaction to write at `point` waits there until terminated or cleared. */
  holdAt(point: FaultPoint): Promise<HeldTransaction>;
  /** Removes every fault; writes go through again. */
  clear(): Promise<void>;
}

export function storeFaults(backend: Backend): StoreFaults {
  const installed = new Set<string>();
  const name = (point: FaultPoint) => `injected_${point.replace(/ /g, '_')}`;

  if ('db' in backend.store) {
    const db = (backend.store as SqliteStore).db;
    return {
      async failAt(point) {
        const { table, on } = SQLITE_TRIGGERS[point];
        db.exec(`CREATE TRIGGER ${name(point)} ${on} BEGIN SELECT RAISE(ABORT, 'injected fault at the ${point}'); END`);
        installed.add(`${name(point)}:${table}`);
      },
      holdAt() {
        throw new Error('SQLite runs each transaction to its end in one call: nothing to hold or terminate');
      },
      async clear() {
        for (const entry of installed) db.exec(`DROP TRIGGER IF EXISTS ${entry.split(':')[0]}`);
        installed.clear();
      },
    };
  }

  const pool = (backend.store as PgStore).pool;
  let holder: pg.Client | undefined;
  const install = async (point: FaultPoint, fn: string) => {
    const { table, on } = PG_TRIGGERS[point];
    await pool.query(`CREATE TRIGGER ${name(point)} ${on} EXECUTE FUNCTION ${fn}('${point}')`);
    installed.add(`${name(point)}:${table}`);
  };
  return {
    async failAt(point) {
      await pool.query(`CREATE OR REPLACE FUNCTION injected_fault() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected fault at the %', TG_ARGV[0]; END $$`);
      await install(point, 'injected_fault');
    },
    async holdAt(point) {
      await pool.query(`CREATE OR REPLACE FUNCTION injected_hold() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_advisory_xact_lock(${HOLD_LOCK}); RETURN NEW; END $$`);
      // A session of its own holds the lock: the transaction reaching the point waits for it.
      holder = new pg.Client({ connectionString: pool.options.connectionString });
      await holder.connect();
      await holder.query('SELECT pg_advisory_lock($1)', [HOLD_LOCK]);
      await install(point, 'injected_hold');
      const waiting = async (): Promise<number | undefined> =>
        (await pool.query(`SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [HOLD_LOCK])).rows[0]?.pid;
      return {
        reached: () => until(async () => (await waiting()) !== undefined),
        async terminate() {
          const pid = await waiting();
          if (pid === undefined) throw new Error('no transaction is held');
          await pool.query('SELECT pg_terminate_backend($1)', [pid]);
        },
      };
    },
    async clear() {
      // The lock first: a transaction still held at the point goes on (dropping its trigger would wait for it).
      await holder?.end();
      holder = undefined;
      for (const entry of installed) {
        const [trigger, table] = entry.split(':');
        await pool.query(`DROP TRIGGER IF EXISTS ${trigger} ON ${table}`);
      }
      installed.clear();
    },
  };
}

/**
 * A real, small file system (tmpfs) that fills up: writes past `size` fail
 * with ENOSPC. Needs the right to mount (root on Linux); undefined where it
 * is missing, so that the tests needing it skip, saying why.
 */
export function mountSmallDisk(sizeBytes: number): { path: string; unmount: () => void } | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return undefined;
  const path = mkdtempSync(join(tmpdir(), 'vidgen-full-disk-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes}`, 'tmpfs', path], { stdio: 'ignore' });
  } catch {
    rmSync(path, { recursive: true, force: true });
    return undefined;
  }
  return {
    path,
    unmount() {
      execFileSync('umount', [path], { stdio: 'ignore' });
      rmSync(path, { recursive: true, force: true });
    },
  };
}
