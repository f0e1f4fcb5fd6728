/**
 * A cancel through an `api` process reaches the render on a `worker` process, on PostgreSQL. A worker alone listens
 * for cancels only (migration 0010's channel), not for every status move: this is the path that shows it still
 * hears the one it needs. The render would take ten minutes in the worker's one slot; the next task starts in it
 * only once the worker has stopped the render.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openBackend, type Backend } from '../src/store/open.js';
import { silentLogger, SUBMIT, until, validSubmit } from './support.js';
import { createAccountWithKey, pipelineEnv, startServerProcess, startWebhookReceiver, type WebhookReceiver } from './support/pipeline-processes.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

describe.skipIf(!hasPostgres)('a cancel through an API process, the render on a worker process', () => {
  const processes: ChildProcess[] = [];
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let backend: Backend;
  let receiver: WebhookReceiver;
  let dataDir: string;
  let key: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = mkdtempSync(join(tmpdir(), 'vidgen-cancel-'));
    backend = await openBackend({ database: { kind: 'postgres', url: database.url, poolSize: 2 }, jobLeaseMs: 60_000 }, { logger: silentLogger, listen: false, supervise: false });
    ({ key } = await createAccountWithKey(backend.store, 'cancel', 1_000_000));
    receiver = await startWebhookReceiver(() => 204);
  });

  afterAll(async () => {
    for (const child of processes) child.kill('SIGKILL');
    await backend?.close();
    await receiver?.close();
    await database?.drop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('stops the render at once, and frees its slot for the next task', { timeout: 60_000 }, async () => {
    const env = {
      ...pipelineEnv({ databaseUrl: database.url, dataDir, receiverCaFile: receiver.writeCa(dataDir) }),
      // Ten minutes a render, one at a time: only a cancel heard ends it within the test.
      VIDGEN_INSTANT_DELAY_MS: '600000',
      VIDGEN_INSTANT_CONCURRENCY: '1',
    };
    const [api] = await Promise.all([
      startServerProcess('api', env, { onSpawn: (child) => processes.push(child) }),
      // Its outputs' URLs would name the API (none is made here: no render ends).
      startServerProcess('worker', { ...env, VIDGEN_PUBLIC_BASE_URL: 'http://127.0.0.1:9' }, { onSpawn: (child) => processes.push(child) }),
    ]);
    const call = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(`${api!.baseUrl}${path}`, { ...init, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' } });
      return { status: res.status, body: (await res.json()) as { requestId: string; status: string } };
    };
    const submit = async () => (await call(SUBMIT, { method: 'POST', body: JSON.stringify(validSubmit()) })).body.requestId;
    const status = async (id: string) => (await call(`${SUBMIT}/${id}`)).body.status;

    const first = await submit();
    await until(async () => (await status(first)) === 'processing');
    const second = await submit();
    expect(await status(second)).toBe('queued');

    const cancelled = await call(`${SUBMIT}/${first}/cancel`, { method: 'POST' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('cancelled');
    // The worker stopped the render (it would have held its one slot for ten minutes): the slot took the next task.
    await until(async () => (await status(second)) === 'processing', 30_000);
    expect(await status(first)).toBe('cancelled');
  });
});
