/**
 * The floor of the HTTP benchmark: the least a correct server must do for a
 * task query and for a submission on this service's stack (Hono on
 * @hono/node-server, better-sqlite3), in its own process like the server, on
 * its own copy of the benchmark's store (argv[2]). Where the ceiling answers
 * fixed bytes, the floor does the work no implementation can skip, and
 * nothing else: no correlation id, security headers, metrics, log line, rate
 * limit, scope check or idempotency, and a key, once found, kept for good.
 *
 * - GET  …/generations/:id  the key's SHA-256, the task's row by account and
 *   id with its webhook's progress (raw arrays, a prepared statement, the turn's
 *   read transaction of the server's group commit), the output URL signed, the
 *   task's JSON; 404
 *   without one.
 * - POST …/generations      the key, the JSON body read as the contract
 *   requires (the server's readJson: strict UTF-8, since a prompt must come
 *   back exactly as sent, and the nesting limit), validated against the
 *   spec's schema (the server's compiled validator) and the model rules
 *   (checkSubmissionRules, contract D5), then one savepoint in the server's
 *   group commit (store/sqlite/group-commit.ts): the task, the account's
 *   balance lowered, the charge in the ledger with the balance it left (the
 *   spec's `balanceAfter`), the generate job; 202 once committed.
 *
 * Left out as the server's own choices, not the contract's: the usage totals
 * kept as running sums (a server may sum the ledger when asked), the
 * idempotency and active-task checks (the benchmark sends no key and runs with
 * the cap off), and every header beyond the status and the JSON body.
 *
 * So a target the floor misses in the same run is out of reach of any
 * server doing the contract's work here, however lean (BENCHMARKS.md).
 *
 * With `--features` (argv[3]) it also does, each as cheaply as it can be done,
 * what the server does around that work by its own choice or the contract's:
 * a correlation id on every answer (D2), the server's security and cache
 * headers (http/security-headers.ts), `Location` on a 202 (D1), the request
 * metrics (http/metrics.ts's RequestMetrics), the usage totals kept as
 * running sums (store/sqlite/pending-usage.ts with the store's statements),
 * and the request's log line (the server's own: http/request-log.ts, written
 * a few milliseconds at a time by log-destination.ts to standard output).
 * Between the two floors and the server, a run then says what those features
 * cost and what the server's own structure (routing, guards, the store's
 * interface) costs on top.
 */
import Database from 'better-sqlite3';
import { createHmac } from 'node:crypto';
import { serve } from '@hono/node-server';
import { Hono, type Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import type { RequestBody } from '@vidgen/types';
import { DEFAULT_PRICES, priceOf } from '../../src/domain/catalog.js';
import { checkSubmissionRules } from '../../src/domain/rules.js';
import { readJson } from '../../src/http/middleware.js';
import { RequestMetrics } from '../../src/http/metrics.js';
import { requestLogWriter } from '../../src/http/request-log.js';
import { batchedLogDestination } from '../../src/log-destination.js';
import { redactSecrets } from '../../src/logging.js';
import pino from 'pino';
import { jsonAnswerHeaders } from '../../src/http/security-headers.js';
import { newCorrelationId, newRequestId } from '../../src/domain/ids.js';
import { PendingUsage } from '../../src/store/sqlite/pending-usage.js';
import { prepareStatements } from '../../src/store/sqlite/sqlite-store.js';
import { bodyValidator } from '../../src/http/spec.js';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';
import { FLOOR_FEATURES } from './floor-features.js';
import { floorKeys } from './floor-keys.js';

const BASE = '/api/open/v1/video/generations';
const DEADLINE_MS = 60 * 60 * 1000;

const db = new Database(process.argv[2]!);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
db.pragma('temp_store = MEMORY');
/**
 * The features done: `--features` all of them; `--features=<list>` those named, of `correlation` (the id, echoed or
 * made, and its header), `headers` (the server's security and cache headers and `Location`; with the correlation id's
 * header, as the server's set has it), `metrics`, `usage` (the usage totals, submissions only) and `log` (the request
 * line): bench/features.ts measures them one at a time.
 */
const featureArg = process.argv[3];
const chosen = new Set<string>(featureArg === '--features' ? FLOOR_FEATURES : featureArg?.startsWith('--features=') ? featureArg.slice('--features='.length).split(',').filter(Boolean) : []);
for (const name of chosen) if (!(FLOOR_FEATURES as readonly string[]).includes(name)) throw new Error(`floor: no feature ${name} (${FLOOR_FEATURES.join(', ')})`);
const FEATURES = chosen.size > 0;
const feature = { correlation: chosen.has('correlation') || chosen.has('headers'), headers: chosen.has('headers'), metrics: chosen.has('metrics'), usage: chosen.has('usage'), log: chosen.has('log') };
const stored = FEATURES ? prepareStatements(db) : undefined;
const usage = stored && feature.usage ? new PendingUsage({ hourly: stored.addUsage, daily: stored.addUsageDaily }) : undefined;
const group = new GroupCommit(db, usage);
const requestMetrics = new RequestMetrics();
// The server's request line (http/request-log.ts), written a few milliseconds at a time (log-destination.ts) to standard output.
const logRequest = feature.log ? requestLogWriter(pino({ level: 'info', base: { service: 'vidgen', role: 'all' } }, batchedLogDestination())) : undefined;
const sql = {
  // The task and its webhook's progress (a task with a webhook shows its delivery's status, attempts and last attempt),
  // as the server's view joins them: without the join the floor could not answer such a task.
  task: db
    .prepare(
      `SELECT t.id, t.status, t.model, t.prompt, t.duration, t.aspect_ratio, t.resolution, t.mode, t.media_urls, t.metadata, t.credits_charged,
              t.credits_refunded, t.output_key, t.output_expires_at, t.created_at, t.updated_at, t.completed_at, d.status, d.attempts, d.last_attempt_at
       FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id
       WHERE t.account_id = ? AND t.id = ?`,
    )
    .raw(true),
  // The first page of the list: the same columns as the query and the webhook's progress (the server's view joins it),
  // newest first by the account's index, one more than the page to know whether there is a next one. `LIMIT +?`: SQLite
  // plans with the value bound to a bare `LIMIT ?`, so every run would prepare the statement again (sqlite-plans.test.ts).
  // Every task of the page read and serialised for every request: the floor of a server that keeps no answers
  // (the server keeps them, http/task-answers.ts).
  page: db
    .prepare(
      `SELECT t.id, t.status, t.model, t.prompt, t.duration, t.aspect_ratio, t.resolution, t.mode, t.media_urls, t.metadata, t.credits_charged,
              t.credits_refunded, t.output_key, t.output_expires_at, t.created_at, t.updated_at, t.completed_at, d.status, d.attempts, d.last_attempt_at
       FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id
       WHERE t.account_id = ? ORDER BY t.created_at DESC, t.id DESC LIMIT +?`,
    )
    .raw(true),
  insertTask: db.prepare(
    `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url,
                        credits_charged, created_at, updated_at, deadline_at)
     VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, 'text_to_video', ?, ?, ?, ?, ?, ?, ?)`,
  ),
  lowerBalance: db.prepare('UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?'),
  charge: db.prepare(
    `INSERT INTO ledger_entries (account_id, kind, amount, task_id, created_at, balance_after) VALUES (?, 'charge', ?, ?, ?, (SELECT balance FROM accounts WHERE id = ?))`,
  ),
  job: db.prepare(
    `INSERT INTO jobs (task_id, kind, provider, state, max_attempts, run_at, created_at, updated_at) VALUES (?, 'generate', 'instant', 'available', 3, ?, ?, ?)`,
  ),
};
const validateSubmission = bodyValidator<RequestBody<'submitGeneration'>>('submitGeneration');

/** A task's own columns, in the order `sql.task` and `sql.page` read them. */
type TaskRow = [
  id: string, status: string, model: string, prompt: string, duration: number, aspectRatio: string, resolution: string, mode: string,
  mediaUrls: string, metadata: string | null, creditsCharged: number, creditsRefunded: number,
  outputKey: string | null, outputExpiresAt: number | null, createdAt: number, updatedAt: number, completedAt: number | null,
];

/** `sql.task`'s and `sql.page`'s columns: `TaskRow`'s, then the webhook's status, attempts and last attempt (null without one). */
type PageRow = [...TaskRow, webhookStatus: string | null, webhookAttempts: number | null, webhookLastAttemptAt: number | null];

const keyOf = floorKeys(db);
function accountOf(c: Context): string | undefined {
  const key = keyOf(c.req.header('authorization'));
  if (!key) return undefined;
  // With --features: the key's id too, for the log line (the floor itself needs only the account).
  if (FEATURES) c.set('key' as never, key as never);
  return key.accountId;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const signed = (key: string, expiresMs: number) => {
  const expires = String(Math.floor(expiresMs / 1000));
  return `http://127.0.0.1/files/${key}?expires=${expires}&sig=${createHmac('sha256', 'floor').update(`${key}:${expires}`).digest('base64url')}`;
};

const CORRELATION_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The answer: its JSON and status only; with --features also a correlation id (the caller's or a new one), the
 * server's headers for a JSON answer, `location`, and the request counted in the metrics under `route`.
 */
function reply(c: Context, started: number, route: string, body: unknown, status: number, location?: string): Response {
  if (!FEATURES) return c.json(body, status as never);
  const given = feature.correlation ? (c.env as { incoming: IncomingMessage }).incoming.headers['x-correlation-id'] : undefined;
  const correlationId = !feature.correlation ? '' : typeof given === 'string' && CORRELATION_ID.test(given) ? given : newCorrelationId(new Date());
  const headers: Record<string, string> = feature.headers
    ? jsonAnswerHeaders(c.req.path, correlationId)
    : feature.correlation
      ? { 'Content-Type': 'application/json', 'X-Correlation-Id': correlationId }
      : { 'Content-Type': 'application/json' };
  if (location && feature.headers) headers.Location = location;
  const response = new Response(JSON.stringify(body), { status, headers });
  const seconds = (performance.now() - started) / 1000;
  if (feature.metrics) requestMetrics.observe(c.req.method, route, status, seconds);
  if (!logRequest) return response;
  const key = c.get('key' as never) as { accountId: string; id: string } | undefined;
  logRequest({
    correlationId,
    method: c.req.method,
    route,
    path: redactSecrets(c.req.path),
    status,
    durationMs: Math.round(seconds * 1000 * 10) / 10,
    accountId: key?.accountId,
    keyId: key?.id,
  });
  return response;
}

const app = new Hono();
app.get(`${BASE}/:id`, async (c) => {
  const started = performance.now();
  const route = `${BASE}/:id`;
  const account = accountOf(c);
  if (!account) return reply(c, started, route, { success: false, error: { code: 'unauthorized' } }, 401);
  const t = await group.read(() => sql.task.get(account, c.req.param('id')) as PageRow | undefined);
  if (!t) return reply(c, started, route, { success: false, error: { code: 'not_found' } }, 404);
  return reply(c, started, route, resource(t), 200);
});
/** A task row (`sql.task`'s and `sql.page`'s columns) as the API shows it. */
const resource = (t: PageRow) => ({
  success: true,
  requestId: t[0],
  model: t[2],
  prompt: t[3],
  duration: t[4],
  aspectRatio: t[5],
  resolution: t[6],
  mode: t[7],
  mediaUrls: JSON.parse(t[8]),
  metadata: t[9] === null ? null : JSON.parse(t[9]),
  creditsCharged: t[10],
  creditsRefunded: t[11],
  createdAt: iso(t[14]),
  updatedAt: iso(t[15]),
  ...(t[17] !== null ? { webhook: { status: t[17], attempts: t[18], lastAttemptAt: iso(t[19] ?? null) } } : {}),
  status: t[1],
  output: t[12] === null || t[13] === null ? null : { type: 'video', url: signed(t[12], t[13]), expiresAt: iso(t[13]) },
  error: null,
  completedAt: iso(t[16]),
});
app.get(BASE, async (c) => {
  const started = performance.now();
  const account = accountOf(c);
  if (!account) return reply(c, started, BASE, { success: false, error: { code: 'unauthorized' } }, 401);
  const limit = 20;
  const rows = await group.read(() => sql.page.all(account, limit + 1) as PageRow[]);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  const nextCursor = rows.length > limit && last ? Buffer.from(JSON.stringify({ t: last[14], i: last[0], s: null })).toString('base64url') : null;
  return reply(c, started, BASE, { success: true, data: page.map(resource), nextCursor }, 200);
});
app.post(BASE, async (c) => {
  const started = performance.now();
  const account = accountOf(c);
  if (!account) return reply(c, started, BASE, { success: false, error: { code: 'unauthorized' } }, 401);
  let body: unknown;
  try {
    body = await readJson(c as never);
  } catch {
    return reply(c, started, BASE, { success: false, error: { code: 'invalid_request' } }, 400);
  }
  const checked = validateSubmission(body);
  if (!checked.ok) return reply(c, started, BASE, { success: false, error: { code: 'invalid_request' } }, 400);
  const r = checked.value;
  if (checkSubmissionRules(r).length) return reply(c, started, BASE, { success: false, error: { code: 'invalid_request' } }, 400);
  const now = Date.now();
  const id = newRequestId(new Date(now));
  const resolution = r.resolution ?? '480p';
  const duration = r.duration ?? 5;
  const price = priceOf(DEFAULT_PRICES, r.model, resolution, duration);
  const charged = await group.write(() => {
    if (sql.lowerBalance.run(price, account, price).changes !== 1) return false;
    sql.insertTask.run(id, account, r.model, r.prompt, duration, r.aspectRatio ?? '16:9', resolution, JSON.stringify(r.mediaUrls ?? []), r.metadata === undefined ? null : JSON.stringify(r.metadata), r.webhookUrl ?? null, price, now, now, now + DEADLINE_MS);
    sql.charge.run(account, -price, id, now, account);
    sql.job.run(id, now, now, now);
    usage?.add(account, r.model, now, { credits_charged: price });
    return true;
  });
  if (!charged) return reply(c, started, BASE, { success: false, error: { code: 'insufficient_credits' } }, 402);
  return reply(c, started, BASE, { success: true, requestId: id, status: 'queued', creditsCharged: price }, 202, `${BASE}/${id}`);
});

serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`floor: listening on http://127.0.0.1:${info.port}\n`);
});
process.on('SIGTERM', () => {
  group.flush();
  db.close();
  process.exit(0);
});
