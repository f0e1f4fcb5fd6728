/**
 * Upstream following: the acceptance target "1,000 upstream tasks of 60 s followed by one worker
 * process: all in flight at once, all done within 60 s + two polling periods".
 *
 *   pnpm bench:upstream [--tasks 1000] [--run-seconds 60] [--poll-seconds 5] [--batch 100]
 *                       [--concurrency 32] [--quick] [--write] [--cpu-prof [--cpu-prof-dir DIR]]
 *                       [--server-env KEY=VALUE ...] [--note TEXT] [--dump FILE.json]
 *                       [--store sqlite|postgres [--api 1] [--workers 2] [--accounts 1]]
 *
 * - The BytePlus stand-in (test/support/byteplus-standin.ts) on loopback, in this process, every
 *   task time-based: `running` for `--run-seconds` from its creation upstream, then succeeded.
 * - One server process (`src/main.ts --role all`, SQLite in a temporary directory), every model on
 *   `byteplus`, VIDGEN_BYTEPLUS_MAX_IN_FLIGHT at least the tasks, VIDGEN_UPSTREAM_POLL_SECONDS and
 *   VIDGEN_UPSTREAM_BATCH_SIZE from the flags (5 and 100, the defaults), everything else at its default.
 * - `--tasks` submitted by `--concurrency` clients, each task then followed by a client's long poll
 *   (`?wait=30`) until it is terminal.
 * - Every request the stand-in receives is timed as it arrives (its record is pushed synchronously,
 *   in the turn that creates the task): creation times, list requests and the ids in each, downloads.
 *   The stand-in's `activeTasks()` is sampled every 250 ms; the server's /metrics (RSS, event-loop
 *   delay, `vidgen_upstream_in_flight`) and /proc (RSS, CPU) every second.
 * - Judged: every task in flight upstream at once; each task's `completedAt` minus its upstream
 *   creation ≤ run + 2 × poll period; the API requests while following about ⌈tasks / batch⌉ per
 *   poll period (not one per task). Exits 1 naming each target missed.
 *
 * `--store postgres [--api 1] [--workers 2] [--accounts N]`: the same on PostgreSQL, split: a fresh database
 * (test/support/postgres.ts createTestDatabase, dropped at the end, also at an interrupted exit), `--api` processes
 * `--role api` taking the submits (round robin), `--workers` processes `--role worker` creating and following, each
 * through a recording proxy of its own (bench/http/upstream-topology.ts) so that its list requests are told apart;
 * the submits spread over `--accounts` accounts (default 1). No long poll per task there: completion is followed through
 * the api's /metrics (`vidgen_tasks`) and each task's `completedAt` read from the store at the end. Reported besides:
 * how the workers split the lists, the bench database's load (pg_stat_database / pg_stat_user_tables deltas, WAL,
 * the backends' CPU, what they wait for in pg_stat_activity), each process's CPU and RSS. Tasks not created or not
 * terminal by the deadlines are logged with their rows and jobs, and the run goes on (the targets show them).
 *
 * `--quick`: 200 tasks of 10 s. `--write` replaces (or inserts, before `## Targets`) the section
 * `## Upstream following` of BENCHMARKS.md and leaves the rest of the file as it is. `pnpm bench`
 * runs this too (bench/http.ts, section `upstream`), through `runUpstreamBench`.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpuSecondsOf } from './http/cpu-cost.js';
import { writeSection } from './http/sections.js';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { openBackend } from '../src/store/open.js';
import { makeTestVideo, startBytePlusStandin, type RecordedRequest } from '../test/support/byteplus-standin.js';
import { createAccountWithKey, stopServerProcess } from '../test/support/pipeline-processes.js';
import { memoryOf, removeOnExit, startNodeService, type NodeService } from './http/children.js';
import { describeMachine, markdownTable, type Machine, type Target } from './http/report.js';
import { pgLoadBetween, startNodeWorker, startTaggingProxy, watchPostgres, type PgCounters, type PgLoad, type PgWatch, type TaggingProxy } from './http/upstream-topology.js';

export const SECTION_HEADING = '## Upstream following';
const SUBMIT = '/api/open/v1/video/generations';
const TASKS_PATH = '/api/v3/contents/generations/tasks';
const MODELS = { 'vidgen-2.0': 'dreamina-seedance-2-0-260128', 'vidgen-2.0-fast': 'dreamina-seedance-2-0-fast-260128', 'vidgen-1.5-pro': 'seedance-1-5-pro-251215' };
const ALL_BYTEPLUS = JSON.stringify({ 'vidgen-2.0': 'byteplus', 'vidgen-2.0-fast': 'byteplus', 'vidgen-1.5-pro': 'byteplus' });
const API_KEY = 'ark-bench-upstream';
const PROMPT = 'upstream bench task';
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
/** prom-client's monitorEventLoopDelay resolution: an idle loop reads about this much. */
const EVENT_LOOP_RESOLUTION_MS = 10;

export interface UpstreamBenchOptions {
  tasks: number;
  runSeconds: number;
  pollSeconds: number;
  batch: number;
  /** Clients submitting at once. */
  concurrency: number;
  /** Extra environment of the server (experiments); reported. */
  serverEnv?: Record<string, string>;
  /** Node options of the server (e.g. --cpu-prof). */
  nodeArgs?: string[];
  log?: (line: string) => void;
  /** Writes every task's times and every list request (ms since the epoch) to this JSON file, for analysis. */
  dumpFile?: string;
  /**
   * `sqlite` (the default): one process `--role all` on SQLite. `postgres`: a fresh PostgreSQL database
   * (createTestDatabase, dropped at the end), `apis` processes `--role api` taking the submits and
   * `workers` processes `--role worker` following; completion is then followed through the api's
   * /metrics (`vidgen_tasks`) and read from the store at the end, not long-polled per task.
   */
  store?: 'sqlite' | 'postgres';
  apis?: number;
  workers?: number;
  /** Accounts the submits are spread over (one key each, client i uses key i mod accounts). Default 1. */
  accounts?: number;
}

/** One server process of the run: its CPU seconds per phase and its memory. */
export interface ProcessFigures {
  role: 'all' | 'api' | 'worker';
  pid: number;
  cpu: { createSeconds: number; steadySeconds: number; totalSeconds: number; steadyShare: number; totalShare: number };
  rss: { startMb: number; peakMb: number; endMb: number };
}

/** The PostgreSQL topology's extra figures. */
export interface PostgresFigures {
  /** The bench database's load: while only following (all created → first end), while tasks end (first end → done). */
  steady: PgLoad | undefined;
  ending: PgLoad;
  /** Per worker: list requests and ids listed while only following, creates and lists overall. */
  workers: { lists: number; ids: number; steadyLists: number; steadyIds: number; creates: number }[];
  /** Two consecutive listings of one task less than half a poll period apart: by one worker / by two. */
  doubleListings: { sameWorker: number; otherWorker: number };
  /** Per poll period while only following: list requests, and tasks listed more than once in it. */
  perPeriod: { periods: number; listsMedian: number; listsMax: number; repeatedIds: number };
  /** pg_stat_activity of the bench database every second: the backends waiting, by wait event, summed over the samples (the most first). */
  waits: { samples: number; events: [string, number][] };
}

type Kind = 'create' | 'list' | 'query' | 'cancel' | 'download' | 'other';
const KINDS: Kind[] = ['create', 'list', 'query', 'cancel', 'download', 'other'];

interface Distribution {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export interface UpstreamBenchResult {
  options: Omit<UpstreamBenchOptions, 'log' | 'nodeArgs'>;
  machine: Machine;
  date: Date;
  /** Tasks that ended succeeded / otherwise (by status). */
  statuses: Record<string, number>;
  /** From the first submit sent to the last answered, seconds. */
  submitSeconds: number;
  /** From the first submit sent to the last task created upstream, seconds. */
  allCreatedSeconds: number;
  /** From the first to the last creation upstream, seconds. */
  createSpanSeconds: number;
  /** From the first submit to the last completion, seconds. */
  totalSeconds: number;
  /** Most tasks queued or running upstream at once: sampled from the stand-in, computed from creation times, and our gauge. */
  peakInFlight: { sampled: number; computed: number; ours: number };
  /** Per task, seconds: completedAt − upstream creation. */
  completion: Distribution;
  /** Per task, seconds: completedAt − the task's end upstream (creation + run). */
  afterEnd: Distribution;
  /** Per task, seconds: the first list showing it ended − its end upstream. */
  observeLag: Distribution;
  /** Per task, seconds: its video's download request − the list that showed it ended. */
  downloadWait: Distribution;
  /** Per task, seconds: completedAt − its download request. */
  storeAfterDownload: Distribution;
  /** Per task, seconds: its first appearance in a list − its creation. */
  firstCheck: Distribution;
  /** Seconds between two appearances of the same task in lists (all tasks, all intervals). */
  checkInterval: Distribution;
  /** Share of those intervals longer than 1.5 poll periods. */
  longIntervalShare: number;
  requests: Record<Kind, number>;
  /** Ids per list request. */
  idsPerList: Distribution;
  /** Between the last creation and the first task's end upstream: only following runs. */
  steady: { seconds: number; apiRequests: number; lists: number; perSecond: number; perPoll: number };
  /** From the first task's end upstream to the last completion: following, downloads and completions. */
  ending: { seconds: number; apiRequests: number; lists: number; perSecond: number };
  /** The server's RSS in MB: after start, peak (VmHWM), at the end. */
  rss: { startMb: number; peakMb: number; endMb: number };
  /** prom-client's event-loop delay per scrape (1 s), ms: the median and worst p99, the largest max. */
  eventLoop: { scrapes: number; p99MedianMs: number; p99WorstMs: number; maxMs: number; steadyP99WorstMs: number; steadyMaxMs: number };
  /** The server's CPU seconds: during submit+create, while only following, and overall; and share of a core. */
  cpu: { createSeconds: number; steadySeconds: number; totalSeconds: number; steadyShare: number; totalShare: number };
  /** The task with the largest completedAt − creation: its times in seconds after its creation. */
  slowest: { listed: number[]; observed: number | undefined; downloaded: number | undefined; completed: number } | undefined;
  /** Warnings and errors the server logged. */
  serverWarnings: number;
  /** Lines of what the server logged at warn and above (a sample). */
  warningSample: string[];
  /** Every server process (one `all` process on SQLite). */
  processes: ProcessFigures[];
  /** How completion was followed: each task long-polled, or the api's /metrics then the store. */
  completionVia: 'long poll' | 'metrics';
  postgres?: PostgresFigures;
}

function distribution(values: number[]): Distribution {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]! : NaN);
  return { count: sorted.length, p50: at(50), p99: at(99), max: sorted.length ? sorted[sorted.length - 1]! : NaN };
}

const median = (values: number[]) => distribution(values).p50;

function kindOf(request: RecordedRequest): Kind {
  if (request.path.startsWith('/media/')) return 'download';
  if (request.path === TASKS_PATH) return request.method === 'POST' ? 'create' : request.method === 'GET' ? 'list' : 'other';
  if (request.path.startsWith(`${TASKS_PATH}/`)) return request.method === 'GET' ? 'query' : request.method === 'DELETE' ? 'cancel' : 'other';
  return 'other';
}

/** One metric's value in Prometheus text (the first sample of that name, labels ignored unless given). */
function metric(text: string, name: string, labels = ''): number | undefined {
  const match = new RegExp(`^${name}${labels ? `\\{${labels.replace(/[{}"]/g, (c) => `\\${c}`)}\\}` : '(?:\\{[^}]*\\})?'} ([0-9.eE+-]+|NaN)$`, 'm').exec(text);
  return match ? Number(match[1]) : undefined;
}

/** utime + stime of a live process, in seconds. */
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

export async function runUpstreamBench(options: UpstreamBenchOptions): Promise<UpstreamBenchResult> {
  const log = options.log ?? ((line: string) => console.log(`bench-upstream: ${line}`));
  const { tasks, runSeconds, pollSeconds, batch, concurrency } = options;
  const runMs = runSeconds * 1000;
  const pollMs = pollSeconds * 1000;
  const machine = describeMachine('');
  const date = new Date();
  const work = removeOnExit(mkdtempSync(join(tmpdir(), 'vidgen-bench-upstream-')));
  const video = readFileSync(await makeTestVideo(work));
  const postgres = options.store === 'postgres';
  const apiCount = postgres ? Math.max(1, options.apis ?? 1) : 1;
  const workerCount = postgres ? Math.max(1, options.workers ?? 2) : 0;
  // On PostgreSQL the workers have VIDGEN_PUBLIC_BASE_URL, so the creates carry a callback_url: the
  // stand-in sends none, so that following is by polling alone, as on SQLite (no callback_url there).
  const standin = await startBytePlusStandin({ apiKey: API_KEY, video, runMs, ...(postgres ? { callbacks: false } : {}) });

  // Every request timed as it arrives: the stand-in pushes its record synchronously, in the turn that
  // creates the task (so a create's arrival is the task's creation time upstream, to the millisecond).
  const arrivals: { kind: Kind; at: number; request: RecordedRequest }[] = [];
  const createdAtByBody = new Map<unknown, number>();
  const push = standin.requests.push.bind(standin.requests);
  standin.requests.push = (...items: RecordedRequest[]) => {
    const at = Date.now();
    for (const request of items) {
      const kind = kindOf(request);
      arrivals.push({ kind, at, request });
      if (kind === 'create') createdAtByBody.set(request.body, at);
    }
    return push(...items);
  };

  const dataDir = join(work, 'data');
  const dbPath = join(work, 'vidgen.db');
  // PostgreSQL: a fresh database, dropped at the end (also when the run is interrupted: at exit, by psql).
  let database: { url: string; name: string; adminUrl: string; drop: () => Promise<void> } | undefined;
  let dropped = false;
  const dropAtExit = () => {
    if (!database || dropped) return;
    try {
      execFileSync('psql', [database.adminUrl, '-qAtc', `DROP DATABASE IF EXISTS ${database.name} WITH (FORCE)`], { stdio: 'ignore', timeout: 10_000 });
    } catch {
      // Reported by nobody: the process is exiting.
    }
  };
  if (postgres) {
    const { createTestDatabase, POSTGRES_ADMIN_URL } = await import('../test/support/postgres.js');
    const created = await createTestDatabase();
    database = { ...created, name: new URL(created.url).pathname.slice(1), adminUrl: POSTGRES_ADMIN_URL };
    process.on('exit', dropAtExit);
  }
  const databaseUrl = database ? database.url : `sqlite:${dbPath}`;
  let server: NodeService | undefined;
  const services: { role: ProcessFigures['role']; service: NodeService }[] = [];
  const proxies: TaggingProxy[] = [];
  let pgWatch: PgWatch | undefined;
  const samplers: NodeJS.Timeout[] = [];
  try {
    const backend = await openBackend(
      { database: database ? { kind: 'postgres', url: database.url, poolSize: 2 } : { kind: 'sqlite', path: dbPath }, jobLeaseMs: 60_000 },
      { logger: pino({ level: 'silent' }), listen: false, supervise: false },
    );
    const keys: string[] = [];
    for (let i = 0; i < Math.max(1, options.accounts ?? 1); i++) keys.push((await createAccountWithKey(backend.store, i === 0 ? 'bench-upstream' : `bench-upstream-${i}`, 1e12)).key);
    const key = keys[0]!;
    await backend.close();

    const serverEnv: Record<string, string> = {
      NODE_ENV: 'production',
      VIDGEN_DATA_DIR: dataDir,
      VIDGEN_DATABASE_URL: databaseUrl,
      ...(postgres ? { VIDGEN_FILE_URL_SECRET: randomBytes(32).toString('hex') } : {}),
      VIDGEN_LOG_LEVEL: 'warn',
      VIDGEN_DEV_BOOTSTRAP: 'false',
      PORT: '0',
      HOST: '127.0.0.1',
      VIDGEN_PROVIDERS: ALL_BYTEPLUS,
      VIDGEN_RATE_LIMIT_SUBMITS: '0',
      VIDGEN_RATE_LIMIT_READS: '0',
      VIDGEN_MAX_ACTIVE_TASKS: '0',
      VIDGEN_BYTEPLUS_API_KEY: API_KEY,
      VIDGEN_BYTEPLUS_BASE_URL: standin.baseUrl,
      VIDGEN_BYTEPLUS_MODELS: JSON.stringify(MODELS),
      VIDGEN_BYTEPLUS_MAX_IN_FLIGHT: String(Math.max(1000, tasks)),
      VIDGEN_UPSTREAM_POLL_SECONDS: String(pollSeconds),
      VIDGEN_UPSTREAM_BATCH_SIZE: String(batch),
      ...options.serverEnv,
    };
    if (!postgres) {
      server = await startNodeService('src/main.ts', ['--role', 'all'], serverEnv, options.nodeArgs);
      services.push({ role: 'all', service: server });
    } else {
      // The api processes first (the first one migrates the new database), then the workers, each
      // through its own tagging proxy to the stand-in, told where the api serves the files.
      for (let i = 0; i < apiCount; i++) services.push({ role: 'api', service: await startNodeService('src/main.ts', ['--role', 'api'], serverEnv, options.nodeArgs) });
      server = services[0]!.service;
      for (let i = 0; i < workerCount; i++) proxies.push(await startTaggingProxy(standin.baseUrl));
      const workers = await Promise.all(
        proxies.map((proxy) =>
          startNodeWorker('src/main.ts', { ...serverEnv, VIDGEN_PUBLIC_BASE_URL: server!.url, VIDGEN_BYTEPLUS_BASE_URL: proxy.baseUrl }, options.nodeArgs),
        ),
      );
      for (const service of workers) services.push({ role: 'worker', service });
      pgWatch = await watchPostgres(database!.adminUrl, database!.url);
    }
    const { pid, url } = server;
    const apiUrls = services.filter((s) => s.role !== 'worker').map((s) => s.service.url);
    const cpuOfAll = () => services.map((s) => cpuSecondsOf(s.service.pid));
    const cpuAtStartAll = cpuOfAll();
    const rssAtStartAll = services.map((s) => memoryOf(s.service.pid).rssMb);
    const cpuAtStart = cpuAtStartAll[0]!;
    const rssAtStart = rssAtStartAll[0]!;
    log(
      `${services.map((s) => `${s.role} ${s.service.url || ''} (pid ${s.service.pid})`).join(', ')}${database ? ` on PostgreSQL ${database.name}` : ''}, stand-in ${standin.baseUrl}; ` +
        `${tasks} tasks of ${runSeconds} s, poll ${pollSeconds} s, batch ${batch}`,
    );

    // --- Samplers: the stand-in's active tasks (250 ms); /metrics and /proc (1 s).
    let peakSampled = 0;
    samplers.push(setInterval(() => (peakSampled = Math.max(peakSampled, standin.activeTasks())), 250));
    const scrapes: { at: number; p99Ms: number; maxMs: number; rssMb: number; inFlight: number; terminal: number }[] = [];
    let scraping = false;
    samplers.push(
      setInterval(() => {
        if (scraping) return;
        scraping = true;
        const at = Date.now();
        fetch(`${url}/metrics`)
          .then((res) => res.text())
          .then((text) => {
            scrapes.push({
              at,
              p99Ms: (metric(text, 'vidgen_nodejs_eventloop_lag_p99_seconds') ?? NaN) * 1000,
              maxMs: (metric(text, 'vidgen_nodejs_eventloop_lag_max_seconds') ?? NaN) * 1000,
              rssMb: (metric(text, 'vidgen_process_resident_memory_bytes') ?? NaN) / 2 ** 20,
              inFlight: metric(text, 'vidgen_upstream_in_flight', 'channel="byteplus"') ?? 0,
              terminal: [...TERMINAL].reduce((sum, status) => sum + (metric(text, 'vidgen_tasks', `status="${status}"`) ?? 0), 0),
            });
          })
          .catch(() => {})
          .finally(() => (scraping = false));
      }, 1000),
    );
    // PostgreSQL: what the bench database's backends wait for, every second (from the admin database).
    const waitCounts = new Map<string, number>();
    let waitSamples = 0;
    if (pgWatch) {
      let sampling = false;
      samplers.push(
        setInterval(() => {
          if (sampling) return;
          sampling = true;
          pgWatch!
            .activity()
            .then((rows) => {
              waitSamples++;
              for (const row of rows) waitCounts.set(row, (waitCounts.get(row) ?? 0) + 1);
            })
            .catch(() => {})
            .finally(() => (sampling = false));
        }, 1000),
      );
    }
    // The first scrape resets the event-loop histogram of the start.
    await fetch(`${url}/metrics`).then((res) => res.text());

    // --- Submit, each task then long-polled until it is terminal.
    const auth = { Authorization: `Bearer ${key}` };
    const finals = new Map<string, { status: string; completedAt: string | null }>();
    const ids: string[] = Array(tasks);
    const waits: Promise<void>[] = [];
    let deadline = Infinity;
    let pollErrors = 0;
    const failures: unknown[] = [];
    const follow = async (id: string) => {
      for (;;) {
        if (Date.now() > deadline) throw new Error(`task ${id} not terminal by the deadline`);
        try {
          const res = await fetch(`${url}${SUBMIT}/${id}?wait=30`, { headers: auth });
          const task = (await res.json()) as { status: string; completedAt: string | null };
          if (res.status !== 200) throw new Error(`query answered ${res.status}`);
          if (TERMINAL.has(task.status)) {
            finals.set(id, task);
            return;
          }
        } catch (error) {
          if (++pollErrors > 100) throw error;
          await sleep(1000);
        }
      }
    };
    const body = (i: number) => JSON.stringify({ model: 'vidgen-2.0-fast', prompt: `${PROMPT} ${i}`, duration: 5, resolution: '480p' });
    const firstSubmit = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: Math.min(concurrency, tasks) }, async () => {
        while (next < tasks) {
          const i = next++;
          const res = await fetch(`${apiUrls[i % apiUrls.length]}${SUBMIT}`, {
            method: 'POST',
            headers: { Authorization: `Bearer ${keys[i % keys.length]}`, 'Content-Type': 'application/json' },
            body: body(i),
          });
          if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${await res.text()}`);
          ids[i] = ((await res.json()) as { requestId: string }).requestId;
          if (!postgres) waits.push(follow(ids[i]!).catch((error: unknown) => void failures.push(error)));
        }
      }),
    );
    const submitted = Date.now();
    log(`${tasks} submitted in ${((submitted - firstSubmit) / 1000).toFixed(2)} s`);

    // All created upstream: a bounded wait (a create that never comes fails the run).
    const createDeadline = submitted + Math.max(120_000, runMs);
    while (standin.createdTasks().length < tasks) {
      if (Date.now() > createDeadline) {
        const message = `only ${standin.createdTasks().length} of ${tasks} tasks created upstream after ${((Date.now() - firstSubmit) / 1000).toFixed(0)} s`;
        if (!pgWatch) throw new Error(message);
        // PostgreSQL: say what the missing ones are doing, and go on with the others (the targets show it).
        log(`${message}; not created: ${JSON.stringify(await pgWatch.notCreated())}`);
        break;
      }
      await sleep(50);
    }
    const creates = arrivals.filter((a) => a.kind === 'create').map((a) => a.at);
    const lastCreate = Math.max(...creates);
    const firstCreate = Math.min(...creates);
    const cpuAtCreatedAll = cpuOfAll();
    const cpuAtCreated = cpuAtCreatedAll[0]!;
    const pgAtCreated: PgCounters | undefined = await pgWatch?.read();
    log(`all ${tasks} created upstream ${((lastCreate - firstSubmit) / 1000).toFixed(2)} s after the first submit (creations spread over ${((lastCreate - firstCreate) / 1000).toFixed(2)} s)`);
    const firstEnd = firstCreate + runMs;
    // CPU while only following: read at the first task's end upstream (when there is such a window).
    let cpuAtFirstEnd: number | undefined;
    let cpuAtFirstEndAll: number[] | undefined;
    let pgAtFirstEnd: Promise<PgCounters> | undefined;
    if (firstEnd > Date.now()) {
      samplers.push(
        setTimeout(() => {
          cpuAtFirstEndAll = cpuOfAll();
          cpuAtFirstEnd = cpuAtFirstEndAll[0];
          pgAtFirstEnd = pgWatch?.read();
        }, firstEnd - Date.now()),
      );
    }

    // Done: every task terminal, or the deadline (run + 2 poll periods + a generous margin) passed.
    deadline = lastCreate + runMs + 2 * pollMs + Math.max(60_000, runMs);
    const terminalNow = () => (postgres ? (scrapes.at(-1)?.terminal ?? 0) : finals.size);
    const progress = setInterval(() => log(`${terminalNow()} of ${tasks} terminal; ${standin.activeTasks()} active upstream`), 10_000);
    samplers.push(progress);
    try {
      if (postgres) {
        // No long poll per task (10,000 of them would be the api's and the store's main load while
        // following): the api's /metrics (`vidgen_tasks`, scraped every second) says when all are terminal.
        while (terminalNow() < tasks) {
          if (Date.now() > deadline) {
            log(`${terminalNow()} of ${tasks} terminal by the deadline; not terminal: ${JSON.stringify(await pgWatch!.notCreated())}`);
            break;
          }
          await sleep(200);
        }
      } else {
        await Promise.all(waits);
      }
    } finally {
      clearInterval(progress);
    }
    if (failures.length) throw new Error(`${failures.length} tasks not followed to their end: ${String(failures[0])}; ${finals.size} of ${tasks} terminal`);
    const done = Date.now();
    const cpuAtEndAll = cpuOfAll();
    const cpuAtEnd = cpuAtEndAll[0]!;
    const pgAtFirstEndRead = await pgAtFirstEnd;
    const pgAtEnd = await pgWatch?.read();
    for (const timer of samplers) clearInterval(timer);
    await sleep(50);
    const memoryAtEndAll = services.map((s) => memoryOf(s.service.pid));
    const memoryAtEnd = memoryAtEndAll[0]!;
    if (postgres) {
      // Each task's status and completedAt, read once from the store (after the last reading of its counters).
      for (const row of await pgWatch!.tasks()) finals.set(row.id, { status: row.status, completedAt: row.completedAt });
    }
    log(`all terminal ${((done - firstSubmit) / 1000).toFixed(1)} s after the first submit`);

    // --- Per task: creation, list appearances, download, completion.
    const byPrompt = new Map<string, string>();
    ids.forEach((id, i) => byPrompt.set(`${PROMPT} ${i}`, id));
    const upstreamOf = new Map<string, { upstreamId: string; createdAt: number }>();
    for (const created of standin.createdTasks()) {
      const content = created.body.content as { type: string; text?: string }[];
      const prompt = content.find((item) => item.type === 'text')?.text ?? '';
      const ours = byPrompt.get(prompt);
      const createdAt = createdAtByBody.get(created.body);
      if (ours && createdAt !== undefined) upstreamOf.set(ours, { upstreamId: created.id, createdAt });
    }
    const listings = new Map<string, number[]>();
    const downloads = new Map<string, number>();
    const idsPerList: number[] = [];
    for (const { kind, at, request } of arrivals) {
      if (kind === 'list') {
        const listed = request.query.getAll('filter.task_ids');
        idsPerList.push(listed.length);
        for (const id of listed) {
          const times = listings.get(id) ?? [];
          times.push(at);
          listings.set(id, times);
        }
      } else if (kind === 'download') {
        const id = request.path.slice('/media/'.length).replace(/\.mp4$/, '');
        if (!downloads.has(id)) downloads.set(id, at);
      }
    }
    const dump: { tasks: Record<string, unknown>[]; lists: { at: number; ids: number }[] } = { tasks: [], lists: [] };
    const completion: number[] = [];
    const afterEnd: number[] = [];
    const observeLag: number[] = [];
    const downloadWait: number[] = [];
    const storeAfterDownload: number[] = [];
    const firstCheck: number[] = [];
    const intervals: number[] = [];
    const statuses: Record<string, number> = {};
    let lastCompleted = 0;
    let slowest: UpstreamBenchResult['slowest'];
    for (const id of ids) {
      const final = finals.get(id);
      statuses[final?.status ?? 'unknown'] = (statuses[final?.status ?? 'unknown'] ?? 0) + 1;
      const upstream = upstreamOf.get(id);
      if (!final || !upstream) continue;
      const end = upstream.createdAt + runMs;
      const times = listings.get(upstream.upstreamId) ?? [];
      if (times.length) firstCheck.push((times[0]! - upstream.createdAt) / 1000);
      for (let i = 1; i < times.length; i++) intervals.push((times[i]! - times[i - 1]!) / 1000);
      const observed = times.find((t) => t >= end);
      const downloaded = downloads.get(upstream.upstreamId);
      if (observed !== undefined) observeLag.push((observed - end) / 1000);
      if (observed !== undefined && downloaded !== undefined) downloadWait.push((downloaded - observed) / 1000);
      if (options.dumpFile) dump.tasks.push({ id, upstreamId: upstream.upstreamId, createdAt: upstream.createdAt, listed: times, downloaded, completedAt: final.completedAt && Date.parse(final.completedAt), status: final.status });
      if (final.completedAt) {
        const completedAt = Date.parse(final.completedAt);
        lastCompleted = Math.max(lastCompleted, completedAt);
        completion.push((completedAt - upstream.createdAt) / 1000);
        if (!slowest || completedAt - upstream.createdAt > slowest.completed * 1000) {
          const after = (t: number | undefined) => (t === undefined ? undefined : (t - upstream.createdAt) / 1000);
          slowest = { listed: times.map((t) => after(t)!), observed: after(observed), downloaded: after(downloaded), completed: after(completedAt)! };
        }
        afterEnd.push((completedAt - end) / 1000);
        if (downloaded !== undefined) storeAfterDownload.push((completedAt - downloaded) / 1000);
      }
    }

    if (options.dumpFile) {
      dump.lists = arrivals.filter((a) => a.kind === 'list').map((a) => ({ at: a.at, ids: a.request.query.getAll('filter.task_ids').length }));
      writeFileSync(options.dumpFile, JSON.stringify({ firstSubmit, submitted, runMs, pollMs, downloads: arrivals.filter((a) => a.kind === 'download').map((a) => a.at), ...dump }));
    }

    // Most tasks in flight upstream at once, from the creation times (each runs exactly runMs).
    const sortedCreates = [...creates].sort((a, b) => a - b);
    let peakComputed = 0;
    for (let i = 0, j = 0; i < sortedCreates.length; i++) {
      while (sortedCreates[j]! + runMs <= sortedCreates[i]!) j++;
      peakComputed = Math.max(peakComputed, i - j + 1);
    }

    const requests = Object.fromEntries(KINDS.map((kind) => [kind, arrivals.filter((a) => a.kind === kind).length])) as Record<Kind, number>;
    const api = (a: { kind: Kind }) => a.kind === 'create' || a.kind === 'list' || a.kind === 'query' || a.kind === 'cancel' || a.kind === 'other';
    const window = (from: number, to: number) => {
      const inside = arrivals.filter((a) => a.at > from && a.at <= to);
      const seconds = Math.max(0, (to - from) / 1000);
      const apiRequests = inside.filter(api).length;
      return { seconds, apiRequests, lists: inside.filter((a) => a.kind === 'list').length, perSecond: seconds > 0 ? apiRequests / seconds : NaN };
    };
    const steadyWindow = window(lastCreate, Math.max(lastCreate, firstEnd));
    const endingWindow = window(firstEnd, Math.max(firstEnd, lastCompleted, done));
    const steadyScrapes = scrapes.filter((s) => s.at > lastCreate + 1000 && s.at < firstEnd);
    const steadyCpu = cpuAtFirstEnd !== undefined ? cpuAtFirstEnd - cpuAtCreated : NaN;

    // Read once the services have stopped: a process writes its log lines every few milliseconds (log-destination.ts),
    // and the last ones on its way out. Workers first (they follow), then the api processes, as below.
    for (const s of [...services].reverse()) await stopServerProcess(s.service.child, 15_000);
    const warnings = services.flatMap((s) => s.service.output().split('\n')).filter((line) => /"level":(40|50|60)/.test(line));
    const steadySeconds = steadyWindow.seconds;
    const processes: ProcessFigures[] = services.map((s, i) => {
      const steadyCpuOf = cpuAtFirstEndAll ? cpuAtFirstEndAll[i]! - cpuAtCreatedAll[i]! : NaN;
      return {
        role: s.role,
        pid: s.service.pid,
        cpu: {
          createSeconds: cpuAtCreatedAll[i]! - cpuAtStartAll[i]!,
          steadySeconds: steadyCpuOf,
          totalSeconds: cpuAtEndAll[i]! - cpuAtStartAll[i]!,
          steadyShare: steadySeconds > 0 ? steadyCpuOf / steadySeconds : NaN,
          totalShare: (cpuAtEndAll[i]! - cpuAtStartAll[i]!) / ((done - firstSubmit) / 1000),
        },
        rss: { startMb: rssAtStartAll[i]!, peakMb: memoryAtEndAll[i]!.peakMb, endMb: memoryAtEndAll[i]!.rssMb },
      };
    });
    let postgresFigures: PostgresFigures | undefined;
    if (postgres && pgAtCreated && pgAtEnd) {
      const inSteady = (at: number) => at > lastCreate && at <= firstEnd;
      const workerOf = new Map<string, number[]>();
      const listingsByWorker: { at: number; worker: number; id: string }[] = [];
      proxies.forEach((proxy, worker) => {
        for (const r of proxy.requests) if (r.method === 'GET' && r.path.endsWith('/contents/generations/tasks')) for (const id of r.ids) listingsByWorker.push({ at: r.at, worker, id });
      });
      listingsByWorker.sort((a, b) => a.at - b.at);
      const doubleListings = { sameWorker: 0, otherWorker: 0 };
      const lastListing = new Map<string, { at: number; worker: number }>();
      for (const l of listingsByWorker) {
        const before = lastListing.get(l.id);
        if (before && l.at - before.at < pollMs / 2) doubleListings[before.worker === l.worker ? 'sameWorker' : 'otherWorker']++;
        lastListing.set(l.id, l);
        workerOf.set(l.id, [...(workerOf.get(l.id) ?? []), l.worker]);
      }
      // Poll periods of the steady window, from the first end backwards (whole periods only).
      const periods: { lists: number; ids: Map<string, number> }[] = [];
      for (let to = firstEnd; to - pollMs >= lastCreate; to -= pollMs) {
        const from = to - pollMs;
        const lists = proxies.flatMap((p) => p.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/contents/generations/tasks') && r.at > from && r.at <= to));
        const ids = new Map<string, number>();
        for (const r of lists) for (const id of r.ids) ids.set(id, (ids.get(id) ?? 0) + 1);
        periods.push({ lists: lists.length, ids });
      }
      const listsPerPeriod = periods.map((p) => p.lists);
      postgresFigures = {
        steady: pgAtFirstEndRead ? pgLoadBetween(pgAtCreated, pgAtFirstEndRead) : undefined,
        ending: pgLoadBetween(pgAtFirstEndRead ?? pgAtCreated, pgAtEnd),
        workers: proxies.map((proxy) => {
          const lists = proxy.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/contents/generations/tasks'));
          const steady = lists.filter((r) => inSteady(r.at));
          return {
            lists: lists.length,
            ids: lists.reduce((sum, r) => sum + r.ids.length, 0),
            steadyLists: steady.length,
            steadyIds: steady.reduce((sum, r) => sum + r.ids.length, 0),
            creates: proxy.requests.filter((r) => r.method === 'POST').length,
          };
        }),
        doubleListings,
        perPeriod: {
          periods: periods.length,
          listsMedian: median(listsPerPeriod),
          listsMax: listsPerPeriod.length ? Math.max(...listsPerPeriod) : NaN,
          repeatedIds: periods.reduce((sum, p) => sum + [...p.ids.values()].filter((n) => n > 1).length, 0),
        },
        waits: { samples: waitSamples, events: [...waitCounts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 12) },
      };
      log(`store load by table, all created → first end: ${JSON.stringify(postgresFigures.steady?.tables ?? null)}`);
      log(`store load by table, ending: ${JSON.stringify(postgresFigures.ending.tables)}`);
      log(`backends waiting (${waitSamples} samples of pg_stat_activity): ${JSON.stringify(postgresFigures.waits.events)}`);
    }
    return {
      options: { tasks, runSeconds, pollSeconds, batch, concurrency, ...(postgres ? { store: 'postgres' as const, apis: apiCount, workers: workerCount, accounts: keys.length } : {}), ...(options.serverEnv && Object.keys(options.serverEnv).length ? { serverEnv: options.serverEnv } : {}) },
      machine,
      date,
      statuses,
      submitSeconds: (submitted - firstSubmit) / 1000,
      allCreatedSeconds: (lastCreate - firstSubmit) / 1000,
      createSpanSeconds: (lastCreate - firstCreate) / 1000,
      totalSeconds: (Math.max(done, lastCompleted) - firstSubmit) / 1000,
      peakInFlight: { sampled: peakSampled, computed: peakComputed, ours: Math.max(0, ...scrapes.map((s) => s.inFlight)) },
      completion: distribution(completion),
      afterEnd: distribution(afterEnd),
      observeLag: distribution(observeLag),
      downloadWait: distribution(downloadWait),
      storeAfterDownload: distribution(storeAfterDownload),
      firstCheck: distribution(firstCheck),
      checkInterval: distribution(intervals),
      longIntervalShare: intervals.length ? intervals.filter((s) => s > 1.5 * pollSeconds).length / intervals.length : NaN,
      requests,
      idsPerList: distribution(idsPerList),
      steady: { ...steadyWindow, perPoll: steadyWindow.perSecond * pollSeconds },
      ending: endingWindow,
      rss: { startMb: rssAtStart, peakMb: memoryAtEnd.peakMb, endMb: memoryAtEnd.rssMb },
      eventLoop: {
        scrapes: scrapes.length,
        p99MedianMs: median(scrapes.map((s) => s.p99Ms)),
        p99WorstMs: Math.max(...scrapes.map((s) => s.p99Ms)),
        maxMs: Math.max(...scrapes.map((s) => s.maxMs)),
        steadyP99WorstMs: steadyScrapes.length ? Math.max(...steadyScrapes.map((s) => s.p99Ms)) : NaN,
        steadyMaxMs: steadyScrapes.length ? Math.max(...steadyScrapes.map((s) => s.maxMs)) : NaN,
      },
      cpu: {
        createSeconds: cpuAtCreated - cpuAtStart,
        steadySeconds: steadyCpu,
        totalSeconds: cpuAtEnd - cpuAtStart,
        steadyShare: steadyWindow.seconds > 0 ? steadyCpu / steadyWindow.seconds : NaN,
        totalShare: (cpuAtEnd - cpuAtStart) / ((done - firstSubmit) / 1000),
      },
      slowest,
      serverWarnings: warnings.length,
      warningSample: warnings.slice(0, 5),
      processes,
      completionVia: postgres ? 'metrics' : 'long poll',
      ...(postgresFigures ? { postgres: postgresFigures } : {}),
    };
  } finally {
    for (const timer of samplers) clearInterval(timer);
    // Workers first (they follow), then the api processes.
    for (const s of [...services].reverse()) await stopServerProcess(s.service.child, 15_000);
    await pgWatch?.close();
    for (const proxy of proxies) await proxy.close();
    await standin.close();
    if (database) {
      await database.drop().catch((error: unknown) => log(`could not drop ${database!.name}: ${String(error)}`));
      dropped = true;
    }
    rmSync(work, { recursive: true, force: true });
  }
}

const int = (n: number) => Math.round(n).toLocaleString('en-US');
const s = (n: number, digits = 1) => (Number.isFinite(n) ? `${n.toFixed(digits)} s` : '—');
const msOf = (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms` : '—');

/** The run's limit for one task: run + 2 poll periods. */
const limitOf = (r: UpstreamBenchResult) => r.options.runSeconds + 2 * r.options.pollSeconds;
/** List requests per poll period when each round lists every task once, in full batches. */
const expectedListsPerPoll = (r: UpstreamBenchResult) => Math.ceil(r.options.tasks / r.options.batch);

export function judgeUpstream(r: UpstreamBenchResult): Target[] {
  const { tasks, runSeconds, pollSeconds } = r.options;
  const succeeded = r.statuses.succeeded ?? 0;
  const peak = Math.max(r.peakInFlight.sampled, r.peakInFlight.computed);
  const expected = expectedListsPerPoll(r);
  return [
    {
      target: `${int(tasks)} upstream tasks in flight at once (${r.postgres ? `${r.options.workers} worker processes, PostgreSQL` : 'one worker process'})`,
      figure: `peak ${int(peak)} (sampled ${int(r.peakInFlight.sampled)}, from creation times ${int(r.peakInFlight.computed)}); all created in ${s(r.allCreatedSeconds)}`,
      met: peak >= tasks,
    },
    {
      target: `every task succeeded, created upstream once`,
      figure: `${int(succeeded)} succeeded of ${int(tasks)}; ${int(r.requests.create)} creates`,
      met: succeeded === tasks && r.requests.create === tasks,
    },
    {
      target: `each done ≤ ${runSeconds} s + 2 × ${pollSeconds} s = ${limitOf(r)} s after its upstream creation`,
      figure: `max ${s(r.completion.max, 2)}, p50 ${s(r.completion.p50, 2)}`,
      met: r.completion.count === tasks && r.completion.max <= limitOf(r),
    },
    {
      target: `following in batches: API requests per poll period ≤ 2 × ⌈${int(tasks)} / ${r.options.batch}⌉ = ${2 * expected}`,
      figure: Number.isFinite(r.steady.perPoll)
        ? `${r.steady.perPoll.toFixed(1)} per ${pollSeconds} s (${r.steady.perSecond.toFixed(2)}/s) between the last create and the first end; single queries ${int(r.requests.query)}`
        : 'no window with only following (the creates took longer than a task runs)',
      met: Number.isFinite(r.steady.perPoll) ? r.steady.perPoll <= 2 * expected && r.requests.query <= tasks / 100 : undefined,
    },
    ...(r.postgres
      ? [
          {
            target: `the ${r.options.workers} workers share the lists: a task listed twice within half a poll period ≤ 1 % of tasks`,
            figure:
              `${int(r.postgres.doubleListings.otherWorker)} by both workers, ${int(r.postgres.doubleListings.sameWorker)} by one; ` +
              `lists per worker ${r.postgres.workers.map((w) => int(w.lists)).join(' / ')}`,
            met: r.postgres.doubleListings.otherWorker + r.postgres.doubleListings.sameWorker <= tasks / 100,
          },
        ]
      : []),
  ];
}

/**
 * The section as Markdown. `loadNote`: say so when the machine was busy before the run (off inside
 * `pnpm bench`, where the load is the benchmark's own earlier parts and the report says it once).
 */
export function renderUpstreamSection(r: UpstreamBenchResult, targets: Target[], command: string, notes: string[] = [], { loadNote = true } = {}): string {
  const { tasks, runSeconds, pollSeconds, batch, concurrency } = r.options;
  const m = r.machine;
  const out: string[] = [SECTION_HEADING, ''];
  for (const note of notes) out.push(`> **${note}**`, '');
  if (loadNote && m.loadBefore > m.cores / 2) out.push(`> **A busy machine: load average ${m.loadBefore.toFixed(2)} on ${m.cores} cores before the run.**`, '');
  const d = (x: Distribution) => `${s(x.p50, 2)} / ${s(x.max, 2)}`;
  out.push(
    markdownTable(
      ['figure', 'this run'],
      [
        ['tasks submitted', `${int(tasks)} in ${s(r.submitSeconds, 2)} (${int(tasks / r.submitSeconds)}/s, ${concurrency} clients)`],
        ['all created upstream, from the first submit', `${s(r.allCreatedSeconds, 2)} (the creations spread over ${s(r.createSpanSeconds, 2)})`],
        ['peak in flight upstream: stand-in sampled / from creation times / `vidgen_upstream_in_flight`', `${int(r.peakInFlight.sampled)} / ${int(r.peakInFlight.computed)} / ${int(r.peakInFlight.ours)}`],
        [`completedAt − upstream creation, p50 / max (limit ${limitOf(r)} s)`, d(r.completion)],
        [`completedAt − end upstream (creation + ${runSeconds} s), p50 / max`, d(r.afterEnd)],
        ['… of which: end → first list showing it, p50 / max', d(r.observeLag)],
        ['… list showing it → download request, p50 / max', d(r.downloadWait)],
        ['… download request → completedAt, p50 / max', d(r.storeAfterDownload)],
        ['creation → first list with it, p50 / max', d(r.firstCheck)],
        [`between two lists of the same task, p50 / max (share > 1.5 × ${pollSeconds} s)`, `${d(r.checkInterval)} (${(r.longIntervalShare * 100).toFixed(0)} %)`],
        ['upstream requests: create / list / single query / cancel / download', KINDS.filter((k) => k !== 'other' || r.requests.other > 0).map((k) => int(r.requests[k])).join(' / ')],
        ['ids per list request, p50 / max', `${int(r.idsPerList.p50)} / ${int(r.idsPerList.max)}`],
        [
          'API requests while only following (last create → first end)',
          Number.isFinite(r.steady.perSecond)
            ? `${int(r.steady.apiRequests)} in ${s(r.steady.seconds)}: ${r.steady.perSecond.toFixed(2)}/s, ${r.steady.perPoll.toFixed(1)} per ${pollSeconds} s (⌈${int(tasks)} / ${batch}⌉ = ${expectedListsPerPoll(r)})`
            : '—',
        ],
        ['API requests while tasks end (first end → last completion)', `${int(r.ending.apiRequests)} in ${s(r.ending.seconds)}: ${r.ending.perSecond.toFixed(2)}/s`],
        ...(r.postgres ? postgresRows(r, r.postgres) : [
        ['server RSS: after start / peak / end', `${int(r.rss.startMb)} MB / ${int(r.rss.peakMb)} MB / ${int(r.rss.endMb)} MB`],
        [
          'event-loop delay (per 1 s scrape): p99 median / p99 worst / max',
          `${msOf(r.eventLoop.p99MedianMs)} / ${msOf(r.eventLoop.p99WorstMs)} / ${msOf(r.eventLoop.maxMs)}; only following: p99 worst ${msOf(r.eventLoop.steadyP99WorstMs)}, max ${msOf(r.eventLoop.steadyMaxMs)}`,
        ],
        [
          'server CPU: submit and create / only following / whole run',
          `${s(r.cpu.createSeconds, 2)} / ${s(r.cpu.steadySeconds, 2)} (${(r.cpu.steadyShare * 100).toFixed(1)} % of a core) / ${s(r.cpu.totalSeconds, 2)} (${(r.cpu.totalShare * 100).toFixed(0)} % of a core)`,
        ],
        ]),
      ],
    ),
    '',
    ...(r.postgres ? postgresDescription(r, command) : [
    `\`${command}\`, ${r.date.toISOString()}, ${m.cores} × ${m.cpu}, Node ${m.node}, SQLite ${m.sqlite}: the BytePlus stand-in`,
    `(\`test/support/byteplus-standin.ts\`, loopback, in the benchmark's process) runs every task ${runSeconds} s from its creation, then`,
    `succeeded; one server process (\`--role all\`, SQLite) with every model on \`byteplus\`, poll ${pollSeconds} s, batch ${batch},`,
    `\`VIDGEN_BYTEPLUS_MAX_IN_FLIGHT\` ${int(Math.max(1000, tasks))}${r.options.serverEnv ? `, ${Object.entries(r.options.serverEnv).map(([k, v]) => `${k}=${v}`).join(', ')}` : ''}, the rest at defaults; ${int(tasks)} tasks submitted by ${concurrency} clients, each then`,
    'long-polled (`wait=30`) until terminal. Times of creation, lists and downloads are the arrivals at the stand-in; completion',
    'is the task\'s `completedAt`. "Peak in flight": the stand-in\'s `activeTasks()` every 250 ms, and the overlap computed from the',
    'creation times. RSS from /proc (peak: VmHWM); event-loop delay from `vidgen_nodejs_eventloop_lag_p99_seconds` / `_max_seconds`,',
    `reset by each scrape (they include prom-client's ${EVENT_LOOP_RESOLUTION_MS} ms sampling interval: an idle loop reads ≈ ${EVENT_LOOP_RESOLUTION_MS} ms).`,
    ]),
    '',
    markdownTable(['target', 'this run', ''], targets.map((t) => [t.target, t.figure, t.met === undefined ? '—' : t.met ? 'met' : '**missed**'])),
    '',
  );
  if (r.checkInterval.p50 > 1.5 * pollSeconds) {
    out.push(
      `Each task was listed every ${s(r.checkInterval.p50, 2)} (median of ${int(r.checkInterval.count)} intervals), not every ${pollSeconds} s: ` +
        `a task that ends upstream just after a list waits up to that long to be seen.`,
      '',
    );
  }
  if (r.slowest) {
    const at = (t: number | undefined) => (t === undefined ? '—' : `+${t.toFixed(2)}`);
    out.push(
      `The slowest task, in seconds after its creation upstream: listed at ${r.slowest.listed.map(at).join(', ')}; ended upstream at +${runSeconds}; ` +
        `first list showing it ended ${at(r.slowest.observed)}, download ${at(r.slowest.downloaded)}, \`completedAt\` ${at(r.slowest.completed)}.`,
      '',
    );
  }
  if (r.serverWarnings > 0) out.push(`The server logged ${int(r.serverWarnings)} warnings or errors; the first: \`${r.warningSample[0]!.slice(0, 300).replace(/`/g, "'")}\``, '');
  return out.join('\n');
}


/** The PostgreSQL topology's rows: the processes, the store's load, how the workers split the lists. */
function postgresRows(r: UpstreamBenchResult, pgf: PostgresFigures): string[][] {
  const { pollSeconds } = r.options;
  const rate = (n: number) => (Number.isFinite(n) ? (n >= 100 ? int(n) : n.toFixed(1)) : '—');
  const load = (l: PgLoad | undefined) =>
    l
      ? `${rate(l.xactPerSecond)} xact/s; rows returned ${rate(l.returnedPerSecond)}/s, fetched ${rate(l.fetchedPerSecond)}/s, ` +
        `inserted ${rate(l.insertedPerSecond)}/s, updated ${rate(l.updatedPerSecond)}/s, deleted ${rate(l.deletedPerSecond)}/s; ` +
        `WAL ${rate(l.walBytesPerSecond / 1024)} KiB/s; backends' CPU ${(l.backendCpuShare * 100).toFixed(1)} % of a core (${s(l.seconds)})`
      : '—';
  const tables = (l: PgLoad | undefined) =>
    l
      ? l.tables
          .slice(0, 4)
          .map((t) => `${t.name}: ${rate(t.seqScans)} seq scans (${rate(t.seqRows)} rows), ${rate(t.idxScans)} index scans (${rate(t.idxRows)} rows), ${rate(t.upd)} upd (${rate(t.hotUpd)} HOT), ${rate(t.ins)} ins, ${rate(t.del)} del`)
          .join('; ')
      : '—';
  const name = (p: ProcessFigures, i: number) => `${p.role}${r.processes.filter((q) => q.role === p.role).length > 1 ? ` ${r.processes.slice(0, i + 1).filter((q) => q.role === p.role).length}` : ''}`;
  return [
    [
      'per worker: list requests (ids) while only following / whole run; creates',
      pgf.workers.map((w, i) => `worker ${i + 1}: ${int(w.steadyLists)} (${int(w.steadyIds)}) / ${int(w.lists)} (${int(w.ids)}); ${int(w.creates)}`).join('; '),
    ],
    [
      `list requests per ${pollSeconds} s period while only following, median / max (${pgf.perPeriod.periods} periods); tasks listed twice in one period`,
      `${rate(pgf.perPeriod.listsMedian)} / ${rate(pgf.perPeriod.listsMax)}; ${int(pgf.perPeriod.repeatedIds)}`,
    ],
    ['a task listed twice within half a period: by both workers / by one', `${int(pgf.doubleListings.otherWorker)} / ${int(pgf.doubleListings.sameWorker)}`],
    [
      `backends of the bench database waiting, per 1 s sample of pg_stat_activity (mean; the top events)`,
      pgf.waits.events.length
        ? pgf.waits.events
            .slice(0, 5)
            .map(([event, n]) => `${(n / pgf.waits.samples).toFixed(2)} ${event.replace(/\|/g, '/')}`)
            .join('; ')
        : 'none',
    ],
    ['**store load while only following** (all created → first end)', load(pgf.steady)],
    ['… by table, most rows first', tables(pgf.steady)],
    ['store load while tasks end (first end, or all created if later, → all terminal)', load(pgf.ending)],
    ['… by table, most rows first', tables(pgf.ending)],
    ...r.processes.map((p, i) => [
      `${name(p, i)} (pid ${p.pid}) CPU: submit and create / only following / whole run; RSS after start / peak / end`,
      `${s(p.cpu.createSeconds, 2)} / ${s(p.cpu.steadySeconds, 2)} (${(p.cpu.steadyShare * 100).toFixed(1)} % of a core) / ${s(p.cpu.totalSeconds, 2)} (${(p.cpu.totalShare * 100).toFixed(0)} %); ` +
        `${int(p.rss.startMb)} / ${int(p.rss.peakMb)} / ${int(p.rss.endMb)} MB`,
    ]),
    [
      'api event-loop delay (per 1 s scrape): p99 median / p99 worst / max',
      `${msOf(r.eventLoop.p99MedianMs)} / ${msOf(r.eventLoop.p99WorstMs)} / ${msOf(r.eventLoop.maxMs)}; only following: p99 worst ${msOf(r.eventLoop.steadyP99WorstMs)}, max ${msOf(r.eventLoop.steadyMaxMs)}`,
    ],
  ];
}

function postgresDescription(r: UpstreamBenchResult, command: string): string[] {
  const { tasks, runSeconds, pollSeconds, batch, concurrency, apis, workers } = r.options;
  const m = r.machine;
  return [
    `\`${command}\`, ${r.date.toISOString()}, ${m.cores} × ${m.cpu}, Node ${m.node}, PostgreSQL on the same machine (a database of its own,`,
    `made and dropped by the run): the BytePlus stand-in (\`test/support/byteplus-standin.ts\`, loopback, in the benchmark's process, callbacks off)`,
    `runs every task ${runSeconds} s from its creation, then succeeded; ${apis} \`--role api\` process(es) take the submits, ${workers} \`--role worker\``,
    `processes create and follow (each through a recording proxy of its own in the benchmark's process, to tell their requests apart),`,
    `every model on \`byteplus\`, poll ${pollSeconds} s, batch ${batch}, \`VIDGEN_BYTEPLUS_MAX_IN_FLIGHT\` ${int(Math.max(1000, tasks))}${r.options.serverEnv ? `, ${Object.entries(r.options.serverEnv).map(([k, v]) => `${k}=${v}`).join(', ')}` : ''}, the rest at defaults`,
    `(download concurrency 8 and pool 10 per process); ${int(tasks)} tasks submitted by ${concurrency} clients${(r.options.accounts ?? 1) > 1 ? ` over ${r.options.accounts} accounts` : ' (one account)'}. Completion is followed through the api's`,
    '`/metrics` (`vidgen_tasks`, scraped every second), not a long poll per task, and each task\'s `completedAt` read from the store at the end.',
    'Store load: `pg_stat_database` deltas of the bench database (transactions committed, rows returned by scans / fetched by index,',
    'inserted / updated / deleted), `pg_stat_user_tables` for the tables, WAL from `pg_current_wal_lsn()` (the whole cluster), the CPU of the',
    "database's backends from /proc; it includes the api's `/metrics` scrape every second (a count of tasks by status and of the channel's",
    'tasks in flight). CPU and RSS of each process from /proc; event-loop delay from the api\'s `/metrics` (workers serve no HTTP).',
  ];
}

/** The sizes: full (the target's) and quick. */
export const UPSTREAM_FULL = { tasks: 1000, runSeconds: 60, pollSeconds: 5, batch: 100, concurrency: 32 };
export const UPSTREAM_QUICK = { tasks: 200, runSeconds: 10, pollSeconds: 5, batch: 100, concurrency: 32 };

// ---------------------------------------------------------------------------

async function main(): Promise<void> {
  const argv = process.argv.slice(2).filter((arg) => arg !== '--');
  const { values: args } = parseArgs({
    args: argv,
    options: {
      quick: { type: 'boolean', default: false },
      write: { type: 'boolean', default: false },
      tasks: { type: 'string' },
      'run-seconds': { type: 'string' },
      'poll-seconds': { type: 'string' },
      batch: { type: 'string' },
      concurrency: { type: 'string' },
      'cpu-prof': { type: 'boolean', default: false },
      'cpu-prof-dir': { type: 'string' },
      'server-env': { type: 'string', multiple: true, default: [] },
      note: { type: 'string' },
      dump: { type: 'string' },
      store: { type: 'string', default: 'sqlite' },
      api: { type: 'string' },
      workers: { type: 'string' },
      accounts: { type: 'string' },
    },
  });
  if (args.store !== 'sqlite' && args.store !== 'postgres') throw new Error(`--store is sqlite or postgres, got ${args.store}`);
  if (args.store === 'sqlite' && (args.api !== undefined || args.workers !== undefined || args.accounts !== undefined)) throw new Error('--api, --workers and --accounts need --store postgres');
  const size = args.quick ? UPSTREAM_QUICK : UPSTREAM_FULL;
  const number = (name: string, value: string | undefined, fallback: number, min: number) => {
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new Error(`--${name} must be a whole number ≥ ${min}, got ${value}`);
    return n;
  };
  const serverEnv = Object.fromEntries(
    args['server-env'].map((pair) => {
      const at = pair.indexOf('=');
      if (at < 1) throw new Error(`--server-env takes KEY=VALUE, got ${pair}`);
      return [pair.slice(0, at), pair.slice(at + 1)];
    }),
  );
  const cpuProfileDir = !args['cpu-prof'] ? undefined : args['cpu-prof-dir'] ? resolve(process.env.INIT_CWD ?? process.cwd(), args['cpu-prof-dir']) : mkdtempSync(join(tmpdir(), 'vidgen-cpu-prof-'));
  const options: UpstreamBenchOptions = {
    tasks: number('tasks', args.tasks, size.tasks, 1),
    runSeconds: number('run-seconds', args['run-seconds'], size.runSeconds, 1),
    pollSeconds: number('poll-seconds', args['poll-seconds'], size.pollSeconds, 1),
    batch: number('batch', args.batch, size.batch, 1),
    concurrency: number('concurrency', args.concurrency, size.concurrency, 1),
    serverEnv,
    nodeArgs: cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${cpuProfileDir}`] : [],
    ...(args.dump ? { dumpFile: resolve(process.env.INIT_CWD ?? process.cwd(), args.dump) } : {}),
    ...(args.store === 'postgres'
      ? { store: 'postgres' as const, apis: number('api', args.api, 1, 1), workers: number('workers', args.workers, 2, 1), accounts: number('accounts', args.accounts, 1, 1) }
      : {}),
  };
  const notes: string[] = [];
  if (args.quick) notes.push(`A --quick run: ${options.tasks} tasks of ${options.runSeconds} s, not the target's 1,000 of 60 s.`);
  if (cpuProfileDir) notes.push('The server ran with --cpu-prof: slower than without.');
  if (args.note) notes.push(args.note);

  const result = await runUpstreamBench(options);
  const targets = judgeUpstream(result);
  const section = renderUpstreamSection(result, targets, `pnpm bench:upstream${argv.map((arg) => ` ${arg}`).join('')}`, notes);
  console.log(`\n${section}`);
  if (args.write) console.log(`bench-upstream: written to ${writeSection(SECTION_HEADING, section)}`);
  if (cpuProfileDir) console.log(`bench-upstream: CPU profile in ${cpuProfileDir}`);
  const missed = targets.filter((t) => t.met === false);
  for (const t of missed) console.error(`bench-upstream: target missed: ${t.target} (${t.figure})`);
  process.exit(missed.length ? 1 : 0);
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  main().catch((error: unknown) => {
    console.error('bench-upstream: failed:', error);
    process.exit(2);
  });
}
