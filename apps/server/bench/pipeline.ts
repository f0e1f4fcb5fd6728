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
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { createAccount, issueApiKey } from '../src/accounts.js';
import { openBackend } from '../src/store/open.js';
import type { Config } from '../src/config.js';
import { startHttpsFixture } from '../test/support/https-fixture.js';
import { createTestDatabase, postgresAvailable } from '../test/support/postgres.js';

const { values } = parseArgs({
  options: { tasks: { type: 'string', default: '2000' }, concurrency: { type: 'string', default: '32' }, paced: { type: 'string', default: '200' }, rate: { type: 'string', default: '20' } },
  allowPositionals: true,
});
const TASKS = Number(values.tasks);
const CONCURRENCY = Number(values.concurrency);
const PACED = Number(values.paced);
const RATE = Number(values.rate);
const root = resolve(import.meta.dirname, '..');
const MODELS = '{"vidgen-2.0":"instant","vidgen-2.0-fast":"instant","vidgen-1.5-pro":"instant"}';

const received = new Map<string, number>();
const waiters = new Map<string, () => void>();
const receiver = await startHttpsFixture((req, res) => {
  let body = '';
  req.on('data', (chunk: Buffer) => (body += chunk.toString()));
  req.on('end', () => {
    const at = performance.now();
    const id = (JSON.parse(body) as { data: { requestId: string } }).data.requestId;
    if (!received.has(id)) received.set(id, at);
    waiters.get(id)?.();
    res.writeHead(204).end();
  });
});

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function measure(name: string, database: Config['database']): Promise<Record<string, string>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-bench-pipeline-'));
  const caFile = join(dataDir, 'receiver-ca.pem');
  writeFileSync(caFile, receiver.ca);
  const backend = await openBackend({ database, jobLeaseMs: 60_000 }, { logger: pino({ level: 'silent' }), listen: false, supervise: false });
  const account = await createAccount(backend.store, { name: 'bench', credits: 1_000_000_000, now: new Date() });
  const { key } = await issueApiKey(backend.store, { accountId: account.id, mode: 'test', scopes: ['tasks:read', 'tasks:write'], name: null, expiresAt: null, now: new Date() });
  await backend.close();

  // VIDGEN_BENCH_CPU_PROF=<dir>: a CPU profile of the server, written when it exits.
  const profile = process.env.VIDGEN_BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.VIDGEN_BENCH_CPU_PROF}`] : [];
  const server: ChildProcess = spawn(process.execPath, [...profile, '--import', 'tsx', 'src/main.ts', '--role', 'all'], {
    cwd: root,
    env: {
      ...process.env,
      VIDGEN_DATABASE_URL: database.kind === 'sqlite' ? `sqlite:${database.path}` : database.url,
      VIDGEN_DATA_DIR: dataDir,
      VIDGEN_LOG_LEVEL: 'silent',
      VIDGEN_DEV_BOOTSTRAP: 'false',
      PORT: '0',
      HOST: '127.0.0.1',
      VIDGEN_PROVIDERS: MODELS,
      VIDGEN_INSTANT_CONCURRENCY: '64',
      VIDGEN_WEBHOOK_CONCURRENCY: '64',
      VIDGEN_WEBHOOK_CA_FILE: caFile,
      VIDGEN_WEBHOOK_ALLOW_LOOPBACK: 'true',
      VIDGEN_RATE_LIMIT_SUBMITS: '0',
      VIDGEN_RATE_LIMIT_READS: '0',
      VIDGEN_MAX_ACTIVE_TASKS: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const baseUrl = await new Promise<string>((done, fail) => {
    let output = '';
    server.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) done(match[1]!);
    });
    server.once('exit', (code) => fail(new Error(`server exited ${code}: ${output}`)));
  });

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
      [`p50 latency @${RATE}/s`]: `${percentile(latencies, 50).toFixed(1)} ms`,
      [`p99 latency @${RATE}/s`]: `${percentile(latencies, 99).toFixed(1)} ms`,
    };
  } finally {
    // A graceful stop, so that a CPU profile is written; SIGKILL if it does not come.
    const exited = new Promise((done) => server.once('exit', done));
    server.kill('SIGTERM');
    const timer = setTimeout(() => server.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
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
