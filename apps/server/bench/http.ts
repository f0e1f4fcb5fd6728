/**
 * `pnpm bench`: the HTTP API against a bare Hono ceiling, the store at two
 * sizes, memory under a long run and the pipeline, in one run on this machine;
 * writes BENCHMARKS.md at the repository root.
 *
 *   pnpm bench [--quick] [--write | --no-write] [--cpu-prof [--cpu-prof-dir DIR]]
 *              [--seconds 10] [--connections 50] [--threads 1] [--skip http,scale,rss,pipeline,upstream,usage]
 *              [--only query,missing,list,models,submit,cancel] [--note TEXT]
 *              [--baseline DIR --rounds N] [--keep-store PATH]
 *
 * --baseline DIR: a second server from another copy of the sources (e.g. `cp -r src .baseline-src` before a change;
 * compiled as dist/ is, bench/http/compiled.ts), on a copy of the store, measured in turns with the server and the floor, --rounds times per request; every run
 * also reports the process's CPU time per answer (µs), steadier than req/s on a shared machine.
 *
 * 1. HTTP. The ceiling (bench/http/ceiling.ts: a bare Hono app on
 *    @hono/node-server answering the real server's answer for a succeeded task,
 *    bytes for bytes) and the server (`dist/main.js`, as operators run it: the
 *    benchmark's build of it, not the sources through tsx; the floor and the ceiling
 *    compiled too, bench/http/compiled.ts), SQLite on a fresh data dir,
 *    rate limits and the active-task cap off, no worker: submitted tasks stay
 *    queued, so that submit measures the API and the store, not the renders,
 *    which the pipeline part measures) each take the same wrk load per request:
 *    query of a succeeded task, query of a missing task, list (first page),
 *    models, submit, cancel. For the query of a task and for submit, the floor
 *    (bench/http/floor.ts: only the work no implementation can skip, on a copy
 *    of the store) takes it too, between the two, and so does the floor with
 *    the server's own features (`floor.ts --features`: correlation id, headers,
 *    metrics, usage totals; on its own copy). Cancel cancels a different queued task with every
 *    request (a refund: the real work), from tasks written to the store before
 *    it runs; never a repeated cancel, which is answered without a write.
 * 2. Store size: GET of random tasks and the list's first page with 1,000 and
 *    with 1,000,000 tasks (--quick: 10,000), written directly to SQLite: two
 *    stores, a server each, GET three times at each size in turns (the median
 *    p99 is the figure).
 * 3. Memory: the server's RSS while it answers 1,000,000 queries (--quick:
 *    100,000), sampled every quarter.
 * 4. Pipeline: bench/pipeline.ts (instant provider, webhooks to an HTTPS
 *    receiver), SQLite and, when reachable, PostgreSQL.
 * 5. Upstream following: bench/upstream.ts (1,000 tasks of 60 s on the
 *    BytePlus stand-in, one server process; --quick: 200 of 10 s), its section
 *    `## Upstream following` before the targets. Skipped, the section a
 *    previous run (or `pnpm bench:upstream --write`) wrote is kept.
 * 6. Account usage: bench/usage.ts (GET /account/usage, 90 days by day, also
 *    by model, and 7 days by hour, on an account with 1,000,000 tasks and the
 *    usage_hourly rows they made; --quick: 100,000 tasks), its section
 *    `## Account usage` before the targets. Skipped, the section a previous
 *    run (or `pnpm bench:usage --write`) wrote is kept.
 *
 * The account and its key are made with the operator CLI; every child process
 * is stopped when the run ends, fails or is interrupted. BENCHMARKS.md is
 * written by a whole full run (not with --no-write, --cpu-prof, --skip or
 * --only) and otherwise only with --write. For profiling one request kind:
 * `pnpm bench --quick --skip rss,scale,pipeline --only submit --cpu-prof` (the server and the floor each write a
 * profile, the floor first).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { stopServerProcess } from '../test/support/pipeline-processes.js';
import { memoryOf, removeOnExit, runCli, SERVER_ROOT, startInstantServer, startNodeService, storageReadOf, type NodeService } from './http/children.js';
import { compileBaseline, compileBenchProcesses } from './http/compiled.js';
import { runPipelineBench } from './http/pipeline-run.js';
import { describeMachine, judgeTargets, renderReport, type Results, type RssSample, type ScaleResult, type ScenarioResult } from './http/report.js';
import { readTemplate, seedTasks, selectColumn, selectRow } from './http/seed.js';
import { runWrk, runWrkMeasured, SUBMIT_BODY, writeIdsScript, writeStaticScript, wrkVersion, type Load, type WrkResult } from './http/wrk.js';
import { judgeUpstream, renderUpstreamSection, runUpstreamBench, SECTION_HEADING as UPSTREAM_HEADING, UPSTREAM_FULL, UPSTREAM_QUICK } from './upstream.js';
import { judgeUsage, renderUsageSection, runUsageBench, SECTION_HEADING as USAGE_HEADING, USAGE_FULL, USAGE_QUICK } from './usage.js';
import { ANALYSIS_MARKER, placeSection, sectionOf } from './http/sections.js';


const { values: args } = parseArgs({
  // `pnpm bench -- --quick` passes the `--` on; it is not the end of the options here.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    quick: { type: 'boolean', default: false },
    write: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    'cpu-prof': { type: 'boolean', default: false },
    'cpu-prof-dir': { type: 'string' },
    seconds: { type: 'string' },
    connections: { type: 'string', default: '50' },
    threads: { type: 'string', default: '1' },
    skip: { type: 'string', default: '' },
    only: { type: 'string' },
    note: { type: 'string' },
    // A/B: a second server from another copy of the sources (e.g. `.baseline-src`, a copy of `src` before a change),
    // on a copy of the store, measured in turns with this one (and the floor) `--rounds` times per request.
    baseline: { type: 'string' },
    // Default: 3 in a full run (the requests the floor answers: query, list, submit), 1 in a --quick one.
    rounds: { type: 'string' },
    // A copy of the main store (1,000 tasks, the benchmark's key) left at this path, for micro-benchmarks.
    'keep-store': { type: 'string' },
  },
});

const QUICK = args.quick;
const FULL = { scaleTasks: 1_000_000, rssRequests: 1_000_000 };
const LOAD: Load = { threads: Number(args.threads), connections: Number(args.connections), seconds: Number(args.seconds ?? (QUICK ? 3 : 10)) };
const WARMUP: Load = { ...LOAD, seconds: QUICK ? 1 : 2 };
/**
 * Server and floor measured in turns this many times per request the floor answers (every request with --baseline): the
 * targets are judged on the round with the median server/floor ratio, so that one slow spell of the machine does not
 * decide them (the same build's query/floor ratio ranged 0.73–0.93 between runs). Each round's runs are short
 * (ROUND_LOAD): this host's slow spells last tens of seconds (one took a round's floor with features and server 16 %
 * and 30 % under the floor it followed), so that many short turns put them on both sides alike, where a few long ones
 * put a spell on one side (fourteenth pass: five rounds of 10 s gave the query 0.71–0.94 of the floor).
 */
const ROUNDS = Math.max(1, Number(args.rounds ?? (QUICK ? 1 : 9)));
/** A measured run of a request measured in rounds: as long as LOAD in a quick run or with --seconds, else 4 s. */
const ROUND_LOAD: Load = { ...LOAD, seconds: args.seconds || QUICK ? LOAD.seconds : 4 };
const SCALE_TASKS = QUICK ? 10_000 : FULL.scaleTasks;
/** GET runs per store size, the sizes taking turns; the median p99 is the size's figure. */
const SCALE_ROUNDS = 3;
const RSS_REQUESTS = QUICK ? 100_000 : FULL.rssRequests;
const PIPELINE = QUICK ? { tasks: 300, warmup: 300, concurrency: 32, paced: 40, rate: 20, rounds: 1 } : { tasks: 2000, warmup: 4000, concurrency: 32, paced: 200, rate: 20, rounds: 3 };
const UPSTREAM = QUICK ? UPSTREAM_QUICK : UPSTREAM_FULL;
const USAGE = QUICK ? USAGE_QUICK : USAGE_FULL;
const SKIP = new Set(args.skip.split(',').filter(Boolean));
const ONLY = args.only ? new Set(args.only.split(',').filter(Boolean)) : undefined;
const REPO_ROOT = resolve(SERVER_ROOT, '../..');
// A relative --cpu-prof-dir is the caller's: pnpm runs this from apps/server and says where it was started in INIT_CWD.
const CPU_PROFILE_DIR = !args['cpu-prof']
  ? undefined
  : args['cpu-prof-dir']
    ? resolve(process.env.INIT_CWD ?? process.cwd(), args['cpu-prof-dir'])
    : mkdtempSync(join(tmpdir(), 'vidgen-cpu-prof-'));
const SERVER_NODE_ARGS = CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${CPU_PROFILE_DIR}`] : [];

const BASE = '/api/open/v1/video/generations';
const MISSING_ID = 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0';

const log = (line: string) => console.log(`bench: ${line}`);
/** SIGTERM, so that a CPU profile is written; SIGKILL after 15 s. */
const stop = (child: NodeService['child']) => stopServerProcess(child, 15_000);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A fresh SQLite store with the benchmark account (credits that never run out) and its key. */
interface BenchStore {
  dir: string;
  dbPath: string;
  env: Record<string, string>;
  accountId: string;
  key: string;
}

async function createStore(dir: string): Promise<BenchStore> {
  mkdirSync(dir, { recursive: true });
  const dbPath = join(dir, 'vidgen.db');
  const env = { VIDGEN_DATA_DIR: dir, VIDGEN_DATABASE_URL: `sqlite:${dbPath}`, VIDGEN_LOG_LEVEL: 'silent' };
  const account = await runCli<{ id: string }>(env, ['accounts', 'create', '--name', 'bench', '--credits', String(1e15)]);
  const { key } = await runCli<{ key: string }>(env, ['keys', 'create', '--account', account.id, '--mode', 'test', '--name', 'bench']);
  return { dir, dbPath, env, accountId: account.id, key };
}


/** Submits one task through a server with a worker and waits (long poll) until it has succeeded. */
/**
 * The server on `store`, from its sources: a port from the OS, every model on the instant provider, no per-key limits,
 * its log lines at the default level (info: a line per request) appended to `server.log` in the store's directory, as
 * an operator's `>> vidgen.log` would (the CLI's runs stay silent: their standard output is their answer).
 */
const startServer = (store: BenchStore, options: { worker: boolean; nodeArgs?: string[] }) =>
  startInstantServer('dist/main.js', { ...store.env, VIDGEN_LOG_LEVEL: 'info' }, { ...options, logFile: join(store.dir, 'server.log') });

async function makeSucceededTask(store: BenchStore): Promise<string> {
  const server = await startServer(store, { worker: true });
  try {
    const headers = { Authorization: `Bearer ${store.key}`, 'Content-Type': 'application/json' };
    const submitted = await fetch(`${server.url}${BASE}`, { method: 'POST', headers, body: SUBMIT_BODY });
    if (submitted.status !== 202) throw new Error(`submit answered ${submitted.status}: ${await submitted.text()}`);
    const { requestId } = (await submitted.json()) as { requestId: string };
    for (let tries = 0; tries < 10; tries++) {
      const task = (await (await fetch(`${server.url}${BASE}/${requestId}?wait=10`, { headers })).json()) as { status: string };
      if (task.status === 'succeeded') return requestId;
      if (task.status !== 'queued' && task.status !== 'processing') throw new Error(`the seed task ended ${task.status}`);
    }
    throw new Error('the seed task did not succeed within 100 s');
  } finally {
    await stop(server.child);
  }
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

// ---------------------------------------------------------------------------

const wrk = wrkVersion();
if (!wrk) {
  console.error('bench: wrk is not installed (Debian/Ubuntu: apt-get install wrk); it is the load generator of this benchmark.');
  process.exit(2);
}
const machine = describeMachine(wrk);
const work = removeOnExit(mkdtempSync(join(tmpdir(), 'vidgen-bench-http-')));
const results: Results = {
  machine,
  command: `pnpm bench${process.argv.slice(2).filter((arg) => arg !== '--').map((arg) => ` ${arg}`).join('')}`,
  date: new Date(),
  quick: QUICK,
  load: { ...LOAD, warmupSeconds: WARMUP.seconds, rounds: ROUNDS, roundSeconds: ROUND_LOAD.seconds },
  ceilingBytes: 0,
  scenarios: [],
  scale: [],
  rss: undefined,
  pipeline: undefined,
  notes: [],
};
// Busy: more than half the cores' worth of load before the run (the 1-minute average also carries what just ended).
if (machine.loadBefore > machine.cores / 2) {
  results.notes.push(
    `Figures from a run on a busy machine (load average ${machine.loadBefore.toFixed(2)} on ${machine.cores} cores before it started); to be re-run on a quiet one.`,
  );
}
if (QUICK) results.notes.push(`A --quick run: ${LOAD.seconds} s per run, ${SCALE_TASKS.toLocaleString('en-US')} tasks for the store size, ${RSS_REQUESTS.toLocaleString('en-US')} requests for memory, a smaller pipeline run. Not the targets' conditions.`);
if (CPU_PROFILE_DIR) results.notes.push('Servers ran with --cpu-prof: slower than without.');
if (args.note) results.notes.push(args.note);
log(`${machine.cores} × ${machine.cpu}, Node ${machine.node}, ${wrk}; load average ${machine.loadBefore.toFixed(2)}; work dir ${work}`);

let mainServer: NodeService | undefined;
let ceiling: NodeService | undefined;
let floor: NodeService | undefined;
/** The floor with the server's own features (floor.ts --features), on its own copy of the store. */
let featuredFloor: NodeService | undefined;
let baseline: NodeService | undefined;
/** The `## Upstream following` section of this run (bench/upstream.ts renders and judges it). */
let upstreamSection: string | undefined;
/** The `## Account usage` section of this run (bench/usage.ts renders and judges it). */
let usageSection: string | undefined;
try {
  // --- The main store: the account, a real succeeded task, 999 copies of it (1,000 tasks).
  const main = await createStore(join(work, 'main'));
  const auth = { Authorization: `Bearer ${main.key}` };
  log('making a succeeded task with the instant provider');
  const succeededId = await makeSucceededTask(main);
  // The floor and the ceiling as compiled JavaScript, like the server's dist/ (bench/http/compiled.ts).
  const compiledProcesses = compileBenchProcesses();
  const succeeded = readTemplate(main.dbPath, succeededId);
  seedTasks(main.dbPath, { template: succeeded, accountId: main.accountId, count: 999, newestAt: (succeeded.task.created_at as number) - 1 });

  // The floor (bench/http/floor.ts) on a copy of the store as it is now (no server has it open, the seeding
  // checkpointed its WAL): its submissions do not add to the server's tasks.
  const floorDb = join(work, 'floor.db');
  copyFileSync(main.dbPath, floorDb);
  if (args['keep-store']) {
    copyFileSync(main.dbPath, args['keep-store']);
    writeFileSync(`${args['keep-store']}.json`, JSON.stringify({ key: main.key, accountId: main.accountId, succeededId }));
  }
  floor = await startNodeService(compiledProcesses.floor, [floorDb], {}, SERVER_NODE_ARGS);
  const featuredDb = join(work, 'featured-floor.db');
  copyFileSync(main.dbPath, featuredDb);
  // Its request lines to a file, as the server's.
  featuredFloor = await startNodeService(compiledProcesses.floor, [featuredDb, '--features'], {}, SERVER_NODE_ARGS, { stdoutFile: join(work, 'featured-floor.log') });
  if (args.baseline) {
    const dir = join(work, 'baseline');
    mkdirSync(dir);
    copyFileSync(main.dbPath, join(dir, 'vidgen.db'));
    const env = { VIDGEN_DATA_DIR: dir, VIDGEN_DATABASE_URL: `sqlite:${join(dir, 'vidgen.db')}`, VIDGEN_LOG_LEVEL: 'info' };
    baseline = await startInstantServer(compileBaseline(args.baseline), env, { worker: false, nodeArgs: SERVER_NODE_ARGS, logFile: join(dir, 'server.log') });
    log(`baseline ${baseline.url} (pid ${baseline.pid}) from ${args.baseline}`);
  }

  mainServer = await startServer(main, { worker: false, nodeArgs: SERVER_NODE_ARGS });
  const server = mainServer;
  const taskAnswer = await (await fetch(`${server.url}${BASE}/${succeededId}`, { headers: auth })).text();
  const ceilingBody = join(work, 'ceiling-body.json');
  writeFileSync(ceilingBody, taskAnswer);
  results.ceilingBytes = Buffer.byteLength(taskAnswer);
  ceiling = await startNodeService(compiledProcesses.ceiling, [ceilingBody], {});
  log(`server ${server.url} (pid ${server.pid}), ceiling ${ceiling.url} (pid ${ceiling.pid}), floor ${floor.url} (pid ${floor.pid}), ${results.ceilingBytes} bytes per answer`);

  const scripts = join(work, 'scripts');
  mkdirSync(scripts);
  const getScript = (name: string) => writeStaticScript(join(scripts, `${name}.lua`), { method: 'GET', headers: auth });
  const queryScript = getScript('query');

  /** One request kind: the ceiling, then the server, each warmed up first with the same load. */
  interface Scenario {
    /** for --only */
    key: string;
    name: string;
    /** the status the server should answer */
    expect: number;
    url: (base: string) => string;
    script: string;
    /** wrk script arguments per run */
    scriptArgs?: (run: 'ceiling' | 'warmup' | 'measured') => string[];
    /** once the ceiling has run: make what the server's runs need; returns a note */
    prepare?: (ceiling: WrkResult) => Promise<string | undefined>;
    /** after the server's runs: check what they did to the store; returns a note, or throws */
    check?: (warmup: WrkResult, measured: WrkResult) => string | undefined;
    /** the floor (bench/http/floor.ts) answers this request too: it runs between the ceiling and the server */
    floor?: boolean;
    /** a request like the measured ones, to check the status and size of the answer */
    sample: () => { url: string; init: RequestInit };
  }

  const cancelIds = { warmup: join(work, 'cancel-warmup.ids'), measured: join(work, 'cancel-measured.ids'), ceiling: join(work, 'cancel-ceiling.ids') };
  writeFileSync(cancelIds.ceiling, `${MISSING_ID}\n`);
  const scenarios: Scenario[] = [
    {
      key: 'query',
      name: 'query, succeeded task',
      expect: 200,
      url: (base) => `${base}${BASE}/${succeededId}`,
      script: queryScript,
      floor: true,
      sample: () => ({ url: `${BASE}/${succeededId}`, init: { headers: auth } }),
    },
    {
      key: 'missing',
      name: 'query, missing task',
      expect: 404,
      url: (base) => `${base}${BASE}/${MISSING_ID}`,
      script: getScript('missing'),
      sample: () => ({ url: `${BASE}/${MISSING_ID}`, init: { headers: auth } }),
    },
    {
      key: 'list',
      name: 'list, first page',
      expect: 200,
      url: (base) => `${base}${BASE}`,
      script: getScript('list'),
      floor: true,
      sample: () => ({ url: BASE, init: { headers: auth } }),
    },
    {
      key: 'models',
      name: 'models',
      expect: 200,
      url: (base) => `${base}/api/open/v1/models`,
      script: getScript('models'),
      sample: () => ({ url: '/api/open/v1/models', init: { headers: auth } }),
    },
    {
      key: 'submit',
      name: 'submit',
      expect: 202,
      url: (base) => `${base}${BASE}`,
      script: writeStaticScript(join(scripts, 'submit.lua'), { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: SUBMIT_BODY }),
      floor: true,
      sample: () => ({ url: BASE, init: { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: SUBMIT_BODY } }),
    },
    {
      key: 'cancel',
      name: 'cancel, queued task',
      expect: 200,
      url: (base) => base,
      script: writeIdsScript(join(scripts, 'cancel.lua'), { method: 'POST', headers: auth, prefix: `${BASE}/`, suffix: '/cancel', wrap: false, exhausted: MISSING_ID }),
      scriptArgs: (run) => [cancelIds[run], String(LOAD.threads)],
      prepare: async (ceilingRun) => {
        // Enough queued tasks that no request of the server's runs finds its task already cancelled: twice what the
        // server answered per second in its fastest run so far (a cancel authenticates like any request, then
        // writes), at most what the ceiling did. Those from the submit runs count; copies of one make up the rest.
        const fastest = Math.max(0, ...results.scenarios.map((s) => s.server.rps));
        const rate = fastest > 0 ? Math.min(ceilingRun.rps, 2 * fastest) : ceilingRun.rps;
        const need = (seconds: number) => Math.ceil(rate * seconds) + 100;
        const queuedSql = `SELECT id FROM tasks WHERE account_id = ? AND status = 'queued' ORDER BY created_at DESC`;
        // A real queued task to copy (the submit runs made many, unless they were left out with --only).
        await fetch(`${server.url}${BASE}`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: SUBMIT_BODY });
        let queued = selectColumn<string>(main.dbPath, queuedSql, main.accountId);
        const missing = need(WARMUP.seconds) + need(LOAD.seconds) + 1 - queued.length;
        if (missing > 0) {
          const { seconds } = seedTasks(main.dbPath, { template: readTemplate(main.dbPath, queued[0]!), accountId: main.accountId, count: missing, newestAt: Date.now() - 60_000 });
          log(`cancel: wrote ${missing.toLocaleString('en-US')} queued tasks in ${seconds.toFixed(1)} s`);
          queued = selectColumn<string>(main.dbPath, queuedSql, main.accountId);
        }
        // The first one is the sample request's.
        const warmup = queued.slice(1, 1 + need(WARMUP.seconds));
        const measured = queued.slice(1 + need(WARMUP.seconds));
        writeFileSync(cancelIds.warmup, `${warmup.join('\n')}\n`);
        writeFileSync(cancelIds.measured, `${measured.join('\n')}\n`);
        return `${measured.length.toLocaleString('en-US')} queued tasks for the measured run (${missing > 0 ? `${missing.toLocaleString('en-US')} written to the store, the rest from the submit runs` : 'from the submit runs'}); each request cancels another one`;
      },
      check: (warmup, measured) => {
        // Every answered cancel refunded a task of its own: at least as many cancelled tasks as answers
        // (more when the runs ended with requests in flight), and as many refunds in the ledger.
        const { cancelled, refunds } = selectRow<{ cancelled: number; refunds: number }>(
          main.dbPath,
          `SELECT (SELECT count(*) FROM tasks WHERE account_id = @account AND status = 'cancelled') AS cancelled,
                  (SELECT count(*) FROM ledger_entries WHERE account_id = @account AND kind = 'refund') AS refunds`,
          { account: main.accountId },
        );
        const answered = warmup.requests + measured.requests + 1;
        if (cancelled < answered || refunds !== cancelled) throw new Error(`cancel: ${answered} answers but ${cancelled} cancelled tasks and ${refunds} refunds`);
        return `${cancelled.toLocaleString('en-US')} tasks cancelled and refunded for ${answered.toLocaleString('en-US')} answers (warm-up included)`;
      },
      sample: () => {
        const first = selectColumn<string>(main.dbPath, `SELECT id FROM tasks WHERE account_id = ? AND status = 'queued' ORDER BY created_at DESC LIMIT 1`, main.accountId)[0]!;
        return { url: `${BASE}/${first}/cancel`, init: { method: 'POST', headers: auth } };
      },
    },
  ];

  if (!SKIP.has('http')) {
    for (const scenario of scenarios.filter((s) => !ONLY || ONLY.has(s.key))) {
      const argsFor = (run: 'ceiling' | 'warmup' | 'measured') => scenario.scriptArgs?.(run) ?? [];
      log(`${scenario.name}: ceiling`);
      await runWrk(scenario.url(ceiling.url), scenario.script, WARMUP, argsFor('ceiling'));
      const ceilingRun = await runWrk(scenario.url(ceiling.url), scenario.script, LOAD, argsFor('ceiling'));
      let floorRun: (WrkResult & { cpuUs: number }) | undefined;
      let featuredRun: (WrkResult & { cpuUs: number }) | undefined;
      const rounds = scenario.floor || baseline ? ROUNDS : 1;
      const load = rounds > 1 ? ROUND_LOAD : LOAD;
      for (let round = 1; round <= rounds; round++) {
        if (scenario.floor) {
          const sample = scenario.sample();
          const answer = await fetch(`${floor.url}${sample.url}`, sample.init);
          await answer.arrayBuffer();
          if (answer.status !== scenario.expect) throw new Error(`${scenario.name}: the floor answered ${answer.status}, not ${scenario.expect}`);
          log(`${scenario.name}: floor`);
          await runWrk(scenario.url(floor.url), scenario.script, WARMUP, argsFor('ceiling'));
          floorRun = await runWrkMeasured(floor.pid, scenario.url(floor.url), scenario.script, load, argsFor('ceiling'));
          log(`${scenario.name}: round ${round} floor ${Math.round(floorRun.rps)} req/s, p99 ${floorRun.p99Ms.toFixed(2)} ms, CPU ${floorRun.cpuUs.toFixed(1)} µs/answer`);
          if (floorRun.statusErrors + floorRun.socketErrors > 0) throw new Error(`${scenario.name}: the floor gave ${floorRun.statusErrors} error answers, ${floorRun.socketErrors} socket errors`);
          log(`${scenario.name}: floor with the server's features`);
          await runWrk(scenario.url(featuredFloor.url), scenario.script, WARMUP, argsFor('ceiling'));
          featuredRun = await runWrkMeasured(featuredFloor.pid, scenario.url(featuredFloor.url), scenario.script, load, argsFor('ceiling'));
          log(`${scenario.name}: round ${round} floor with features ${Math.round(featuredRun.rps)} req/s (${(featuredRun.rps / floorRun.rps).toFixed(2)} of the floor), CPU ${featuredRun.cpuUs.toFixed(1)} µs/answer`);
          if (featuredRun.statusErrors + featuredRun.socketErrors > 0) throw new Error(`${scenario.name}: the floor with features gave ${featuredRun.statusErrors} error answers, ${featuredRun.socketErrors} socket errors`);
        }
        if (baseline) {
          log(`${scenario.name}: baseline`);
          await runWrk(scenario.url(baseline.url), scenario.script, WARMUP, argsFor('warmup'));
          const run = await runWrkMeasured(baseline.pid, scenario.url(baseline.url), scenario.script, load, argsFor('measured'));
          log(`${scenario.name}: round ${round} baseline ${Math.round(run.rps)} req/s, p99 ${run.p99Ms.toFixed(2)} ms, CPU ${run.cpuUs.toFixed(1)} µs/answer` + (floorRun ? ` (floor ${Math.round(floorRun.rps)} req/s, p99 ${floorRun.p99Ms.toFixed(2)} ms; baseline/floor ${(run.rps / floorRun.rps).toFixed(2)})` : '') + `, errors ${run.statusErrors + run.socketErrors}`);
        }
        const note = await scenario.prepare?.(ceilingRun);
        const sample = scenario.sample();
        const answer = await fetch(`${server.url}${sample.url}`, sample.init);
        const answerBytes = (await answer.arrayBuffer()).byteLength;
        if (answer.status !== scenario.expect) throw new Error(`${scenario.name}: the server answered ${answer.status}, not ${scenario.expect}`);
        log(`${scenario.name}: server`);
        const rssBeforeMb = memoryOf(server.pid).rssMb;
        const warmupRun = await runWrk(scenario.url(server.url), scenario.script, WARMUP, argsFor('warmup'));
        const serverRun = await runWrkMeasured(server.pid, scenario.url(server.url), scenario.script, load, argsFor('measured'));
        // Requests wrk left in flight are still answered; let them finish before reading the store.
        await sleep(500);
        const rssAfterMb = memoryOf(server.pid).rssMb;
        const checked = scenario.check?.(warmupRun, serverRun);
        // wrk counts answers ≥ 400: for the missing task those are the expected ones.
        const wrongStatus = scenario.expect >= 400 ? serverRun.requests - serverRun.statusErrors : serverRun.statusErrors;
        const result: ScenarioResult = {
          name: scenario.name,
          answerBytes,
          server: serverRun,
          ceiling: ceilingRun,
          ...(floorRun ? { floor: floorRun } : {}),
          ...(featuredRun ? { featuredFloor: featuredRun } : {}),
          rssBeforeMb,
          rssAfterMb,
          unexpected: wrongStatus + serverRun.socketErrors,
          ...(note || checked ? { note: [note, checked].filter(Boolean).join('; ') } : {}),
        };
        results.scenarios.push(result);
        log(
          `${scenario.name}: ${Math.round(serverRun.rps)} req/s (ceiling ${Math.round(ceilingRun.rps)}, ratio ${(serverRun.rps / ceilingRun.rps).toFixed(2)}), ` +
            (floorRun ? `floor ${Math.round(floorRun.rps)} (ratio ${(floorRun.rps / ceilingRun.rps).toFixed(2)}, p99 ${floorRun.p99Ms.toFixed(2)} ms), ` : '') +
            `p50 ${serverRun.p50Ms.toFixed(2)} ms, p99 ${serverRun.p99Ms.toFixed(2)} ms, RSS ${rssBeforeMb.toFixed(0)} → ${rssAfterMb.toFixed(0)} MB, errors ${result.unexpected}` +
            (rounds > 1 || baseline ? ` [round ${round}${floorRun ? `, server/floor ${(serverRun.rps / floorRun.rps).toFixed(2)}` : ''}, CPU ${serverRun.cpuUs.toFixed(1)} µs/answer]` : ''),
        );
      }
    }
  }
  await stop(ceiling.child);
  await stop(floor.child);
  await stop(featuredFloor.child);
  if (baseline) await stop(baseline.child);
  baseline = undefined;

  // --- Memory: queries of the succeeded task until RSS_REQUESTS were answered, RSS every quarter.
  if (!SKIP.has('rss')) {
    log(`memory: ${RSS_REQUESTS.toLocaleString('en-US')} queries`);
    const atStart = memoryOf(server.pid);
    const samples: RssSample[] = [{ requests: 0, rssMb: atStart.rssMb, anonMb: atStart.anonMb }];
    let answered = 0;
    let rate = results.scenarios[0]?.server.rps ?? 3000;
    let last: WrkResult | undefined;
    for (const quarter of [1, 2, 3, 4]) {
      const mark = (RSS_REQUESTS * quarter) / 4;
      while (answered < mark) {
        const seconds = Math.max(1, Math.ceil(((mark - answered) / rate) * 1.02));
        last = await runWrk(`${server.url}${BASE}/${succeededId}`, queryScript, { ...LOAD, seconds });
        if (last.statusErrors + last.socketErrors > 0) throw new Error(`memory run: ${last.statusErrors} error answers, ${last.socketErrors} socket errors`);
        answered += last.requests;
        rate = last.rps;
      }
      const { rssMb, anonMb } = memoryOf(server.pid);
      samples.push({ requests: answered, rssMb, anonMb });
      log(`memory: ${answered.toLocaleString('en-US')} requests, RSS ${rssMb.toFixed(0)} MB (anonymous ${anonMb.toFixed(0)} MB)`);
    }
    results.rss = { samples, peakMb: memoryOf(server.pid).peakMb, p99Ms: last!.p99Ms };
  }
  await stop(server.child);
  mainServer = undefined;

  // --- Store size: a store of 1,000 tasks and one of SCALE_TASKS, each with a server of its own, both up together.
  // GET is measured SCALE_ROUNDS times at each size, the two sizes taking turns, so that a slow spell of the machine
  // falls on both alike; each size reports its run with the median p99 (every p99 is in the report). The floor
  // (bench/http/floor.ts) answers the same GETs from the same file in each turn: what the store's size
  // costs any server doing the read on this host. What each process had read from the disk over its runs tells the
  // store's size from the host's page cache (a host that drops idle file pages, BENCHMARKS.md twenty-eighth pass).
  if (!SKIP.has('scale')) {
    const now = Date.now();
    const seeded = [];
    for (const tasks of [1000, SCALE_TASKS]) {
      const store = await createStore(join(work, `scale-${tasks}`));
      log(`store size: writing ${tasks.toLocaleString('en-US')} tasks`);
      seeded.push({ tasks, store, seedSeconds: seedTasks(store.dbPath, { template: succeeded, accountId: store.accountId, count: tasks, newestAt: now }).seconds });
    }
    const servers: NodeService[] = [];
    try {
      // Each size's server and floor, the ids its GETs ask for and its scripts, made once.
      interface Size {
        tasks: number;
        seedSeconds: number;
        server: NodeService;
        floor: NodeService;
        getScript: string;
        getArgs: string[];
        getAloneArgs: string[];
        listScript: string;
        gets: WrkResult[];
        floorGets: WrkResult[];
        /** MB read from the disk over the measured GET runs, by the server and by the floor. */
        readMb: { server: number; floor: number };
      }
      const sizes: Size[] = [];
      for (const { tasks, store, seedSeconds } of seeded) {
        const server = await startServer(store, { worker: false, nodeArgs: SERVER_NODE_ARGS });
        servers.push(server);
        const sizeFloor = await startNodeService(compiledProcesses.floor, [store.dbPath], {}, SERVER_NODE_ARGS);
        servers.push(sizeFloor);
        const headers = { Authorization: `Bearer ${store.key}` };
        const ids = join(work, `get-${tasks}.ids`);
        writeFileSync(ids, `${shuffle(selectColumn<string>(store.dbPath, 'SELECT id FROM tasks ORDER BY random() LIMIT 10000')).join('\n')}\n`);
        sizes.push({
          tasks,
          seedSeconds,
          server,
          floor: sizeFloor,
          getScript: writeIdsScript(join(scripts, `get-random-${tasks}.lua`), { method: 'GET', headers, prefix: `${BASE}/`, suffix: '', wrap: true, exhausted: MISSING_ID }),
          getArgs: [ids, String(LOAD.threads)],
          getAloneArgs: [ids, '1'],
          listScript: writeStaticScript(join(scripts, `list-${tasks}.lua`), { method: 'GET', headers }),
          gets: [],
          floorGets: [],
          readMb: { server: 0, floor: 0 },
        });
      }
      const checked = (tasks: number, run: WrkResult) => {
        if (run.statusErrors + run.socketErrors > 0) throw new Error(`store size ${tasks}: error answers`);
        return run;
      };
      for (const size of sizes) {
        await runWrk(size.server.url, size.getScript, WARMUP, size.getArgs);
        await runWrk(size.floor.url, size.getScript, WARMUP, size.getArgs);
      }
      /** A GET run of `service`, and what it had read from the disk meanwhile added to `size.readMb[who]`. */
      const measured = async (size: Size, who: 'server' | 'floor') => {
        const service = size[who];
        const before = storageReadOf(service.pid);
        const run = checked(size.tasks, await runWrk(service.url, size.getScript, LOAD, size.getArgs));
        size.readMb[who] += storageReadOf(service.pid) - before;
        return run;
      };
      for (let round = 0; round < SCALE_ROUNDS; round++) {
        for (const size of sizes) {
          // Which of the two reads the file first takes turns: the first's reads from the disk warm the page cache for the other.
          if (round % 2 === 0) size.gets.push(await measured(size, 'server'));
          size.floorGets.push(await measured(size, 'floor'));
          if (round % 2 === 1) size.gets.push(await measured(size, 'server'));
        }
      }
      /** The run with the median p99 (of an even count, the upper of the two middle ones). */
      const medianByP99 = (runs: WrkResult[]) => [...runs].sort((a, b) => a.p99Ms - b.p99Ms)[Math.floor(runs.length / 2)]!;
      for (const size of sizes) {
        const get = medianByP99(size.gets);
        // One connection: the latency of a lone request, without the queueing of a saturated server.
        const getAlone = checked(size.tasks, await runWrk(size.server.url, size.getScript, { ...LOAD, threads: 1, connections: 1 }, size.getAloneArgs));
        await runWrk(`${size.server.url}${BASE}`, size.listScript, WARMUP);
        const list = checked(size.tasks, await runWrk(`${size.server.url}${BASE}`, size.listScript, LOAD));
        const floorGet = medianByP99(size.floorGets);
        const getP99s = size.gets.map((run) => run.p99Ms);
        log(
          `${size.tasks.toLocaleString('en-US')} tasks: GET p99 ${getP99s.map((p99) => p99.toFixed(2)).join(', ')} ms (median ${get.p99Ms.toFixed(2)}; ` +
            `1 connection: p99 ${getAlone.p99Ms.toFixed(2)} ms), list p99 ${list.p99Ms.toFixed(2)} ms; ` +
            `floor GET p99 ${size.floorGets.map((run) => run.p99Ms.toFixed(2)).join(', ')} ms; read from the disk: server ${size.readMb.server.toFixed(1)} MB, floor ${size.readMb.floor.toFixed(1)} MB`,
        );
        results.scale.push({
          tasks: size.tasks,
          seedSeconds: size.seedSeconds,
          get,
          getP99s,
          getAlone,
          floorGet,
          floorGetP99s: size.floorGets.map((run) => run.p99Ms),
          readMb: size.readMb,
          list,
          rssMb: memoryOf(size.server.pid).rssMb,
        });
      }
    } finally {
      for (const server of servers) await stop(server.child);
    }
  }

  // --- Pipeline: bench/pipeline.ts, its own servers and receiver.
  if (!SKIP.has('pipeline')) {
    log('pipeline: bench/pipeline.ts');
    const pipelineArgs = ['--tasks', String(PIPELINE.tasks), '--warmup', String(PIPELINE.warmup), '--concurrency', String(PIPELINE.concurrency), '--paced', String(PIPELINE.paced), '--rate', String(PIPELINE.rate), '--rounds', String(PIPELINE.rounds)];
    const { rows } = await runPipelineBench(pipelineArgs, CPU_PROFILE_DIR);
    if (!rows.length) throw new Error('could not read the table bench/pipeline.ts printed');
    results.pipeline = {
      rows,
      description:
        `\`bench/pipeline.ts ${pipelineArgs.join(' ')}\`: one server (\`--role all\`) per store with the instant provider and webhooks to an HTTPS ` +
        `receiver on loopback; tasks/s from the first of ${PIPELINE.tasks} submits (${PIPELINE.concurrency} clients), after ${PIPELINE.warmup} tasks of warm-up as loaded through each api process (the split topology's two: twice as many), ` +
        `to the last webhook received` +
        (PIPELINE.rounds > 1 ? `, the median of ${PIPELINE.rounds} rounds in which the stores and topologies take turns, each on a fresh store (every round's figure beside it)` : '') +
        `; ` +
        `latency from submit sent to webhook received for ${PIPELINE.paced} tasks paced at ${PIPELINE.rate}/s (not saturated). ` +
        `\`SQLite floor\`: in the server's place, the least one process does on this stack from a submission to its webhook received ` +
        `(bench/http/pipeline-floor.ts: the submission's floor, then the job leased, the instant provider's output, the task's success with its ` +
        `delivery written, the server's webhook sender, the delivery recorded; no long polls, usage totals, logs, metrics or limits); ` +
        `a floor under 1,000 tasks/s shows that rate out of reach on this machine. ` +
        `\`PostgreSQL floor\` and \`PostgreSQL floor, 2 api + 2 worker\`: the same on PostgreSQL, in one process and split (bench/http/pg-pipeline-floor.ts: api processes, each ` +
        `submission's floor with an event-loop turn's tasks, charges and wake-up in one message; workers claiming and starting in one ` +
        `statement, the instant provider's output, the successes with their deliveries in one message, the server's sender, the deliveries ` +
        `recorded in one statement; no long polls or their trigger, usage totals, attempts' history, logs, metrics or limits); ` +
        `one process does both, its worker woken in the process; a floor under 0.6 × SQLite's shows that line out of reach on this machine.`,
    };
  }

  // --- Upstream following: bench/upstream.ts, its own stand-in and server.
  if (!SKIP.has('upstream')) {
    log(`upstream following: ${UPSTREAM.tasks.toLocaleString('en-US')} tasks of ${UPSTREAM.runSeconds} s (bench/upstream.ts)`);
    const upstream = await runUpstreamBench({ ...UPSTREAM, nodeArgs: SERVER_NODE_ARGS, log: (line) => log(`upstream: ${line}`) });
    const notes = QUICK ? [`A --quick run: ${UPSTREAM.tasks} tasks of ${UPSTREAM.runSeconds} s, not the target's 1,000 of 60 s.`] : [];
    upstreamSection = renderUpstreamSection(upstream, judgeUpstream(upstream), results.command, notes, { loadNote: false });
  }

  // --- Account usage: bench/usage.ts, its own store and server, the same wrk load.
  if (!SKIP.has('usage')) {
    log(`account usage: ${USAGE.tasks.toLocaleString('en-US')} tasks (bench/usage.ts)`);
    const usage = await runUsageBench({ tasks: USAGE.tasks, load: LOAD, warmupSeconds: WARMUP.seconds, nodeArgs: SERVER_NODE_ARGS, log: (line) => log(`usage: ${line}`) });
    const notes = QUICK ? [`A --quick run: ${USAGE.tasks.toLocaleString('en-US')} tasks, ${LOAD.seconds} s runs, not the target's ${USAGE_FULL.tasks.toLocaleString('en-US')} tasks.`] : [];
    usageSection = renderUsageSection(usage, judgeUsage(usage), results.command, notes, { loadNote: false });
  }
} finally {
  if (mainServer) await stop(mainServer.child);
  if (ceiling) await stop(ceiling.child);
  if (floor) await stop(floor.child);
  if (featuredFloor) await stop(featuredFloor.child);
  if (baseline) await stop(baseline.child);
  rmSync(work, { recursive: true, force: true });
}

const targets = judgeTargets(results, FULL);
const withUpstream = upstreamSection ? placeSection(renderReport(results, targets), UPSTREAM_HEADING, upstreamSection) : renderReport(results, targets);
const report = usageSection ? placeSection(withUpstream, USAGE_HEADING, usageSection) : withUpstream;
console.log(`\n${report}`);
const write = args.write || (!QUICK && !CPU_PROFILE_DIR && !ONLY && SKIP.size === 0 && !args['no-write']);
if (write) {
  // What follows ANALYSIS_MARKER is written by hand (profiles, reasons): a new run keeps it.
  const target = join(REPO_ROOT, 'BENCHMARKS.md');
  const previous = existsSync(target) ? readFileSync(target, 'utf8') : '';
  const analysis = previous.includes(ANALYSIS_MARKER) ? previous.slice(previous.indexOf(ANALYSIS_MARKER)) : '';
  // The upstream part skipped: the section of the run that last measured it stays.
  const keptUpstream = upstreamSection ? undefined : sectionOf(previous, UPSTREAM_HEADING);
  // Likewise the account usage part.
  const keptUsage = usageSection ? undefined : sectionOf(previous, USAGE_HEADING);
  const withKeptUpstream = keptUpstream ? placeSection(report, UPSTREAM_HEADING, keptUpstream) : report;
  // After the upstream section when both are kept: placeSection inserts before `## Targets`.
  const written = keptUsage ? placeSection(withKeptUpstream, USAGE_HEADING, keptUsage) : withKeptUpstream;
  writeFileSync(target, `${written}\n${analysis ? `\n${analysis}` : ''}`);
  log(`written to ${join(REPO_ROOT, 'BENCHMARKS.md')}`);
}
if (CPU_PROFILE_DIR && existsSync(CPU_PROFILE_DIR)) {
  log(`CPU profiles in ${CPU_PROFILE_DIR}: ${readdirSync(CPU_PROFILE_DIR).filter((f) => f.endsWith('.cpuprofile')).join(', ')}`);
}
process.exit(0);
