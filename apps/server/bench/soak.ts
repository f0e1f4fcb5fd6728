/**
 * Soak: minutes of mixed load while server processes are SIGKILLed at random,
 * then an audit of what the store and the webhook receiver hold. Not in CI.
 *
 *   pnpm soak [-- --minutes 10 --seed 42 --store postgres|sqlite|both --clients 8 --out soak.json]
 *
 * - PostgreSQL (a fresh database, dropped after): 2 `api` and 2 `worker`
 *   processes; SQLite (`--store sqlite|both`): one `all` process. `both` runs
 *   each for `--minutes`.
 * - Tasks go to the instant provider (each process started with its own small
 *   delay) and, `--local-share` of them, to the local renderer; webhooks go to
 *   an HTTPS receiver on loopback that sometimes answers 500 or 503 or is slower
 *   than the sender waits.
 * - `--clients` concurrent clients submit (most with an Idempotency-Key, some
 *   replayed, some reused with another body, some invalid), query (with and
 *   without `?wait`), list, cancel and read the models, each choosing an API
 *   process at random and retrying a network error on another one (a submit
 *   without a key is never retried: its task is then "unacknowledged").
 * - Every `--kill-every` seconds (±50 %, from `--seed`) one process gets SIGKILL
 *   and is started again; the lease is 2 s so its jobs come back at once.
 * - Then the load stops, at most `--drain-seconds` are given for every task to
 *   end and every webhook to arrive, and the store is read directly.
 *
 * Exit code 1 when tasks were lost, charged twice, stuck or missing their
 * webhook (or any other figure marked "must be 0" is not).
 */
import type { ChildProcess } from 'node:child_process';
import { mulberry32 } from './http/random.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { isTerminal, type TaskState } from '../src/domain/states.js';
import type { Config } from '../src/config.js';
import { openBackend, type Backend } from '../src/store/open.js';
import { PgStore } from '../src/store/postgres/pg-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { TaskRecord } from '../src/store/store.js';
import {
  createAccountWithKey,
  freePort,
  pipelineEnv,
  startServerProcess,
  startWebhookReceiver,
  stopServerProcess,
  type ReceivedWebhook,
  type Role,
  type ServerProcess,
} from '../test/support/pipeline-processes.js';
import { createTestDatabase, postgresAvailable } from '../test/support/postgres.js';

const { values: args } = parseArgs({
  // `pnpm soak -- --minutes 2` passes the `--` on; it is not the end of the options here.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    minutes: { type: 'string', default: '10' },
    seed: { type: 'string' },
    store: { type: 'string', default: 'postgres' },
    clients: { type: 'string', default: '8' },
    'think-ms': { type: 'string', default: '100' },
    'kill-every': { type: 'string', default: '6' },
    'local-share': { type: 'string', default: '0.02' },
    'drain-seconds': { type: 'string', default: '120' },
    out: { type: 'string' },
  },
});
const MINUTES = Number(args.minutes);
const SEED = args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(args.seed);
const CLIENTS = Number(args.clients);
const THINK_MS = Number(args['think-ms']);
const KILL_EVERY_MS = Number(args['kill-every']) * 1000;
const LOCAL_SHARE = Number(args['local-share']);
const DRAIN_MS = Number(args['drain-seconds']) * 1000;
const STORES = { postgres: ['postgres'], sqlite: ['sqlite'], both: ['postgres', 'sqlite'] }[args.store!] as ('postgres' | 'sqlite')[] | undefined;
if (!STORES || !(MINUTES > 0) || !Number.isInteger(SEED) || !(CLIENTS >= 1) || !(KILL_EVERY_MS > 0) || !(LOCAL_SHARE >= 0 && LOCAL_SHARE <= 1)) {
  console.error('usage: soak [--minutes 10] [--seed N] [--store postgres|sqlite|both] [--clients 8] [--think-ms 100] [--kill-every 6] [--local-share 0.02] [--drain-seconds 120] [--out file.json]');
  process.exit(2);
}

const SUBMIT = '/api/open/v1/video/generations';
/** A request that outlives this has hung; `?wait` requests get their wait on top. */
const REQUEST_TIMEOUT_MS = 20_000;
/** How long a client keeps retrying a request across network errors (a restart takes a few seconds). */
const RETRY_FOR_MS = 30_000;
/** vidgen-1.5-pro renders locally (ffmpeg); the other models answer from the instant provider. */
const PROVIDERS = '{"vidgen-2.0":"instant","vidgen-2.0-fast":"instant","vidgen-1.5-pro":"local"}';
/** Delays before webhook retries: short, so a delivery refused a few times still arrives within the drain. */
const WEBHOOK_RETRY_SCHEDULE = '100ms,250ms,500ms,1s,2s,2s,3s,3s,3s';
const WEBHOOK_TIMEOUT_MS = 2_000;

const between = (random: () => number, low: number, high: number) => low + Math.floor(random() * (high - low + 1));
const pick = <T>(random: () => number, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const sleep = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));
const percent = (part: number, whole: number) => (whole ? `${((100 * part) / whole).toFixed(1)} %` : '–');

// ---------------------------------------------------------------------------------------------
// The webhook receiver, shared by the phases: it verifies each signature on arrival (Standard
// Webhooks refuses old timestamps, so it cannot wait for the audit) and answers as the seed says.

const receiverRandom = mulberry32(SEED ^ 0x5eed);
/** Each POST received: `answered` is the status the sender saw (0 when it had given up), `answer` says how. */
const receipts: (ReceivedWebhook & { answered: number; answer: string; signatureValid: boolean })[] = [];
const webhookSecrets: string[] = [];
const receiver = await startWebhookReceiver(async (hook) => {
  const signatureValid = webhookSecrets.some((secret) => {
    try {
      new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>);
      return true;
    } catch {
      return false;
    }
  });
  const roll = receiverRandom();
  let answered = 204;
  let label = '204';
  if (roll < 0.08) answered = 500;
  else if (roll < 0.12) answered = 503;
  else if (roll < 0.17) {
    // Slow: in time, or well after the sender has given up (VIDGEN_WEBHOOK_TIMEOUT_MS), which is a failed attempt.
    const late = receiverRandom() < 0.5;
    label = late ? '204 after the sender gave up' : '204 slow';
    await sleep(late ? between(receiverRandom, WEBHOOK_TIMEOUT_MS + 500, WEBHOOK_TIMEOUT_MS + 1_500) : between(receiverRandom, 300, WEBHOOK_TIMEOUT_MS - 500));
  }
  if (answered !== 204) label = String(answered);
  // Delivered only when the sender can have seen the 2xx.
  receipts.push({ ...hook, answered: label === '204 after the sender gave up' ? 0 : answered, answer: label, signatureValid });
  return answered;
});

// Ctrl-C: kill what this started and drop the database before leaving.
const running = new Set<ChildProcess>();
let currentDatabase: { drop(): Promise<void> } | undefined;
/** Set while a phase stops its processes: their exits are no crash. */
let tearingDown = false;
process.once('SIGINT', () => {
  for (const child of running) child.kill('SIGKILL');
  void (currentDatabase?.drop() ?? Promise.resolve()).finally(() => process.exit(130));
});

// ---------------------------------------------------------------------------------------------
// Server processes: slots that the chaos loop kills and starts again.

interface Slot {
  name: string;
  role: Role;
  process: ServerProcess | undefined;
  /** False while the harness kills or starts it (or it crashed): no request is sent to it then. */
  up: boolean;
  kills: number;
  /** A start under way after a crash, awaited before the slot is started by anyone else. */
  starting?: Promise<void>;
}

type Outcome = '2xx' | '4xx' | '5xx' | 'network error';
type Operation = 'submit' | 'submit replay' | 'submit reused key' | 'submit invalid' | 'get' | 'get ?wait' | 'get unknown' | 'list' | 'cancel' | 'models';

/** What the clients do, with weights. */
const OPERATIONS: [Operation, number][] = [
  ['submit', 32],
  ['submit replay', 5],
  ['submit reused key', 2],
  ['submit invalid', 5],
  ['get', 12],
  ['get ?wait', 16],
  ['get unknown', 2],
  ['list', 10],
  ['cancel', 9],
  ['models', 7],
];
interface PhaseReport {
  store: string;
  seed: number;
  minutes: number;
  clients: number;
  requests: Record<string, Record<Outcome, number>>;
  figures: Record<string, number>;
  tasksByStatus: Record<string, number>;
  failedByCode: Record<string, number>;
  kills: Record<string, number>;
  receiverAnswers: Record<string, number>;
  /** Unexpected answers (counts, then examples), and examples of lost and stuck tasks. */
  details: string[];
  processExits: string[];
  mustBeZero: string[];
}

/** Starts the phase's store, soaks it, and removes all of it again whatever happens. */
async function runPhase(kind: 'postgres' | 'sqlite'): Promise<PhaseReport> {
  const dataDir = mkdtempSync(join(tmpdir(), `vidgen-soak-${kind}-`));
  const database = kind === 'postgres' ? await createTestDatabase() : undefined;
  currentDatabase = database;
  const sqlitePath = join(dataDir, 'vidgen.db');
  const databaseConfig: Config['database'] = database ? { kind: 'postgres', url: database.url, poolSize: 4 } : { kind: 'sqlite', path: sqlitePath };
  let backend: Backend | undefined;
  try {
    backend = await openBackend({ database: databaseConfig, jobLeaseMs: 2_000 }, { logger: pino({ level: 'silent' }), listen: false, supervise: false });
    return await soak(kind, { dataDir, databaseUrl: database ? database.url : `sqlite:${sqlitePath}`, backend });
  } finally {
    tearingDown = true;
    await Promise.all([...running].map((child) => stopServerProcess(child)));
    tearingDown = false;
    await backend?.close();
    await database?.drop();
    currentDatabase = undefined;
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** The load, the kills, the drain and the audit of one store. */
async function soak(kind: 'postgres' | 'sqlite', { dataDir, databaseUrl, backend }: { dataDir: string; databaseUrl: string; backend: Backend }): Promise<PhaseReport> {
  const phaseSeed = SEED + (kind === 'postgres' ? 0 : 1_000_003);
  const { accountId, key } = await createAccountWithKey(backend.store, 'soak', 1_000_000_000);
  webhookSecrets.push(...(await backend.store.webhookSecrets(accountId, new Date())));
  const hookUrl = receiver.url('/hooks');
  const receiverCaFile = receiver.writeCa(dataDir);

  const processRandom = mulberry32(phaseSeed ^ 0x9e3779b9);
  const processExits: string[] = [];
  const slots: Slot[] = (kind === 'postgres' ? (['api', 'api', 'worker', 'worker'] as const) : (['all'] as const)).map((role, i, all) => ({
    name: `${role}${all.filter((r) => r === role).length > 1 ? ` ${all.slice(0, i + 1).filter((r) => r === role).length}` : ''}`,
    role,
    process: undefined,
    up: false,
    kills: 0,
  }));
  let stopLoad = false;
  // Outputs are files in the shared data dir served by the APIs: workers store URLs at the first
  // API, which listens on this port at every (re)start.
  const filesPort = kind === 'postgres' ? await freePort() : undefined;
  const filesSlot = slots.find((slot) => slot.role === 'api');

  async function startSlot(slot: Slot): Promise<void> {
    const env = {
      ...pipelineEnv({ databaseUrl, dataDir, receiverCaFile, publicBaseUrl: slot.role === 'worker' ? `http://127.0.0.1:${filesPort}` : undefined }),
      ...(slot === filesSlot ? { PORT: String(filesPort) } : {}),
      // Every process must sign output URLs alike: configured, as machines that share no data dir need.
      VIDGEN_FILE_URL_SECRET: `soak-${SEED}`,
      VIDGEN_PROVIDERS: PROVIDERS,
      VIDGEN_INSTANT_DELAY_MS: String(between(processRandom, 20, 400)),
      VIDGEN_INSTANT_CONCURRENCY: '8',
      VIDGEN_LOCAL_CONCURRENCY: '1',
      VIDGEN_JOB_LEASE_SECONDS: '2',
      VIDGEN_DATABASE_POOL_SIZE: '5',
      VIDGEN_WEBHOOK_CONCURRENCY: '16',
      VIDGEN_WEBHOOK_RETRY_SCHEDULE: WEBHOOK_RETRY_SCHEDULE,
      VIDGEN_WEBHOOK_TIMEOUT_MS: String(WEBHOOK_TIMEOUT_MS),
    };
    const started = await startServerProcess(slot.role, env, { onSpawn: (child) => (running.add(child), child.once('exit', () => running.delete(child))) });
    started.child.once('exit', (code, signal) => {
      if (signal === 'SIGKILL' || tearingDown) return;
      // Nobody killed it: a crash. Recorded (it fails the run) and started again.
      processExits.push(`${slot.name} exited ${code ?? signal}: ${started.output().slice(-2_000)}`);
      slot.up = false;
      void startSlotAgain(slot).catch(() => {});
    });
    slot.process = started;
    slot.up = true;
  }

  /** Starts a slot that went down; a failed start is recorded (it fails the run) and tried again. */
  function startSlotAgain(slot: Slot): Promise<void> {
    slot.starting ??= (async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await startSlot(slot);
        } catch (error) {
          processExits.push(`${slot.name} did not start: ${(error as Error).message.slice(-2_000)}`);
          if (attempt === 3) throw error;
        }
      }
    })().finally(() => (slot.starting = undefined));
    return slot.starting;
  }

  async function killAndRestart(slot: Slot): Promise<void> {
    slot.up = false;
    const child = slot.process!.child;
    const exited = new Promise((done) => child.once('exit', done));
    child.kill('SIGKILL');
    await exited;
    slot.kills++;
    await sleep(between(processRandom, 0, 1_500));
    await startSlotAgain(slot);
  }

  await Promise.all(slots.map(startSlot));

  // -------------------------------------------------------------------------------------------
  // The load.

  const requests = Object.fromEntries(OPERATIONS.map(([op]) => [op, { '2xx': 0, '4xx': 0, '5xx': 0, 'network error': 0 }])) as Record<Operation, Record<Outcome, number>>;
  const unexpectedAnswers: string[] = [];
  const unexpectedCounts: Record<string, number> = {};
  const count = (op: Operation, outcome: Outcome) => requests[op][outcome]++;
  const figures = {
    accepted: 0,
    unacknowledgedSubmits: 0,
    replaysMatched: 0,
    idempotencyMismatches: 0,
    gaveUp: 0,
  };
  /** Every requestId a 202 named, in the order they came (recent ones are cancelled and long-polled). */
  const accepted = new Set<string>();
  const acceptedIds: string[] = [];
  const keyed: { key: string; body: string; requestId: string }[] = [];

  /** One answer: its status and parsed body (undefined when the request did not get through). */
  interface Answer {
    status: number;
    headers: Headers;
    body: unknown;
  }

  const pickApi = (random: () => number, avoid?: string): string | undefined => {
    const up = slots.filter((s) => s.up && s.process?.baseUrl).map((s) => s.process!.baseUrl);
    const others = up.filter((url) => url !== avoid);
    return others.length ? pick(random, others) : up[0];
  };

  /**
   * Sends one request to an API process chosen at random; after a network error, tries
   * another (when `retry`) for up to RETRY_FOR_MS. Each attempt is counted.
   */
  async function send(random: () => number, op: Operation, method: string, path: string, init: { body?: string; headers?: Record<string, string>; retry: boolean; waitSeconds?: number }): Promise<Answer | undefined> {
    const started = Date.now();
    let failedOn: string | undefined;
    for (let attempt = 0; ; attempt++) {
      const base = pickApi(random, failedOn);
      if (!base) {
        await sleep(100);
        if (Date.now() - started > RETRY_FOR_MS) break;
        continue;
      }
      try {
        const res = await fetch(`${base}${path}`, {
          method,
          headers: { Authorization: `Bearer ${key}`, ...(init.body !== undefined ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
          body: init.body,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS + (init.waitSeconds ?? 0) * 1000),
        });
        const text = await res.text();
        count(op, res.status >= 500 ? '5xx' : res.status >= 400 ? '4xx' : '2xx');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // Not JSON: kept as text for the report.
        }
        return { status: res.status, headers: res.headers, body };
      } catch {
        count(op, 'network error');
        failedOn = base;
        if (!init.retry || Date.now() - started > RETRY_FOR_MS) break;
        await sleep(Math.min(1_000, 50 * 2 ** attempt));
      }
    }
    if (init.retry) figures.gaveUp++;
    return undefined;
  }

  function check(op: Operation, answer: Answer | undefined, statuses: number[]): boolean {
    if (!answer) return false;
    if (statuses.includes(answer.status)) return true;
    const label = `${op} → ${answer.status}`;
    unexpectedCounts[label] = (unexpectedCounts[label] ?? 0) + 1;
    if (unexpectedAnswers.length < 20) unexpectedAnswers.push(`${label}: ${JSON.stringify(answer.body).slice(0, 300)}`);
    return false;
  }

  function newSubmission(random: () => number, client: number, seq: number): Record<string, unknown> {
    const local = random() < LOCAL_SHARE;
    return {
      model: local ? 'vidgen-1.5-pro' : pick(random, ['vidgen-2.0', 'vidgen-2.0-fast']),
      prompt: `soak ${kind} client ${client} task ${seq}`,
      duration: local ? 5 : between(random, 4, 15),
      resolution: local ? '480p' : pick(random, ['480p', '720p', '1080p']),
      ...(random() < 0.8 ? { webhookUrl: hookUrl } : {}),
      metadata: { soak: { client, seq } },
    };
  }

  const INVALID_BODIES = [
    JSON.stringify({ model: 'vidgen-2.0' }),
    JSON.stringify({ model: 'vidgen-9', prompt: 'no such model' }),
    JSON.stringify({ model: 'vidgen-2.0', prompt: 'too long', duration: 99 }),
    JSON.stringify({ model: 'vidgen-2.0', prompt: 'typo', durations: 5 }),
    JSON.stringify({ model: 'vidgen-1.5-pro', prompt: 'odd duration', duration: 7 }),
    JSON.stringify({ model: 'vidgen-2.0', prompt: 'plain http', webhookUrl: 'http://example.com/hook' }),
    '{"model": "vidgen-2.0", "prompt": ',
  ];

  const totalWeight = OPERATIONS.reduce((sum, [, weight]) => sum + weight, 0);
  const chooseOperation = (random: () => number): Operation => {
    let roll = random() * totalWeight;
    for (const [op, weight] of OPERATIONS) if ((roll -= weight) < 0) return op;
    return 'models';
  };

  async function submit(random: () => number, client: number, seq: number): Promise<void> {
    const body = JSON.stringify(newSubmission(random, client, seq));
    const idempotencyKey = random() < 0.7 ? `soak-${kind}-${SEED}-${client}-${seq}` : undefined;
    for (let tries = 1; ; tries++) {
      const answer = await send(random, 'submit', 'POST', SUBMIT, { body, headers: idempotencyKey ? { 'Idempotency-Key': idempotencyKey } : {}, retry: idempotencyKey !== undefined });
      if (!answer) {
        if (!idempotencyKey) figures.unacknowledgedSubmits++;
        return;
      }
      // The first attempt may still hold the key (a process killed mid-submit rolls back at once; a slow one does not).
      if (answer.status === 409 && idempotencyKey && tries < 30) {
        await sleep(1_000);
        continue;
      }
      if (!check('submit', answer, [202])) return;
      const requestId = (answer.body as { requestId: string }).requestId;
      if (!accepted.has(requestId)) {
        accepted.add(requestId);
        acceptedIds.push(requestId);
        figures.accepted++;
      }
      if (idempotencyKey) keyed.push({ key: idempotencyKey, body, requestId });
      return;
    }
  }

  async function replay(random: () => number): Promise<void> {
    if (!keyed.length) return;
    const earlier = pick(random, keyed);
    const answer = await send(random, 'submit replay', 'POST', SUBMIT, { body: earlier.body, headers: { 'Idempotency-Key': earlier.key }, retry: true });
    // 409: the first submission with that key is still in its transaction.
    if (!check('submit replay', answer, [202, 409]) || answer!.status === 409) return;
    const same = (answer!.body as { requestId: string }).requestId === earlier.requestId && answer!.headers.get('idempotent-replayed') === 'true';
    if (same) figures.replaysMatched++;
    else figures.idempotencyMismatches++;
  }

  async function reuseKey(random: () => number): Promise<void> {
    if (!keyed.length) return;
    const earlier = pick(random, keyed);
    const changed = JSON.stringify({ ...(JSON.parse(earlier.body) as object), prompt: 'another body, the same key' });
    const answer = await send(random, 'submit reused key', 'POST', SUBMIT, { body: changed, headers: { 'Idempotency-Key': earlier.key }, retry: true });
    check('submit reused key', answer, [422]);
  }

  /** A recent task (more likely still running), or any accepted one. */
  const someTask = (random: () => number, recentOnly = false): string | undefined => {
    if (!acceptedIds.length) return undefined;
    const from = recentOnly || random() < 0.6 ? Math.max(0, acceptedIds.length - 30) : 0;
    return acceptedIds[between(random, from, acceptedIds.length - 1)];
  };

  async function operate(random: () => number, op: Operation, client: number, seq: number): Promise<void> {
    switch (op) {
      case 'submit':
        return submit(random, client, seq);
      case 'submit replay':
        return replay(random);
      case 'submit reused key':
        return reuseKey(random);
      case 'submit invalid':
        check(op, await send(random, op, 'POST', SUBMIT, { body: pick(random, INVALID_BODIES), retry: true }), [400]);
        return;
      case 'get': {
        const id = someTask(random);
        if (id) check(op, await send(random, op, 'GET', `${SUBMIT}/${id}`, { retry: true }), [200]);
        return;
      }
      case 'get ?wait': {
        const id = someTask(random, true);
        const wait = between(random, 1, 5);
        if (id) check(op, await send(random, op, 'GET', `${SUBMIT}/${id}?wait=${wait}`, { retry: true, waitSeconds: wait }), [200]);
        return;
      }
      case 'get unknown':
        check(op, await send(random, op, 'GET', `${SUBMIT}/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0`, { retry: true }), [404]);
        return;
      case 'list': {
        const status = pick(random, [undefined, undefined, 'queued', 'processing', 'succeeded', 'failed', 'cancelled'] as const);
        const query = new URLSearchParams({ limit: String(between(random, 1, 50)), ...(status ? { status } : {}) });
        const first = await send(random, op, 'GET', `${SUBMIT}?${query}`, { retry: true });
        if (!check(op, first, [200])) return;
        const cursor = (first!.body as { nextCursor: string | null }).nextCursor;
        if (cursor && random() < 0.5) {
          query.set('cursor', cursor);
          check(op, await send(random, op, 'GET', `${SUBMIT}?${query}`, { retry: true }), [200]);
        }
        return;
      }
      case 'cancel': {
        const id = someTask(random, true);
        // 409 invalid_state: it had already ended.
        if (id) check(op, await send(random, op, 'POST', `${SUBMIT}/${id}/cancel`, { retry: true }), [200, 409]);
        return;
      }
      case 'models':
        check(op, await send(random, op, 'GET', '/api/open/v1/models', { retry: true }), [200]);
        return;
    }
  }

  async function client(index: number): Promise<void> {
    const random = mulberry32(phaseSeed + 7919 * (index + 1));
    for (let seq = 0; !stopLoad; seq++) {
      await operate(random, chooseOperation(random), index, seq);
      if (THINK_MS > 0) await sleep(random() * THINK_MS);
    }
  }

  let loadStopped = () => {};
  const loadOver = new Promise<void>((done) => (loadStopped = done));
  async function chaos(): Promise<void> {
    const random = mulberry32(phaseSeed ^ 0xc4a05);
    while (!stopLoad) {
      const wait = KILL_EVERY_MS * (0.5 + random());
      await Promise.race([sleep(wait), loadOver]);
      if (stopLoad) return;
      const up = slots.filter((s) => s.up);
      if (up.length) await killAndRestart(pick(random, up));
    }
  }

  const loadStarted = Date.now();
  const progress = setInterval(() => {
    const sent = Object.values(requests).reduce((sum, row) => sum + row['2xx'] + row['4xx'] + row['5xx'] + row['network error'], 0);
    const fivexx = Object.values(requests).reduce((sum, row) => sum + row['5xx'], 0);
    const kills = slots.reduce((sum, s) => sum + s.kills, 0);
    console.log(`[${kind} ${((Date.now() - loadStarted) / 1000).toFixed(0)} s] requests ${sent}, accepted ${figures.accepted}, kills ${kills}, 5xx ${fivexx}, webhooks received ${receipts.length}`);
  }, 30_000);
  console.log(`[${kind}] ${slots.map((s) => s.name).join(', ')} up; ${CLIENTS} clients for ${MINUTES} min, seed ${SEED}`);
  const chaosDone = chaos();
  const clientsDone = Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
  await sleep(MINUTES * 60_000);
  stopLoad = true;
  loadStopped();
  await Promise.all([clientsDone, chaosDone]);
  clearInterval(progress);

  // -------------------------------------------------------------------------------------------
  // The drain: every process up, no more load; wait for tasks to end and webhooks to arrive.

  for (const slot of slots) if (!slot.up) await startSlotAgain(slot);

  async function allTasks(): Promise<TaskRecord[]> {
    const tasks: TaskRecord[] = [];
    let after: { createdAt: Date; id: string } | undefined;
    for (;;) {
      const page = await backend.store.listTasks({ accountId, limit: 500, after });
      tasks.push(...page);
      if (page.length < 500) return tasks;
      const last = page.at(-1)!;
      after = { createdAt: last.createdAt, id: last.id };
    }
  }

  const drainStarted = Date.now();
  let tasks = await allTasks();
  for (;;) {
    const deliveredIds = new Set(receipts.filter((r) => r.answered >= 200 && r.answered < 300).map((r) => r.requestId));
    const waiting = tasks.filter((t) => !isTerminal(t.status) || (t.webhookUrl && (!deliveredIds.has(t.id) || t.webhook?.status === 'pending')));
    if (!waiting.length || Date.now() - drainStarted > DRAIN_MS) break;
    await sleep(1_000);
    tasks = await allTasks();
  }
  const drainSeconds = (Date.now() - drainStarted) / 1000;

  // -------------------------------------------------------------------------------------------
  // The audit, read from the store itself.

  const byId = new Map(tasks.map((t) => [t.id, t]));
  const tasksByStatus: Record<string, number> = {};
  const failedByCode: Record<string, number> = {};
  for (const t of tasks) {
    tasksByStatus[t.status] = (tasksByStatus[t.status] ?? 0) + 1;
    if (t.status === 'failed') failedByCode[t.errorCode ?? '?'] = (failedByCode[t.errorCode ?? '?'] ?? 0) + 1;
  }
  const lost = [...accepted].filter((id) => !byId.has(id) || !isTerminal(byId.get(id)!.status));
  const stuck = tasks.filter((t) => !isTerminal(t.status));

  // Ledger: one charge per task, one refund per failed or cancelled task and none otherwise, both of the task's price.
  const ledger = await backend.store.listLedger(accountId);
  const charges = new Map<string, number[]>();
  const refunds = new Map<string, number[]>();
  for (const entry of ledger) {
    if (!entry.taskId) continue;
    const into = entry.kind === 'charge' ? charges : entry.kind === 'refund' ? refunds : undefined;
    into?.set(entry.taskId, [...(into.get(entry.taskId) ?? []), Math.abs(entry.amount)]);
  }
  const audit = (await backend.store.auditBalance(accountId))!;
  let doubleCharges = 0;
  let ledgerMismatches = 0;
  for (const t of tasks) {
    const charged = charges.get(t.id) ?? [];
    const refunded = refunds.get(t.id) ?? [];
    if (charged.length > 1) doubleCharges++;
    if (refunded.length > 1) doubleCharges++;
    const refundDue = t.status === 'failed' || t.status === 'cancelled';
    if (charged.length !== 1 || charged[0] !== t.creditsCharged) ledgerMismatches++;
    else if (isTerminal(t.status) && (refundDue ? refunded.length !== 1 || refunded[0] !== t.creditsCharged : refunded.length !== 0)) ledgerMismatches++;
  }
  for (const taskId of charges.keys()) if (!byId.has(taskId)) ledgerMismatches++;
  if (audit.balance !== audit.ledgerSum) doubleCharges++;
  // A retried submit that created a second task (the same Idempotency-Key, found through the metadata).
  const tasksBySubmission = new Map<string, number>();
  for (const t of tasks) {
    const mark = JSON.stringify((t.metadata as { soak?: unknown } | null)?.soak ?? t.id);
    tasksBySubmission.set(mark, (tasksBySubmission.get(mark) ?? 0) + 1);
  }
  const duplicateTasks = [...tasksBySubmission.values()].reduce((sum, n) => sum + (n - 1), 0);

  // Webhooks: each terminal task with a webhookUrl reached the receiver (a 2xx it answered in time),
  // under one webhook-id (the delivery's), saying the status the task ended in, correctly signed.
  const deliveries = new Map((await backend.store.listDeliveries(accountId, 10_000_000)).map((d) => [d.taskId, d]));
  const phaseReceipts = receipts.filter((r) => byId.has(r.requestId));
  const receiptsByTask = new Map<string, typeof receipts>();
  for (const r of phaseReceipts) receiptsByTask.set(r.requestId, [...(receiptsByTask.get(r.requestId) ?? []), r]);
  const answeredInTime = (r: (typeof receipts)[number]) => r.answered >= 200 && r.answered < 300;
  let webhooksMissing = 0;
  let webhookIdConflicts = 0;
  let webhookStatusMismatches = 0;
  let repeatedDeliveries = 0;
  for (const t of tasks) {
    if (!t.webhookUrl || !isTerminal(t.status)) continue;
    const mine = receiptsByTask.get(t.id) ?? [];
    if (!mine.some(answeredInTime) || deliveries.get(t.id)?.status !== 'delivered') webhooksMissing++;
    const ids = new Set(mine.map((r) => r.webhookId));
    const deliveryId = deliveries.get(t.id)?.id;
    if (ids.size > 1 || (deliveryId && mine.some((r) => r.webhookId !== deliveryId))) webhookIdConflicts++;
    if (mine.some((r) => r.type !== `video.generation.${t.status}` || (JSON.parse(r.body) as { data: { status: TaskState } }).data.status !== t.status)) webhookStatusMismatches++;
    repeatedDeliveries += mine.filter(answeredInTime).length > 1 ? 1 : 0;
  }
  const unexpectedWebhooks = phaseReceipts.filter((r) => !byId.get(r.requestId)?.webhookUrl).length;
  const badSignatures = phaseReceipts.filter((r) => !r.signatureValid).length;
  const settledDeliveries = [...deliveries.values()].filter((d) => d.status !== 'pending').length;

  const sent = Object.values(requests).reduce((sum, row) => sum + row['2xx'] + row['4xx'] + row['5xx'] + row['network error'], 0);
  const report: PhaseReport = {
    store: kind === 'postgres' ? 'PostgreSQL (2 api + 2 worker processes)' : 'SQLite (1 process, role all)',
    seed: SEED,
    minutes: MINUTES,
    clients: CLIENTS,
    requests,
    figures: {
      'requests sent': sent,
      '5xx answers': Object.values(requests).reduce((sum, row) => sum + row['5xx'], 0),
      'network errors (kills)': Object.values(requests).reduce((sum, row) => sum + row['network error'], 0),
      'requests given up after retries': figures.gaveUp,
      'tasks accepted (202)': figures.accepted,
      'submits unacknowledged (no key, connection lost)': figures.unacknowledgedSubmits,
      'tasks in the store': tasks.length,
      'of which never acknowledged (answer lost)': tasks.filter((t) => !accepted.has(t.id)).length,
      'replays answered with the same task': figures.replaysMatched,
      'webhooks received (POSTs)': phaseReceipts.length,
      'tasks whose webhook came more than once (same id)': repeatedDeliveries,
      'deliveries settled in the store': settledDeliveries,
      'process kills (SIGKILL)': slots.reduce((sum, s) => sum + s.kills, 0),
      'generation jobs claimed again (kills mid-run)': await reclaimedGenerationJobs(backend),
      'drain seconds': Number(drainSeconds.toFixed(1)),
      // Must be 0:
      'tasks lost': lost.length,
      'double charges': doubleCharges,
      'duplicate tasks for one submission': duplicateTasks,
      'ledger mismatches': ledgerMismatches,
      'idempotency mismatches': figures.idempotencyMismatches,
      'stuck tasks': stuck.length,
      'webhooks missing': webhooksMissing,
      'duplicate webhooks with different webhook-ids': webhookIdConflicts,
      'webhooks with the wrong status': webhookStatusMismatches,
      'webhooks with a bad signature': badSignatures,
      'webhooks for tasks without a webhookUrl': unexpectedWebhooks,
      'unexpected process exits': processExits.length,
    },
    tasksByStatus,
    failedByCode,
    kills: Object.fromEntries(slots.map((s) => [s.name, s.kills])),
    receiverAnswers: phaseReceipts.reduce<Record<string, number>>((counts, r) => ({ ...counts, [r.answer]: (counts[r.answer] ?? 0) + 1 }), {}),
    details: Object.entries(unexpectedCounts)
      .map(([label, n]) => `${n} × ${label}`)
      .concat(unexpectedAnswers.map((example) => `  e.g. ${example}`)),
    processExits,
    mustBeZero: [
      'tasks lost',
      'double charges',
      'duplicate tasks for one submission',
      'ledger mismatches',
      'idempotency mismatches',
      'stuck tasks',
      'webhooks missing',
      'duplicate webhooks with different webhook-ids',
      'webhooks with the wrong status',
      'webhooks with a bad signature',
      'webhooks for tasks without a webhookUrl',
      'unexpected process exits',
    ],
  };
  if (lost.length) report.details.push(`lost, e.g.: ${lost.slice(0, 5).join(', ')}`);
  if (stuck.length) report.details.push(`stuck, e.g.: ${stuck.slice(0, 5).map((t) => `${t.id} ${t.status}`).join(', ')}`);

  return report;
}

/** Generation jobs claimed more than once: work a kill interrupted, taken back after its lease. */
async function reclaimedGenerationJobs(backend: Backend): Promise<number> {
  if (backend.store instanceof PgStore) {
    const { rows } = await backend.store.pool.query(
      `SELECT count(*)::int AS n FROM (SELECT name, retry_count FROM pgboss.job UNION ALL SELECT name, retry_count FROM pgboss.archive) j
       WHERE name LIKE 'vidgen-%' AND name <> 'vidgen-webhooks' AND retry_count > 0`,
    );
    return rows[0].n as number;
  }
  if (backend.store instanceof SqliteStore) return backend.store.db.prepare("SELECT count(*) FROM jobs WHERE kind = 'generate' AND attempts > 1").pluck().get() as number;
  return 0;
}

function print(report: PhaseReport): void {
  console.log(`\n${report.store}: ${report.minutes} min, ${report.clients} clients, seed ${report.seed}`);
  console.log(`Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}.`);
  console.log('\nRequests by operation and answer:');
  console.table(report.requests);
  console.log(`Tasks by status: ${JSON.stringify(report.tasksByStatus)}; failed by code: ${JSON.stringify(report.failedByCode)}`);
  console.log(`Kills: ${JSON.stringify(report.kills)}; webhook receiver answered: ${JSON.stringify(report.receiverAnswers)}\n`);
  const width = Math.max(...Object.keys(report.figures).map((name) => name.length));
  for (const [name, value] of Object.entries(report.figures)) {
    const verdict = report.mustBeZero.includes(name) ? (value === 0 ? '  ok (must be 0)' : '  FAIL (must be 0)') : '';
    console.log(`  ${name.padEnd(width)}  ${String(value).padStart(8)}${verdict}`);
  }
  if (report.details.length) console.log(`Details:\n${report.details.join('\n')}`);
  if (report.processExits.length) console.log(`Unexpected exits:\n${report.processExits.join('\n')}`);
  console.log(`(${percent(report.figures['5xx answers']!, report.figures['requests sent']!)} of requests answered 5xx.)`);
}

const reports: PhaseReport[] = [];
try {
  for (const kind of STORES) {
    if (kind === 'postgres' && !(await postgresAvailable())) {
      console.log('PostgreSQL is not reachable: the PostgreSQL phase is skipped.');
      continue;
    }
    reports.push(await runPhase(kind));
  }
} finally {
  await receiver.close();
}

for (const report of reports) print(report);
if (args.out) {
  writeFileSync(resolve(process.env.INIT_CWD ?? process.cwd(), args.out), `${JSON.stringify({ at: new Date().toISOString(), reports }, null, 2)}\n`);
  console.log(`\nWrote ${args.out}.`);
}
const failures = reports.flatMap((r) => r.mustBeZero.filter((name) => r.figures[name] !== 0).map((name) => `${r.store}: ${name} = ${r.figures[name]}`));
if (!reports.length) failures.push('nothing ran');
console.log(failures.length ? `\nSOAK FAILED:\n${failures.join('\n')}` : '\nSoak passed: every must-be-0 figure is 0.');
process.exit(failures.length ? 1 : 0);
