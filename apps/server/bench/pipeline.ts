/**
 * The pipeline from submit to webhook received, on SQLite and on PostgreSQL in
 * the same run: one server process (`--role all`) per store with the instant
 * provider (a prepared MP4 at once, selected by configuration), webhooks to an
 * HTTPS receiver on loopback.
 *
 *   pnpm --filter @vidgen/server bench:pipeline [-- --tasks 2000 --concurrency 32 --paced 200 --rate 20]
 *
 * - throughput: `--tasks` submitted by `--concurrency` clients as fast as they
 *   are answered; tasks/s from the first submit to the last webhook received.
 * - latency: `--paced` tasks at `--rate` per second (not saturated); submit
 *   sent → webhook received, p50/p99.
 * PostgreSQL is skipped with a note when it is not reachable.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { openBackend } from '../src/store/open.js';
import type { Config } from '../src/config.js';
import { createAccountWithKey, pipelineEnv, startServerProcess, startWebhookReceiver, stopServerProcess } from '../test/support/pipeline-processes.js';
import { createTestDatabase, postgresAvailable } from '../test/support/postgres.js';

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '2000' }, concurrency: { type: 'string', default: '32' }, paced: { type: 'string', default: '200' }, rate: { type: 'string', default: '20' } },
  allowPositionals: true,
});
const TASKS = Number(values.tasks);
const CONCURRENCY = Number(values.concurrency);
const PACED = Number(values.paced);
const RATE = Number(values.rate);

const received = new Map<string, number>();
const waiters = new Map<string, () => void>();
const receiver = await startWebhookReceiver(({ requestId, at }) => {
  if (!received.has(requestId)) received.set(requestId, at);
  waiters.get(requestId)?.();
  return 204;
});

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function measure(name: string, database: Config['database']): Promise<Record<string, string>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-bench-pipeline-'));
  const backend = await openBackend({ database, jobLeaseMs: 60_000 }, { logger: pino({ level: 'silent' }), listen: false, supervise: false });
  const { key } = await createAccountWithKey(backend.store, 'bench', 1_000_000_000);
  await backend.close();

  // VIDGEN_BENCH_CPU_PROF=<dir>: a CPU profile of the server, written when it exits.
  const profile = process.env.VIDGEN_BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.VIDGEN_BENCH_CPU_PROF}`] : [];
  const { child: server, baseUrl } = await startServerProcess(
    'all',
    {
      ...pipelineEnv({ databaseUrl: database.kind === 'sqlite' ? `sqlite:${database.path}` : database.url, dataDir, receiverCaFile: receiver.writeCa(dataDir) }),
      VIDGEN_INSTANT_CONCURRENCY: '64',
      VIDGEN_WEBHOOK_CONCURRENCY: '64',
    },
    { nodeArgs: profile, inheritStderr: true },
  );

  const body = JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'bench', duration: 4, resolution: '480p', webhookUrl: receiver.url('/hooks') });
  const submit = async (): Promise<string> => {
    const res = await fetch(`${baseUrl}/api/open/v1/video/generations`, { method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }, body });
    if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${await res.text()}`);
    return ((await res.json()) as { requestId: string }).requestId;
  };
  // A webhook that never comes fails the run instead of hanging it.
  const delivered = (id: string) =>
    received.has(id)
      ? Promise.resolve()
      : new Promise<void>((done, fail) => {
          const timer = setTimeout(() => fail(new Error(`no webhook for ${id} within 60 s`)), 60_000);
          waiters.set(id, () => (clearTimeout(timer), done()));
        });

  try {
    // Warm-up: the instant provider prepares its MP4, connections open.
    await Promise.all(Array.from({ length: 20 }, async () => delivered(await submit())));

    // Throughput: as fast as submits are answered, until the last webhook arrives.
    const started = performance.now();
    let next = 0;
    const ids: string[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < TASKS) {
          next++;
          ids.push(await submit());
        }
      }),
    );
    const submitted = performance.now();
    await Promise.all(ids.map(delivered));
    const finished = performance.now();
    const throughput = TASKS / ((finished - started) / 1000);

    // Latency, not saturated: paced submits, each timed from send to its webhook.
    const latencies: number[] = [];
    const paced: Promise<void>[] = [];
    for (let i = 0; i < PACED; i++) {
      const sent = performance.now();
      paced.push(submit().then(async (id) => {
        await delivered(id);
        latencies.push(received.get(id)! - sent);
      }));
      await new Promise((done) => setTimeout(done, 1000 / RATE));
    }
    await Promise.all(paced);
    latencies.sort((a, b) => a - b);
    return {
      store: name,
      'tasks/s (submit → webhook)': throughput.toFixed(0),
      'submits/s': (TASKS / ((submitted - started) / 1000)).toFixed(0),
      // `--paced 0` measures throughput only.
      [`p50 latency @${RATE}/s`]: latencies.length ? `${percentile(latencies, 50).toFixed(1)} ms` : '—',
      [`p99 latency @${RATE}/s`]: latencies.length ? `${percentile(latencies, 99).toFixed(1)} ms` : '—',
    };
  } finally {
    // A graceful stop, so that a CPU profile is written; SIGKILL if it does not come.
    await stopServerProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const rows: Record<string, string>[] = [];
try {
  const sqliteDir = mkdtempSync(join(tmpdir(), 'vidgen-bench-sqlite-'));
  rows.push(await measure('SQLite', { kind: 'sqlite', path: join(sqliteDir, 'vidgen.db') }));
  rmSync(sqliteDir, { recursive: true, force: true });
  if (await postgresAvailable()) {
    const database = await createTestDatabase();
    try {
      rows.push(await measure('PostgreSQL', { kind: 'postgres', url: database.url, poolSize: 10 }));
    } finally {
      await database.drop();
    }
  } else {
    console.log('PostgreSQL is not reachable: measured SQLite only.');
  }
} finally {
  await receiver.close();
}

console.log(`\nPipeline, submit → webhook received (instant provider); ${TASKS} tasks at ${CONCURRENCY} clients, then ${PACED} paced at ${RATE}/s.`);
console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.\n`);
console.table(rows);
process.exit(0);
