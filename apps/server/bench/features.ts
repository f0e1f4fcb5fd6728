/**
 * What each of the floor's features costs by itself (bench/http/floor.ts `--features=<list>`): the task query (or, with
 * `--request submit`, the submission `pnpm bench` sends) answered by the floor with none, with each feature alone and
 * with all of them, each in its own process on its own copy of a store
 * kept by `pnpm bench --keep-store PATH`, measured in rounds in which the variants take turns (a slow spell of a shared
 * host then falls on all of them), each round starting one variant later than the last, CPU an answer from /proc and
 * req/s, the median of the rounds; and a second table of where that CPU went (user and system, the main thread and the
 * others) with the minor page faults and context switches an answer (bench/http/process-counters.ts).
 *
 *   pnpm bench --quick --only query --skip rss,scale,pipeline,upstream,usage --no-write --keep-store /tmp/store.db
 *   pnpm --filter @vidgen/server bench:features -- --store /tmp/store.db [--rounds 7 --seconds 4 --connections 50]
 *       [--request query|submit] [--variants none,correlation,headers,metrics,usage,log,all,server,baseline] [--baseline DIR]
 *       [--node-args '--trace-gc'] [--logs DIR]
 *
 * `correlation`: the id (the caller's checked, or a new one) and its header; `headers`: the server's security and cache
 * headers with the correlation id's; `metrics`: the request counted and timed; `log`: the request line (its id empty
 * without `correlation`) written a few milliseconds at a time to a file, as the server's standard output is in the benchmark;
 * `usage` (submissions only): the usage totals kept as running sums, written with each batch. The store's account has
 * credits that never run out, so every submission is answered 202 however many a run sends.
 *
 * Beside the floor's variants, `server` is the server itself (dist/main.js, as `pnpm bench` runs it: instant providers,
 * no limits, no worker, its log lines at info appended to a file) and `baseline` a copy of the server's sources
 * (`--baseline DIR`, compiled as bench/http/compiled.ts's compileBaseline does), each on its own copy of the store: a
 * steady A/B in time of a change to the server, or of the server against the floor with every feature
 * (`--variants none,all,server`), paired by round like the features.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { stopServerProcess } from '../test/support/pipeline-processes.js';
import { removeOnExit, startInstantServer, startNodeService, type NodeService } from './http/children.js';
import { compileBaseline, compileBenchProcesses } from './http/compiled.js';
import { FLOOR_FEATURES } from './http/floor-features.js';
import { median } from './http/report.js';
import { perAnswer, processCounters, type ProcessCounters } from './http/process-counters.js';
import { runWrk, SUBMIT_BODY, writeStaticScript, type Load } from './http/wrk.js';

const { values } = parseArgs({
  options: {
    store: { type: 'string' },
    rounds: { type: 'string', default: '7' },
    seconds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    request: { type: 'string', default: 'query' },
    variants: { type: 'string' },
    baseline: { type: 'string' },
    // Node's own options for every variant's process (e.g. `--trace-gc`, whose lines go to the variant's log file).
    'node-args': { type: 'string', default: '' },
    // Where each variant's standard output (its log lines) is kept after the run: `<variant>.log`.
    logs: { type: 'string' },
  },
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
});
if (!values.store) throw new Error('--store PATH: a store kept by `pnpm bench --keep-store PATH` (and its PATH.json)');
const storePath = resolve(process.env.INIT_CWD ?? process.cwd(), values.store);
const kept = JSON.parse(readFileSync(`${storePath}.json`, 'utf8')) as { key: string; succeededId: string };
const LOAD: Load = { threads: 1, connections: Number(values.connections), seconds: Number(values.seconds) };
const ROUNDS = Math.max(1, Number(values.rounds));
const NODE_ARGS = values['node-args'].split(' ').filter(Boolean);
if (values.request !== 'query' && values.request !== 'submit') throw new Error(`--request query|submit, not ${values.request}`);
const SUBMIT = values.request === 'submit';
const variants = values.variants?.split(',') ?? ['none', ...FLOOR_FEATURES.filter((feature) => SUBMIT || feature !== 'usage'), 'all'];
const argsOf = (variant: string) => (variant === 'none' ? [] : variant === 'all' ? ['--features'] : [`--features=${variant}`]);
const SERVERS = ['server', 'baseline'];
if (variants.includes('baseline') && !values.baseline) throw new Error('the baseline variant needs --baseline DIR, a copy of the server\'s sources');

const work = removeOnExit(mkdtempSync(join(tmpdir(), 'vidgen-bench-features-')));
const logs = values.logs ? resolve(process.env.INIT_CWD ?? process.cwd(), values.logs) : work;
mkdirSync(logs, { recursive: true });
const compiled = compileBenchProcesses();
const baselineMain = variants.includes('baseline') ? compileBaseline(values.baseline!) : undefined;
const auth = { Authorization: `Bearer ${kept.key}` };
const submitHeaders = { ...auth, 'Content-Type': 'application/json' };
const script = SUBMIT
  ? writeStaticScript(join(work, 'submit.lua'), { method: 'POST', headers: submitHeaders, body: SUBMIT_BODY })
  : writeStaticScript(join(work, 'query.lua'), { method: 'GET', headers: auth });
const services = new Map<string, NodeService>();
try {
  for (const variant of variants) {
    if (SERVERS.includes(variant)) {
      const dir = join(work, variant);
      mkdirSync(dir);
      copyFileSync(storePath, join(dir, 'vidgen.db'));
      const env = { VIDGEN_DATA_DIR: dir, VIDGEN_DATABASE_URL: `sqlite:${join(dir, 'vidgen.db')}`, VIDGEN_LOG_LEVEL: 'info' };
      const script = variant === 'server' ? 'dist/main.js' : baselineMain!;
      services.set(variant, await startInstantServer(script, env, { worker: false, nodeArgs: NODE_ARGS, logFile: join(logs, `${variant}.log`) }));
      continue;
    }
    const db = join(work, `${variant}.db`);
    copyFileSync(storePath, db);
    services.set(variant, await startNodeService(compiled.floor, [db, ...argsOf(variant)], {}, NODE_ARGS, { stdoutFile: join(logs, `${variant}.log`) }));
  }
  const base = '/api/open/v1/video/generations';
  const urlOf = (variant: string) => `${services.get(variant)!.url}${base}${SUBMIT ? '' : `/${kept.succeededId}`}`;
  for (const variant of variants) {
    const answer = await fetch(
      urlOf(variant),
      SUBMIT ? { method: 'POST', headers: submitHeaders, body: SUBMIT_BODY } : { headers: auth },
    );
    if (answer.status !== (SUBMIT ? 202 : 200)) throw new Error(`${variant}: the ${values.request} answered ${answer.status}`);
    await answer.arrayBuffer();
    await runWrk(urlOf(variant), script, { ...LOAD, seconds: 2 });
  }
  const runs = new Map<string, { rps: number; cpuUs: number; counts: ProcessCounters }[]>(variants.map((variant) => [variant, []]));
  for (let round = 1; round <= ROUNDS; round++) {
    // Each round starts one variant later: a host that drifts within a round then favours none of them.
    const shift = (round - 1) % variants.length;
    for (const variant of [...variants.slice(shift), ...variants.slice(0, shift)]) {
      const { pid } = services.get(variant)!;
      const before = processCounters(pid);
      const run = await runWrk(urlOf(variant), script, LOAD);
      const counts = perAnswer(before, processCounters(pid), run.requests);
      if (run.statusErrors + run.socketErrors > 0) throw new Error(`${variant}: ${run.statusErrors} error answers, ${run.socketErrors} socket errors`);
      const cpuUs = (counts.user + counts.system) * 1e6;
      runs.get(variant)!.push({ rps: run.rps, cpuUs, counts });
      console.log(`round ${round} ${variant}: ${Math.round(run.rps)} req/s, CPU ${cpuUs.toFixed(1)} µs/answer`);
    }
  }
  // Over the floor: the median of each round's difference from the floor's run of the same round (a round's variants
  // run back to back, so a slow spell mostly falls on both of a pair; the rounds' own CPU moved by ±10 % on a noisy host).
  const floorRuns = runs.get('none');
  console.log(`\n${SUBMIT ? 'The submission' : 'The task query'}, the floor with each feature (medians of ${ROUNDS} rounds, wrk -t1 -c${LOAD.connections} -d${LOAD.seconds}s):\n`);
  console.log('| variant | req/s | ÷ the floor\'s, paired by round | CPU an answer | over the floor, paired by round |');
  console.log('|---|---|---|---|---|');
  for (const [variant, rs] of runs) {
    const cpu = median(rs.map((r) => r.cpuUs));
    const paired = !floorRuns || variant === 'none' ? undefined : { rate: median(rs.map((r, i) => r.rps / floorRuns[i]!.rps)), cpu: median(rs.map((r, i) => r.cpuUs - floorRuns[i]!.cpuUs)) };
    const overText = paired === undefined ? '—' : `${paired.cpu.toFixed(1)} µs (${((100 * paired.cpu) / median(floorRuns!.map((r) => r.cpuUs))).toFixed(1)} %)`;
    console.log(`| ${variant} | ${Math.round(median(rs.map((r) => r.rps))).toLocaleString('en-US')} | ${paired ? paired.rate.toFixed(2) : '—'} | ${cpu.toFixed(1)} µs | ${overText} |`);
  }
  // Where the CPU went (/proc, medians of the rounds): the faults and switches are the kernel's share's usual causes.
  console.log('\n| variant | user | system | main thread | other threads | minor faults | voluntary switches | involuntary switches |');
  console.log('|---|---|---|---|---|---|---|---|');
  for (const [variant, rs] of runs) {
    const of = (pick: (c: ProcessCounters) => number) => median(rs.map((r) => pick(r.counts)));
    const us = (pick: (c: ProcessCounters) => number) => `${(of(pick) * 1e6).toFixed(1)} µs`;
    const each = (pick: (c: ProcessCounters) => number) => of(pick).toFixed(3);
    console.log(
      `| ${variant} | ${us((c) => c.user)} | ${us((c) => c.system)} | ${us((c) => c.mainUser + c.mainSystem)} | ${us((c) => c.user + c.system - c.mainUser - c.mainSystem)} | ` +
        `${each((c) => c.minorFaults)} | ${each((c) => c.voluntarySwitches)} | ${each((c) => c.involuntarySwitches)} |`,
    );
  }
} finally {
  for (const service of services.values()) await stopServerProcess(service.child, 15_000);
}
