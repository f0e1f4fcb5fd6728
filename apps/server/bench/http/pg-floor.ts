/**
 * The pipeline's floor on PostgreSQL: what PostgreSQL itself can do with the statements a task costs,
 * without the server. `pgbench` (PostgreSQL's own C client, prepared statements, no HTTP, no
 * JavaScript, no webhook sent) runs one script per task on a database migrated as the server's
 * (the store's tables and triggers), as the server's processes do:
 *
 * 1. submit, one transaction: the task with its generation job (its row's, migration 0011) and the
 *    wake-up NOTIFY, the charge with its ledger entry and usage shard;
 * 2. the worker claims the job and starts the task, one statement (a lease on the task's row; the status trigger NOTIFYs);
 * 3. complete, one transaction: the task succeeded (which ends its job), its webhook delivery (its own
 *    queue entry, written already claimed by the completing worker, as the server does when that worker
 *    has a webhook slot free), the usage shard;
 * 4. deliver: the attempt recorded, the delivery marked and its lease ended, in one statement (the server
 *    ends the lease and records the attempt in two, in one transaction).
 *
 * That is 8 statements and 4 commits a task, fewer than the server sends (the server's reads of the
 * task, of the delivery and the secret, lease extensions and batched claims are left out), with the
 * same row locks: every task of the one account charges the same balance row. A job is claimed by its
 * task's id (known to the script), cheaper than the server's search of the lane with SKIP LOCKED, so if
 * anything the floor is too high. Tasks per second is pgbench's transactions per second (one script = one task).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { postgresCpuSeconds } from './cpu-cost.js';

const BODY = JSON.stringify({ type: 'task.succeeded', data: { requestId: 'gen_x', status: 'succeeded', output: { url: 'x'.repeat(400) } } }).replace(/'/g, "''");

const script = (accountId: string) => `
\\set r random(1, 9000000000000000000)
\\set shard :r % 16
BEGIN;
INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url, credits_charged, deadline_at, created_at, updated_at,
                   job_lane, job_state, job_run_at, job_max_attempts)
  VALUES ('gen_' || :r, '${accountId}', 'queued', 'vidgen-2.0', 'a lighthouse at dusk, waves breaking', 4, '16:9', '480p', 'text_to_video', '[]', NULL, 'https://127.0.0.1:9/hook', 10, now() + interval '30 minutes', now(), now(),
          'instant', 'waiting', now(), 3);
SELECT pg_notify('vidgen_jobs', 'instant');
WITH charged AS (UPDATE accounts SET balance = balance - 10 WHERE id = '${accountId}' AND balance >= 10 RETURNING balance),
  ledger AS (INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after) SELECT '${accountId}', 'charge', -10, 'gen_' || :r, NULL, now(), balance FROM charged),
  hourly AS (INSERT INTO usage_hourly_shards (account_id, hour_start, model, shard, credits_charged) SELECT '${accountId}', date_trunc('hour', now()), 'vidgen-2.0', :shard, 10 FROM charged
             ON CONFLICT (account_id, hour_start, model, shard) DO UPDATE SET credits_charged = usage_hourly_shards.credits_charged + excluded.credits_charged)
  INSERT INTO usage_daily_shards (account_id, day_start, model, shard, credits_charged) SELECT '${accountId}', date_trunc('day', now()), 'vidgen-2.0', :shard, 10 FROM charged
  ON CONFLICT (account_id, day_start, model, shard) DO UPDATE SET credits_charged = usage_daily_shards.credits_charged + excluded.credits_charged;
COMMIT;
UPDATE tasks SET job_lease_id = job_lease_id + 1, job_claims = job_claims + 1, job_lease_until = now() + interval '60 seconds', status = 'processing', updated_at = now()
  WHERE id = 'gen_' || :r AND job_lane = 'instant' AND job_state = 'waiting' AND status IN ('queued', 'processing') RETURNING id AS task
\\gset
BEGIN;
UPDATE tasks SET status = 'succeeded', output_key = :task::text || '.mp4', output_url = 'https://127.0.0.1/files/' || :task::text || '.mp4', output_expires_at = now() + interval '1 day', updated_at = now(), completed_at = now()
  WHERE id = :task::text AND status = 'processing';
INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at, lease_id, lease_until, unrecorded_claims)
  VALUES ('msg_' || :r, :task::text, '${accountId}', 'https://127.0.0.1:9/hook', 'task.succeeded', '${BODY}', 'pending', now(), now(), now(), 1, now() + interval '60 seconds', 1);
INSERT INTO usage_hourly_shards (account_id, hour_start, model, shard, succeeded, seconds_delivered) VALUES ('${accountId}', date_trunc('hour', now()), 'vidgen-2.0', :shard, 1, 4)
  ON CONFLICT (account_id, hour_start, model, shard) DO UPDATE SET succeeded = usage_hourly_shards.succeeded + 1, seconds_delivered = usage_hourly_shards.seconds_delivered + 4;
COMMIT;
WITH d AS (UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = now(), status = 'delivered', next_attempt_at = NULL, updated_at = now(), lease_until = NULL, unrecorded_claims = 0
           WHERE task_id = :task::text AND lease_id = 1 RETURNING id)
  INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) SELECT id, now(), 204, NULL, 3 FROM d;
`;

/**
 * The same work for `n` tasks at once (one script = n tasks): every statement above as one statement over the n
 * tasks (their rows from generate_series), the balance charged once for all of them, one usage row per commit. What
 * a server that batched across tasks would send: the floor of such a design, not of the server as it is.
 */
const batchedScript = (accountId: string, n: number) => {
  const ids = `SELECT 'gen_' || :r || '_' || i FROM generate_series(1, ${n}) i`;
  return `
\\set r random(1, 9000000000000000000)
\\set shard :r % 16
BEGIN;
INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url, credits_charged, deadline_at, created_at, updated_at,
                   job_lane, job_state, job_run_at, job_max_attempts)
  SELECT 'gen_' || :r || '_' || i, '${accountId}', 'queued', 'vidgen-2.0', 'a lighthouse at dusk, waves breaking', 4, '16:9', '480p', 'text_to_video', '[]', NULL, 'https://127.0.0.1:9/hook', 10, now() + interval '30 minutes', now(), now(),
         'instant', 'waiting', now(), 3 FROM generate_series(1, ${n}) i;
SELECT pg_notify('vidgen_jobs', 'instant');
WITH charged AS (UPDATE accounts SET balance = balance - ${10 * n} WHERE id = '${accountId}' AND balance >= ${10 * n} RETURNING balance),
  ledger AS (INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after) SELECT '${accountId}', 'charge', -10, 'gen_' || :r || '_' || i, NULL, now(), balance + 10 * (${n} - i) FROM charged, generate_series(1, ${n}) i),
  hourly AS (INSERT INTO usage_hourly_shards (account_id, hour_start, model, shard, credits_charged) SELECT '${accountId}', date_trunc('hour', now()), 'vidgen-2.0', :shard, ${10 * n} FROM charged
             ON CONFLICT (account_id, hour_start, model, shard) DO UPDATE SET credits_charged = usage_hourly_shards.credits_charged + excluded.credits_charged)
  INSERT INTO usage_daily_shards (account_id, day_start, model, shard, credits_charged) SELECT '${accountId}', date_trunc('day', now()), 'vidgen-2.0', :shard, ${10 * n} FROM charged
  ON CONFLICT (account_id, day_start, model, shard) DO UPDATE SET credits_charged = usage_daily_shards.credits_charged + excluded.credits_charged;
COMMIT;
UPDATE tasks SET job_lease_id = job_lease_id + 1, job_claims = job_claims + 1, job_lease_until = now() + interval '60 seconds', status = 'processing', updated_at = now()
  WHERE id IN (${ids}) AND job_lane = 'instant' AND job_state = 'waiting' AND status IN ('queued', 'processing');
BEGIN;
UPDATE tasks SET status = 'succeeded', output_key = id || '.mp4', output_url = 'https://127.0.0.1/files/' || id || '.mp4', output_expires_at = now() + interval '1 day', updated_at = now(), completed_at = now()
  WHERE id IN (${ids}) AND status = 'processing';
INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at, lease_id, lease_until, unrecorded_claims)
  SELECT 'msg_' || :r || '_' || i, 'gen_' || :r || '_' || i, '${accountId}', 'https://127.0.0.1:9/hook', 'task.succeeded', '${BODY}', 'pending', now(), now(), now(), 1, now() + interval '60 seconds', 1
  FROM generate_series(1, ${n}) i;
INSERT INTO usage_hourly_shards (account_id, hour_start, model, shard, succeeded, seconds_delivered) VALUES ('${accountId}', date_trunc('hour', now()), 'vidgen-2.0', :shard, ${n}, ${4 * n})
  ON CONFLICT (account_id, hour_start, model, shard) DO UPDATE SET succeeded = usage_hourly_shards.succeeded + ${n}, seconds_delivered = usage_hourly_shards.seconds_delivered + ${4 * n};
COMMIT;
WITH d AS (UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = now(), status = 'delivered', next_attempt_at = NULL, updated_at = now(), lease_until = NULL, unrecorded_claims = 0
           WHERE task_id IN (${ids}) AND lease_id = 1 RETURNING id)
  INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) SELECT id, now(), 204, NULL, 3 FROM d;
`;
};

/**
 * The per-task statements of `n` tasks in each transaction (one script = n tasks): each task's statements as they
 * are, but one commit per phase for all n (their submissions, their completions, their deliveries). What combining
 * the one-message transactions of concurrent tasks would save, without writing many tasks per statement.
 */
const combinedScript = (accountId: string, n: number) => {
  const one = script(accountId);
  const [sets, submit, rest] = [one.slice(0, one.indexOf('BEGIN;')), one.slice(one.indexOf('BEGIN;') + 6, one.indexOf('COMMIT;')), one.slice(one.indexOf('COMMIT;') + 7)];
  const [claim, rest2] = [rest.slice(0, rest.indexOf('BEGIN;')), rest.slice(rest.indexOf('BEGIN;') + 6)];
  const [complete, deliver] = [rest2.slice(0, rest2.indexOf('COMMIT;')), rest2.slice(rest2.indexOf('COMMIT;') + 7)];
  const of = (part: string, k: number) =>
    part
      // One usage shard for the script's n tasks: with a shard each, two scripts lock shared rows in opposite orders.
      .replace(/:shard\b/g, ':shard1')
      .replace(/:(job|task|r)\b/g, `:$1${k}`)
      .replace(/AS (job|task)\b/g, `AS $1${k}`)
      .replace(/\\set (shard|r)\b/g, `\\set $1${k}`);
  const each = (part: string) => Array.from({ length: n }, (_, i) => of(part, i + 1)).join('\n');
  return `${each(sets)}\nBEGIN;\n${each(submit)}\nCOMMIT;\n${each(claim)}\nBEGIN;\n${each(complete)}\nCOMMIT;\nBEGIN;\n${each(deliver)}\nCOMMIT;\n`;
};

export interface FloorResult {
  tasksPerSecond: number;
  tasks: number;
  failed: number;
  /** PostgreSQL's CPU a task over the run, in ms (bench/http/cpu-cost.ts; undefined without /proc). */
  postgresCpuMs: number | undefined;
}

/**
 * Runs the script at `clients` connections for `seconds` on `url` (a database the server's migrations
 * and pg-boss's queues were applied to, with `accountId` holding credits for every task).
 */
/**
 * pgbench's protocol: `prepared` (each statement parsed and planned once per connection, the floor proper) or `extended`
 * (unnamed statements, parsed and planned every time, as the server sent every statement before its plans were kept).
 * Not `simple`: pgbench writes variables into the text unquoted there, which this script's text ids do not survive.
 */
export type FloorProtocol = 'prepared' | 'extended';

export async function runPostgresFloor(url: string, accountId: string, options: { clients: number; seconds: number; protocol?: FloorProtocol; batch?: number; combined?: boolean }): Promise<FloorResult> {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-pg-floor-'));
  try {
    const file = join(dir, 'task.sql');
    const batch = options.batch ?? 1;
    writeFileSync(file, batch > 1 ? (options.combined ? combinedScript(accountId, batch) : batchedScript(accountId, batch)) : script(accountId));
    const args = ['--no-vacuum', `--protocol=${options.protocol ?? 'prepared'}`, `--client=${options.clients}`, '--jobs=2', `--time=${options.seconds}`, `--file=${file}`, url];
    const cpuBefore = postgresCpuSeconds();
    const output = await new Promise<string>((done, fail) =>
      execFile('pgbench', args, { maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => (error ? fail(new Error(`pgbench failed: ${stderr || error.message}`)) : done(stdout + stderr))),
    );
    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(output);
    const processed = /number of transactions actually processed: (\d+)/.exec(output);
    if (!tps || !processed) throw new Error(`pgbench printed no result:\n${output}`);
    const failed = /number of failed transactions: (\d+)/.exec(output);
    const tasks = Number(processed[1]) * batch;
    const cpuAfter = postgresCpuSeconds();
    const postgresCpuMs = cpuBefore === undefined || cpuAfter === undefined ? undefined : ((cpuAfter - cpuBefore) * 1000) / tasks;
    return { tasksPerSecond: Number(tps[1]) * batch, tasks, failed: failed ? Number(failed[1]) * batch : 0, postgresCpuMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
