/**
 * The pipeline from submit to webhook received, on SQLite and on PostgreSQL in
 * the same run: one server process (`--role all`) per store with the instant
 * provider (a prepared MP4 at once, selected by configuration), webhooks to an
 * HTTPS receiver on loopback.
 *
 *   pnpm --filter @vidgen/server bench:pipeline [-- --tasks 2000 --warmup 4000 --concurrency 32 --paced 200 --rate 20 --rounds 1 --accounts 1]
 *
 * - `--rounds N`: the throughput of every store and topology measured N times, the variants taking turns round by
 *   round (SQLite, PostgreSQL, 2 api + 2 worker, SQLite, …), each on a fresh store; the median is the figure, so that
 *   the ratios of one run do not hang on one slow spell of a shared machine (runs of the same build varied by ±15 %).
 * - `--accounts N`: the submits spread over N accounts in turn (default 1: every submission charges the same
 *   balance row, the worst case for a store that locks it until its commit).
 *
 * - throughput: `--tasks` submitted by `--concurrency` clients as fast as they
 *   are answered; tasks/s from the first submit to the last webhook received. Before them `--warmup` tasks go
 *   through each api process as loaded, uncounted: a server's first few thousand tasks run slower (SQLite: 600
 *   tasks/s after 20 of warm-up, 740 after 1,000, 1,000 after 4,000, on 2,000 measured), and a service runs warm.
 *   The split topology's submits alternate between its two api processes, so it is warmed with twice `--warmup`.
 * - what a task costs its store over the throughput window (bench/http/store-cost.ts): transactions,
 *   statements, round trips and WAL bytes per task, and the statements sent most often.
 * - `--stores sqlite,postgres` and `--topologies all,split`: `all` is one `--role all` process per
 *   store; `split` (PostgreSQL only) is 2 `api` + 2 `worker` processes, submits alternating between
 *   the two api processes, the workers serving files through the first (VIDGEN_PUBLIC_BASE_URL).
 *   `sqlite-floor` (in the default `--stores sqlite,sqlite-floor,postgres,postgres-floor`) is the SQLite pipeline's floor
 *   (bench/http/pipeline-floor.ts: the least one process does from submission to webhook on this stack) measured as
 *   the server is, its row `SQLite floor`: SQLite's 1,000 tasks/s (issue 20) judged against what it reaches.
 *   `postgres-floor` (also in the default) is PostgreSQL's floor in each topology (bench/http/pg-pipeline-floor.ts: the
 *   least one `all` process, or 2 `api` + 2 `worker` processes, do on this stack), its rows `PostgreSQL floor` and
 *   `PostgreSQL floor, 2 api + 2 worker`.
 * - `--b-node-args`, `--b-env`, `--b-warmup`, `--b-main`: an A/B in one run, each variant also measured (in turn with
 *   it) as `<name> (B)` with those Node flags, environment or warm-up for its server processes, or another build of the
 *   server (its `main.js`, relative to apps/server: a copy of `dist/` made before a change, say).
 * - latency: `--paced` tasks at `--rate` per second (not saturated); submit
 *   sent → webhook received, p50/p99.
 * PostgreSQL is skipped with a note when it is not reachable.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { openBackend } from '../src/store/open.js';
import type { Config } from '../src/config.js';
import { createAccountWithKey, freePort, pipelineEnv, startServerProcess, startWebhookReceiver, stopServerProcess, type Role } from '../test/support/pipeline-processes.js';
import { cpuPerTask, cpuSnapshot, type CpuCost } from './http/cpu-cost.js';
import { costPerTask, costSnapshot, STORE_COST_HOOK, type TaskCost } from './http/store-cost.js';
import { createTestDatabase, postgresAvailable } from '../test/support/postgres.js';
import { runPostgresFloor, type FloorProtocol, type FloorResult } from './http/pg-floor.js';
import { compilePipelineFloor } from './http/compiled.js';
import { medianIndex } from './http/report.js';

const { values } = parseArgs({
  options: {
    tasks: { type: 'string', default: '2000' },
    // Tasks through the pipeline before the measured ones (at --concurrency), whose time is not counted.
    warmup: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '32' },
    paced: { type: 'string', default: '200' },
    // Throughput measured this many times per store and topology, the variants taking turns round by round; the median
    // is the figure (one run's ratios are then not at the mercy of one slow spell of the machine). Latency: last round.
    rounds: { type: 'string', default: '1' },
    rate: { type: 'string', default: '20' },
    // `sqlite-floor`: the SQLite pipeline's floor (bench/http/pipeline-floor.ts), measured as a store of its own.
    // `postgres-floor`: PostgreSQL's floor (bench/http/pg-pipeline-floor.ts) in each topology, measured as the server is.
    stores: { type: 'string', default: 'sqlite,sqlite-floor,postgres,postgres-floor' },
    topologies: { type: 'string', default: 'all,split' },
    // Accounts the submits are spread over (each its own balance row and key), in turn.
    accounts: { type: 'string', default: '1' },
    // The PostgreSQL floor (bench/http/pg-floor.ts) at these numbers of connections; `none` to leave it out.
    'floor-clients': { type: 'string', default: '4,10,32' },
    'floor-seconds': { type: 'string', default: '10' },
    // pgbench's protocols for the floor (bench/http/pg-floor.ts): `prepared` is the floor; `extended` plans every
    // statement every time, as the server did before it kept plans, and shows what keeping them is worth.
    'floor-protocols': { type: 'string', default: 'prepared' },
    // Tasks per pgbench script for the floor: 1 is the server's design (each task's statements its own); n > 1 the
    // floor of a design that writes n tasks in each statement and commit (bench/http/pg-floor.ts, batchedScript).
    // `c<n>`: n tasks' statements as they are, with one commit per phase for the n.
    'floor-batches': { type: 'string', default: '1' },
    // An A/B in one run: each variant also measured, in turn with it, as `<name> (B)` with these Node/V8 flags
    // (space-separated) and environment (`NAME=value,NAME=value`) for its server processes, and this warm-up.
    'b-node-args': { type: 'string' },
    'b-env': { type: 'string' },
    'b-warmup': { type: 'string' },
    'b-main': { type: 'string' },
  },
  // `pnpm bench:pipeline -- --tasks 500` passes the `--` on; it is not the end of the options here.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
});
const TASKS = Number(values.tasks);
const WARMUP = Math.max(1, Number(values.warmup));
const CONCURRENCY = Number(values.concurrency);
const PACED = Number(values.paced);
const RATE = Number(values.rate);
const STORES = values.stores!.split(',');
const TOPOLOGIES = (values.topologies === 'none' ? [] : values.topologies!.split(',')) as Topology[];
const ACCOUNTS = Number(values.accounts);
const ROUNDS = Math.max(1, Number(values.rounds));
/** VIDGEN_BENCH_SERVER_MAIN: another build's entry (relative to apps/server) for an A/B pair, e.g. `.dist-base/main.js`. */
const MAIN = process.env.VIDGEN_BENCH_SERVER_MAIN ?? 'dist/main.js';
/** `floor`: the SQLite pipeline's floor (bench/http/pipeline-floor.ts) in place of the server, started as `all` is. */
type Topology = 'all' | 'split' | 'floor';
/** What `--b-node-args`, `--b-env`, `--b-warmup` and `--b-main` change for a variant's twin. */
interface Twin {
  nodeArgs: string[];
  env: Record<string, string>;
  warmup?: number;
  /** Another build's entry in the server's place (relative to apps/server): the same topology, that code. */
  main?: string;
}
const TWIN: Twin | undefined =
  values['b-node-args'] === undefined && values['b-env'] === undefined && values['b-warmup'] === undefined && values['b-main'] === undefined
    ? undefined
    : {
        ...(values['b-main'] === undefined ? {} : { main: values['b-main'] }),
        ...(values['b-warmup'] === undefined ? {} : { warmup: Math.max(1, Number(values['b-warmup'])) }),
        nodeArgs: (values['b-node-args'] ?? '').split(' ').filter(Boolean),
        env: Object.fromEntries(
          (values['b-env'] ?? '')
            .split(',')
            .filter(Boolean)
            .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
        ),
      };
/** Preloaded into the server processes with VIDGEN_BENCH_HEAP_PROF=<dir> (what each allocates; bench/heap-report.ts sums it). */
const HEAP_SAMPLE = fileURLToPath(new URL('./http/heap-sample.mjs', import.meta.url));
const costs: { name: string; cost: TaskCost; cpu: CpuCost | undefined }[] = [];
/**
 * The directories of the measurements done (outputs, stores), removed when the bench ends, not after each: for a while
 * after thousands of files were deleted, ext4's inode allocator steps over the freed inodes (recently_deleted) with its
 * threads spinning on the group's lock, and a file created meanwhile cost 0.5-0.9 ms of kernel CPU instead of 0.1-0.2
 * (perf on this machine). The round after a removal paid it, the first round of a run did not: SQLite's rounds ran
 * 2,276 / 1,539 / 1,403 tasks/s (BENCHMARKS.md, ninth pass). VIDGEN_BENCH_KEEP_FILES=1 leaves them (runs back to back, each
 * then not paying for the last one's removal; remove /tmp/vidgen-bench-* after).
 */
const leftBehind: string[] = [];
const floorBuilds = new Map<'pipeline-floor' | 'pg-pipeline-floor', string>();
/** A pipeline floor's build (SQLite's or PostgreSQL's), compiled the first time it is measured. */
const floorMain = (name: 'pipeline-floor' | 'pg-pipeline-floor') => () => {
  if (!floorBuilds.has(name)) floorBuilds.set(name, compilePipelineFloor(name));
  return floorBuilds.get(name)!;
};
const pipelineFloorMain = floorMain('pipeline-floor');
const pgPipelineFloorMain = floorMain('pg-pipeline-floor');
if (!process.env.VIDGEN_BENCH_KEEP_FILES) process.on('exit', () => leftBehind.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const received = new Map<string, number>();
const waiters = new Map<string, () => void>();
const receiver = await startWebhookReceiver(({ requestId, at }) => {
  if (!received.has(requestId)) received.set(requestId, at);
  waiters.get(requestId)?.();
  return 204;
});

/**
 * The load's HTTP client: node:http on connections kept per server, not fetch (undici), which cost the bench about
 * three times the CPU a submission (BENCHMARKS.md, sixth pass). The bench shares the machine's two cores with the
 * server and, on PostgreSQL, with the database: what it spends is taken from them.
 */
const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
/**
 * One submission. A kept connection the server closed (its keep-alive timeout, 5 s) just as the request went out on it
 * is reset before the server read a byte of it: sent once more, on a connection of its own, as Node's documentation of
 * `request.reusedSocket` advises. Any other error ends the run, as before. (Twice in about forty runs, such a reset had
 * ended a run of the whole benchmark with an uncaught `read ECONNRESET`, BENCHMARKS.md, tenth and nineteenth passes.)
 */
function post(url: string, key: string, body: string, retried = false): Promise<{ status: number; text: string }> {
  return new Promise((done, fail) => {
    let answered = false;
    const req = request(url, { method: 'POST', agent: retried ? false : agent, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done({ status: res.statusCode ?? 0, text }));
      res.on('error', fail);
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      // Only before any answer: a reset after the server began to answer may follow a task it created.
      if (!retried && !answered && req.reusedSocket && error.code === 'ECONNRESET') post(url, key, body, true).then(done, fail);
      else fail(error);
    });
    req.end(body);
  });
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** Opens the store (its migrations and the queue's lanes applied) and makes an account with credits and a key. */
async function migrateWithAccount(database: Config['database'], name: string, credits: number): Promise<{ accountId: string; key: string }> {
  const backend = await openBackend({ database, jobLeaseMs: 60_000 }, { logger: pino({ level: 'silent' }), listen: false, supervise: false });
  try {
    return await createAccountWithKey(backend.store, name, credits);
  } finally {
    await backend.close();
  }
}

interface Measured {
  tasksPerSecond: number;
  submitsPerSecond: number;
  /** submit sent → webhook received of the paced tasks, sorted (none when `paced` is 0) */
  latencies: number[];
}

async function measure(name: string, database: Config['database'], topology: Topology, paced: number, twin?: Twin, floor?: () => string): Promise<Measured> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-bench-pipeline-'));
  const countDir = mkdtempSync(join(tmpdir(), 'vidgen-bench-counts-'));
  const keys: string[] = [];
  for (let i = 0; i < ACCOUNTS; i++) keys.push((await migrateWithAccount(database, `bench-${i}`, 1_000_000_000)).key);

  // VIDGEN_BENCH_CPU_PROF=<dir>: a CPU profile of each server process, written when it exits. VIDGEN_BENCH_HEAP_PROF=<dir>:
  // what each allocates, and where (bench/http/heap-sample.mjs; `bench/heap-report.ts <dir>` sums it per task); with
  // VIDGEN_BENCH_HEAP_PROF_PROMOTED=1, only what outlived the young generation.
  const heapName = `${name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '')}-r${measured.get(name)!.length + 1}`;
  const profile = [
    ...(process.env.VIDGEN_BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.VIDGEN_BENCH_CPU_PROF}`] : []),
    ...(process.env.VIDGEN_BENCH_HEAP_PROF ? ['--import', HEAP_SAMPLE] : []),
  ];
  const env = {
    ...pipelineEnv({ databaseUrl: database.kind === 'sqlite' ? `sqlite:${database.path}` : database.url, dataDir, receiverCaFile: receiver.writeCa(dataDir) }),
    // 64 of each unless set for the run (the same for every store): the slots a worker process runs at once.
    VIDGEN_INSTANT_CONCURRENCY: process.env.VIDGEN_INSTANT_CONCURRENCY ?? '64',
    VIDGEN_WEBHOOK_CONCURRENCY: process.env.VIDGEN_WEBHOOK_CONCURRENCY ?? '64',
    VIDGEN_BENCH_COUNT_SQL: countDir,
    ...(process.env.VIDGEN_BENCH_HEAP_PROF ? { VIDGEN_BENCH_HEAP_PROF_NAME: heapName } : {}),
    ...twin?.env,
  };
  const nodeArgs = twin?.nodeArgs ?? [];
  const children: ChildProcess[] = [];
  const servers: { role: string; pid: number }[] = [];
  const main = floor ? floor() : topology === 'floor' ? pipelineFloorMain() : (twin?.main ?? MAIN);
  const start = (role: Role, extra: Record<string, string> = {}) =>
    startServerProcess(role, { ...env, ...extra }, { nodeArgs: ['--import', STORE_COST_HOOK, ...profile, ...nodeArgs], main, inheritStderr: true, onSpawn: (child) => (children.push(child), servers.push({ role, pid: child.pid! })) });
  let baseUrls: string[];
  try {
    if (topology === 'all' || topology === 'floor') {
      baseUrls = [(await start('all')).baseUrl];
    } else {
      const apiPort = await freePort();
      const filesAt = { VIDGEN_PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}` };
      const started = await Promise.all([start('api', { PORT: String(apiPort) }), start('api'), start('worker', filesAt), start('worker', filesAt)]);
      baseUrls = started.slice(0, 2).map((process) => process.baseUrl);
    }
  } catch (error) {
    await Promise.all(children.map((child) => stopServerProcess(child)));
    throw error;
  }
  let submits = 0;

  const body = JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'bench', duration: 4, resolution: '480p', webhookUrl: receiver.url('/hooks') });
  const submit = async (): Promise<string> => {
    const n = submits++;
    const baseUrl = baseUrls[n % baseUrls.length]!;
    const key = keys[Math.floor(n / baseUrls.length) % keys.length]!;
    const res = await post(`${baseUrl}/api/open/v1/video/generations`, key, body);
    if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${res.text}`);
    return (JSON.parse(res.text) as { requestId: string }).requestId;
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
    // Warm-up, as loaded as the measured run: the instant provider prepares its MP4, connections open, and the
    // server's hot code is compiled by V8's optimising tiers (a few thousand calls each; 20 tasks left the first
    // seconds of the run to that). The same for every store, and for every process: `--warmup` tasks through each api
    // process (and as many through each worker), so the split topology's four processes get twice as many between them
    // as the one `all` process. With the same total they each had half its warm-up, and V8's compiler threads were
    // still busy in the measured window (the api processes' other threads 0.24 ms a task against 0.05, eighteenth pass).
    const warmup = (twin?.warmup ?? WARMUP) * baseUrls.length;
    let warmed = 0;
    await Promise.all(
      Array.from({ length: Math.min(CONCURRENCY, warmup) }, async () => {
        while (warmed < warmup) {
          warmed++;
          await delivered(await submit());
        }
      }),
    );

    // Throughput: as fast as submits are answered, until the last webhook arrives.
    const postgresUrl = database.kind === 'postgres' ? database.url : undefined;
    const costBefore = await costSnapshot(children, countDir, postgresUrl);
    const cpuBefore = cpuSnapshot(servers);
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
    const cpuAfter = cpuSnapshot(servers);
    const throughput = TASKS / ((finished - started) / 1000);
    const cpu = cpuBefore && cpuAfter ? cpuPerTask(cpuBefore, cpuAfter, TASKS) : undefined;
    costs.push({ name, cost: costPerTask(costBefore, await costSnapshot(children, countDir, postgresUrl), TASKS, database.kind), cpu });

    // Latency, not saturated: paced submits, each timed from send to its webhook.
    const latencies: number[] = [];
    const pacing: Promise<void>[] = [];
    for (let i = 0; i < paced; i++) {
      const sent = performance.now();
      pacing.push(submit().then(async (id) => {
        await delivered(id);
        latencies.push(received.get(id)! - sent);
      }));
      await new Promise((done) => setTimeout(done, 1000 / RATE));
    }
    await Promise.all(pacing);
    latencies.sort((a, b) => a - b);
    if (process.env.VIDGEN_BENCH_HEAP_PROF) {
      // The tasks the processes of each role took between them, for heap-report.ts's figures a task.
      const processes: Record<string, number> = {};
      for (const { role } of servers) processes[role] = (processes[role] ?? 0) + 1;
      writeFileSync(join(process.env.VIDGEN_BENCH_HEAP_PROF, `${heapName}.tasks.json`), JSON.stringify({ variant: name, tasks: warmup + TASKS + paced, processes }));
    }
    return { tasksPerSecond: throughput, submitsPerSecond: TASKS / ((submitted - started) / 1000), latencies };
  } finally {
    // A graceful stop, so that a CPU profile is written; SIGKILL if it does not come.
    await Promise.all(children.map((child) => stopServerProcess(child)));
    leftBehind.push(dataDir, countDir);
  }
}

/** The floor at each number of connections: pgbench, on a database migrated as the server's, with no server. */
async function measureFloor(): Promise<{ clients: number; protocol: FloorProtocol; batch: string; result: FloorResult }[]> {
  const clients = values['floor-clients'] === 'none' ? [] : values['floor-clients']!.split(',').map(Number);
  if (clients.length && spawnSync('pgbench', ['--version']).error) {
    console.log('pgbench is not installed (Debian: postgresql-client): the PostgreSQL floor is left out.');
    return [];
  }
  const protocols = values['floor-protocols']!.split(',') as FloorProtocol[];
  // `c<n>`: n tasks' statements as they are, one commit per phase for all n (pg-floor.ts, combinedScript).
  const batches = values['floor-batches']!.split(',');
  const results: { clients: number; protocol: FloorProtocol; batch: string; result: FloorResult }[] = [];
  for (const n of clients) {
    for (const protocol of protocols) {
      for (const batch of batches) {
        const database = await createTestDatabase();
        try {
          const { accountId } = await migrateWithAccount({ kind: 'postgres', url: database.url, poolSize: 2 }, 'floor', 1_000_000_000_000);
          const combined = batch.startsWith('c');
          const result = await runPostgresFloor(database.url, accountId, { clients: n, seconds: Number(values['floor-seconds']), protocol, batch: Number(combined ? batch.slice(1) : batch), combined });
          results.push({ clients: n, protocol, batch, result });
        } finally {
          await database.drop();
        }
      }
    }
  }
  return results;
}

/** The variants measured, in the order each round takes them. */
const variants: {
  name: string;
  open: () => Promise<{ database: Config['database']; drop: () => Promise<void> }>;
  topology: Topology;
  twin?: Twin;
  /** A floor's entry in the server's place (its processes started as the topology's). */
  floor?: () => string;
}[] = [];
/** A SQLite store in a directory of its own, kept until the bench ends (`leftBehind`). */
const sqliteStore = (prefix: string) => async () => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { database: { kind: 'sqlite', path: join(dir, 'vidgen.db') } as Config['database'], drop: async () => void leftBehind.push(dir) };
};
if (STORES.includes('sqlite')) variants.push({ name: 'SQLite', topology: 'all', open: sqliteStore('vidgen-bench-sqlite-') });
if (STORES.includes('sqlite-floor')) variants.push({ name: 'SQLite floor', topology: 'floor', open: sqliteStore('vidgen-bench-sqlite-floor-') });
const wantsPostgres = STORES.includes('postgres') || STORES.includes('postgres-floor');
const withPostgres = wantsPostgres && (await postgresAvailable());
if (wantsPostgres && !withPostgres) console.log('PostgreSQL is not reachable: measured SQLite only.');
if (withPostgres) {
  // A database of its own per measurement: each starts from an empty queue and tables.
  const open = async () => {
    const database = await createTestDatabase();
    return { database: { kind: 'postgres', url: database.url, poolSize: 10 } as Config['database'], drop: () => database.drop() };
  };
  if (STORES.includes('postgres')) for (const topology of TOPOLOGIES) variants.push({ name: topology === 'all' ? 'PostgreSQL' : 'PostgreSQL 2 api + 2 worker', topology, open });
  if (STORES.includes('postgres-floor')) {
    for (const topology of TOPOLOGIES) variants.push({ name: topology === 'all' ? 'PostgreSQL floor' : 'PostgreSQL floor, 2 api + 2 worker', topology, open, floor: pgPipelineFloorMain });
  }
}

if (TWIN) variants.splice(0, variants.length, ...variants.flatMap((variant) => [variant, { ...variant, name: `${variant.name} (B)`, twin: TWIN }]));

/**
 * The variants in a round's order. A twin and its variant swap places every other round (A then B, then B then A), so
 * that neither has the later slot every round and an order effect cannot pass for a difference (two lanes for the
 * combined messages won by 6 % as B and lost by 6 % as A, within an A/A spread of 5 %: BENCHMARKS.md, thirty-second pass).
 */
const inRound = (round: number) => (TWIN && round % 2 === 0 ? variants.flatMap((variant, i) => (i % 2 === 0 ? [variants[i + 1]!, variant] : [])) : variants);
const measured = new Map<string, Measured[]>(variants.map(({ name }) => [name, []]));
let floor: { clients: number; protocol: FloorProtocol; batch: string; result: FloorResult }[] = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    for (const variant of inRound(round)) {
      const { database, drop } = await variant.open();
      try {
        // Latency in the last round only: the rounds are for throughput.
        measured.get(variant.name)!.push(await measure(variant.name, database, variant.topology, round === ROUNDS ? PACED : 0, variant.twin, variant.floor));
      } finally {
        await drop();
      }
    }
  }
  if (withPostgres) floor = await measureFloor();
} finally {
  await receiver.close();
}

/** The figure of a variant's rounds: the value at medianIndex, the round whose costs the tables below show. */
const median = (values: number[]) => values[medianIndex(values)]!;
const rows = variants.map(({ name }): Record<string, string> => {
  const runs = measured.get(name)!;
  const latencies = runs.at(-1)!.latencies;
  return {
    store: name,
    'tasks/s (submit → webhook)': median(runs.map((run) => run.tasksPerSecond)).toFixed(0),
    ...(ROUNDS > 1 ? { 'tasks/s by round': runs.map((run) => run.tasksPerSecond.toFixed(0)).join(' / ') } : {}),
    'submits/s': median(runs.map((run) => run.submitsPerSecond)).toFixed(0),
    // `--paced 0` measures throughput only.
    [`p50 latency @${RATE}/s`]: latencies.length ? `${percentile(latencies, 50).toFixed(1)} ms` : '—',
    [`p99 latency @${RATE}/s`]: latencies.length ? `${percentile(latencies, 99).toFixed(1)} ms` : '—',
  };
});

console.log(
  `\nPipeline, submit → webhook received (instant provider); ${TASKS} tasks at ${CONCURRENCY} clients` +
    `${ROUNDS > 1 ? `, ${ROUNDS} rounds (the variants in turn${TWIN ? ', each twin before its variant every other round' : ''}; tasks/s and submits/s the median)` : ''}, then ${PACED} paced at ${RATE}/s.`,
);
console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.\n`);
console.table(rows);

// Markdown (lines not starting with │, so the table above stays the one pipeline-run.ts parses).
if (floor.length) {
  console.log('\nThe PostgreSQL floor: the statements of a task run by pgbench on a database migrated as the server\'s, no server (bench/http/pg-floor.ts):\n');
  console.log('| connections | protocol | tasks a script | tasks/s | tasks | failed | PostgreSQL CPU a task |');
  console.log('|---|---|---|---|---|---|---|');
  for (const { clients, protocol, batch, result } of floor) {
    const cpu = result.postgresCpuMs === undefined ? '—' : `${result.postgresCpuMs.toFixed(2)} ms`;
    console.log(`| ${clients} | ${protocol} | ${batch} | ${result.tasksPerSecond.toFixed(0)} | ${result.tasks} | ${result.failed} | ${cpu} |`);
  }
}
const fixed = (value: number | undefined, digits = 1) => (value === undefined ? '—' : value.toFixed(digits));
console.log(`\nWhat a task costs its store (throughput window${ROUNDS > 1 ? ', the median round' : ''}, per task; PostgreSQL transactions are those that wrote, as transaction ids assigned; statements and round trips counted at the client; SQLite transactions are write commits):\n`);
console.log('| store | transactions | statements | round trips | WAL bytes | rows written |');
console.log('|---|---|---|---|---|---|');
// With rounds, each variant's median round: the one whose tasks/s is the figure judged (`median`).
const shownCosts = variants.map(({ name }) => costs.filter((entry) => entry.name === name)[medianIndex(measured.get(name)!.map((run) => run.tasksPerSecond))]!);
for (const { name, cost } of shownCosts) {
  console.log(`| ${name} | ${fixed(cost.transactions, 2)} | ${fixed(cost.statements)} | ${fixed(cost.roundTrips)} | ${cost.walBytes.toFixed(0)} | ${fixed(cost.rowsWritten)} |`);
}
const withCpu = shownCosts.filter(({ cpu }) => cpu);
if (withCpu.length) {
  console.log(`\nThe CPU a task costs (throughput window${ROUNDS > 1 ? ', the median round' : ''}, ms a task, from /proc; server threads by role: main thread + the others, libuv's pool and V8's helpers; the host's steal: the share of the window a virtual machine's CPUs waited for the host, which no process's times count; bench/http/cpu-cost.ts):\n`);
  console.log('| store | server main threads | server other threads | PostgreSQL | bench | all | machine idle | taken by the host (steal) |');
  console.log('|---|---|---|---|---|---|---|---|');
  const byRole = (cpu: CpuCost, part: 'main' | 'other') => cpu.byRole.map((role) => `${role[part].toFixed(2)}${cpu.byRole.length > 1 ? ` ${role.role}` : ''}`).join(' + ');
  for (const { name, cpu } of withCpu) {
    console.log(`| ${name} | ${byRole(cpu!, 'main')} | ${byRole(cpu!, 'other')} | ${cpu!.postgres.toFixed(2)} | ${cpu!.bench.toFixed(2)} | ${cpu!.total.toFixed(2)} | ${cpu!.idlePercent.toFixed(0)} % | ${cpu!.stealPercent === undefined ? '—' : `${cpu!.stealPercent.toFixed(1)} %`} |`);
  }
}
for (const { name, cost } of shownCosts) {
  const timed = cost.top.some(([, , us]) => us !== undefined);
  console.log(`\n${name}: statements per task, most frequent first${timed ? ' (and the µs a task they took to run)' : ''}`);
  for (const [text, n, us] of cost.top) console.log(`  ${n.toFixed(2).padStart(6)}${timed ? ` ${(us ?? 0).toFixed(1).padStart(7)} µs` : ''}  ${text}`);
  if (timed) console.log(`  all statements: ${cost.top.reduce((sum, [, , us]) => sum + (us ?? 0), 0).toFixed(1)} µs a task (the 25 above)`);
}
process.exit(0);
