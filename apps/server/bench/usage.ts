/**
 * Account usage: the acceptance target "GET /api/open/v1/account/usage (90 days of daily buckets, also
 * groupBy=model) answers with p99 ≤ 50 ms on an account with 1,000,000 tasks".
 *
 *   pnpm bench:usage [--quick] [--write] [--tasks 1000000] [--seconds 10] [--connections 50]
 *                    [--cpu-prof [--cpu-prof-dir DIR]] [--note TEXT]
 *
 * - A SQLite store in a temporary directory with one account and its key (the operator CLI), one real
 *   succeeded task made through the server (instant provider), then `--tasks` tasks written directly to
 *   SQLite (bench/http/seed.ts's way: copies of the real task's row and job): created over the 100 days
 *   before it, across the three models (durations and resolutions of each model's rules, priced with the
 *   default price table), 90 % succeeded, 6 % failed (`timeout`), 4 % cancelled, each ending seconds to
 *   minutes after its creation. The ledger as the live transactions write it: a charge at the creation,
 *   a refund at the end of each failed or cancelled task, in time order, each entry with the balance it
 *   left, the account's balance moved by the same amounts.
 * - usage_hourly from the tasks and the ledger with the migration's own backfill statements
 *   (0008_account_api.sql, read from the file), usage_daily from it likewise (0009), then checked: the rows the live transactions wrote for
 *   the real task equal the backfill's, every column's total equals the ledger's and the tasks', and a
 *   sample of hours recomputed by another SQL query matches row for row.
 * - One server (`node dist/main.js --role all`, SQLite, rate limits off, no worker), each request kind
 *   warmed up, then wrk (one thread, 50 connections, 10 s) and once at one connection: `granularity=day`
 *   over 90 days, the same with `groupBy=model`, `granularity=hour` over 7 days. Each answer is checked
 *   against the ledger and the tasks of its range before the runs.
 * - Judged: p99 ≤ 50 ms of one answer (1 connection) for the daily report and its groupBy=model, no errors
 *   at either load (the hourly one is reported; at 50 connections the p99 is the saturated server's queue). Exits 1 naming each target missed (or the route answering anything but 200).
 *
 * `--quick`: 100,000 tasks, 3 s runs. `--write` replaces (or inserts, before `## Targets`) the section
 * `## Account usage` of BENCHMARKS.md and leaves the rest of the file as it is. `pnpm bench` runs this
 * too (bench/http.ts, section `usage`), through `runUsageBench`.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { writeSection } from './http/sections.js';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { DEFAULT_PRICES, MODEL_IDS, MODEL_RULES, priceOf, type ModelId, type Resolution } from '../src/domain/catalog.js';
import { newUlid } from '../src/domain/ids.js';
import { TASK_STATES } from '../src/domain/states.js';
import { stopServerProcess } from '../test/support/pipeline-processes.js';
import { memoryOf, removeOnExit, runCli, SERVER_ROOT, startInstantServer, type NodeService } from './http/children.js';
import { cpuSecondsOf } from './http/cpu-cost.js';
import { mulberry32 } from './http/random.js';
import { describeMachine, markdownTable, median, type Machine, type Target } from './http/report.js';
import { readTemplate, selectRow } from './http/seed.js';
import { runWrk, SUBMIT_BODY, writeStaticScript, wrkVersion, type Load, type WrkResult } from './http/wrk.js';

export const SECTION_HEADING = '## Account usage';
const USAGE = '/api/open/v1/account/usage';
const GENERATIONS = '/api/open/v1/video/generations';
const MIGRATION = join(SERVER_ROOT, 'src/store/sqlite/migrations/0008_account_api.sql');
/** usage_daily's migration: its backfill sums usage_hourly by day. */
const DAILY_MIGRATION = join(SERVER_ROOT, 'src/store/sqlite/migrations/0009_usage_daily.sql');
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** The seeded tasks' creation times span this many days before the real task. */
const SPREAD_DAYS = 100;
const BATCH = 50_000;
const RESOLUTIONS: Resolution[] = ['480p', '720p', '1080p'];
/** The mix of the seeded tasks. */
const MODEL_SHARES: [ModelId, number][] = [['vidgen-2.0-fast', 0.5], ['vidgen-2.0', 0.3], ['vidgen-1.5-pro', 0.2]];
const STATUS_SHARES = { succeeded: 0.9, failed: 0.06, cancelled: 0.04 };
/** The target: p99 of one answer (1 connection). */
const TARGET_P99_MS = 50;
/** Hours recomputed by the sample check. */
const SAMPLE_HOURS = 48;

export interface UsageBenchOptions {
  tasks: number;
  load: Load;
  warmupSeconds: number;
  /** Node options of the server (e.g. --cpu-prof). */
  nodeArgs?: string[];
  log?: (line: string) => void;
}

type Kind = 'day' | 'dayByModel' | 'hour';

export interface UsageScenario {
  kind: Kind;
  name: string;
  path: string;
  /** Entries in `data` of the answer. */
  buckets: number;
  /** usage_hourly rows of the range. */
  rows: number;
  answerBytes: number;
  /** What the answer was checked against (the ledger and tasks of its range). */
  check: string;
  /** Judged against the target (the others are reported). */
  judged: boolean;
  loaded: WrkResult;
  alone: WrkResult;
  /** The server's CPU time (user + system) per answer of the loaded run, ms. */
  cpuMsPerRequest: number;
  rssAfterMb: number;
}

export interface UsageBenchResult {
  options: Omit<UsageBenchOptions, 'log' | 'nodeArgs'>;
  machine: Machine;
  date: Date;
  /** The route's status for the first request (200 when it exists). */
  routeStatus: number;
  routeAnswer: string;
  seeding: {
    tasks: number;
    statuses: Record<string, number>;
    models: Record<string, number>;
    ledgerEntries: number;
    usageRows: number;
    firstAt: Date;
    lastAt: Date;
    writeSeconds: number;
    ledgerSeconds: number;
    usageSeconds: number;
    checks: string[];
  };
  scenarios: UsageScenario[];
  /** `/metrics` scraped on the same store (absent when the route was not measured). */
  scrape?: ScrapeResult;
  rss: { startMb: number; endMb: number; peakMb: number };
}

/** `/metrics` scraped on the store of 1,000,000 tasks: how long, and what a scrape read before (every task). */
export interface ScrapeResult {
  scrapes: number;
  medianMs: number;
  maxMs: number;
  /** The statement the scrape ran until 2026-11-28 (`SELECT status, count(*) FROM tasks GROUP BY status`), timed on the same file. */
  fullCountMs: number;
  check: string;
}

const SCRAPES = 20;

/**
 * `SCRAPES` scrapes of `/metrics` one after another (the server otherwise idle), then `vidgen_tasks` checked against the
 * tasks counted by status, and that count, which is what every scrape did before, timed on the same file (median of 3).
 */
async function measureScrape(baseUrl: string, dbPath: string): Promise<ScrapeResult> {
  const times: number[] = [];
  let text = '';
  for (let i = 0; i < SCRAPES; i++) {
    const started = performance.now();
    const answer = await fetch(`${baseUrl}/metrics`);
    text = await answer.text();
    if (answer.status !== 200) throw new Error(`/metrics answered ${answer.status}: ${text.slice(0, 200)}`);
    times.push(performance.now() - started);
  }
  const db = new Database(dbPath, { readonly: true });
  let truth: { status: string; count: number }[] = [];
  const fullTimes: number[] = [];
  try {
    const counting = db.prepare('SELECT status, count(*) AS count FROM tasks GROUP BY status');
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      truth = counting.all() as typeof truth;
      fullTimes.push(performance.now() - started);
    }
  } finally {
    db.close();
  }
  const shown = (status: string) => Number(new RegExp(`^vidgen_tasks\\{status="${status}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
  const statuses = Object.values(TASK_STATES);
  const wrong = statuses.filter((status) => shown(status) !== (truth.find((row) => row.status === status)?.count ?? 0));
  if (wrong.length) throw new Error(`/metrics: vidgen_tasks differs from the tasks counted by status for ${wrong.map((status) => `${status} (${shown(status)})`).join(', ')}`);
  const total = truth.reduce((sum, row) => sum + row.count, 0);
  return {
    scrapes: SCRAPES,
    medianMs: median(times),
    maxMs: Math.max(...times),
    fullCountMs: median(fullTimes),
    check: `vidgen_tasks equals the ${total.toLocaleString('en-US')} tasks counted by status`,
  };
}


const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** utime + stime of a live process, in seconds (clock ticks of 10 ms). */

const stop = (child: NodeService['child']) => stopServerProcess(child, 15_000);

/** Submits one task through a server with a worker and waits (long poll) until it has succeeded. */
/** The built server on the store: quiet, a port from the OS, every model on the instant provider, no limits. */
const startServer = (env: Record<string, string>, options: { worker: boolean; nodeArgs?: string[] }) => startInstantServer('dist/main.js', env, options);

async function makeSucceededTask(env: Record<string, string>, key: string): Promise<string> {
  const server = await startServer(env, { worker: true });
  try {
    const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
    const submitted = await fetch(`${server.url}${GENERATIONS}`, { method: 'POST', headers, body: SUBMIT_BODY });
    if (submitted.status !== 202) throw new Error(`submit answered ${submitted.status}: ${await submitted.text()}`);
    const { requestId } = (await submitted.json()) as { requestId: string };
    for (let tries = 0; tries < 10; tries++) {
      const task = (await (await fetch(`${server.url}${GENERATIONS}/${requestId}?wait=10`, { headers })).json()) as { status: string };
      if (task.status === 'succeeded') return requestId;
      if (task.status !== 'queued' && task.status !== 'processing') throw new Error(`the template task ended ${task.status}`);
    }
    throw new Error('the template task did not succeed within 100 s');
  } finally {
    await stop(server.child);
  }
}

type Row = Record<string, unknown>;
const STATUSES = ['succeeded', 'failed', 'cancelled'] as const;

/**
 * Writes `count` tasks on the account, created over the SPREAD_DAYS before `newestAt`, with their jobs,
 * and then their ledger entries in time order (charges at creation, refunds at the end of failed and
 * cancelled tasks), each with the balance it left; moves the account's balance by the same amount.
 */
function seedUsageTasks(dbPath: string, input: { templateId: string; accountId: string; count: number; newestAt: number }) {
  const { task, job } = readTemplate(dbPath, input.templateId);
  const db = new Database(dbPath);
  try {
    db.pragma('busy_timeout = 30000');
    const started = performance.now();
    const insertOf = (table: string, row: Row, skip: string[]) => {
      const columns = Object.keys(row).filter((column) => !skip.includes(column));
      return db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`);
    };
    const insertTask = insertOf('tasks', task, []);
    const insertJob = job ? insertOf('jobs', job, ['id']) : undefined;
    const next = mulberry32(20261124);
    const n = input.count;
    const span = SPREAD_DAYS * DAY_MS;
    const oldest = input.newestAt - span;
    const ids: string[] = new Array(n);
    const createdAt = new Float64Array(n);
    const endedAt = new Float64Array(n);
    const credits = new Int32Array(n);
    const status = new Uint8Array(n);
    const statuses: Record<string, number> = { succeeded: 0, failed: 0, cancelled: 0 };
    const models: Record<string, number> = {};
    const pick = <T>(items: readonly T[]) => items[Math.floor(next() * items.length)]!;
    const templateCreated = task.created_at as number;

    const writeBatch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        // Evenly over the span, a little jitter, increasing.
        const at = Math.floor(oldest + (i * span) / n + next() * (span / n / 2));
        const u = next();
        const model = MODEL_SHARES.find((_, k) => u < MODEL_SHARES.slice(0, k + 1).reduce((sum, [, share]) => sum + share, 0))?.[0] ?? 'vidgen-2.0-fast';
        const duration = pick(MODEL_RULES[model].durations);
        const resolution = pick(RESOLUTIONS);
        const charged = priceOf(DEFAULT_PRICES, model, resolution, duration);
        const v = next();
        const s = v < STATUS_SHARES.succeeded ? 0 : v < STATUS_SHARES.succeeded + STATUS_SHARES.failed ? 1 : 2;
        // Ends: a render of 20 s to 5 min; a failure at 1 to 15 min; a cancel after 1 s to 2 min.
        const after = s === 0 ? 20_000 + next() * 280_000 : s === 1 ? 60_000 + next() * 840_000 : 1000 + next() * 119_000;
        const end = Math.floor(at + after);
        const id = `gen_${newUlid(at)}`;
        const name = STATUSES[s];
        ids[i] = id;
        createdAt[i] = at;
        endedAt[i] = end;
        credits[i] = charged;
        status[i] = s;
        statuses[name]! += 1;
        models[model] = (models[model] ?? 0) + 1;
        insertTask.run({
          ...task,
          id,
          account_id: input.accountId,
          status: name,
          model,
          duration,
          resolution,
          credits_charged: charged,
          credits_refunded: s === 0 ? 0 : charged,
          output_url: s === 0 ? task.output_url : null,
          output_key: s === 0 ? (task.output_key ?? null) : null,
          output_expires_at: s === 0 ? task.output_expires_at : null,
          error_code: s === 1 ? 'timeout' : null,
          error_message: s === 1 ? 'no result within the deadline' : null,
          created_at: at,
          updated_at: end,
          completed_at: end,
        });
        if (insertJob && job) {
          const delta = at - templateCreated;
          insertJob.run({
            ...job,
            task_id: id,
            state: s === 1 ? 'dead' : 'done',
            last_error: s === 1 ? 'timeout: no result within the deadline' : job.last_error,
            created_at: at,
            updated_at: end,
            run_at: typeof job.run_at === 'number' ? job.run_at + delta : job.run_at,
          });
        }
      }
    });
    for (let from = 0; from < n; from += BATCH) writeBatch(from, Math.min(n, from + BATCH));
    const writeSeconds = (performance.now() - started) / 1000;

    // The ledger in time order: a charge per task at its creation, a refund at the end of the failed and cancelled.
    const ledgerStarted = performance.now();
    const events: number[] = [];
    for (let i = 0; i < n; i++) {
      events.push(i * 2);
      if (status[i] !== 0) events.push(i * 2 + 1);
    }
    const timeOf = (e: number) => ((e & 1) === 0 ? createdAt[e >> 1]! : endedAt[e >> 1]!);
    const order = Int32Array.from(events).sort((a, b) => timeOf(a) - timeOf(b) || a - b);
    const insertLedger = db.prepare(
      'INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after) VALUES (@account_id, @kind, @amount, @task_id, @note, @created_at, @balance_after)',
    );
    const account = db.prepare('SELECT balance FROM accounts WHERE id = ?').get(input.accountId) as { balance: number } | undefined;
    if (!account) throw new Error(`no account ${input.accountId}`);
    let balance = account.balance;
    const writeLedger = db.transaction((from: number, to: number) => {
      const before = balance;
      for (let k = from; k < to; k++) {
        const e = order[k]!;
        const i = e >> 1;
        const refund = (e & 1) === 1;
        const amount = refund ? credits[i]! : -credits[i]!;
        balance += amount;
        insertLedger.run({
          account_id: input.accountId,
          kind: refund ? 'refund' : 'charge',
          amount,
          task_id: ids[i],
          note: refund ? (status[i] === 1 ? 'timeout' : 'cancelled') : null,
          created_at: timeOf(e),
          balance_after: balance,
        });
      }
      db.prepare('UPDATE accounts SET balance = balance + ? WHERE id = ?').run(balance - before, input.accountId);
    });
    for (let from = 0; from < order.length; from += BATCH * 2) writeLedger(from, Math.min(order.length, from + BATCH * 2));
    const ledgerSeconds = (performance.now() - ledgerStarted) / 1000;

    // usage_hourly: what the live transactions wrote for the real task, then the migration's backfill over everything.
    const usageStarted = performance.now();
    const live = db.prepare('SELECT * FROM usage_hourly ORDER BY account_id, hour_start, model').all() as Row[];
    const migration = readFileSync(MIGRATION, 'utf8');
    const marker = migration.indexOf('-- What happened before this migration');
    if (marker < 0) throw new Error(`cannot find the backfill statements in ${MIGRATION}`);
    const daily = readFileSync(DAILY_MIGRATION, 'utf8');
    const dailyMarker = daily.indexOf('INSERT INTO usage_daily');
    if (dailyMarker < 0) throw new Error(`cannot find the backfill statement in ${DAILY_MIGRATION}`);
    db.transaction(() => {
      db.prepare('DELETE FROM usage_hourly').run();
      db.exec(migration.slice(marker));
      // The days from the hours, as migration 0009 does (the daily answers read usage_daily).
      db.prepare('DELETE FROM usage_daily').run();
      db.exec(daily.slice(dailyMarker));
    })();
    const usageSeconds = (performance.now() - usageStarted) / 1000;
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.pragma('optimize');

    const checks = checkUsage(db, input.accountId, live);
    const ledgerEntries = order.length;
    const usageRows = (db.prepare('SELECT count(*) FROM usage_hourly WHERE account_id = ?').pluck().get(input.accountId) as number) ?? 0;
    return {
      tasks: n,
      statuses,
      models,
      ledgerEntries,
      usageRows,
      firstAt: new Date(createdAt[0]!),
      lastAt: new Date(endedAt.reduce((a, b) => Math.max(a, b), 0)),
      writeSeconds,
      ledgerSeconds,
      usageSeconds,
      checks,
    };
  } finally {
    db.close();
  }
}

/**
 * Checks usage_hourly against the tasks and the ledger; throws on any difference, returns what was checked.
 * `live`: the rows the live transactions wrote (the real task only), which the backfill must reproduce.
 */
function checkUsage(db: Database.Database, accountId: string, live: Row[]): string[] {
  const checks: string[] = [];
  const columns = ['credits_charged', 'credits_refunded', 'succeeded', 'failed', 'cancelled', 'seconds_delivered'];
  const rowOf = db.prepare('SELECT * FROM usage_hourly WHERE account_id = ? AND hour_start = ? AND model = ?');
  for (const row of live) {
    const now = rowOf.get(row.account_id, row.hour_start, row.model) as Row | undefined;
    const differs = columns.filter((c) => now?.[c] !== row[c]);
    if (differs.length) throw new Error(`usage_hourly ${row.hour_start} ${row.model}: the backfill's ${differs.map((c) => `${c} ${now?.[c]}`).join(', ')}, the live transactions' ${differs.map((c) => row[c]).join(', ')}`);
  }
  checks.push(`the ${live.length} row(s) the live transactions wrote for the real task equal the backfill's`);

  // Totals: every column against the ledger and the tasks.
  const usage = db
    .prepare(`SELECT ${columns.map((c) => `coalesce(sum(${c}), 0) AS ${c}`).join(', ')}, count(*) AS rows FROM usage_hourly WHERE account_id = ?`)
    .get(accountId) as Record<string, number>;
  const ledger = db
    .prepare(
      `SELECT coalesce(-sum(amount) FILTER (WHERE kind = 'charge'), 0) AS charged, coalesce(sum(amount) FILTER (WHERE kind = 'refund'), 0) AS refunded,
              count(*) FILTER (WHERE kind = 'charge') AS charges, count(*) FILTER (WHERE kind = 'refund') AS refunds
       FROM ledger_entries WHERE account_id = ?`,
    )
    .get(accountId) as Record<string, number>;
  const tasks = db
    .prepare(
      `SELECT count(*) AS tasks, count(*) FILTER (WHERE status = 'succeeded') AS succeeded, count(*) FILTER (WHERE status = 'failed') AS failed,
              count(*) FILTER (WHERE status = 'cancelled') AS cancelled, coalesce(sum(duration) FILTER (WHERE status = 'succeeded'), 0) AS seconds,
              coalesce(sum(credits_charged), 0) AS charged, coalesce(sum(credits_refunded), 0) AS refunded
       FROM tasks WHERE account_id = ?`,
    )
    .get(accountId) as Record<string, number>;
  const pairs: [string, number, number][] = [
    ['credits charged (usage / ledger)', usage.credits_charged!, ledger.charged!],
    ['credits charged (usage / tasks)', usage.credits_charged!, tasks.charged!],
    ['credits refunded (usage / ledger)', usage.credits_refunded!, ledger.refunded!],
    ['credits refunded (usage / tasks)', usage.credits_refunded!, tasks.refunded!],
    ['succeeded', usage.succeeded!, tasks.succeeded!],
    ['failed', usage.failed!, tasks.failed!],
    ['cancelled', usage.cancelled!, tasks.cancelled!],
    ['seconds delivered', usage.seconds_delivered!, tasks.seconds!],
    ['charges in the ledger / tasks', ledger.charges!, tasks.tasks!],
    ['refunds in the ledger / failed + cancelled', ledger.refunds!, tasks.failed! + tasks.cancelled!],
  ];
  const wrong = pairs.filter(([, a, b]) => a !== b);
  if (wrong.length) throw new Error(`usage totals differ: ${wrong.map(([name, a, b]) => `${name} ${a} ≠ ${b}`).join('; ')}`);
  checks.push(
    `totals over all ${usage.rows!.toLocaleString('en-US')} rows equal the ledger's and the tasks' (charged ${usage.credits_charged!.toLocaleString('en-US')}, ` +
      `refunded ${usage.credits_refunded!.toLocaleString('en-US')}, ${usage.succeeded!.toLocaleString('en-US')} / ${usage.failed!.toLocaleString('en-US')} / ` +
      `${usage.cancelled!.toLocaleString('en-US')} succeeded / failed / cancelled, ${usage.seconds_delivered!.toLocaleString('en-US')} s delivered)`,
  );

  // The balance: the ledger's sum, and the last entry's balance_after.
  const balance = db.prepare('SELECT balance FROM accounts WHERE id = ?').pluck().get(accountId) as number;
  const ledgerSum = db.prepare('SELECT sum(amount) FROM ledger_entries WHERE account_id = ?').pluck().get(accountId) as number;
  const lastAfter = db.prepare('SELECT balance_after FROM ledger_entries WHERE account_id = ? ORDER BY id DESC LIMIT 1').pluck().get(accountId) as number;
  if (balance !== ledgerSum || balance !== lastAfter) throw new Error(`balance ${balance}, ledger sum ${ledgerSum}, last balance_after ${lastAfter}`);
  checks.push('the balance equals the ledger\'s sum and the last entry\'s balance_after');

  // A sample of hours recomputed row for row by another query: each event's hour computed in JS terms (floor), the
  // ledger and the tasks read separately, compared with what usage_hourly holds for those hours.
  const hours = db.prepare('SELECT DISTINCT hour_start FROM usage_hourly WHERE account_id = ? ORDER BY random() LIMIT ?').pluck().all(accountId, SAMPLE_HOURS) as number[];
  const sample = JSON.stringify(hours);
  const recomputed = new Map<string, Record<string, number>>();
  const at = (hour: number, model: string) => {
    const key = `${hour} ${model}`;
    let row = recomputed.get(key);
    if (!row) recomputed.set(key, (row = Object.fromEntries(columns.map((c) => [c, 0]))));
    return row;
  };
  for (const r of db
    .prepare(
      `SELECT l.created_at - (l.created_at % ${HOUR_MS}) AS hour, t.model, l.kind, l.amount FROM ledger_entries l, tasks t
       WHERE t.id = l.task_id AND l.account_id = ? AND l.kind IN ('charge', 'refund') AND l.created_at - (l.created_at % ${HOUR_MS}) IN (SELECT value FROM json_each(?))`,
    )
    .iterate(accountId, sample) as Iterable<{ hour: number; model: string; kind: string; amount: number }>) {
    const row = at(r.hour, r.model);
    if (r.kind === 'charge') row.credits_charged! -= r.amount;
    else row.credits_refunded! += r.amount;
  }
  for (const r of db
    .prepare(
      `SELECT completed_at - (completed_at % ${HOUR_MS}) AS hour, model, status, duration FROM tasks
       WHERE account_id = ? AND completed_at IS NOT NULL AND completed_at - (completed_at % ${HOUR_MS}) IN (SELECT value FROM json_each(?))`,
    )
    .iterate(accountId, sample) as Iterable<{ hour: number; model: string; status: string; duration: number }>) {
    const row = at(r.hour, r.model);
    if (r.status === 'succeeded') {
      row.succeeded! += 1;
      row.seconds_delivered! += r.duration;
    } else if (r.status === 'failed') row.failed! += 1;
    else if (r.status === 'cancelled') row.cancelled! += 1;
  }
  const stored = db.prepare('SELECT * FROM usage_hourly WHERE account_id = ? AND hour_start IN (SELECT value FROM json_each(?))').all(accountId, sample) as Row[];
  if (stored.length !== recomputed.size) throw new Error(`sample: ${stored.length} usage_hourly rows, ${recomputed.size} recomputed`);
  for (const row of stored) {
    const expected = recomputed.get(`${row.hour_start} ${row.model}`);
    const differs = columns.filter((c) => expected?.[c] !== row[c]);
    if (differs.length) throw new Error(`sample ${row.hour_start} ${row.model}: ${differs.map((c) => `${c} stored ${row[c]}, recomputed ${expected?.[c]}`).join('; ')}`);
  }
  checks.push(`${hours.length} random hours (${stored.length} rows) recomputed from the ledger and the tasks match column for column`);
  return checks;
}

interface UsageAnswer {
  from: string;
  to: string;
  data: { start: string; model?: string; tasks: { succeeded: number; failed: number; cancelled: number }; secondsDelivered: number; creditsCharged: number; creditsRefunded: number; creditsNet: number }[];
}

/** The answer's sums against the ledger and the tasks of its range; throws on a difference. */
function checkAnswer(dbPath: string, accountId: string, answer: UsageAnswer, byModel: boolean): string {
  const from = Date.parse(answer.from);
  const to = Date.parse(answer.to);
  const ledger = selectRow<Record<string, number>>(
    dbPath,
    `SELECT coalesce(-sum(amount) FILTER (WHERE kind = 'charge'), 0) AS charged, coalesce(sum(amount) FILTER (WHERE kind = 'refund'), 0) AS refunded
     FROM ledger_entries WHERE account_id = @account AND kind IN ('charge', 'refund') AND created_at >= @from AND created_at < @to`,
    { account: accountId, from, to },
  );
  const tasks = selectRow<Record<string, number>>(
    dbPath,
    `SELECT count(*) FILTER (WHERE status = 'succeeded') AS succeeded, count(*) FILTER (WHERE status = 'failed') AS failed,
            count(*) FILTER (WHERE status = 'cancelled') AS cancelled, coalesce(sum(duration) FILTER (WHERE status = 'succeeded'), 0) AS seconds
     FROM tasks WHERE account_id = @account AND completed_at >= @from AND completed_at < @to`,
    { account: accountId, from, to },
  );
  const sum = (f: (d: UsageAnswer['data'][number]) => number) => answer.data.reduce((total, d) => total + f(d), 0);
  const pairs: [string, number, number][] = [
    ['creditsCharged', sum((d) => d.creditsCharged), ledger.charged!],
    ['creditsRefunded', sum((d) => d.creditsRefunded), ledger.refunded!],
    ['creditsNet', sum((d) => d.creditsNet), ledger.charged! - ledger.refunded!],
    ['succeeded', sum((d) => d.tasks.succeeded), tasks.succeeded!],
    ['failed', sum((d) => d.tasks.failed), tasks.failed!],
    ['cancelled', sum((d) => d.tasks.cancelled), tasks.cancelled!],
    ['secondsDelivered', sum((d) => d.secondsDelivered), tasks.seconds!],
  ];
  const wrong = pairs.filter(([, a, b]) => a !== b);
  if (wrong.length) throw new Error(`the answer for ${answer.from} – ${answer.to} differs from the ledger and tasks: ${wrong.map(([n, a, b]) => `${n} ${a} ≠ ${b}`).join('; ')}`);
  if (byModel && !answer.data.every((d) => d.model && (MODEL_IDS as string[]).includes(d.model))) throw new Error('groupBy=model: an entry without a model of the catalog');
  return `sums equal the ledger's and tasks' of the range (${pairs[3]![2].toLocaleString('en-US')} succeeded, ${pairs[2]![2].toLocaleString('en-US')} credits net)`;
}

export async function runUsageBench(options: UsageBenchOptions): Promise<UsageBenchResult> {
  const log = options.log ?? ((line: string) => console.log(`bench-usage: ${line}`));
  const machine = describeMachine(wrkVersion() ?? 'wrk not installed');
  const date = new Date();
  const work = removeOnExit(mkdtempSync(join(tmpdir(), 'vidgen-bench-usage-')));
  let server: NodeService | undefined;
  try {
    const dir = join(work, 'store');
    mkdirSync(dir, { recursive: true });
    const dbPath = join(dir, 'vidgen.db');
    const env = { VIDGEN_DATA_DIR: dir, VIDGEN_DATABASE_URL: `sqlite:${dbPath}`, VIDGEN_LOG_LEVEL: 'silent' };
    const account = await runCli<{ id: string }>(env, ['accounts', 'create', '--name', 'bench-usage', '--credits', String(1e15)]);
    const { key } = await runCli<{ key: string }>(env, ['keys', 'create', '--account', account.id, '--mode', 'test', '--name', 'bench-usage']);
    log('making a succeeded task with the instant provider');
    const templateId = await makeSucceededTask(env, key);
    const templateAt = selectRow<{ created_at: number }>(dbPath, 'SELECT created_at FROM tasks WHERE id = ?', templateId).created_at;
    // The seeded tasks end before the real task's hour, so that its hour holds only what the live transactions wrote.
    const newestAt = Math.floor(templateAt / HOUR_MS) * HOUR_MS - 20 * 60_000;
    log(`writing ${options.tasks.toLocaleString('en-US')} tasks, their jobs and ledger entries, and usage_hourly`);
    const seeding = seedUsageTasks(dbPath, { templateId, accountId: account.id, count: options.tasks, newestAt });
    log(
      `seeded in ${seeding.writeSeconds.toFixed(1)} s (tasks and jobs) + ${seeding.ledgerSeconds.toFixed(1)} s (${seeding.ledgerEntries.toLocaleString('en-US')} ledger entries) + ` +
        `${seeding.usageSeconds.toFixed(1)} s (${seeding.usageRows.toLocaleString('en-US')} usage_hourly rows)`,
    );
    for (const check of seeding.checks) log(`checked: ${check}`);

    server = await startServer(env, { worker: false, nodeArgs: options.nodeArgs });
    const auth = { Authorization: `Bearer ${key}` };
    const rssStart = memoryOf(server.pid).rssMb;
    log(`server ${server.url} (pid ${server.pid}), RSS ${rssStart.toFixed(0)} MB`);

    // Whole buckets ending at the end of the current one: 90 daily buckets, 168 hourly.
    const now = Date.now();
    const dayEnd = Math.ceil(now / DAY_MS) * DAY_MS;
    const hourEnd = Math.ceil(now / HOUR_MS) * HOUR_MS;
    const iso = (ms: number) => new Date(ms).toISOString();
    const dayRange = `from=${iso(dayEnd - 90 * DAY_MS)}&to=${iso(dayEnd)}`;
    const kinds: { kind: Kind; name: string; path: string; byModel: boolean; judged: boolean; rows: [number, number] }[] = [
      { kind: 'day', name: '90 days, granularity=day', path: `${USAGE}?${dayRange}&granularity=day`, byModel: false, judged: true, rows: [dayEnd - 90 * DAY_MS, dayEnd] },
      { kind: 'dayByModel', name: '90 days, granularity=day, groupBy=model', path: `${USAGE}?${dayRange}&granularity=day&groupBy=model`, byModel: true, judged: true, rows: [dayEnd - 90 * DAY_MS, dayEnd] },
      { kind: 'hour', name: '7 days, granularity=hour', path: `${USAGE}?from=${iso(hourEnd - 7 * DAY_MS)}&to=${iso(hourEnd)}&granularity=hour`, byModel: false, judged: false, rows: [hourEnd - 7 * DAY_MS, hourEnd] },
    ];

    const first = await fetch(`${server.url}${kinds[0]!.path}`, { headers: auth });
    const firstText = await first.text();
    const result: UsageBenchResult = {
      options: { tasks: options.tasks, load: options.load, warmupSeconds: options.warmupSeconds },
      machine,
      date,
      routeStatus: first.status,
      routeAnswer: firstText.slice(0, 300),
      seeding,
      scenarios: [],
      rss: { startMb: rssStart, endMb: NaN, peakMb: NaN },
    };
    if (first.status !== 200) {
      log(`the route answered ${first.status}, not 200: nothing to measure (${firstText.slice(0, 200)})`);
      const memory = memoryOf(server.pid);
      result.rss = { startMb: rssStart, endMb: memory.rssMb, peakMb: memory.peakMb };
      return result;
    }

    const scripts = join(work, 'scripts');
    mkdirSync(scripts);
    for (const kind of kinds) {
      const answer = await fetch(`${server.url}${kind.path}`, { headers: auth });
      const text = await answer.text();
      if (answer.status !== 200) throw new Error(`${kind.name}: the server answered ${answer.status}: ${text.slice(0, 300)}`);
      const body = JSON.parse(text) as UsageAnswer;
      const check = checkAnswer(dbPath, account.id, body, kind.byModel);
      const rows = selectRow<{ n: number }>(dbPath, 'SELECT count(*) AS n FROM usage_hourly WHERE account_id = ? AND hour_start >= ? AND hour_start < ?', account.id, kind.rows[0], kind.rows[1]).n;
      const script = writeStaticScript(join(scripts, `${kind.kind}.lua`), { method: 'GET', headers: auth });
      const url = `${server.url}${kind.path}`;
      log(`${kind.name}: ${body.data.length} entries, ${Buffer.byteLength(text).toLocaleString('en-US')} B, ${rows.toLocaleString('en-US')} usage_hourly rows; ${check}`);
      await runWrk(url, script, { ...options.load, seconds: options.warmupSeconds });
      const cpuBefore = cpuSecondsOf(server.pid);
      const loaded = await runWrk(url, script, options.load);
      // Requests wrk left in flight are still answered: counted in the CPU, not in the requests (a few of thousands).
      await sleep(200);
      const cpuMsPerRequest = ((cpuSecondsOf(server.pid) - cpuBefore) * 1000) / Math.max(1, loaded.requests);
      const alone = await runWrk(url, script, { threads: 1, connections: 1, seconds: options.load.seconds });
      await sleep(200);
      // Error answers and timeouts (wrk gives up on a request after 5 s; its latencies leave those out) are reported and miss the target.
      for (const [label, run] of [['loaded', loaded], ['1 connection', alone]] as const) {
        if (run.statusErrors + run.socketErrors > 0) log(`${kind.name} (${label}): ${run.statusErrors} error answers, ${run.socketErrors} socket errors or timeouts (5 s)`);
      }
      const rssAfterMb = memoryOf(server.pid).rssMb;
      log(
        `${kind.name}: ${Math.round(loaded.rps)} req/s, p50 ${loaded.p50Ms.toFixed(2)} ms, p99 ${loaded.p99Ms.toFixed(2)} ms at ${options.load.connections} connections; ` +
          `server CPU ${cpuMsPerRequest.toFixed(2)} ms per answer; 1 connection p50 ${alone.p50Ms.toFixed(2)} ms, p99 ${alone.p99Ms.toFixed(2)} ms; errors ${errorsOf(loaded)} / ${errorsOf(alone)}; RSS ${rssAfterMb.toFixed(0)} MB`,
      );
      result.scenarios.push({ kind: kind.kind, name: kind.name, path: kind.path, buckets: body.data.length, rows, answerBytes: Buffer.byteLength(text), check, judged: kind.judged, loaded, alone, cpuMsPerRequest, rssAfterMb });
    }
    result.scrape = await measureScrape(server.url, dbPath);
    log(
      `/metrics: median ${result.scrape.medianMs.toFixed(2)} ms, max ${result.scrape.maxMs.toFixed(2)} ms of ${result.scrape.scrapes} scrapes; ${result.scrape.check}; ` +
        `the full count by status it made before: ${result.scrape.fullCountMs.toFixed(1)} ms`,
    );
    const memory = memoryOf(server.pid);
    result.rss = { startMb: rssStart, endMb: memory.rssMb, peakMb: memory.peakMb };
    return result;
  } finally {
    if (server) await stop(server.child);
    rmSync(work, { recursive: true, force: true });
  }
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
/** Error answers, socket errors and timeouts of a run. */
const errorsOf = (run: WrkResult) => run.statusErrors + run.socketErrors;
const msOf = (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms` : '—');

export function judgeUsage(r: UsageBenchResult): Target[] {
  const tasks = int(r.options.tasks);
  const c = r.options.load.connections;
  const quick = r.options.tasks < USAGE_FULL.tasks ? ` (quick: ${tasks} tasks)` : '';
  const judged: [Kind, string][] = [
    ['day', `usage, 90 days by day: p99 ≤ ${TARGET_P99_MS} ms with ${int(USAGE_FULL.tasks)} tasks`],
    ['dayByModel', `usage, 90 days by day and model: p99 ≤ ${TARGET_P99_MS} ms with ${int(USAGE_FULL.tasks)} tasks`],
  ];
  return judged.map(([kind, target]) => {
    if (r.routeStatus !== 200) return { target, figure: `not measured: the route answered ${r.routeStatus}`, met: false };
    const s = r.scenarios.find((x) => x.kind === kind);
    if (!s) return { target, figure: 'not measured', met: undefined };
    const errors = errorsOf(s.loaded);
    const failed = errors ? `; ${int(errors)} errors or timeouts (> 5 s), not in the p99` : '';
    const aloneErrors = errorsOf(s.alone);
    // Judged on the answer's own latency (one connection, no queueing): the target says how long a usage answer may
    // take with 1,000,000 tasks, i.e. that it reads running totals, not every task. At 50 connections the server is
    // saturated and the p99 is the queue (its mean is 50 / req/s), reported beside it.
    return {
      target,
      figure: `${msOf(s.alone.p99Ms)} at 1 connection${aloneErrors ? `; ${int(aloneErrors)} errors` : ''} (saturated, ${c} connections: p99 ${msOf(s.loaded.p99Ms)} at ${int(s.loaded.rps)} req/s${failed})${quick}`,
      met: s.alone.p99Ms <= TARGET_P99_MS && aloneErrors === 0 && errors === 0,
    };
  });
}

/**
 * The section as Markdown. `loadNote`: say so when the machine was busy before the run (off inside
 * `pnpm bench`, where the load is the benchmark's own earlier parts and the report says it once).
 */
export function renderUsageSection(r: UsageBenchResult, targets: Target[], command: string, notes: string[] = [], { loadNote = true } = {}): string {
  const m = r.machine;
  const { load } = r.options;
  const sd = r.seeding;
  const out: string[] = [SECTION_HEADING, ''];
  for (const note of notes) out.push(`> **${note}**`, '');
  if (loadNote && m.loadBefore > m.cores / 2) out.push(`> **A busy machine: load average ${m.loadBefore.toFixed(2)} on ${m.cores} cores before the run.**`, '');
  if (r.routeStatus !== 200) {
    out.push(`> **\`GET ${USAGE}\` answered ${r.routeStatus}, not 200: the route is not there (yet); nothing was measured.**`, '');
  } else {
    out.push(
      markdownTable(
        ['request', 'entries', 'usage_hourly rows', 'answer', 'req/s', 'p50', 'p99', 'max', 'errors', 'server CPU per answer', 'p50, 1 conn.', 'p99, 1 conn.', 'server RSS after'],
        r.scenarios.map((s) => [
          `\`${s.name}\``,
          int(s.buckets),
          int(s.rows),
          `${int(s.answerBytes)} B`,
          int(s.loaded.rps),
          msOf(s.loaded.p50Ms),
          msOf(s.loaded.p99Ms),
          msOf(s.loaded.maxMs),
          `${int(errorsOf(s.loaded))} / ${int(errorsOf(s.alone))}`,
          msOf(s.cpuMsPerRequest),
          msOf(s.alone.p50Ms),
          msOf(s.alone.p99Ms),
          `${int(s.rssAfterMb)} MB`,
        ]),
      ),
      '',
    );
  }
  const pct = (k: string) => `${((100 * (sd.statuses[k] ?? 0)) / sd.tasks).toFixed(1)} %`;
  out.push(
    `\`${command}\`, ${r.date.toISOString()}, ${m.cores} × ${m.cpu}, ${m.ramGiB.toFixed(1)} GiB, Linux ${m.kernel}, Node ${m.node}, SQLite ${m.sqlite}, ${m.wrk}.`,
    `Store: one account with ${int(sd.tasks + 1)} tasks: one real succeeded task made through the server, and ${int(sd.tasks)} written directly to SQLite`,
    `(copies of its row and job, bench/http/seed.ts's way) created from ${sd.firstAt.toISOString().slice(0, 16)}Z over ${SPREAD_DAYS} days, across the three models`,
    `(${MODEL_SHARES.map(([model]) => `${model} ${int(sd.models[model] ?? 0)}`).join(', ')}; durations and resolutions of each model's rules, the default prices),`,
    `${pct('succeeded')} succeeded, ${pct('failed')} failed, ${pct('cancelled')} cancelled, each ending seconds to minutes after its creation; ${int(sd.ledgerEntries)} ledger`,
    'entries in time order (a charge at each creation, a refund at each failure or cancel, each with the balance it left). usage_hourly',
    `(${int(sd.usageRows)} rows) from the tasks and the ledger by the backfill statements of migration 0008, usage_daily from it by 0009's (read from the files). Seeding took`,
    `${sd.writeSeconds.toFixed(1)} s (tasks and jobs) + ${sd.ledgerSeconds.toFixed(1)} s (ledger) + ${sd.usageSeconds.toFixed(1)} s (usage_hourly). Checked after seeding:`,
    '',
    ...sd.checks.map((check) => `- ${check}`),
    '',
    `One server (\`node dist/main.js --role all\`, SQLite, rate limits off, no worker), RSS ${int(r.rss.startMb)} MB after start, ${Number.isFinite(r.rss.endMb) ? `${int(r.rss.endMb)} MB at the end (peak ${int(r.rss.peakMb)} MB)` : '—'}.`,
    `Each request: one answer checked against the ledger and the tasks of its range, a ${r.options.warmupSeconds} s warm-up, \`wrk -t${load.threads} -c${load.connections} -d${load.seconds}s --latency\`,`,
    `then \`-t1 -c1 -d${load.seconds}s\` (a lone request, no queueing). Ranges of whole buckets ending at the end of the current day (hour): 90 daily`,
    'buckets (270 entries by model), 168 hourly; the target is judged on the daily report and its `groupBy=model`, on one answer\'s',
    'latency (1 connection): how long an answer takes with 1,000,000 tasks, which is what running totals decide. At 50 connections the',
    'server is saturated and the p99 is mostly the queue; it is reported beside it, and errors there also miss the target.',
    '"errors": error answers, socket errors and timeouts (wrk gives up on a request after 5 s and leaves it out of its latencies),',
    'at 50 connections / at 1 connection; any of them misses the target. "server CPU per answer": the server process\'s user + system',
    'time over the loaded run divided by its answers. wrk keeps all 50 connections busy, so the mean latency there is about',
    '50 / req/s: a p99 ≤ 50 ms at 50 connections asks for well over 1,000 answers a second, under 1 ms of server time each.',
    '',
    markdownTable(['target', 'this run', ''], targets.map((t) => [t.target, t.figure, t.met === undefined ? '—' : t.met ? 'met' : '**missed**'])),
    '',
  );
  if (r.scrape) {
    const sc = r.scrape;
    out.push(
      `\`GET /metrics\` on the same store, ${sc.scrapes} scrapes one after another: median ${msOf(sc.medianMs)}, max ${msOf(sc.maxMs)}; ${sc.check}. The`,
      `count by status every scrape made until 2026-11-28 (\`SELECT status, count(*) FROM tasks GROUP BY status\`, every task read, the event loop held`,
      `meanwhile), timed on the same file: ${msOf(sc.fullCountMs)}. A scrape now counts the queued and processing tasks through their partial index`,
      'and the ended ones from the usage totals.',
      '',
    );
  }
  return out.join('\n');
}


/** The sizes: full (the target's) and quick. */
export const USAGE_FULL = { tasks: 1_000_000, seconds: 10, warmupSeconds: 2 };
export const USAGE_QUICK = { tasks: 100_000, seconds: 3, warmupSeconds: 1 };

// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  const argv = process.argv.slice(2).filter((arg) => arg !== '--');
  const { values: args } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
      tasks: { type: 'string' },
      seconds: { type: 'string' },
      connections: { type: 'string', default: '50' },
      'cpu-prof': { type: 'boolean', default: false },
      'cpu-prof-dir': { type: 'string' },
      note: { type: 'string' },
    },
  });
  if (!wrkVersion()) {
    console.error('bench-usage: wrk is not installed (Debian/Ubuntu: apt-get install wrk); it is the load generator of this benchmark.');
    process.exit(2);
  }
  const size = args.quick ? USAGE_QUICK : USAGE_FULL;
  const number = (name: string, value: string | undefined, fallback: number, min: number) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number ≥ ${min}, got ${value}`);
    return n;
  };
  const cpuProfileDir = !args['cpu-prof'] ? undefined : args['cpu-prof-dir'] ? resolve(process.env.INIT_CWD ?? process.cwd(), args['cpu-prof-dir']) : mkdtempSync(join(tmpdir(), 'vidgen-cpu-prof-'));
  const options: UsageBenchOptions = {
    tasks: number('tasks', args.tasks, size.tasks, 1),
    load: { threads: 1, connections: number('connections', args.connections, 50, 1), seconds: number('seconds', args.seconds, size.seconds, 1) },
    warmupSeconds: size.warmupSeconds,
    nodeArgs: cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [],
  };
  const notes: string[] = [];
  if (options.tasks < USAGE_FULL.tasks || options.load.seconds < USAGE_FULL.seconds) {
    notes.push(`${args.quick ? 'A --quick run' : 'A smaller run'}: ${int(options.tasks)} tasks, ${options.load.seconds} s runs, not the target's ${int(USAGE_FULL.tasks)} tasks and ${USAGE_FULL.seconds} s.`);
  }
  if (cpuProfileDir) notes.push('The server ran with --cpu-prof: slower than without.');
  if (args.note) notes.push(args.note);

  const result = await runUsageBench(options);
  const targets = judgeUsage(result);
  const section = renderUsageSection(result, targets, `pnpm bench:usage${argv.map((arg) => ` ${arg}`).join('')}`, notes);
  console.log(`\n${section}`);
  if (args.write) console.log(`bench-usage: written to ${writeSection(SECTION_HEADING, section)}`);
  if (cpuProfileDir) console.log(`bench-usage: CPU profile in ${cpuProfileDir}`);
  const missed = targets.filter((t) => t.met === false);
  for (const t of missed) console.error(`bench-usage: target missed: ${t.target} (${t.figure})`);
  process.exit(missed.length ? 1 : 0);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error('bench-usage: failed:', error);
    process.exit(2);
  });
}
