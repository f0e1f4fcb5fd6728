/**
 * What a task costs its store, for bench/pipeline.ts: transactions, statements, round trips and WAL
 * bytes over a window, per task.
 *
 * - Client side, in each server process: bench/http/store-cost-hook.mjs (preloaded, VIDGEN_BENCH_COUNT_SQL)
 *   counts PostgreSQL round trips per statement text, SQLite statements, write commits and WAL frames.
 * - Server side, PostgreSQL: the transactions that wrote, as the transaction ids assigned (the cluster's next id,
 *   `pg_snapshot_xmax(pg_current_snapshot())`: exact at the instant it is read; a transaction that only read takes
 *   no id), rows written from pg_stat_database for the bench's database, and pg_current_wal_lsn() (the id counter and
 *   the WAL are the cluster's: nothing else should write while a bench runs). pg_stat_database's counters lag: a busy
 *   backend reports them at most once a second, an idle one within ten seconds of going idle (PostgreSQL 15's
 *   PGSTAT_MIN_INTERVAL and PGSTAT_IDLE_INTERVAL), so over a window of a second or two its commits were off by as much
 *   as the window held (1.12 and 0.42 a task for two builds sending the same statements, twenty-sixth pass): they are not the
 *   count.
 *   pg_stat_statements is not loaded on this server (shared_preload_libraries is empty), so statements
 *   are counted at the client: every query is one round trip, and as many statements as its text holds
 *   (the store's simple-protocol messages join several with `;\n`).
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

export const STORE_COST_HOOK = fileURLToPath(new URL('./store-cost-hook.mjs', import.meta.url));

interface ProcessCounts {
  seq: number;
  pg: { roundTrips: number; statements: number; begins: number; commits: number; rollbacks: number; byText: Record<string, number> };
  sqlite: { statements: number; writeCommits: number; walFrames: number; walResets: number; walBytes: number; byText: Record<string, number>; byTime?: Record<string, number> };
}

export interface CostSnapshot {
  processes: ProcessCounts[];
  postgres?: { nextXid: bigint; rowsWritten: number; walLsn: string };
}

/** The hook's counts of each process, asked for by SIGUSR2 and read back once written. */
async function processCounts(children: ChildProcess[], dir: string): Promise<ProcessCounts[]> {
  const read = (pid: number): ProcessCounts | undefined => {
    const path = `${dir}/${pid}.json`;
    return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as ProcessCounts) : undefined;
  };
  return Promise.all(
    children.map(async (child) => {
      const before = read(child.pid!)?.seq ?? 0;
      child.kill('SIGUSR2');
      for (let i = 0; i < 200; i++) {
        const now = read(child.pid!);
        if (now && now.seq > before) return now;
        await new Promise((done) => setTimeout(done, 10));
      }
      throw new Error(`process ${child.pid} did not report its store counts (is VIDGEN_BENCH_COUNT_SQL set?)`);
    }),
  );
}

async function postgresStats(url: string): Promise<CostSnapshot['postgres']> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    // Backends report their counts at most once a second, and when idle: let the last ones in.
    await new Promise((done) => setTimeout(done, 1_500));
    const { rows } = await client.query(
      `SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS next_xid, tup_inserted + tup_updated + tup_deleted AS rows_written,
              pg_current_wal_lsn()::text AS lsn
       FROM pg_stat_database WHERE datname = current_database()`,
    );
    // A read: it takes no transaction id of its own.
    return { nextXid: BigInt(rows[0].next_xid), rowsWritten: Number(rows[0].rows_written), walLsn: rows[0].lsn };
  } finally {
    await client.end();
  }
}

export async function costSnapshot(children: ChildProcess[], dir: string, postgresUrl?: string): Promise<CostSnapshot> {
  return { processes: await processCounts(children, dir), postgres: postgresUrl ? await postgresStats(postgresUrl) : undefined };
}

const lsnBytes = (lsn: string) => {
  const [high, low] = lsn.split('/');
  return BigInt(`0x${high}`) * 2n ** 32n + BigInt(`0x${low}`);
};

export interface TaskCost {
  statements: number;
  roundTrips: number | undefined;
  walBytes: number;
  /** PostgreSQL: the transactions that wrote (ids assigned); SQLite: write commits. */
  transactions: number;
  /** PostgreSQL: rows inserted, updated or deleted (pg_stat_database, which lags: see above). */
  rowsWritten: number | undefined;
  /** The statements sent most often, per task; with the µs a task they took to run, where timed (SQLite, VIDGEN_BENCH_TIME_SQL=1). */
  top: [string, number, number?][];
}

/** Per task between two snapshots of the same processes. */
export function costPerTask(before: CostSnapshot, after: CostSnapshot, tasks: number, kind: 'sqlite' | 'postgres'): TaskCost {
  const sum = (pick: (counts: ProcessCounts) => number) =>
    after.processes.reduce((total, counts) => total + pick(counts), 0) - before.processes.reduce((total, counts) => total + pick(counts), 0);
  /** A per-text record of every process, after less before. */
  const difference = (pick: (counts: ProcessCounts) => Record<string, number> | undefined) => {
    const totals = new Map<string, number>();
    for (const [sign, snapshot] of [[1, after], [-1, before]] as const) {
      for (const counts of snapshot.processes) {
        for (const [text, n] of Object.entries(pick(counts) ?? {})) totals.set(text, (totals.get(text) ?? 0) + sign * n);
      }
    }
    return totals;
  };
  const byText = difference((counts) => (kind === 'postgres' ? counts.pg.byText : counts.sqlite.byText));
  const byTime = difference((counts) => (kind === 'sqlite' ? counts.sqlite.byTime : undefined));
  const top = [...byText.entries()]
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 25)
    .map(([text, n]): [string, number, number?] => (byTime.has(text) ? [text, n / tasks, (byTime.get(text)! * 1000) / tasks] : [text, n / tasks]));
  if (kind === 'postgres') {
    const pgBefore = before.postgres!;
    const pgAfter = after.postgres!;
    return {
      transactions: Number(pgAfter.nextXid - pgBefore.nextXid) / tasks,
      statements: sum((c) => c.pg.statements ?? c.pg.roundTrips) / tasks,
      roundTrips: sum((c) => c.pg.roundTrips) / tasks,
      walBytes: Number(lsnBytes(pgAfter.walLsn) - lsnBytes(pgBefore.walLsn)) / tasks,
      rowsWritten: (pgAfter.rowsWritten - pgBefore.rowsWritten) / tasks,
      top,
    };
  }
  return {
    transactions: sum((c) => c.sqlite.writeCommits) / tasks,
    statements: sum((c) => c.sqlite.statements) / tasks,
    roundTrips: undefined,
    walBytes: sum((c) => c.sqlite.walBytes) / tasks,
    rowsWritten: undefined,
    top,
  };
}
