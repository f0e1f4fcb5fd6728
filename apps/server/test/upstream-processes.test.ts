/**
 * The upstream path as an operator runs it: real server processes (the built `dist/main.js`) on SQLite and on
 * PostgreSQL, every model routed to `byteplus`, in front of loopback stand-ins of the upstream's task
 * API (one per channel, i.e. per upstream account). What must hold: an upstream task is created once
 * per task whatever the restarts (SIGKILL, SIGTERM), a failing channel's tasks land on another,
 * full channels keep tasks queued until a slot frees, and a create whose answer is lost is never
 * sent again.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger, until } from './support.js';
import { type BytePlusStandin, errorReply, makeTestVideo, scripts, startBytePlusStandin } from './support/byteplus-standin.js';
import { startServerProcess, stopServerProcess, type ServerProcess } from './support/pipeline-processes.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';
import { openBackend } from '../src/store/open.js';

const TASKS = '/contents/generations/tasks';
const SUBMIT = '/api/open/v1/video/generations';
const MODELS = { 'vidgen-2.0': 'dreamina-seedance-2-0-260128', 'vidgen-2.0-fast': 'dreamina-seedance-2-0-fast-260128', 'vidgen-1.5-pro': 'seedance-1-5-pro-251215' };
const ALL_BYTEPLUS = JSON.stringify({ 'vidgen-2.0': 'byteplus', 'vidgen-2.0-fast': 'byteplus', 'vidgen-1.5-pro': 'byteplus' });

let dir: string;
let video: Buffer;
const children: ChildProcess[] = [];
const cleanups: (() => Promise<unknown> | void)[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-upstream-processes-'));
  video = readFileSync(await makeTestVideo(dir));
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const cleanup of cleanups.reverse()) await cleanup();
  rmSync(dir, { recursive: true, force: true });
});

async function standin(apiKey: string): Promise<BytePlusStandin> {
  const s = await startBytePlusStandin({ apiKey, video });
  cleanups.push(() => s.close());
  return s;
}

interface Store {
  name: string;
  skip: boolean;
  /** A fresh database for one test: its VIDGEN_DATABASE_URL. */
  database(): Promise<string>;
}

const stores: Store[] = [
  {
    name: 'SQLite',
    skip: false,
    database: async () => `sqlite:${join(mkdtempSync(join(dir, 'db-')), 'vidgen.db')}`,
  },
  {
    name: 'PostgreSQL',
    skip: !hasPostgres,
    async database() {
      const database = await createTestDatabase();
      cleanups.push(() => database.drop());
      return database.url;
    },
  },
];

function serviceEnv(databaseUrl: string, extra: Record<string, string>): Record<string, string> {
  return {
    VIDGEN_DATABASE_URL: databaseUrl,
    VIDGEN_DATA_DIR: mkdtempSync(join(dir, 'data-')),
    VIDGEN_LOG_LEVEL: 'silent',
    PORT: '0',
    HOST: '127.0.0.1',
    VIDGEN_PROVIDERS: ALL_BYTEPLUS,
    VIDGEN_RATE_LIMIT_SUBMITS: '0',
    VIDGEN_RATE_LIMIT_READS: '0',
    VIDGEN_MAX_ACTIVE_TASKS: '0',
    VIDGEN_JOB_LEASE_SECONDS: '2',
    VIDGEN_UPSTREAM_POLL_SECONDS: '1',
    VIDGEN_SHUTDOWN_GRACE_SECONDS: '5',
    ...extra,
  };
}

async function start(env: Record<string, string>): Promise<ServerProcess> {
  const server = await startServerProcess('all', env, { onSpawn: (child) => children.push(child) });
  return server;
}

/** The development key the first start printed. */
const devKey = (server: ServerProcess) => /(vg_test_[0-9A-Za-z]{38})/.exec(server.output())![1]!;

function client(baseUrl: string, key: string) {
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { ...((await res.json()) as object), httpStatus: res.status };
  };
}

async function submitMany(api: ReturnType<typeof client>, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const answer = await api('POST', SUBMIT, { model: 'vidgen-2.0-fast', prompt: `upstream task ${i}`, duration: 5 });
    expect(answer.httpStatus).toBe(202);
    ids.push(answer.requestId);
  }
  return ids;
}

/** Long polls each task until it is terminal. */
async function settle(api: ReturnType<typeof client>, ids: string[]): Promise<any[]> {
  return Promise.all(
    ids.map(async (id) => {
      for (;;) {
        const task = await api('GET', `${SUBMIT}/${id}?wait=20`);
        if (['succeeded', 'failed', 'cancelled'].includes(task.status)) return task;
      }
    }),
  );
}

/** Waits for the tasks to reach `status` (long polls wake at once on a change). */
async function allReach(api: ReturnType<typeof client>, ids: string[], status: string): Promise<void> {
  await Promise.all(
    ids.map(async (id) => {
      for (let task = await api('GET', `${SUBMIT}/${id}`); task.status !== status; ) task = await api('GET', `${SUBMIT}/${id}?wait=20`);
    }),
  );
}

/** Reads the store the processes shared: charges, refunds and the ledger of every account. */
async function audit(databaseUrl: string, ids: string[] = []) {
  const kind = databaseUrl.startsWith('sqlite:') ? ({ kind: 'sqlite', path: databaseUrl.slice(7) } as const) : ({ kind: 'postgres', url: databaseUrl, poolSize: 2 } as const);
  const backend = await openBackend({ database: kind, jobLeaseMs: 2_000 }, { logger: silentLogger, listen: false, supervise: false });
  try {
    const accounts = await backend.store.listAccounts();
    const ledger = (await Promise.all(accounts.map((a) => backend.store.listLedger(a.id)))).flat();
    const audits = await Promise.all(accounts.map((a) => backend.store.auditBalance(a.id)));
    return {
      charges: ledger.filter((e) => e.kind === 'charge').length,
      refunds: ledger.filter((e) => e.kind === 'refund').length,
      balanced: audits.every((a) => a && a.balance === a.ledgerSum),
      channels: await backend.store.listUpstreamChannels(),
      upstream: await Promise.all(ids.map((id) => backend.store.getUpstreamTask(id))),
    };
  } finally {
    await backend.close();
  }
}

const waitExit = (child: ChildProcess) => new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

describe.each(stores)('upstream tasks on $name', ({ skip, database }) => {
  it.skipIf(skip)('creates 50 upstream tasks once through a SIGKILL and a SIGTERM, every task succeeded and charged once', async () => {
    const upstream = await standin('ark-restarts');
    for (let i = 0; i < 50; i++) upstream.enqueue(scripts.held());
    const databaseUrl = await database();
    const env = serviceEnv(databaseUrl, { VIDGEN_BYTEPLUS_API_KEY: 'ark-restarts', VIDGEN_BYTEPLUS_BASE_URL: upstream.baseUrl, VIDGEN_BYTEPLUS_MODELS: JSON.stringify(MODELS) });

    const first = await start(env);
    const key = devKey(first);
    const ids = await submitMany(client(first.baseUrl, key), 50);
    await allReach(client(first.baseUrl, key), ids, 'processing');
    expect(upstream.createdTasks()).toHaveLength(50);

    // A crash while all 50 run upstream, then a deploy (SIGTERM drains and exits 0).
    const killed = waitExit(first.child);
    first.child.kill('SIGKILL');
    await killed;
    const second = await start(env);
    // The restarted follower queries the tasks again (without creating any) before it is stopped.
    const listedBefore = upstream.listed().length;
    await upstream.received('GET', TASKS, upstream.requestsTo('GET', TASKS).length + 1);
    expect(upstream.listed().length).toBeGreaterThan(listedBefore);
    const drained = waitExit(second.child);
    second.child.kill('SIGTERM');
    expect(await drained).toBe(0);

    const third = await start(env);
    upstream.finish();
    const finals = await settle(client(third.baseUrl, key), ids);
    expect(finals.map((t) => t.status)).toEqual(ids.map(() => 'succeeded'));
    expect(upstream.createdTasks()).toHaveLength(50);
    expect(upstream.requestsTo('POST', TASKS)).toHaveLength(50);
    await stopServerProcess(third.child);

    const store = await audit(databaseUrl, ids);
    expect(store).toMatchObject({ charges: 50, refunds: 0, balanced: true });
    expect(new Set(store.upstream.map((u) => u?.upstreamId)).size).toBe(50);
    expect(store.upstream[0]).toMatchObject({ channel: 'byteplus', state: 'ended', outcome: 'succeeded', usage: { completionTokens: 108900, totalTokens: 108900 } });
  });

  it.skipIf(skip)('sends every task to the other channel when one refuses every create (429, then 500), failing none', async () => {
    const refusing = await standin('ark-refusing');
    const healthy = await standin('ark-healthy');
    const databaseUrl = await database();
    const channels = [
      { name: 'refusing', baseUrl: refusing.baseUrl, apiKeyEnv: 'REFUSING_KEY', models: MODELS, maxInFlight: 50, priority: 0 },
      { name: 'healthy', baseUrl: healthy.baseUrl, apiKeyEnv: 'HEALTHY_KEY', models: MODELS, maxInFlight: 50, priority: 1 },
    ];
    const env = serviceEnv(databaseUrl, { VIDGEN_UPSTREAM_CHANNELS: JSON.stringify(channels), REFUSING_KEY: 'ark-refusing', HEALTHY_KEY: 'ark-healthy' });
    const server = await start(env);
    const api = client(server.baseUrl, devKey(server));

    refusing.configure({ createReply: errorReply(429, 'ServerOverloaded', 'Too many requests.', 'TooManyRequests') });
    const first = await settle(api, await submitMany(api, 5));
    refusing.configure({ createReply: errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError') });
    const second = await settle(api, await submitMany(api, 5));

    expect([...first, ...second].map((t) => t.status)).toEqual(Array(10).fill('succeeded'));
    expect(refusing.createdTasks()).toHaveLength(0);
    expect(healthy.createdTasks()).toHaveLength(10);
    // Three failures in a row put the refusing channel in a cool-down: it is skipped, not asked every time.
    expect(refusing.requestsTo('POST', TASKS).length).toBeLessThan(10);
    await stopServerProcess(server.child);
    const store = await audit(databaseUrl);
    expect(store).toMatchObject({ charges: 10, refunds: 0, balanced: true });
    const byName = new Map(store.channels.map((c) => [c.name, c]));
    expect(byName.get('healthy')).toMatchObject({ creates: 10, inFlight: 0 });
    expect(byName.get('refusing')!.createFailures).toBeGreaterThanOrEqual(3);
  });

  it.skipIf(skip)('keeps tasks queued while both channels are full, and runs them all as slots free', async () => {
    const a = await standin('ark-a');
    const b = await standin('ark-b');
    for (let i = 0; i < 8; i++) (i % 2 ? b : a).enqueue(scripts.held());
    const databaseUrl = await database();
    const channels = [
      { name: 'a', baseUrl: a.baseUrl, apiKeyEnv: 'A_KEY', models: MODELS, maxInFlight: 2 },
      { name: 'b', baseUrl: b.baseUrl, apiKeyEnv: 'B_KEY', models: MODELS, maxInFlight: 2 },
    ];
    // The stand-ins would answer 429 past 2: admission must keep each account under it instead.
    a.configure({ maxActive: 2 });
    b.configure({ maxActive: 2 });
    const server = await start(serviceEnv(databaseUrl, { VIDGEN_UPSTREAM_CHANNELS: JSON.stringify(channels), A_KEY: 'ark-a', B_KEY: 'ark-b' }));
    const api = client(server.baseUrl, devKey(server));
    const ids = await submitMany(api, 8);

    await a.received('POST', TASKS, 2);
    await b.received('POST', TASKS, 2);
    const statuses = async () => Promise.all(ids.map(async (id) => (await api('GET', `${SUBMIT}/${id}`)).status as string));
    // A create the stand-in has received is recorded (the task `processing`) a moment later.
    await until(async () => (await statuses()).filter((s) => s === 'processing').length >= 4);
    let now = await statuses();
    expect(now.filter((s) => s === 'processing')).toHaveLength(4);
    expect(now.filter((s) => s === 'queued')).toHaveLength(4);

    // Slots free one channel's worth at a time; the waiting tasks take them.
    while (a.createdTasks().length + b.createdTasks().length < 8) {
      const held = [...a.createdTasks(), ...b.createdTasks()].length;
      a.finish();
      b.finish();
      await Promise.race([a.received('POST', TASKS, a.requestsTo('POST', TASKS).length + 1), b.received('POST', TASKS, b.requestsTo('POST', TASKS).length + 1)]);
      expect([...a.createdTasks(), ...b.createdTasks()].length).toBeGreaterThan(held);
    }
    a.finish();
    b.finish();
    now = (await settle(api, ids)).map((t) => t.status);
    expect(now).toEqual(Array(8).fill('succeeded'));
    expect([...a.requestsTo('POST', TASKS), ...b.requestsTo('POST', TASKS)]).toHaveLength(8);
    await stopServerProcess(server.child);
  });

  it.skipIf(skip)('never sends a create twice when its answer is lost: timed out, or the process killed while it waited', async () => {
    const upstream = await standin('ark-hangs');
    upstream.configure({ createHangsAfterAccept: true });
    const databaseUrl = await database();
    const env = serviceEnv(databaseUrl, {
      VIDGEN_BYTEPLUS_API_KEY: 'ark-hangs',
      VIDGEN_BYTEPLUS_BASE_URL: upstream.baseUrl,
      VIDGEN_BYTEPLUS_MODELS: JSON.stringify(MODELS),
      VIDGEN_UPSTREAM_REQUEST_TIMEOUT_MS: '500',
    });
    const first = await start(env);
    const key = devKey(first);
    const api = client(first.baseUrl, key);
    const [timedOut] = await submitMany(api, 1);
    const [task] = await settle(api, [timedOut!]);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'provider_error' }, creditsRefunded: task.creditsCharged });
    expect(task.error.message).toMatch(/not created twice/);
    expect(upstream.createdTasks()).toHaveLength(1);

    // Killed while its create waits for an answer: the restart finds the slot taken and the id unknown.
    const [interrupted] = await submitMany(api, 1);
    await upstream.received('POST', TASKS, 2);
    const killed = waitExit(first.child);
    first.child.kill('SIGKILL');
    await killed;
    const second = await start(env);
    const [after] = await settle(client(second.baseUrl, key), [interrupted!]);
    expect(after).toMatchObject({ status: 'failed', error: { code: 'provider_error' } });
    expect(upstream.requestsTo('POST', TASKS)).toHaveLength(2);
    const metrics = await (await fetch(`${second.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/vidgen_upstream_lost_creates\{channel="byteplus"\} 2/);
    await stopServerProcess(second.child);

    const store = await audit(databaseUrl, [interrupted!]);
    expect(store).toMatchObject({ charges: 2, refunds: 2, balanced: true });
    expect(store.upstream[0]).toMatchObject({ state: 'ended', outcome: 'lost' });
  });
});
