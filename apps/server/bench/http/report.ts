/**
 * What `pnpm bench` prints and writes to BENCHMARKS.md: the machine, the
 * tables, and each target of issue 9 with its figure and met/missed.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg, release, totalmem } from 'node:os';
import Database from 'better-sqlite3';
import type { PipelineFigures } from './pipeline-run.js';
import type { WrkResult } from './wrk.js';

export interface Machine {
  cpu: string;
  cores: number;
  ramGiB: number;
  node: string;
  wrk: string;
  sqlite: string;
  kernel: string;
  /** 1-minute load average just before the run */
  loadBefore: number;
}

export function describeMachine(wrk: string): Machine {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  const memory = new Database(':memory:');
  const sqlite = memory.prepare('SELECT sqlite_version()').pluck().get() as string;
  memory.close();
  return {
    cpu: /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown CPU',
    cores: availableParallelism(),
    ramGiB: totalmem() / 2 ** 30,
    node: process.version,
    wrk,
    sqlite,
    kernel: release(),
    loadBefore: loadavg()[0]!,
  };
}

export interface ScenarioResult {
  name: string;
  /** the server's answer to the same request, in bytes */
  answerBytes: number;
  server: WrkResult;
  ceiling: WrkResult;
  /** the floor (bench/http/floor.ts), for the request kinds it answers */
  floor?: WrkResult;
  /** the floor with the server's own features (floor.ts --features): correlation id, headers, metrics, usage totals */
  featuredFloor?: WrkResult;
  rssBeforeMb: number;
  rssAfterMb: number;
  /** answers other than the expected status, plus socket errors */
  unexpected: number;
  note?: string;
}

export interface ScaleResult {
  tasks: number;
  seedSeconds: number;
  /** the GET run with the median p99 */
  get: WrkResult;
  /** every GET run's p99, in the order they ran */
  getP99s: number[];
  /** GET at one connection */
  getAlone: WrkResult;
  /** the floor's (bench/http/floor.ts) GET run with the median p99, on the same store, the two taking turns to go first */
  floorGet?: WrkResult;
  /** every floor GET run's p99, in the order they ran */
  floorGetP99s?: number[];
  /** MB read from the disk (not the page cache) over the measured GET runs */
  readMb?: { server: number; floor: number };
  list: WrkResult;
  rssMb: number;
}

export interface RssSample {
  requests: number;
  rssMb: number;
  /** the process's own memory in it (RssAnon), without the file pages it maps */
  anonMb?: number;
}

export interface Results {
  machine: Machine;
  command: string;
  date: Date;
  quick: boolean;
  /** `rounds`, `roundSeconds`: the turns of server and floor per request the floor answers, and each measured run's length in them. */
  load: { threads: number; connections: number; seconds: number; warmupSeconds: number; rounds?: number; roundSeconds?: number };
  ceilingBytes: number;
  scenarios: ScenarioResult[];
  scale: ScaleResult[];
  rss: { samples: RssSample[]; peakMb: number; p99Ms: number } | undefined;
  pipeline: { rows: PipelineFigures[]; description: string } | undefined;
  notes: string[];
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const ms = (n: number) => `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms`;
const mb = (n: number) => `${n.toFixed(0)} MB`;

/** The middle value (of an even count, the upper of the two middle ones). */
export const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * Where the median of `values` is (of an even count, the lower of the two middle ones, as bench/pipeline.ts takes its
 * figure): which round the figure judged came from, so that what else that round measured is shown beside it.
 */
export const medianIndex = (values: number[]): number => values.map((value, index) => ({ value, index })).sort((a, b) => a.value - b.value)[Math.floor((values.length - 1) / 2)]!.index;

export function markdownTable(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

/**
 * SQLite's pipeline against 1,000 tasks/s, or, where it falls short, against its floor of the same run
 * (bench/http/pipeline-floor.ts): a floor under 1,000 shows the rate out of reach of any server on this machine.
 */
export function sqlitePipelineTarget(sqlite: PipelineFigures | undefined, floor: PipelineFigures | undefined): Target {
  const target = 'pipeline on SQLite ≥ 1,000 tasks/s (submit → webhook received)';
  if (!sqlite) return { target, figure: 'not measured', met: undefined };
  const server = `${int(sqlite.tasksPerSecond)} tasks/s`;
  if (!floor) return { target, figure: server, met: sqlite.tasksPerSecond >= 1000 };
  const figure = `${server}; the floor ${int(floor.tasksPerSecond)} tasks/s, the server ${(sqlite.tasksPerSecond / floor.tasksPerSecond).toFixed(2)} of it`;
  if (sqlite.tasksPerSecond >= 1000) return { target, figure, met: true };
  return floor.tasksPerSecond < 1000 ? { target, figure, met: true, outOfReach: true } : { target, figure, met: false };
}

/**
 * A PostgreSQL topology's pipeline against 0.6 × SQLite's of the same run, and, where the run measured it, the
 * topology's floor (bench/http/pg-pipeline-floor.ts): a floor under the line shows it out of reach on this machine.
 */
export function postgresPipelineTarget(label: string, postgres: PipelineFigures | undefined, sqlite: PipelineFigures | undefined, floor: PipelineFigures | undefined): Target {
  const target = `pipeline on PostgreSQL, ${label}, ≥ 0.6 × SQLite's`;
  if (!postgres || !sqlite) return { target, figure: 'not measured', met: undefined };
  const line = 0.6 * sqlite.tasksPerSecond;
  let figure = `${int(postgres.tasksPerSecond)} / ${int(sqlite.tasksPerSecond)} tasks/s = ${(postgres.tasksPerSecond / sqlite.tasksPerSecond).toFixed(2)} ×`;
  if (floor) {
    figure += `; its floor ${int(floor.tasksPerSecond)} tasks/s = ${(floor.tasksPerSecond / sqlite.tasksPerSecond).toFixed(2)} ×, the server ${(postgres.tasksPerSecond / floor.tasksPerSecond).toFixed(2)} of it`;
  }
  if (postgres.tasksPerSecond >= line) return { target, figure, met: true };
  return floor && floor.tasksPerSecond < line ? { target, figure, met: true, outOfReach: true } : { target, figure, met: false };
}

/**
 * The GET's p99 at the large store against the small one's (the median runs at 50 connections), and, where the run
 * measured it, the floor's on the same files (bench/http/floor.ts with SQLite's default page cache, like the server):
 * a floor over the line too shows the store's size costing any server that reads the task there that much on this
 * machine (a host that drops idle file pages from its cache makes reads at 10⁶ tasks wait for the disk, BENCHMARKS.md).
 */
export function storeSizeTarget(small: ScaleResult | undefined, large: ScaleResult | undefined, fullTasks: number): Target {
  const target = `GET p99 with ${int(fullTasks)} tasks ≤ 1.2 × with 1,000`;
  if (!small || !large || large === small) return { target, figure: 'not measured', met: undefined };
  const ratio = large.get.p99Ms / small.get.p99Ms;
  const quick = large.tasks < fullTasks ? ` (quick: ${int(large.tasks)} tasks)` : '';
  const alone = `; 1 connection: ${(large.getAlone.p99Ms / small.getAlone.p99Ms).toFixed(2)}×`;
  const floorRatio = large.floorGet && small.floorGet ? large.floorGet.p99Ms / small.floorGet.p99Ms : undefined;
  const floor = floorRatio === undefined ? '' : `; the floor ${ms(large.floorGet!.p99Ms)} / ${ms(small.floorGet!.p99Ms)} = ${floorRatio.toFixed(2)}×`;
  const read = large.readMb ? `; read from the disk at ${int(large.tasks)} tasks: server ${large.readMb.server.toFixed(1)} MB, floor ${large.readMb.floor.toFixed(1)} MB` : '';
  const figure = `${ms(large.get.p99Ms)} / ${ms(small.get.p99Ms)} = ${ratio.toFixed(2)}×${alone}${floor}${read}${quick}`;
  if (ratio <= 1.2) return { target, figure, met: true };
  return floorRatio !== undefined && floorRatio > 1.2 ? { target, figure, met: true, outOfReach: true } : { target, figure, met: false };
}

export interface Target {
  target: string;
  figure: string;
  /** undefined: not measured in this run */
  met: boolean | undefined;
  /** In place of `met`: a target its floor shows out of reach on this machine (the issue's alternative to meeting it). */
  outOfReach?: true;
}

/**
 * The targets, each judged from this run's figures: issue 20's (the PostgreSQL pipeline against SQLite's, the SQLite
 * pipeline, the query and submit against the floor, the list against the query) and those of issue 9 it kept (the GET
 * p99 at 1,000,000 tasks, the pipeline's latency, the RSS). Issue 9's ratios to the ceiling and its 5 ms p99 at 50
 * connections were withdrawn by issue 20 (beyond the floor on this machine); the HTTP table still shows them.
 */
export function judgeTargets(results: Results, full: { scaleTasks: number; rssRequests: number }): Target[] {
  // A request measured in rounds (server and floor in turns): the round with the median server/floor ratio (req/s without a floor).
  const rounds = (name: string) => results.scenarios.filter((s) => s.name === name);
  const scenario = (name: string) => medianOf(rounds(name), (s) => (s.floor ? s.server.rps / s.floor.rps : s.server.rps));
  const ofRounds = (name: string, ratio: (s: ScenarioResult) => number) => {
    const all = rounds(name);
    return all.length > 1 ? ` (median of ${all.length} rounds: ${all.map((s) => ratio(s).toFixed(2)).join(', ')})` : '';
  };
  const targets: Target[] = [];
  const pipeline = (store: string) => results.pipeline?.rows.find((row) => row.store === store);
  const sqlite = pipeline('SQLite');
  for (const [label, store] of [['one `all` process', 'PostgreSQL'], ['2 `api` + 2 `worker`', 'PostgreSQL 2 api + 2 worker']] as const) {
    targets.push(postgresPipelineTarget(label, pipeline(store), sqlite, pipeline(store === 'PostgreSQL' ? 'PostgreSQL floor' : 'PostgreSQL floor, 2 api + 2 worker')));
  }
  targets.push(sqlitePipelineTarget(sqlite, pipeline('SQLite floor')));
  for (const name of ['query, succeeded task', 'submit']) {
    const s = scenario(name);
    const target = `${name === 'submit' ? 'submit' : 'task query'} ≥ 0.85 × the floor's req/s`;
    targets.push(
      s?.floor
        ? {
            target,
            figure:
              `${int(s.server.rps)} / ${int(s.floor.rps)} = ${(s.server.rps / s.floor.rps).toFixed(2)}${ofRounds(name, (r) => r.server.rps / r.floor!.rps)}` +
              (s.featuredFloor ? `; the floor with the server's features ${(s.featuredFloor.rps / s.floor.rps).toFixed(2)} of it, the server ${(s.server.rps / s.featuredFloor.rps).toFixed(2)} of that` : ''),
            met: s.server.rps >= 0.85 * s.floor.rps,
          }
        : { target, figure: 'not measured', met: undefined },
    );
  }
  // Each the round with its median req/s.
  const byRps = (name: string) => medianOf(rounds(name), (s) => s.server.rps);
  const [query, list] = [byRps('query, succeeded task'), byRps('list, first page')];
  targets.push(
    query && list
      ? {
          target: "list's first page ≥ 0.5 × the query's req/s",
          // The floor's own list against its own query: what any server doing the list's work reaches here.
          figure: `${int(list.server.rps)} / ${int(query.server.rps)} = ${(list.server.rps / query.server.rps).toFixed(2)}${list.floor && query.floor ? ` (floor ${(list.floor.rps / query.floor.rps).toFixed(2)})` : ''}`,
          met: list.server.rps >= 0.5 * query.server.rps,
        }
      : { target: "list's first page ≥ 0.5 × the query's req/s", figure: 'not measured', met: undefined },
  );
  targets.push(storeSizeTarget(results.scale[0], results.scale.at(-1), full.scaleTasks));

  targets.push(
    sqlite
      ? { target: 'submit → webhook p99 ≤ 100 ms, not saturated', figure: `${ms(sqlite.p99Ms)} (${sqlite.labels.find((l) => l.startsWith('p99')) ?? 'p99'})`, met: sqlite.p99Ms <= 100 }
      : { target: 'submit → webhook p99 ≤ 100 ms, not saturated', figure: 'not measured', met: undefined },
  );

  const rss = results.rss;
  const last = rss?.samples.at(-1);
  const half = rss?.samples.find((sample) => last && sample.requests >= last.requests / 2);
  const quickRss = last && last.requests < full.rssRequests ? ` (quick: ${int(last.requests)} requests)` : '';
  targets.push(
    last
      ? { target: `server RSS ≤ 200 MB after ${int(full.rssRequests)} requests`, figure: `${mb(last.rssMb)} after ${int(last.requests)}${quickRss}`, met: last.rssMb <= 200 }
      : { target: `server RSS ≤ 200 MB after ${int(full.rssRequests)} requests`, figure: 'not measured', met: undefined },
  );
  targets.push(
    last && half && half !== last
      ? {
          target: 'RSS not growing (last sample ≤ 1.05 × the one at half the requests)',
          figure: `${mb(half.rssMb)} at ${int(half.requests)} → ${mb(last.rssMb)} at ${int(last.requests)}`,
          met: last.rssMb <= half.rssMb * 1.05,
        }
      : { target: 'RSS not growing', figure: 'not measured', met: undefined },
  );
  return targets;
}

/** One row a request: a request measured in rounds by its round with the median server/floor ratio, in the order run. */
function shownRounds(scenarios: ScenarioResult[]): ScenarioResult[] {
  const shown = new Set<ScenarioResult>();
  for (const name of new Set(scenarios.map((s) => s.name))) {
    const rounds = scenarios.filter((s) => s.name === name);
    shown.add(medianOf(rounds, (s) => (s.floor ? s.server.rps / s.floor.rps : s.server.rps))!);
  }
  return scenarios.filter((s) => shown.has(s));
}

/** The item whose `key` is the median of `items` (the lower of the middle two), or undefined when there is none. */
function medianOf<T>(items: T[], key: (item: T) => number): T | undefined {
  return [...items].sort((a, b) => key(a) - key(b))[Math.floor((items.length - 1) / 2)];
}

/** The whole report as Markdown: printed to the console and written to BENCHMARKS.md. */
export function renderReport(results: Results, targets: Target[]): string {
  const { machine, load } = results;
  const out: string[] = [];
  out.push('# Benchmarks', '');
  out.push(
    'Measured by `pnpm bench` (`apps/server/bench/http.ts`) in one run on one machine: a bare Hono app on',
    '@hono/node-server answering a fixed JSON body of a succeeded task’s size (the ceiling) and the real',
    'server (SQLite, `node dist/main.js` as operators run it, rate limits off), driven by the same wrk with the same threads,',
    'connections and duration (the ceiling and the floors compiled by tsc like the server, not run through tsx); then the store at two sizes, the memory after many requests, and the',
    'pipeline with the `instant` provider (`bench/pipeline.ts`). Ratios in the HTTP table are to the ceiling of the same run; the targets\' to the floor and to SQLite\'s pipeline of the same run.',
    '',
  );
  for (const note of results.notes) out.push(`> **${note}**`, '');
  out.push('## Machine and command', '');
  out.push(
    `- CPU: ${machine.cpu}, ${machine.cores} cores; RAM ${machine.ramGiB.toFixed(1)} GiB; Linux ${machine.kernel}`,
    `- Node ${machine.node}, ${machine.wrk}, SQLite ${machine.sqlite}`,
    `- load average before the run: ${machine.loadBefore.toFixed(2)}`,
    `- date: ${results.date.toISOString()}`,
    `- command: \`${results.command}\` (from the repository root)`,
    `- load: \`wrk -t${load.threads} -c${load.connections} -d${load.seconds}s --latency\` per run, after a ${load.warmupSeconds} s warm-up of the same request` +
      (load.threads === 1 ? ' (one wrk thread, so that the process measured keeps a core of its own)' : '') +
      (load.rounds && load.rounds > 1
        ? `; the requests the floor answers in ${load.rounds} rounds of \`-d${load.roundSeconds}s\` runs, the floor, the floor with features and the server taking turns in each (the HTTP table shows the round with the median server/floor ratio)`
        : ''),
    '',
  );

  if (results.scenarios.length) {
    out.push('## HTTP: the server against the ceiling', '');
    out.push(
      markdownTable(
        ['request', 'req/s', 'p50', 'p99', 'ceiling req/s', 'ceiling p99', 'ratio', 'floor req/s', 'floor p99', 'floor ratio', 'floor with features req/s', 'server RSS before → after', 'answer', 'errors'],
        shownRounds(results.scenarios).map((s) => [
          s.name,
          int(s.server.rps),
          ms(s.server.p50Ms),
          ms(s.server.p99Ms),
          int(s.ceiling.rps),
          ms(s.ceiling.p99Ms),
          (s.server.rps / s.ceiling.rps).toFixed(2),
          s.floor ? int(s.floor.rps) : '—',
          s.floor ? ms(s.floor.p99Ms) : '—',
          s.floor ? (s.floor.rps / s.ceiling.rps).toFixed(2) : '—',
          s.featuredFloor ? int(s.featuredFloor.rps) : '—',
          `${mb(s.rssBeforeMb)} → ${mb(s.rssAfterMb)}`,
          `${int(s.answerBytes)} B`,
          String(s.unexpected),
        ]),
      ),
      '',
      `The ceiling answers every request with the same ${int(results.ceilingBytes)} bytes (the succeeded task's answer). The floor`,
      '(`bench/http/floor.ts`, on a copy of the same store) does for a task query and a submission only the work no server',
      'can skip on this stack: the key hashed (its row then kept for good), the task read or, for a submission, the body',
      'parsed and validated against the spec and the task, charge, balance and job written in the server\'s group commit;',
      'no correlation id, security headers, metrics, log line, rate limit or idempotency. A ratio target the floor misses',
      'is out of reach of any server doing the contract\'s work on this machine. "errors": answers other than the expected',
      'status (404 for the missing task, 2xx otherwise) plus socket errors and timeouts. "floor with features": the same floor',
      '(`floor.ts --features`) also doing, as cheaply as it can be done, what the server does around that work by its own',
      'choice or the contract\'s: the correlation id, the security and cache headers, `Location`, the request metrics,',
      'the usage totals and the request\'s log line (the server\'s own code for it, to a file); between the two floors and the',
      'server, what those features cost and what the server\'s structure costs. The servers measured log at the default level',
      '(`info`, a line a request), appended to a file.',
      ...results.scenarios.filter((s) => s.note).map((s) => `${s.name}: ${s.note}`),
      '',
    );
  }

  if (results.scale.length) {
    out.push('## GET latency and store size', '');
    out.push(
      markdownTable(
        ['tasks in the store', 'GET req/s', 'GET p50', 'GET p99', 'GET p50, 1 conn.', 'GET p99, 1 conn.', 'floor GET req/s', 'floor GET p99', 'read from the disk (server, floor)', 'list req/s', 'list p50', 'list p99', 'server RSS', 'seeded in'],
        results.scale.map((s) => [
          int(s.tasks),
          int(s.get.rps),
          ms(s.get.p50Ms),
          ms(s.get.p99Ms),
          ms(s.getAlone.p50Ms),
          ms(s.getAlone.p99Ms),
          s.floorGet ? int(s.floorGet.rps) : '—',
          s.floorGet ? ms(s.floorGet.p99Ms) : '—',
          s.readMb ? `${s.readMb.server.toFixed(1)} MB, ${s.readMb.floor.toFixed(1)} MB` : '—',
          int(s.list.rps),
          ms(s.list.p50Ms),
          ms(s.list.p99Ms),
          mb(s.rssMb),
          `${s.seedSeconds.toFixed(1)} s`,
        ]),
      ),
      '',
      'A store of each size with a server of its own, both up together: every task on the benchmark account (copies of a real',
      'succeeded task, written directly to SQLite with their jobs and ledger charges, the balance lowered to match). GET: each',
      `request a random task among up to 10,000 drawn from the whole store, at ${results.load.connections} connections, ${results.scale[0]?.getP99s.length ?? 0} runs per size with`,
      'the sizes taking turns, the run with the median p99 shown (so that a slow spell of the machine falls on both sizes alike),',
      'then once at 1 connection (a lone request, no queueing); list: the first page (20 tasks). The target is judged on the',
      `median p99 at ${results.load.connections} connections. Every GET p99, in the order run: ${results.scale.map((s) => `${int(s.tasks)} tasks ${s.getP99s.map(ms).join(', ')}`).join('; ')}.`,
      "The floor (bench/http/floor.ts: the key, the task's read, its JSON) answers the same GETs from the same file in each turn,",
      "the server and the floor taking turns to go first; its median p99 shown. 'Read from the disk' is what each process had",
      "read from storage over its measured GET runs (`read_bytes` of /proc/<pid>/io: reads the kernel's page cache did not answer).",
      '',
    );
  }

  if (results.rss) {
    out.push('## Memory under a long run', '');
    out.push(
      markdownTable(
        ['requests (query of a succeeded task)', ...results.rss.samples.map((s) => int(s.requests))],
        [['server RSS', ...results.rss.samples.map((s) => mb(s.rssMb))], ['of it anonymous (RssAnon)', ...results.rss.samples.map((s) => (s.anonMb === undefined ? '—' : mb(s.anonMb)))]],
      ),
      '',
      `The server of the HTTP table after its runs; peak RSS ${mb(results.rss.peakMb)}; p99 of the last part ${ms(results.rss.p99Ms)}.`,
      '',
    );
  }

  if (results.pipeline) {
    out.push('## Pipeline: submit → webhook received (instant provider)', '');
    out.push(
      markdownTable(
        ['store', 'tasks/s, submit → webhook', 'each round', '× SQLite', 'submits/s', 'latency p50', 'latency p99'],
        results.pipeline.rows.map((row) => {
          const sqlite = results.pipeline!.rows.find((other) => other.store === 'SQLite');
          return [row.store, int(row.tasksPerSecond), row.rounds ?? '—', sqlite ? (row.tasksPerSecond / sqlite.tasksPerSecond).toFixed(2) : '—', int(row.submitsPerSecond), ms(row.p50Ms), ms(row.p99Ms)];
        }),
      ),
      '',
      results.pipeline.description,
      '',
    );
  }

  out.push('## Targets', '');
  out.push(markdownTable(['target', 'this run', ''], targets.map((t) => [t.target, t.figure, t.met === undefined ? '—' : t.outOfReach ? 'out of reach: the floor misses it' : t.met ? 'met' : '**missed**'])), '');
  return out.join('\n');
}
