/**
 * The floor of the PostgreSQL pipeline (bench/pipeline.ts's `PostgreSQL floor, 2 api + 2 worker` row, and `PostgreSQL
 * floor` for one `--role all` process): the least that 2 `api` and 2 `worker` processes (or one process doing both) on
 * one PostgreSQL must do on this service's stack (Hono on @hono/node-server, node-postgres, Node's HTTPS client) to
 * take a task from its submission to its webhook received, with every state that must survive a crash in the store
 * before it matters. What pipeline-floor.ts is to the SQLite pipeline, for the processes the operator runs apart or
 * together. Started as the server is (`--role api`, `--role worker` or `--role all`), on a database
 * migrated as the server's (VIDGEN_DATABASE_URL), its outputs in VIDGEN_DATA_DIR, webhooks trusted to
 * VIDGEN_WEBHOOK_CA_FILE's receiver; an api process listens on PORT when it is set.
 *
 * An `api` process, for each submission: the key's hash (its account kept for good), the body read, validated
 * against the spec and the rules, priced; then the submissions of an event-loop turn (and those arriving while the
 * previous message is in flight) in one message, one transaction: the tasks with their generation jobs in one
 * multi-row INSERT, the account's balance lowered once for all of them with their ledger entries in one statement,
 * one NOTIFY to the workers (in `--role all`, the process's own worker woken in the process instead); 202 once committed. (Were the balance short, the message would fail and each submission
 * be sent alone: never the case in the bench.)
 *
 * A `worker` process: woken by the NOTIFY, it claims the due tasks of its lane and starts them in one statement (a
 * lease on each task's row, as the server's claim does), at most 64 running at once; for each, the server's instant
 * provider links its prepared MP4 to the task's output; then the tasks finished together are made `succeeded` with
 * their webhook deliveries (the exact text signed: the outbox a crash cannot lose) in one message; the deliveries are
 * sent by the server's sender (connections kept per receiver, the address checked, the Standard Webhooks signature),
 * and those delivered together recorded in one statement.
 *
 * Left out, as the server's own choices: the tasks' moves announced to long polls (the status trigger is dropped from
 * the floor's database), the usage totals, the attempts' history, the deliveries' own leases, the log lines and
 * metrics, limits of any kind, answers to anything but a submission, lease extension and every recovery path (a
 * floor that never crashes). Statements carry their values as literals (one message per transaction, as the
 * server's combined messages do); node-postgres keeps no plans for them.
 *
 * So a rate the floor misses in the same run is out of reach, on this machine, of any split deployment doing this work.
 */
import pg from 'pg';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { DEFAULT_PRICES, priceOf } from '../../src/domain/catalog.js';
import { inferMode, mediaKindOf } from '../../src/domain/rules.js';
import { hashApiKey } from '../../src/domain/keys.js';
import { newRequestId, newUlid } from '../../src/domain/ids.js';
import { createLocalOutputFiles } from '../../src/files/storage.js';
import { floorSubmissions } from './floor-submission.js';
import { createInstantProvider } from '../../src/providers/instant/instant-provider.js';
import { Coalescer } from '../../src/store/postgres/combined-messages.js';
import { literal } from '../../src/store/postgres/literals.js';
import { createWebhookSender } from '../../src/webhooks/sender.js';

const BASE = '/api/open/v1/video/generations';
const DEADLINE_MS = 60 * 60 * 1000;
const LEASE_MS = 10 * 60 * 1000;
const OUTPUT_TTL_MS = 7 * 24 * 60 * 60 * 1000;
const LANE = 'instant';
/** Tasks a worker runs at once, as the bench's server runs (VIDGEN_INSTANT_CONCURRENCY). */
const SLOTS = Number(process.env.VIDGEN_INSTANT_CONCURRENCY ?? 64);

const role = process.argv[process.argv.indexOf('--role') + 1];
const url = process.env.VIDGEN_DATABASE_URL ?? '';
if (!url.startsWith('postgres')) throw new Error('PostgreSQL pipeline floor: VIDGEN_DATABASE_URL must be a postgres:// URL');
const pool = new pg.Pool({ connectionString: url, max: 4 });
pool.on('error', () => {});
const oneBatch = { lanes: 1, maxCallers: 64 };
const values = (row: unknown[]) => `(${row.map(literal).join(', ')})`;
const iso = (ms: number) => new Date(ms).toISOString();

if (role !== 'api' && role !== 'worker' && role !== 'all') throw new Error(`PostgreSQL pipeline floor: --role api, worker or all, not ${role}`);
// `all`: both in one process, as the server's `--role all` (the one-process topology's floor): its worker woken in
// the process by each message committed, no NOTIFY.
if (role === 'all') {
  let wake = () => {};
  await startApi(() => wake());
  wake = await startWorker();
} else if (role === 'api') await startApi();
else await startWorker();

process.on('SIGTERM', () => void pool.end().finally(() => process.exit(0)));

interface Submission {
  taskId: string;
  accountId: string;
  row: unknown[];
  price: number;
  now: number;
}

/** `wake`: this process's worker, woken once a message has committed (then no NOTIFY is sent). */
async function startApi(wake?: () => void): Promise<void> {
  // The tasks' moves announced to long polls are the server's: not the floor's.
  await pool.query('DROP TRIGGER IF EXISTS tasks_status_changed ON tasks');
  const keys = new Map<string, string>();
  const accountOf = async (authorization: string | undefined): Promise<string | undefined> => {
    if (!authorization?.startsWith('Bearer ')) return undefined;
    const hash = hashApiKey(authorization.slice(7));
    let account = keys.get(hash);
    if (account === undefined) {
      const { rows } = await pool.query<{ account_id: string }>('SELECT account_id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL', [hash]);
      if (!rows[0]) return undefined;
      keys.set(hash, (account = rows[0].account_id));
    }
    return account;
  };
  const readSubmission = floorSubmissions(accountOf);

  const message = (batch: Submission[]): string => {
    const statements = [
      `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url,
                          credits_charged, created_at, updated_at, deadline_at, job_lane, job_state, job_run_at, job_max_attempts)
       VALUES ${batch.map((s) => values(s.row)).join(', ')}`,
    ];
    for (const accountId of new Set(batch.map((s) => s.accountId))) {
      const mine = batch.filter((s) => s.accountId === accountId);
      const total = mine.reduce((sum, s) => sum + s.price, 0);
      // Each entry's balance after it: the balance after all of them plus what the later ones charged.
      let later = total;
      const entries = mine.map((s) => values([s.taskId, -s.price, iso(s.now), (later -= s.price)]));
      statements.push(
        `WITH charged AS (UPDATE accounts SET balance = balance - ${total} WHERE id = ${literal(accountId)} AND balance >= ${total} RETURNING balance),
              enough AS (SELECT vidgen_require(count(*) = 1, 'insufficient_credits') FROM charged)
         INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after)
         SELECT ${literal(accountId)}, 'charge', e.amount, e.task_id, NULL, e.created_at::timestamptz, charged.balance + e.later
         FROM charged, enough, (VALUES ${entries.join(', ')}) AS e (task_id, amount, created_at, later)`,
      );
    }
    if (!wake) statements.push(`SELECT pg_notify('vidgen_jobs', ${literal(LANE)})`);
    return statements.join(';\n');
  };
  const submissions = new Coalescer<Submission, boolean>(async (batch) => {
    try {
      await pool.query(message(batch));
      wake?.();
      return batch.map(() => ({ ok: true, value: true }));
    } catch {
      // Short of credits (or anything else PostgreSQL refused): each on its own, the short one refused alone.
      const each = await Promise.all(batch.map((s) => pool.query(message([s])).then(() => ({ ok: true as const, value: true }), () => ({ ok: true as const, value: false }))));
      wake?.();
      return each;
    }
  }, oneBatch);

  const app = new Hono();
  app.post(BASE, async (c) => {
    const submission = await readSubmission(c);
    if (submission.refused) return submission.refused;
    const { account, value: r } = submission;
    const now = Date.now();
    const mediaUrls = r.mediaUrls ?? [];
    const taskId = newRequestId(new Date(now));
    const duration = r.duration ?? 5;
    const resolution = r.resolution ?? '480p';
    const mode = inferMode(mediaUrls.map((media) => mediaKindOf(media)!));
    const price = priceOf(DEFAULT_PRICES, r.model, resolution, duration);
    const row = [taskId, account, 'queued', r.model, r.prompt, duration, r.aspectRatio ?? '16:9', resolution, mode, JSON.stringify(mediaUrls),
      r.metadata === undefined ? null : JSON.stringify(r.metadata), r.webhookUrl ?? null, price, iso(now), iso(now), iso(now + DEADLINE_MS),
      LANE, 'waiting', iso(now), 3];
    if (!(await submissions.call({ taskId, accountId: account, row, price, now }))) {
      return c.json({ success: false, error: { code: 'insufficient_credits' } }, 402);
    }
    return c.json({ success: true, requestId: taskId, status: 'queued', creditsCharged: price }, 202);
  });
  const port = Number(process.env.PORT ?? 0);
  serve({ fetch: app.fetch, port, hostname: '127.0.0.1' }, (info) => {
    process.stdout.write(`PostgreSQL pipeline floor: listening on http://127.0.0.1:${info.port}\n`);
  });
}

/** A claimed task, as the claim answered it. */
interface Claimed {
  id: string;
  account_id: string;
  model: string;
  prompt: string;
  duration: number;
  aspect_ratio: string;
  resolution: string;
  mode: string;
  media_urls: unknown;
  metadata: unknown;
  webhook_url: string | null;
  credits_charged: string;
  created_at: Date;
}

/** A task finished by the provider: what its success writes. */
interface Finished {
  task: Claimed;
  key: string;
  deliveryId: string;
  body: string;
  at: number;
  expiresAt: number;
}

/** Starts the worker; answers its wake-up (a claim round). */
async function startWorker(): Promise<() => void> {
  const dataDir = process.env.VIDGEN_DATA_DIR!;
  const outputs = join(dataDir, 'outputs');
  const files = createLocalOutputFiles({ directory: outputs, publicBaseUrl: process.env.VIDGEN_PUBLIC_BASE_URL ?? 'http://127.0.0.1', secret: randomBytes(32) });
  const provider = createInstantProvider({ preparedPath: join(dataDir, 'instant', 'prepared.mp4'), delayMs: 0 });
  const sender = createWebhookSender({ allowLoopback: true, ca: readFileSync(process.env.VIDGEN_WEBHOOK_CA_FILE!) });
  const secrets = [`whsec_${randomBytes(24).toString('base64')}`];

  const succeeded = new Coalescer<Finished, void>(async (batch) => {
    const tasks = batch.map((f) => values([f.task.id, f.key, iso(f.expiresAt), iso(f.at)]));
    const deliveries = batch.filter((f) => f.task.webhook_url).map((f) =>
      values([f.deliveryId, f.task.id, f.task.account_id, f.task.webhook_url, 'video.generation.succeeded', f.body, 'pending', iso(f.at), iso(f.at), iso(f.at)]));
    await pool.query(
      [
        `UPDATE tasks SET status = 'succeeded', output_key = f.key, output_expires_at = f.expires_at::timestamptz, completed_at = f.at::timestamptz, updated_at = f.at::timestamptz
         FROM (VALUES ${tasks.join(', ')}) AS f (id, key, expires_at, at) WHERE tasks.id = f.id AND tasks.status = 'processing'`,
        ...(deliveries.length
          ? [`INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at) VALUES ${deliveries.join(', ')}`]
          : []),
      ].join(';\n'),
    );
    return batch.map(() => ({ ok: true, value: undefined }));
  }, oneBatch);
  const delivered = new Coalescer<string, void>(async (ids) => {
    await pool.query(
      `UPDATE webhook_deliveries SET status = 'delivered', attempts = attempts + 1, last_attempt_at = now(), next_attempt_at = NULL, updated_at = now()
       WHERE id IN (${ids.map(literal).join(', ')})`,
    );
    return ids.map(() => ({ ok: true, value: undefined }));
  }, oneBatch);

  const fail = (error: unknown) => {
    console.error(error);
    process.exit(1);
  };
  /** One task from its claim to its delivery recorded. */
  const run = async (task: Claimed): Promise<void> => {
    const key = `${task.id}.mp4`;
    const result = await provider.generate({
      taskId: task.id, model: task.model, prompt: task.prompt, duration: task.duration, aspectRatio: task.aspect_ratio, resolution: task.resolution,
      mode: task.mode, references: [], outputPath: join(outputs, key), signal: new AbortController().signal,
    } as never);
    if (!result.ok) throw new Error(`PostgreSQL pipeline floor: the instant provider failed: ${result.error.message}`);
    const at = Date.now();
    const expiresAt = at + OUTPUT_TTL_MS;
    const body = JSON.stringify({
      type: 'video.generation.succeeded',
      timestamp: iso(at),
      data: {
        requestId: task.id, model: task.model, prompt: task.prompt, duration: task.duration, aspectRatio: task.aspect_ratio, resolution: task.resolution,
        mode: task.mode, mediaUrls: task.media_urls, metadata: task.metadata, creditsCharged: Number(task.credits_charged), creditsRefunded: 0,
        createdAt: task.created_at.toISOString(), updatedAt: iso(at), status: 'succeeded',
        output: { type: 'video', url: await files.urlFor(key, new Date(expiresAt)), expiresAt: iso(expiresAt) }, error: null, completedAt: iso(at),
      },
    });
    const deliveryId = `msg_${newUlid(at)}`;
    await succeeded.call({ task, key, deliveryId, body, at, expiresAt });
    if (!task.webhook_url) return;
    const sent = await sender.send({ url: task.webhook_url, id: deliveryId, body, secrets });
    if (sent.outcome !== 'delivered') throw new Error(`PostgreSQL pipeline floor: the webhook was not delivered: ${JSON.stringify(sent)}`);
    await delivered.call(deliveryId);
  };

  // Claims: one at a time; woken by a NOTIFY, again while the last one filled the slots it asked for.
  let running = 0;
  let claiming = false;
  let again = false;
  const claim = async (): Promise<void> => {
    if (claiming) return void (again = true);
    claiming = true;
    try {
      do {
        again = false;
        const room = SLOTS - running;
        if (room <= 0) break;
        const { rows } = await pool.query<Claimed>(
          `WITH picked AS (
             SELECT id AS picked_id FROM tasks
             WHERE job_lane = $1 AND job_state = 'waiting' AND status IN ('queued', 'processing') AND job_run_at <= now() AND (job_lease_until IS NULL OR job_lease_until <= now())
             ORDER BY job_run_at LIMIT $2 FOR NO KEY UPDATE SKIP LOCKED)
           UPDATE tasks SET job_lease_id = job_lease_id + 1, job_claims = job_claims + 1, job_lease_until = now() + $3::interval, status = 'processing', updated_at = now()
           FROM picked WHERE tasks.id = picked.picked_id
           RETURNING id, account_id, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url, credits_charged, created_at`,
          [LANE, room, `${LEASE_MS} milliseconds`],
        );
        for (const task of rows) {
          running++;
          run(task)
            .then(() => {
              running--;
              void claim();
            })
            .catch(fail);
        }
        if (rows.length === room) again = true;
      } while (again);
    } finally {
      claiming = false;
    }
  };
  const listener = new pg.Client({ connectionString: url });
  await listener.connect();
  listener.on('notification', () => void claim().catch(fail));
  await listener.query('LISTEN vidgen_jobs');
  // Tasks submitted before the LISTEN, and any NOTIFY missed: a look every second.
  setInterval(() => void claim().catch(fail), 1000).unref();
  void claim().catch(fail);
  process.stdout.write('PostgreSQL pipeline floor: worker started\n');
  return () => void claim().catch(fail);
}
