/**
 * What bench/upstream.ts needs for its PostgreSQL topology (`--store postgres --api N --workers M`):
 * worker processes (which serve no HTTP: started once they print `worker started`), a tagging proxy
 * in front of the BytePlus stand-in per worker (so each list request is known by the worker that sent
 * it), PostgreSQL's own counters for the bench database (pg_stat_database, pg_stat_user_tables, the
 * WAL position) and the CPU of the database's backends (from /proc).
 */
import { Agent, createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { startNodeProcess, type NodeService } from './children.js';
import { cpuSecondsOf } from './cpu-cost.js';

/** utime + stime of a live process, in seconds (NaN when it is gone). */
function cpuSecondsOrNaN(pid: number): number {
  try {
    return cpuSecondsOf(pid);
  } catch {
    return NaN;
  }
}

/**
 * `node [nodeArgs] --import tsx <script> --role worker` from apps/server; resolves once it prints
 * `worker started` (a worker listens on nothing), rejects if it exits first. `url` is ''.
 */
export function startNodeWorker(script: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<NodeService> {
  return startNodeProcess(script, ['--role', 'worker'], env, nodeArgs, (output) => (/worker started/.test(output) ? '' : undefined), 'starting');
}

/** One request through a tagging proxy: when it arrived, its method and path, and the ids of a list. */
export interface ProxiedRequest {
  at: number;
  method: string;
  path: string;
  ids: string[];
}

export interface TaggingProxy {
  /** The proxy's address with the target's path, e.g. `http://127.0.0.1:<port>/api/v3`. */
  baseUrl: string;
  requests: ProxiedRequest[];
  close(): Promise<void>;
}

/**
 * A loopback HTTP proxy to `targetBaseUrl` (the stand-in) that records every request it forwards,
 * so that the requests of one process can be told from another's. Bodies and answers are piped
 * unchanged; the download URLs the stand-in hands out still point at the stand-in itself.
 */
export async function startTaggingProxy(targetBaseUrl: string): Promise<TaggingProxy> {
  const target = new URL(targetBaseUrl);
  // A connection per request to the stand-in: a kept-alive one may be closed by the stand-in (Node's 5 s keep-alive timeout) as
  // the proxy reuses it, and a create reset that way is a lost create (never sent again), an artefact of the proxy.
  const agent = new Agent({ keepAlive: false });
  const requests: ProxiedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://proxy');
    requests.push({ at: Date.now(), method: req.method ?? 'GET', path: url.pathname, ids: url.searchParams.getAll('filter.task_ids') });
    const upstream = httpRequest(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host }, agent },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}${target.pathname}`,
    requests,
    close: () =>
      new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
        agent.destroy();
      }),
  };
}

/** pg_stat_database's counters of one database, the cluster's WAL position, and the time they were read. */
export interface PgCounters {
  at: number;
  xactCommit: number;
  xactRollback: number;
  tupReturned: number;
  tupFetched: number;
  tupInserted: number;
  tupUpdated: number;
  tupDeleted: number;
  blksRead: number;
  blksHit: number;
  walBytes: number;
  /** Per table of the bench database: scans and rows. */
  tables: Record<string, { seqScan: number; seqTupRead: number; idxScan: number; idxTupFetch: number; ins: number; upd: number; hotUpd: number; del: number }>;
  /** CPU seconds of each backend connected to the bench database, by pid. */
  backendCpu: Map<number, number>;
}

export interface PgWatch {
  read(): Promise<PgCounters>;
  /** The bench database's backends waiting now: `wait_event_type:wait_event | the query's start`, one entry per backend. */
  activity(): Promise<string[]>;
  /** Tasks not terminal or without an upstream id (at most 20): their rows, their upstream rows and their jobs, for a diagnosis. */
  notCreated(): Promise<Record<string, unknown>[]>;
  /** Every task's id, status and completedAt (ISO), from the bench database. */
  tasks(): Promise<{ id: string; status: string; completedAt: string | null }[]>;
  close(): Promise<void>;
}

/**
 * Reads the bench database's counters: pg_stat_database and the WAL position from a connection to
 * the admin database (so the reading itself does not count against the bench database), and
 * pg_stat_user_tables from one connection to the bench database (two queries per reading).
 */
export async function watchPostgres(adminUrl: string, databaseUrl: string): Promise<PgWatch> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: adminUrl });
  const bench = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await bench.connect();
  const n = (value: unknown) => Number(value ?? 0);
  return {
    async read() {
      await admin.query('SELECT pg_stat_clear_snapshot()');
      const db = (
        await admin.query(
          `SELECT xact_commit, xact_rollback, tup_returned, tup_fetched, tup_inserted, tup_updated, tup_deleted, blks_read, blks_hit,
                  pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS wal
           FROM pg_stat_database WHERE datname = $1`,
          [name],
        )
      ).rows[0] as Record<string, unknown>;
      const pids = (await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = $1', [name])).rows.map((row: { pid: number }) => row.pid);
      const backendCpu = new Map(pids.map((pid) => [pid, cpuSecondsOrNaN(pid)] as [number, number]).filter(([, cpu]) => Number.isFinite(cpu)));
      const tables: PgCounters['tables'] = {};
      await bench.query('SELECT pg_stat_clear_snapshot()');
      for (const row of (
        await bench.query(
          `SELECT schemaname || '.' || relname AS name, seq_scan, seq_tup_read, idx_scan, idx_tup_fetch, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
           FROM pg_stat_user_tables`,
        )
      ).rows as Record<string, unknown>[]) {
        tables[String(row.name)] = {
          seqScan: n(row.seq_scan),
          seqTupRead: n(row.seq_tup_read),
          idxScan: n(row.idx_scan),
          idxTupFetch: n(row.idx_tup_fetch),
          ins: n(row.n_tup_ins),
          upd: n(row.n_tup_upd),
          hotUpd: n(row.n_tup_hot_upd),
          del: n(row.n_tup_del),
        };
      }
      return {
        at: Date.now(),
        xactCommit: n(db.xact_commit),
        xactRollback: n(db.xact_rollback),
        tupReturned: n(db.tup_returned),
        tupFetched: n(db.tup_fetched),
        tupInserted: n(db.tup_inserted),
        tupUpdated: n(db.tup_updated),
        tupDeleted: n(db.tup_deleted),
        blksRead: n(db.blks_read),
        blksHit: n(db.blks_hit),
        walBytes: n(db.wal),
        tables,
        backendCpu,
      };
    },
    async activity() {
      const rows = (
        await admin.query(
          `SELECT wait_event_type || ':' || wait_event AS event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS query
           FROM pg_stat_activity WHERE datname = $1 AND state = 'active' AND wait_event IS NOT NULL AND pid <> pg_backend_pid()`,
          [name],
        )
      ).rows as { event: string; query: string }[];
      return rows.map((row) => `${row.event} | ${row.query}`);
    },
    async notCreated() {
      const rows = (
        await bench.query(
          `SELECT t.id, t.status, t.error_code, t.error_message, t.created_at, t.updated_at, u.state, u.upstream_id, u.last_error, u.lease_until, u.next_check_at
           FROM tasks t LEFT JOIN upstream_tasks u ON u.task_id = t.id
           WHERE u.upstream_id IS NULL OR t.status NOT IN ('succeeded', 'failed', 'cancelled') LIMIT 20`,
        )
      ).rows as Record<string, unknown>[];
      for (const row of rows) {
        try {
          row.jobs = (await bench.query(`SELECT name, state, retry_count, start_after, started_on, completed_on, output FROM pgboss.job WHERE data->>'taskId' = $1`, [row.id])).rows;
        } catch (error) {
          row.jobs = String(error);
        }
      }
      return rows;
    },
    async tasks() {
      const rows = (await bench.query('SELECT id, status, completed_at FROM tasks')).rows as { id: string; status: string; completed_at: Date | null }[];
      return rows.map((row) => ({ id: row.id, status: row.status, completedAt: row.completed_at ? row.completed_at.toISOString() : null }));
    },
    async close() {
      await admin.end().catch(() => {});
      await bench.end().catch(() => {});
    },
  };
}

/** Rates between two readings: per second. */
export interface PgLoad {
  seconds: number;
  xactPerSecond: number;
  rollbacksPerSecond: number;
  returnedPerSecond: number;
  fetchedPerSecond: number;
  insertedPerSecond: number;
  updatedPerSecond: number;
  deletedPerSecond: number;
  walBytesPerSecond: number;
  /** Blocks read from outside PostgreSQL's buffers per second (cache misses). */
  blocksReadPerSecond: number;
  /** CPU of the database's backends present at both readings, as a share of one core. */
  backendCpuShare: number;
  /** The tables with the most rows read or written, per second. */
  tables: { name: string; seqScans: number; seqRows: number; idxScans: number; idxRows: number; ins: number; upd: number; hotUpd: number; del: number }[];
}

export function pgLoadBetween(a: PgCounters, b: PgCounters): PgLoad {
  const seconds = (b.at - a.at) / 1000;
  const rate = (x: number, y: number) => (seconds > 0 ? (y - x) / seconds : NaN);
  let backend = 0;
  for (const [pid, cpu] of b.backendCpu) {
    const before = a.backendCpu.get(pid);
    if (before !== undefined) backend += cpu - before;
  }
  const tables = Object.entries(b.tables)
    .map(([name, t]) => {
      const s = a.tables[name] ?? { seqScan: 0, seqTupRead: 0, idxScan: 0, idxTupFetch: 0, ins: 0, upd: 0, hotUpd: 0, del: 0 };
      return {
        name,
        seqScans: rate(s.seqScan, t.seqScan),
        seqRows: rate(s.seqTupRead, t.seqTupRead),
        idxScans: rate(s.idxScan, t.idxScan),
        idxRows: rate(s.idxTupFetch, t.idxTupFetch),
        ins: rate(s.ins, t.ins),
        upd: rate(s.upd, t.upd),
        hotUpd: rate(s.hotUpd, t.hotUpd),
        del: rate(s.del, t.del),
      };
    })
    .filter((t) => t.seqRows + t.idxRows + t.ins + t.upd + t.del + t.seqScans + t.idxScans > 0)
    .sort((x, y) => y.seqRows + y.idxRows + y.ins + y.upd + y.del - (x.seqRows + x.idxRows + x.ins + x.upd + x.del));
  return {
    seconds,
    xactPerSecond: rate(a.xactCommit, b.xactCommit),
    rollbacksPerSecond: rate(a.xactRollback, b.xactRollback),
    returnedPerSecond: rate(a.tupReturned, b.tupReturned),
    fetchedPerSecond: rate(a.tupFetched, b.tupFetched),
    insertedPerSecond: rate(a.tupInserted, b.tupInserted),
    updatedPerSecond: rate(a.tupUpdated, b.tupUpdated),
    deletedPerSecond: rate(a.tupDeleted, b.tupDeleted),
    walBytesPerSecond: rate(a.walBytes, b.walBytes),
    blocksReadPerSecond: rate(a.blksRead, b.blksRead),
    backendCpuShare: seconds > 0 ? backend / seconds : NaN,
    tables,
  };
}
