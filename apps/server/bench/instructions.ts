/**
 * Instructions a request costs, counted by valgrind's callgrind: the floor, the floor with the server's features and
 * the server (and a `--baseline` copy of the sources), each answering exactly the same requests.
 *
 *   pnpm --filter @vidgen/server bench:instructions [-- --only query,submit --requests 10000 --warmup 10000
 *                                                      --concurrency 1 --repeat 1 --baseline DIR [--servers-only] --keep-dumps DIR
 *                                                      --variants correlation,headers,metrics,usage,log]
 *
 * `--variants`: the floor also counted with each of those features alone, and a table of what each adds to the floor
 * (bench:features measures the same in time, which on a shared host moves more than most features cost). A feature
 * worth less than the count's own spread between processes warmed alike (± 2–3 % at 3,000 requests of 16 connections,
 * where the compiler's and the collector's history differ) shows as noise, even below zero; on 2026-11-28 only the
 * headers stood out (+3.5 % of a query's floor, +2.4 % of a submission's), and the features together +9.1 % and +5.6 %.
 *
 * `--servers-only`: only the server and the `--baseline` (no floors): an A/B of a change to the server in half the time.
 *
 * `--keep-dumps DIR`: each process's callgrind dump of the measured requests kept there as `<request>-<process>-<n>.out`,
 * for `callgrind_annotate` (native code by function: SQLite, V8, libuv; JavaScript shows as addresses).
 *
 * Why: on this project's hosts a wall-clock run of the same build varies by ± 10–15 % from minute to minute
 * (BENCHMARKS.md), so a change worth a microsecond of a request's ≈ 30–60 cannot be told from noise by `pnpm bench`,
 * however many rounds. Instructions counted do not depend on what else the machine is doing: two processes of one
 * build with the same history of requests counted the same to ≈ 0.03 %. They do depend on that history, through the
 * garbage collector and the compiler: a submission of the floor counted 768,000 instructions after 3,000 submissions
 * of warm-up, 719,000 after 12,000, and 441,000 after 3,000 queries, list pages and submissions each (sixteenth pass).
 * So compare only processes warmed alike (every process here gets the same requests), count over many requests (a
 * collection of the old generation that falls in the window is paid by its requests alone: the default 10,000 spread
 * it), and treat a difference under a few percent as a hint, not a result. `pnpm bench` stays the judge of the targets,
 * which are throughput.
 *
 * What is counted, and what not:
 * - every instruction the process executes in user space between the warm-up and the end of the measured requests
 *   (all of its threads: JavaScript, V8's compilers and GC, SQLite, libuv), divided by the requests;
 * - not the kernel's work (the socket's and the files' system calls: on a loaded server ≈ a fifth of a request's
 *   CPU), nor how long an instruction takes (a cache miss, a lock);
 * - node runs with `--predictable --single-threaded` (no background compilation or GC threads, whose timing would
 *   change what is counted) and under valgrind about fifty times slower, so the client is never the limit;
 * - `--concurrency 1` (the default) answers each request in a turn of its own: the most repeatable count, but each
 *   request then pays what a loaded server shares among a turn's requests (a commit, the event loop's own work). The
 *   log lines are written every 10 ms (log-destination.ts's hold), which under valgrind is every few requests: that
 *   small part of the count follows the clock (and a `--baseline` from before the hold, 2026-11-28, wrote once a
 *   request). With more connections the count moves by ≈ 1 % from run to run, as batches vary.
 *
 * The store is the HTTP bench's: one account, its key, one succeeded task made through the server (the query's);
 * every measured process gets a fresh copy of it. Needs valgrind (`apt-get install valgrind`).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './http/report.js';
import { SUBMIT_BODY } from './http/wrk.js';
import { compileBaseline, compileBenchProcesses } from './http/compiled.js';
import { FLOOR_FEATURES } from './http/floor-features.js';
import { instantServerEnv, removeOnExit, runCli, SERVER_ROOT, startInstantServer, track } from './http/children.js';
import { stopServerProcess } from '../test/support/pipeline-processes.js';

const { values: args } = parseArgs({
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    only: { type: 'string' },
    requests: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    repeat: { type: 'string' },
    baseline: { type: 'string' },
    'warm-all': { type: 'boolean' },
    'keep-dumps': { type: 'string' },
    'servers-only': { type: 'boolean' },
    variants: { type: 'string' },
  },
});

const REQUESTS = Number(args.requests ?? 10_000);
const WARMUP = Number(args.warmup ?? 10_000);
const CONCURRENCY = Number(args.concurrency ?? 1);
const REPEAT = Number(args.repeat ?? 1);
const KINDS = (args.only ?? 'query,submit').split(',') as Kind[];
/**
 * --warm-all: each process first answers every kind of request (queries, list pages, submissions) before the measured
 * kind's warm-up, as `pnpm bench`'s processes have when they reach it: its call sites have then seen other routes.
 */
const WARM_ALL = args['warm-all'] === true;
for (const [name, value] of Object.entries({ requests: REQUESTS, warmup: WARMUP, concurrency: CONCURRENCY, repeat: REPEAT })) {
  if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a whole number ≥ 1, not ${value}`);
}
for (const kind of KINDS) if (kind !== 'query' && kind !== 'submit') throw new Error(`--only takes query and submit, not ${kind}`);
/**
 * --variants correlation,headers,…: the floor also counted with each of these features alone (floor.ts `--features=<list>`,
 * as bench:features measures them in time), beside the floor with all of them; `usage` counts for submissions only.
 */
const VARIANTS = (args.variants ?? '').split(',').filter(Boolean);
for (const variant of VARIANTS) {
  if (!(FLOOR_FEATURES as readonly string[]).includes(variant)) throw new Error(`--variants takes ${FLOOR_FEATURES.join(', ')}, not ${variant}`);
}

type Kind = 'query' | 'submit';
/** Requests sent: the measured kinds, and the list's first page (--warm-all). */
type Sent = Kind | 'list';
/** `floor+<feature>`: the floor with that one feature (`--variants`). */
type Process = 'floor' | 'features' | 'server' | 'baseline' | `floor+${string}`;
/** The floor's arguments after its store for a process that is the floor (none, every feature, or one); undefined for a server. */
const floorArgs = (name: Process): string[] | undefined =>
  name === 'floor' ? [] : name === 'features' ? ['--features'] : name.startsWith('floor+') ? [`--features=${name.slice('floor+'.length)}`] : undefined;

const BASE = '/api/open/v1/video/generations';
/** Node's flags under valgrind: nothing counted depends on when a background thread ran. */
const NODE_FLAGS = ['--predictable', '--single-threaded'];
/** valgrind names the pipes callgrind_control talks through after USER and HOST: the same for both (HOST is also the server's). */
const VALGRIND_ENV = { USER: 'vidgen-bench', HOST: '127.0.0.1' };
const log = (line: string) => console.log(`instructions: ${line}`);

function valgrindAvailable(): boolean {
  try {
    execFileSync('valgrind', ['--version'], { stdio: 'ignore' });
    execFileSync('callgrind_control', ['-h'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Exactly `count` requests over `connections` keep-alive connections; throws on any answer but `expect`. */
async function send(url: string, kind: Sent, key: string, taskId: string, count: number, connections: number, expect: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const target = new URL(kind === 'query' ? `${BASE}/${taskId}` : kind === 'list' ? `${BASE}?limit=20` : BASE, url);
  const headers: Record<string, string> =
    kind === 'submit' ? { authorization: `Bearer ${key}`, 'content-type': 'application/json' } : { authorization: `Bearer ${key}` };
  let sent = 0;
  const one = (): Promise<void> =>
    new Promise<number>((done, fail) => {
      sent++;
      const outgoing = request(target, { agent, method: kind === 'submit' ? 'POST' : 'GET', headers }, (incoming) => {
        incoming.resume();
        incoming.once('end', () => done(incoming.statusCode!));
        incoming.once('error', fail);
      });
      outgoing.once('error', fail);
      outgoing.end(kind === 'submit' ? SUBMIT_BODY : undefined);
    }).then((status) => {
      if (status !== expect) throw new Error(`${kind}: answered ${status}, not ${expect}`);
      return sent < count ? one() : undefined;
    });
  try {
    await Promise.all(Array.from({ length: Math.min(connections, count) }, one));
  } finally {
    agent.destroy();
  }
}

/** `callgrind_control <command> <pid>` (`-z` zeroes the counts, `-d` dumps them). */
const control = (command: '-z' | '-d', pid: number) =>
  execFileSync('callgrind_control', [command, String(pid)], { env: { ...process.env, ...VALGRIND_ENV }, stdio: 'ignore' });

/** The pid of valgrind's own process (`valgrind` is a wrapper script on Debian), found by the output file it was given. */
function valgrindPid(outFile: string): number {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(`--callgrind-out-file=${outFile}`)) return Number(entry);
    } catch {
      // gone
    }
  }
  throw new Error(`no valgrind process writing ${outFile}`);
}

/** Starts `script args` under callgrind and resolves with its URL once it listens (which takes valgrind a while). */
async function startCounted(script: string, scriptArgs: string[], env: Record<string, string>, outFile: string): Promise<{ child: ChildProcess; url: string; pid: number }> {
  const child = track(
    spawn('valgrind', ['--tool=callgrind', `--callgrind-out-file=${outFile}`, `--log-file=${outFile}.log`, process.execPath, ...NODE_FLAGS, script, ...scriptArgs], {
      cwd: SERVER_ROOT,
      env: { ...process.env, ...env, ...VALGRIND_ENV },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  const url = await new Promise<string>((done, fail) => {
    const look = (chunk: Buffer) => {
      output += chunk.toString();
      const found = /listening on (http:\/\/\S+)/.exec(output)?.[1];
      if (found) done(found);
    };
    child.stdout!.on('data', look);
    child.stderr!.on('data', look);
    child.once('exit', (code, signal) => fail(new Error(`${script} exited ${code ?? signal} under valgrind before listening:\n${output}`)));
  });
  // Keep reading what it writes (its log lines), so that a full pipe never stops it.
  child.stdout!.resume();
  return { child, url, pid: valgrindPid(outFile) };
}

/** The instructions of a dump: callgrind's `summary:` (or `totals:`) line. */
function dumpedInstructions(outFile: string): number {
  const text = readFileSync(`${outFile}.1`, 'utf8');
  const line = /^(?:summary|totals): (\d+)/m.exec(text);
  if (!line) throw new Error(`no totals in ${outFile}.1`);
  return Number(line[1]);
}

async function main(): Promise<void> {
  if (!valgrindAvailable()) {
    log('valgrind and callgrind_control are not installed (apt-get install valgrind): nothing measured');
    process.exitCode = 1;
    return;
  }
  const work = removeOnExit(mkdtempSync(join(tmpdir(), 'vidgen-bench-instructions-')));
  const compiled = compileBenchProcesses();
  const baselineMain = args.baseline ? compileBaseline(args.baseline) : undefined;

  // The store: the account, its key and one succeeded task (made through the server with a worker, as the HTTP bench does).
  const storeDir = join(work, 'store');
  mkdirSync(storeDir);
  const dbPath = join(storeDir, 'vidgen.db');
  const storeEnv = { VIDGEN_DATA_DIR: storeDir, VIDGEN_DATABASE_URL: `sqlite:${dbPath}`, VIDGEN_LOG_LEVEL: 'silent' };
  const account = await runCli<{ id: string }>(storeEnv, ['accounts', 'create', '--name', 'bench', '--credits', String(1e15)]);
  const { key } = await runCli<{ key: string }>(storeEnv, ['keys', 'create', '--account', account.id, '--mode', 'test', '--name', 'bench']);
  const maker = await startInstantServer('dist/main.js', storeEnv, { worker: true });
  let taskId: string;
  try {
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const submitted = (await (await fetch(`${maker.url}${BASE}`, { method: 'POST', headers, body: SUBMIT_BODY })).json()) as { requestId: string };
    taskId = submitted.requestId;
    let status = 'queued';
    for (let tries = 0; tries < 10 && status !== 'succeeded'; tries++) {
      status = ((await (await fetch(`${maker.url}${BASE}/${taskId}?wait=10`, { headers })).json()) as { status: string }).status;
    }
    if (status !== 'succeeded') throw new Error(`the query's task is ${status}, not succeeded`);
  } finally {
    await stopServerProcess(maker.child);
  }

  const floors: Process[] = args['servers-only'] ? [] : ['floor', ...VARIANTS.map((variant) => `floor+${variant}` as const), 'features'];
  const processes: Process[] = [...floors, 'server', ...(baselineMain ? (['baseline'] as const) : [])];
  const serverEnv = (dir: string, db: string) => instantServerEnv({ VIDGEN_DATA_DIR: dir, VIDGEN_DATABASE_URL: `sqlite:${db}`, VIDGEN_LOG_LEVEL: 'info' }, false);
  const results = new Map<string, number[]>();
  let run = 0;
  for (const kind of KINDS) {
    for (let repeat = 0; repeat < REPEAT; repeat++) {
      for (const name of processes) {
        run++;
        const dir = join(work, `run-${run}`);
        mkdirSync(dir);
        // The output files' secret and the like, as the store's own directory has them.
        for (const entry of readdirSync(storeDir)) if (!entry.startsWith('vidgen.db')) cpSync(join(storeDir, entry), join(dir, entry), { recursive: true });
        const db = join(dir, 'vidgen.db');
        copyFileSync(dbPath, db);
        const outFile = join(dir, 'callgrind.out');
        const features = floorArgs(name);
        const started = features
          ? await startCounted(compiled.floor, [db, ...features], {}, outFile)
          : await startCounted(name === 'server' ? 'dist/main.js' : baselineMain!, ['--role', 'all'], serverEnv(dir, db), outFile);
        try {
          const expect = kind === 'query' ? 200 : 202;
          if (WARM_ALL) {
            await send(started.url, 'query', key, taskId, WARMUP, CONCURRENCY, 200);
            await send(started.url, 'list', key, taskId, WARMUP, CONCURRENCY, 200);
            await send(started.url, 'submit', key, taskId, WARMUP, CONCURRENCY, 202);
          }
          await send(started.url, kind, key, taskId, WARMUP, CONCURRENCY, expect);
          control('-z', started.pid);
          await send(started.url, kind, key, taskId, REQUESTS, CONCURRENCY, expect);
          control('-d', started.pid);
        } finally {
          await stopServerProcess(started.child, 60_000);
        }
        const perRequest = dumpedInstructions(outFile) / REQUESTS;
        if (args['keep-dumps']) {
          mkdirSync(args['keep-dumps'], { recursive: true });
          copyFileSync(`${outFile}.1`, join(args['keep-dumps'], `${kind}-${name}-${repeat + 1}.out`));
        }
        const label = `${kind} ${name}`;
        results.set(label, [...(results.get(label) ?? []), perRequest]);
        log(`${label}: ${Math.round(perRequest).toLocaleString('en-US')} instructions a request`);
        rmSync(dir, { recursive: true, force: true });
      }
    }
  }

  const warmedWith = WARM_ALL ? ` (and before it ${WARMUP.toLocaleString('en-US')} each of queries, list pages and submissions)` : '';
  console.log(`\n${REQUESTS.toLocaleString('en-US')} requests after ${WARMUP.toLocaleString('en-US')} of warm-up${warmedWith}, ${CONCURRENCY} connection(s), node ${NODE_FLAGS.join(' ')} under callgrind\n`);
  // As throughput ratios are read: the server's share of the floor's rate if instructions were all a request cost.
  const ratios = floors.length > 0;
  console.log(`| request | ${processes.join(' | ')} |${ratios ? ' floor ÷ server | floor with features ÷ server |' : ''}${baselineMain ? ' server ÷ baseline |' : ''}`);
  console.log(`|---|${processes.map(() => '---|').join('')}${ratios ? '---|---|' : ''}${baselineMain ? '---|' : ''}`);
  for (const kind of KINDS) {
    const of = (name: Process) => median(results.get(`${kind} ${name}`)!);
    const cells = processes.map((name) => results.get(`${kind} ${name}`)!.map((value) => Math.round(value).toLocaleString('en-US')).join(' / '));
    const floorRatios = ratios ? ` ${(of('floor') / of('server')).toFixed(3)} | ${(of('features') / of('server')).toFixed(3)} |` : '';
    console.log(`| ${kind} | ${cells.join(' | ')} |${floorRatios}${baselineMain ? ` ${(of('server') / of('baseline')).toFixed(3)} |` : ''}`);
  }
  if (VARIANTS.length && floors.length) {
    console.log('\nWhat each feature adds to the floor, alone and all together (instructions a request, and the share of the floor\'s):\n');
    console.log(`| request | ${[...VARIANTS, 'all'].join(' | ')} |`);
    console.log(`|---|${[...VARIANTS, 'all'].map(() => '---|').join('')}`);
    for (const kind of KINDS) {
      const floor = median(results.get(`${kind} floor`)!);
      const over = (name: Process) => {
        const added = median(results.get(`${kind} ${name}`)!) - floor;
        return `${Math.round(added).toLocaleString('en-US')} (${((100 * added) / floor).toFixed(1)} %)`;
      };
      console.log(`| ${kind} | ${[...VARIANTS.map((variant) => over(`floor+${variant}`)), over('features')].join(' | ')} |`);
    }
  }
}

await main();
