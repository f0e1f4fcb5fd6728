/**
 * Several machines' worth of processes on one PostgreSQL: 2 API processes and
 * 2 worker processes (`--role api|worker`), 300 tasks submitted through both
 * APIs with webhooks, one worker killed with SIGKILL mid-run. Every task ends
 * terminal, every charge and refund happens once (ledger = balance), every
 * webhook arrives (repeats only with the same webhook-id), nothing stays
 * processing; a long poll on one API process is woken by a worker's move.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBackend, type Backend } from '../src/store/open.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import { silentLogger, SUBMIT, until } from './support.js';
import { createAccountWithKey, freePort, pipelineEnv, startServerProcess, startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from './support/pipeline-processes.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

const TASKS = 300;

describe.skipIf(!hasPostgres)('API and worker processes on one PostgreSQL', () => {
  const processes: ChildProcess[] = [];
  const received: ReceivedWebhook[] = [];
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let backend: Backend;
  let receiver: WebhookReceiver;
  let hookUrl: string;
  let caFile: string;
  let dataDir: string;
  let key: string;
  let accountId: string;

  /** Starts `dist/main.js --role <role>` (the built server) on the test's database; killed after the file. */
  function start(role: 'api' | 'worker', extraEnv: Record<string, string> = {}) {
    const env = {
      ...pipelineEnv({ databaseUrl: database.url, dataDir, receiverCaFile: caFile }),
      VIDGEN_FILE_URL_SECRET: 'multi-process',
      VIDGEN_INSTANT_DELAY_MS: '150',
      VIDGEN_INSTANT_CONCURRENCY: '8',
      VIDGEN_JOB_LEASE_SECONDS: '2',
      VIDGEN_WEBHOOK_CONCURRENCY: '16',
      ...extraEnv,
    };
    return startServerProcess(role, env, { onSpawn: (child) => processes.push(child) });
  }

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'vidgen-multi-'));
    backend = await openBackend({ database: { kind: 'postgres', url: database.url, poolSize: 4 }, jobLeaseMs: 2_000 }, { logger: silentLogger, listen: false, supervise: false });
    ({ accountId, key } = await createAccountWithKey(backend.store, 'multi', 10_000_000));
    receiver = await startWebhookReceiver((hook) => (received.push(hook), 204));
    hookUrl = receiver.url('/hooks');
    caFile = receiver.writeCa(dataDir);
  });

  afterAll(async () => {
    for (const child of processes) child.kill('SIGKILL');
    await backend?.close();
    await receiver?.close();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('300 tasks through 2 APIs and 2 workers, one worker killed: all terminal, charged once, webhooks delivered', { timeout: 180_000 }, async () => {
    // Outputs are files in the shared data dir served by the APIs: workers store URLs at API 1, on a port chosen now.
    const apiPort = await freePort();
    const filesAt = { VIDGEN_PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}` };
    const [api1, api2, worker1] = await Promise.all([start('api', { PORT: String(apiPort) }), start('api'), start('worker', filesAt), start('worker', filesAt)]);
    const apis = [api1!.baseUrl, api2!.baseUrl];
    expect(api1!.baseUrl).toBe(filesAt.VIDGEN_PUBLIC_BASE_URL);
    const submit = async (i: number) => {
      const res = await fetch(`${apis[i % 2]}${SUBMIT}`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Idempotency-Key': `multi-${i}` },
        body: JSON.stringify({ model: 'vidgen-2.0-fast', prompt: `task ${i}`, duration: 4, resolution: '480p', webhookUrl: hookUrl }),
      });
      const body = (await res.json()) as { requestId: string };
      expect(res.status, JSON.stringify(body)).toBe(202);
      return body.requestId;
    };

    // A long poll on API 2 for a task submitted through API 1 is answered by the worker's move, not its timeout.
    const first = await submit(0);
    const polled = Date.now();
    const long = await fetch(`${apis[1]}${SUBMIT}/${first}?wait=30`, { headers: { Authorization: `Bearer ${key}` } });
    expect(((await long.json()) as { status: string }).status).not.toBe('queued');
    expect(Date.now() - polled).toBeLessThan(15_000);

    const activeGenerations = async () =>
      // Jobs held under a lease (the task rows' own, pg-generation-lane.ts; the leases on this machine's clock, as the workers').
      ((await (backend.store as PgStore).pool.query(`SELECT count(*)::int AS n FROM tasks WHERE job_state = 'waiting' AND status IN ('queued', 'processing') AND job_lease_until > now()`)).rows[0] as { n: number }).n;
    const ids = [first];
    let killed = false;
    for (let i = 1; i < TASKS; i += 20) {
      ids.push(...(await Promise.all(Array.from({ length: Math.min(20, TASKS - i) }, (_, j) => submit(i + j)))));
      if (!killed && received.length >= 40) {
        // Mid-run: worker 1 holds jobs (8 at a time, 150 ms each) and dies without a word. More generation jobs
        // running than worker 2's 8 slots means some are worker 1's (right after a batch its claims may be in flight).
        await until(async () => (await activeGenerations()) > 8);
        worker1!.child.kill('SIGKILL');
        killed = true;
      }
    }
    if (!killed) worker1!.child.kill('SIGKILL');
    expect(ids).toHaveLength(TASKS);
    // A repeated submission (same Idempotency-Key) through the other API creates nothing.
    expect(await submit(2)).toBe(ids[2]);

    const deadline = Date.now() + 120_000;
    while (new Set(received.map((r) => r.requestId)).size < TASKS && Date.now() < deadline) await new Promise((done) => setTimeout(done, 100));

    const byStatus = await backend.store.countTasksByStatus();
    expect(byStatus.queued + byStatus.processing).toBe(0);

    // A worker's output URL is an API's, and that API serves the file.
    const done = (await (await fetch(`${apis[1]}${SUBMIT}/${ids.at(-1)}`, { headers: { Authorization: `Bearer ${key}` } })).json()) as { status: string; output: { url: string } | null };
    expect(done.status).toBe('succeeded');
    expect(done.output!.url.startsWith(`${filesAt.VIDGEN_PUBLIC_BASE_URL}/files/`)).toBe(true);
    expect((await fetch(done.output!.url)).status).toBe(200);
    expect(byStatus.succeeded + byStatus.failed + byStatus.cancelled).toBe(TASKS);

    // Exactly once: one charge per task, one refund per refunded task, and the balance equals the ledger.
    const ledger = await backend.store.listLedger(accountId);
    const charges = ledger.filter((e) => e.kind === 'charge');
    expect(charges).toHaveLength(TASKS);
    expect(new Set(charges.map((e) => e.taskId)).size).toBe(TASKS);
    expect(ledger.filter((e) => e.kind === 'refund')).toHaveLength(byStatus.failed + byStatus.cancelled);
    const audit = await backend.store.auditBalance(accountId);
    expect(audit!.balance).toBe(audit!.ledgerSum);

    // Every webhook arrived; a repeat (a delivery whose worker died after sending) carries the same webhook-id.
    const idsByTask = new Map<string, Set<string>>();
    for (const r of received) idsByTask.set(r.requestId, (idsByTask.get(r.requestId) ?? new Set()).add(r.webhookId));
    expect(new Set(idsByTask.keys())).toEqual(new Set(ids));
    for (const webhookIds of idsByTask.values()) expect(webhookIds.size).toBe(1);
    for (const id of ids) expect((await backend.store.getDeliveryForTask(id))?.status).toBe('delivered');

    // The kill really was mid-run: some job was taken back from the dead worker after its lease ran out.
    const pool = (backend.store as PgStore).pool;
    const { rows } = await pool.query(`SELECT count(*)::int AS n FROM tasks WHERE job_claims > 1`);
    expect(rows[0].n).toBeGreaterThan(0);
  });

  it('shares the request budget of a key across API processes (store-backed counters)', async () => {
    const limited = { VIDGEN_RATE_LIMIT_READS: '10' };
    const [a, b] = await Promise.all([start('api', limited), start('api', limited)]);
    const answers: Response[] = [];
    for (let i = 0; i < 12; i++) answers.push(await fetch(`${[a!.baseUrl, b!.baseUrl][i % 2]}/api/open/v1/models`, { headers: { Authorization: `Bearer ${key}` } }));
    const statuses = answers.map((res) => res.status);
    // The window may turn over during the run; then the count starts again, never more than 10 per window.
    const firstRefusal = statuses.indexOf(429);
    expect(firstRefusal === -1 ? statuses.every((s) => s === 200) : firstRefusal).toBe(firstRefusal === -1 ? true : 10);
    expect(answers[0]!.headers.get('ratelimit-policy')).toBe('"read";q=10;w=60');
    expect(answers[1]!.headers.get('ratelimit')).toMatch(/^"read";r=8;t=\d+$/);
    if (firstRefusal !== -1) {
      const refused = answers[firstRefusal]!;
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('rate_limited');
    }
  });
});
