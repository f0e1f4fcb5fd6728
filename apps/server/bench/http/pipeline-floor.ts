/**
 * The floor of the SQLite pipeline (bench/pipeline.ts's `SQLite floor` row): the least one process must do on this
 * service's stack (Hono on @hono/node-server, better-sqlite3, Node's HTTPS client) to take a task from its submission
 * to its webhook received, with every state that must survive a crash in the store before it matters. Started as the
 * server is (`--role all` is taken and ignored), on a store migrated as the server's (VIDGEN_DATABASE_URL
 * `sqlite:PATH`), its outputs in VIDGEN_DATA_DIR, webhooks trusted to VIDGEN_WEBHOOK_CA_FILE's receiver.
 *
 * For each task:
 * - the submission as the submission's floor does it (bench/http/floor.ts, the server's readJson, validator and
 *   rules): the key's hash (its account kept for good), the body read, validated, the balance lowered and the task,
 *   the charge and the generate job written in one savepoint of the server's group commit; 202 once committed. The
 *   task then goes to this process's own worker in memory, where the server's claim reads it back from the store
 *   (a restarted floor would have to read its jobs; this one never restarts);
 * - the job leased and the task made `processing`, committed before the provider is called (a provider that costs
 *   money is called only for a task the store says is running);
 * - the server's instant provider (src/providers/instant): its prepared MP4 linked (or copied) to the task's output file;
 * - the task `succeeded` with its output, the job done and the webhook's delivery (its body, the exact text signed)
 *   written in one savepoint: the outbox a crash cannot lose;
 * - the delivery sent by the server's sender (src/webhooks/sender.ts: connections kept per receiver, the address
 *   checked, the Standard Webhooks signature), and recorded delivered in one savepoint.
 *
 * Left out as the server's own choices: the task's moves published to long polls, the usage totals, the attempts'
 * history, the `deliver` job (the delivery row is the outbox), the log lines and metrics, limits of any kind, and
 * answers to anything but a submission. Concurrency: every task is worked on at once (the server runs 64 a process
 * in the bench).
 *
 * So a pipeline's rate the floor misses in the same run is out of reach of any server doing this work here.
 */
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { DEFAULT_PRICES, priceOf } from '../../src/domain/catalog.js';
import { inferMode, mediaKindOf } from '../../src/domain/rules.js';
import { newRequestId, newUlid } from '../../src/domain/ids.js';
import { createLocalOutputFiles } from '../../src/files/storage.js';
import { floorSubmissions } from './floor-submission.js';
import { createInstantProvider } from '../../src/providers/instant/instant-provider.js';
import type { GenerationRequest } from '../../src/providers/provider.js';
import { GroupCommit } from '../../src/store/sqlite/group-commit.js';
import { createWebhookSender } from '../../src/webhooks/sender.js';
import { floorKeys } from './floor-keys.js';

const BASE = '/api/open/v1/video/generations';
const DEADLINE_MS = 60 * 60 * 1000;
const LEASE_MS = 10 * 60 * 1000;
const OUTPUT_TTL_MS = 7 * 24 * 60 * 60 * 1000;

const url = process.env.VIDGEN_DATABASE_URL ?? '';
if (!url.startsWith('sqlite:')) throw new Error('pipeline floor: VIDGEN_DATABASE_URL must be sqlite:PATH');
const dataDir = process.env.VIDGEN_DATA_DIR!;
const outputs = join(dataDir, 'outputs');
// The server's local output store, for its signed URLs (the floor copies each file into place itself, no `put`).
const files = createLocalOutputFiles({ directory: outputs, publicBaseUrl: 'http://127.0.0.1', secret: randomBytes(32) });
const db = new Database(url.slice('sqlite:'.length));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = ON');
db.pragma('busy_timeout = 5000');
db.pragma('temp_store = MEMORY');
const group = new GroupCommit(db);

const provider = createInstantProvider({ preparedPath: join(dataDir, 'instant', 'prepared.mp4'), delayMs: 0 });
const sender = createWebhookSender({ allowLoopback: true, ca: readFileSync(process.env.VIDGEN_WEBHOOK_CA_FILE!) });
const secrets = [`whsec_${randomBytes(24).toString('base64')}`];

const sql = {
  lowerBalance: db.prepare('UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?'),
  insertTask: db.prepare(
    `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url,
                        credits_charged, created_at, updated_at, deadline_at)
     VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ),
  charge: db.prepare(
    `INSERT INTO ledger_entries (account_id, kind, amount, task_id, created_at, balance_after) VALUES (?, 'charge', ?, ?, ?, (SELECT balance FROM accounts WHERE id = ?))`,
  ),
  insertJob: db.prepare(
    `INSERT INTO jobs (task_id, kind, provider, state, max_attempts, run_at, created_at, updated_at) VALUES (?, 'generate', 'instant', 'available', 3, ?, ?, ?)`,
  ),
  leaseJob: db.prepare(
    `UPDATE jobs SET state = 'leased', attempts = attempts + 1, lease_until = ?, updated_at = ? WHERE task_id = ? AND kind = 'generate' AND state = 'available'`,
  ),
  startTask: db.prepare(`UPDATE tasks SET status = 'processing', updated_at = ? WHERE id = ? AND status = 'queued'`),
  succeedTask: db.prepare(
    `UPDATE tasks SET status = 'succeeded', output_key = ?, output_expires_at = ?, completed_at = ?, updated_at = ? WHERE id = ? AND status = 'processing'`,
  ),
  finishJob: db.prepare(`UPDATE jobs SET state = 'done', lease_until = NULL, updated_at = ? WHERE task_id = ? AND kind = 'generate'`),
  insertDelivery: db.prepare(
    `INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)`,
  ),
  delivered: db.prepare(`UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_attempt_at = ?, updated_at = ? WHERE id = ?`),
};

const keyOf = floorKeys(db);
const readSubmission = floorSubmissions((authorization) => keyOf(authorization)?.accountId);

/** What the worker needs of a submitted task, as the submission wrote it: the provider's request but for where and how long. */
interface Submitted {
  generation: Omit<GenerationRequest, 'outputPath' | 'signal'>;
  accountId: string;
  mediaUrls: string[];
  metadata: unknown;
  price: number;
  createdAt: number;
  webhookUrl: string | null;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** The task's event (D8): the task as the query answers it, succeeded with its output. */
function eventBody(task: Submitted, url: string, expiresAt: number, at: number): string {
  const { taskId, references: _none, ...fields } = task.generation;
  return JSON.stringify({
    type: 'video.generation.succeeded',
    timestamp: iso(at),
    data: {
      requestId: taskId,
      ...fields,
      mediaUrls: task.mediaUrls,
      metadata: task.metadata,
      creditsCharged: task.price,
      creditsRefunded: 0,
      createdAt: iso(task.createdAt),
      updatedAt: iso(at),
      status: 'succeeded',
      output: { type: 'video', url, expiresAt: iso(expiresAt) },
      error: null,
      completedAt: iso(at),
    },
  });
}

/** One task from its committed submission to its delivery recorded. */
async function run(task: Submitted): Promise<void> {
  const id = task.generation.taskId;
  const started = Date.now();
  const leased = await group.write(() => {
    if (sql.leaseJob.run(started + LEASE_MS, started, id).changes !== 1) return false;
    sql.startTask.run(started, id);
    return true;
  });
  if (!leased) return;
  const key = `${id}.mp4`;
  const result = await provider.generate({ ...task.generation, outputPath: join(outputs, key), signal: new AbortController().signal });
  if (!result.ok) throw new Error(`pipeline floor: the instant provider failed: ${result.error.message}`);
  const at = Date.now();
  const expiresAt = at + OUTPUT_TTL_MS;
  const body = eventBody(task, await files.urlFor(key, new Date(expiresAt)), expiresAt, at);
  const deliveryId = `msg_${newUlid(at)}`;
  await group.write(() => {
    sql.succeedTask.run(key, expiresAt, at, at, id);
    sql.finishJob.run(at, id);
    if (task.webhookUrl) sql.insertDelivery.run(deliveryId, id, task.accountId, task.webhookUrl, 'video.generation.succeeded', body, at, at);
  });
  if (!task.webhookUrl) return;
  const sent = await sender.send({ url: task.webhookUrl, id: deliveryId, body, secrets });
  if (sent.outcome !== 'delivered') throw new Error(`pipeline floor: the webhook was not delivered: ${JSON.stringify(sent)}`);
  const done = Date.now();
  await group.write(() => void sql.delivered.run(done, done, deliveryId));
}

const app = new Hono();
app.post(BASE, async (c) => {
  const submission = await readSubmission(c);
  if (submission.refused) return submission.refused;
  const { account, value: r } = submission;
  const now = Date.now();
  const mediaUrls = r.mediaUrls ?? [];
  const g: Submitted['generation'] = {
    taskId: newRequestId(new Date(now)),
    model: r.model,
    prompt: r.prompt,
    duration: r.duration ?? 5,
    aspectRatio: r.aspectRatio ?? '16:9',
    resolution: r.resolution ?? '480p',
    mode: inferMode(mediaUrls.map((media) => mediaKindOf(media)!)),
    references: [],
  };
  const price = priceOf(DEFAULT_PRICES, r.model, g.resolution, g.duration);
  const task: Submitted = { generation: g, accountId: account, mediaUrls, metadata: r.metadata ?? null, price, createdAt: now, webhookUrl: r.webhookUrl ?? null };
  const charged = await group.write(() => {
    if (sql.lowerBalance.run(price, account, price).changes !== 1) return false;
    sql.insertTask.run(g.taskId, account, g.model, g.prompt, g.duration, g.aspectRatio, g.resolution, g.mode, JSON.stringify(mediaUrls),
      r.metadata === undefined ? null : JSON.stringify(r.metadata), task.webhookUrl, price, now, now, now + DEADLINE_MS);
    sql.charge.run(account, -price, g.taskId, now, account);
    sql.insertJob.run(g.taskId, now, now, now);
    return true;
  });
  if (!charged) return c.json({ success: false, error: { code: 'insufficient_credits' } }, 402);
  run(task).catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
  return c.json({ success: true, requestId: g.taskId, status: 'queued', creditsCharged: price }, 202);
});

serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`pipeline floor: listening on http://127.0.0.1:${info.port}\n`);
});
process.on('SIGTERM', () => {
  group.flush();
  db.close();
  process.exit(0);
});
