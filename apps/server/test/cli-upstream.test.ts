/**
 * What operators see of the upstream: `vidgen channels`, `vidgen upstream report` and the upstream part of
 * `vidgen tasks show` (the CLI run as a process over a SQLite file filled through the Store port), and the
 * channels' gauges in /metrics. No channel key ever appears in either: every CLI run is checked for both.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../src/http/metrics.js';
import { openBackend } from '../src/store/open.js';
import type { NewTask, Store } from '../src/store/store.js';
import { newTask, silentLogger } from './support.js';

const root = resolve(import.meta.dirname, '..');
const tsx = join(root, 'node_modules/.bin/tsx');
const KEY_A = 'secret-key-value';
const KEY_B = 'secret-b-value';
const at = new Date('2026-11-22T10:00:00.000Z');
const later = (ms: number) => new Date(at.getTime() + ms);
/** Long enough that bp-b is still cooling down whenever the test runs (the CLI reads the real clock). */
const CENTURY_MS = 100 * 365 * 24 * 3600_000;

const channelsJson = JSON.stringify([
  { name: 'bp-a', apiKeyEnv: 'BP_A_KEY', models: { 'vidgen-2.0': 'dreamina-seedance-2-0-260128', 'vidgen-2.0-fast': 'seedance-fast' }, maxInFlight: 5 },
  { name: 'bp-b', kind: 'volcengine', apiKeyEnv: 'BP_B_KEY', models: { 'vidgen-2.0': 'doubao-seedance-2-0' }, maxInFlight: 3, priority: 1, weight: 2 },
]);

/**
 * The story the views tell, written through the Store port:
 * bp-a: gen1 succeeded (after one failed download), gen2 failed upstream, gen3 following (after bp-b refused it),
 *       gen5 cancelled then finished upstream (discarded), gen6's create lost;
 * bp-b: one refused create, whose error quotes its key, and a cool-down;
 * old-ch (no longer configured): one refused create; gen4 never went upstream.
 */
async function fill(store: Store) {
  await store.createAccount({ id: 'acc_ops', name: 'ops', webhookSecret: 'whsec_x', openingGrant: 1_000, now: at });
  let n = 0;
  const submit = async (price: number, patch: Partial<NewTask> = {}) => {
    const created = later(++n * 1_000);
    const task = newTask('acc_ops', price, created, { deadlineAt: later(3600_000), ...patch });
    const outcome = await store.submitTask({ task, job: { maxAttempts: 3, provider: 'byteplus' }, idempotency: null, now: created, respond: () => ({ status: 202, body: {} }) });
    if (outcome.kind !== 'created') throw new Error(`not created: ${outcome.kind}`);
    return task.id;
  };
  const reserve = async (taskId: string, channel: string) => {
    const outcome = await store.reserveUpstream({ taskId, channels: [{ name: channel, limit: 100 }], now: later(10_000) });
    if (outcome.kind !== 'reserved') throw new Error(`not reserved: ${outcome.kind}`);
  };
  const created = (taskId: string, upstreamId: string) => store.recordUpstreamCreated({ taskId, upstreamId, now: later(11_000), nextCheckAt: later(16_000) });
  const output = (taskId: string) => ({ outputKey: `${taskId}.mp4`, outputUrl: 'https://files.example.com/x.mp4', outputExpiresAt: later(3600_000) });

  const gen1 = await submit(30);
  await reserve(gen1, 'bp-a');
  await created(gen1, 'cgt-1');
  await store.markUpstreamSucceeded({ taskId: gen1, videoUrl: 'https://upstream.example.com/1.mp4?X-Signature=abc', usage: { completionTokens: 100, totalTokens: 120 }, now: later(20_000) });
  await store.retryUpstreamDownload({ taskId: gen1, now: later(21_000), nextAt: later(22_000), error: 'download: HTTP 503' });
  await store.endUpstream({ taskId: gen1, now: later(23_000), outcome: 'succeeded', complete: output(gen1) });

  const gen2 = await submit(20);
  await reserve(gen2, 'bp-a');
  await created(gen2, 'cgt-2');
  await store.endUpstream({ taskId: gen2, now: later(30_000), outcome: 'failed', upstreamStatus: 'failed', error: 'OutputVideoSensitiveContentDetected', fail: { code: 'provider_error', message: 'refused upstream' } });

  const gen3 = await submit(5, { model: 'vidgen-2.0-fast' });
  await reserve(gen3, 'bp-b');
  await store.releaseUpstreamReservation({ taskId: gen3, channel: 'bp-b', error: `401 the API key ${KEY_B} is invalid`, now: later(12_000), countFailure: true, cooldownAfter: 1, cooldownMs: CENTURY_MS });
  await reserve(gen3, 'bp-a');
  await created(gen3, 'cgt-3');

  const gen4 = await submit(8);
  await reserve(gen4, 'old-ch');
  await store.releaseUpstreamReservation({ taskId: gen4, channel: 'old-ch', error: 'HTTP 503', now: later(13_000), countFailure: true, cooldownAfter: 3, cooldownMs: 60_000 });

  const gen5 = await submit(10);
  await reserve(gen5, 'bp-a');
  await created(gen5, 'cgt-5');
  await store.cancelTask({ accountId: 'acc_ops', id: gen5, now: later(40_000) });
  await store.markUpstreamSucceeded({ taskId: gen5, videoUrl: 'https://upstream.example.com/5.mp4', usage: { completionTokens: 50, totalTokens: 60 }, now: later(41_000) });
  await store.endUpstream({ taskId: gen5, now: later(42_000), outcome: 'succeeded', complete: output(gen5) });

  const gen6 = await submit(15);
  await reserve(gen6, 'bp-a');
  await store.endUpstream({ taskId: gen6, now: later(50_000), outcome: 'lost', error: 'create timed out', fail: { code: 'provider_error', message: 'create lost' } });

  return { gen1, gen3, gen4 };
}

describe('the operator CLI on the upstream', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  let ids: Awaited<ReturnType<typeof fill>>;

  async function vidgen(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let result: { code: number; stdout: string; stderr: string };
    try {
      const { stdout, stderr } = await promisify(execFile)(tsx, ['src/cli/main.ts', ...args], { cwd: root, env });
      result = { code: 0, stdout, stderr };
    } catch (error) {
      const e = error as { code: number; stdout: string; stderr: string };
      result = { code: e.code, stdout: e.stdout, stderr: e.stderr };
    }
    // Whatever the command, no channel key is ever printed.
    for (const key of [KEY_A, KEY_B]) expect(result.stdout + result.stderr).not.toContain(key);
    return result;
  }
  const json = async (...args: string[]) => {
    const { code, stdout, stderr } = await vidgen(...args, '--json');
    if (code !== 0) throw new Error(`vidgen ${args.join(' ')} exited ${code}: ${stderr}`);
    return JSON.parse(stdout);
  };

  beforeAll(async () => {
    // Made here rather than at collection, so that a run filtered to other tests leaves nothing behind.
    dir = mkdtempSync(join(tmpdir(), 'vidgen-cli-upstream-'));
    env = {
      ...process.env,
      VIDGEN_DATABASE_URL: `sqlite:${join(dir, 'vidgen.db')}`,
      VIDGEN_LOG_LEVEL: 'silent',
      VIDGEN_UPSTREAM_CHANNELS: channelsJson,
      BP_A_KEY: KEY_A,
      BP_B_KEY: KEY_B,
    };
    const backend = await openBackend({ database: { kind: 'sqlite', path: join(dir, 'vidgen.db') }, jobLeaseMs: 60_000 }, { logger: silentLogger, listen: false, supervise: false });
    try {
      ids = await fill(backend.store);
    } finally {
      await backend.close();
    }
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists the configured channels with the store’s counts and health, then a channel no longer configured', async () => {
    const channels = await json('channels');
    expect(channels).toEqual([
      {
        name: 'bp-a',
        configured: true,
        kind: 'byteplus',
        baseUrl: 'https://ark.ap-southeast.bytepluses.com/api/v3',
        models: { 'vidgen-2.0': 'dreamina-seedance-2-0-260128', 'vidgen-2.0-fast': 'seedance-fast' },
        inFlight: 1,
        limit: 5,
        priority: 0,
        weight: 1,
        state: 'ok',
        cooldownUntil: null,
        consecutiveFailures: 0,
        lastError: null,
        lastErrorAt: null,
        creates: 4,
        createFailures: 0,
        lostCreates: 1,
        discardedResults: 1,
      },
      {
        name: 'bp-b',
        configured: true,
        kind: 'volcengine',
        baseUrl: 'https://ark.cn-beijing.volces.com/api/v3',
        models: { 'vidgen-2.0': 'doubao-seedance-2-0' },
        inFlight: 0,
        limit: 3,
        priority: 1,
        weight: 2,
        state: 'cooling_down',
        cooldownUntil: new Date(later(12_000).getTime() + CENTURY_MS).toISOString(),
        consecutiveFailures: 1,
        lastError: '401 the API key [key] is invalid',
        lastErrorAt: later(12_000).toISOString(),
        creates: 0,
        createFailures: 1,
        lostCreates: 0,
        discardedResults: 0,
      },
      {
        name: 'old-ch',
        configured: false,
        kind: null,
        baseUrl: null,
        models: null,
        inFlight: 0,
        limit: null,
        priority: null,
        weight: null,
        state: 'failing',
        cooldownUntil: null,
        consecutiveFailures: 1,
        lastError: 'HTTP 503',
        lastErrorAt: later(13_000).toISOString(),
        creates: 0,
        createFailures: 1,
        lostCreates: 0,
        discardedResults: 0,
      },
    ]);
    const { code, stdout } = await vidgen('channels');
    expect(code).toBe(0);
    expect(stdout).toContain('bp-a  byteplus  https://ark.ap-southeast.bytepluses.com/api/v3');
    expect(stdout).toContain('in flight     1 of 5   priority 0   weight 1');
    expect(stdout).toContain(`state         cooling down until ${new Date(later(12_000).getTime() + CENTURY_MS).toISOString()}`);
    expect(stdout).toContain('old-ch  (not configured)');
    expect(stdout).toContain('state         failing (1 in a row)');
    expect(stdout).toContain('creates       4   create failures 0   lost creates 1   discarded results 1');
  });

  it('reports usage and credits per channel and model, with a total', async () => {
    const report = await json('upstream', 'report', '--from', '2026-11-22T00:00:00Z', '--to', '2026-11-23T00:00:00Z');
    expect(report).toEqual({
      from: '2026-11-22T00:00:00.000Z',
      to: '2026-11-23T00:00:00.000Z',
      rows: [
        // gen1, gen2, gen5, gen6 (gen4 never went upstream).
        { channel: 'bp-a', model: 'vidgen-2.0', tasks: 4, succeeded: 1, completionTokens: 150, totalTokens: 180, creditsCharged: 75, creditsRefunded: 45, creditsKept: 30 },
        { channel: 'bp-a', model: 'vidgen-2.0-fast', tasks: 1, succeeded: 0, completionTokens: 0, totalTokens: 0, creditsCharged: 5, creditsRefunded: 0, creditsKept: 5 },
      ],
      total: { tasks: 5, succeeded: 1, completionTokens: 150, totalTokens: 180, creditsCharged: 80, creditsRefunded: 45, creditsKept: 35 },
    });
    const { stdout } = await vidgen('upstream', 'report', '--from', '2026-11-22T00:00:00Z', '--to', '2026-11-23T00:00:00Z');
    expect(stdout.split('\n').slice(1, 5)).toEqual([
      'channel  model            tasks  succeeded  completion tokens  total tokens  credits charged  refunded  kept',
      'bp-a     vidgen-2.0           4          1                150           180               75        45    30',
      'bp-a     vidgen-2.0-fast      1          0                  0             0                5         0     5',
      'total                         5          1                150           180               80        45    35',
    ]);
    // A range with nothing in it: only the total, of zeros.
    expect((await json('upstream', 'report', '--from', '2026-11-23T00:00:00Z', '--to', '2026-11-24T00:00:00Z')).rows).toEqual([]);
  });

  it('defaults the report to the 24 hours up to now, and refuses a range that is not one', async () => {
    const before = Date.now();
    const report = await json('upstream', 'report');
    const to = Date.parse(report.to);
    expect(to).toBeGreaterThanOrEqual(before);
    expect(to).toBeLessThanOrEqual(Date.now());
    expect(to - Date.parse(report.from)).toBe(24 * 3600_000);
    expect(await vidgen('upstream', 'report', '--from', 'yesterday')).toMatchObject({ code: 2, stderr: expect.stringContaining('--from must be an ISO 8601') });
    expect(await vidgen('upstream', 'report', '--from', '2026-11-23T00:00:00Z', '--to', '2026-11-22T00:00:00Z')).toMatchObject({ code: 2, stderr: expect.stringContaining('--from must be before --to') });
  });

  it('shows a task’s upstream part, and null for a task that never went upstream', async () => {
    const shown = await json('tasks', 'show', ids.gen1);
    expect(shown).toMatchObject({ requestId: ids.gen1, status: 'succeeded', accountId: 'acc_ops' });
    expect(shown.upstream).toEqual({
      channel: 'bp-a',
      upstreamId: 'cgt-1',
      upstreamStatus: 'succeeded',
      state: 'ended',
      outcome: 'succeeded',
      usage: { completionTokens: 100, totalTokens: 120 },
      downloadAttempts: 1,
      lastError: 'download: HTTP 503',
      nextCheckAt: null,
      createdAt: later(10_000).toISOString(),
      updatedAt: later(23_000).toISOString(),
      endedAt: later(23_000).toISOString(),
    });
    expect((await json('tasks', 'show', ids.gen3)).upstream).toMatchObject({ channel: 'bp-a', upstreamId: 'cgt-3', upstreamStatus: 'queued', state: 'following', outcome: null, usage: null, endedAt: null });
    expect((await json('tasks', 'show', ids.gen4)).upstream).toBeNull();
    const { stdout } = await vidgen('tasks', 'show', ids.gen1);
    expect(stdout).toContain('upstream: bp-a  cgt-1  succeeded\n  state ended, outcome succeeded');
    expect(stdout).toContain('usage 100 completion / 120 total tokens');
    expect(stdout).not.toContain('X-Signature');
  });

  it('lists the new commands in its usage', async () => {
    const { stdout } = await vidgen('--help');
    expect(stdout).toContain('\n  channels ');
    expect(stdout).toContain('\n  upstream report [--from ISO] [--to ISO]');
  });
});

describe('the upstream gauges in /metrics', () => {
  const configured = [
    { name: 'bp-a', maxInFlight: 5 },
    { name: 'bp-b', maxInFlight: 3 },
    { name: 'bp-idle', maxInFlight: 7 },
  ];
  let store: Store;
  let close: () => Promise<void>;
  let reads = 0;

  beforeAll(async () => {
    const backend = await openBackend({ database: { kind: 'sqlite', path: ':memory:' }, jobLeaseMs: 60_000 }, { logger: silentLogger, listen: false, supervise: false });
    close = backend.close;
    await fill(backend.store);
    const inner = backend.store;
    store = new Proxy(inner, {
      get(target, property) {
        if (property === 'listUpstreamChannels') {
          return () => {
            reads++;
            return target.listUpstreamChannels();
          };
        }
        const value = Reflect.get(target, property);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
  });
  afterAll(async () => {
    await close?.();
  });

  /** Every `name{channel="…"} value` sample of the scrape, as channel → value. */
  const samples = (text: string, name: string) =>
    Object.fromEntries([...text.matchAll(new RegExp(`^${name}\\{channel="([^"]+)"\\} (\\S+)$`, 'gm'))].map(([, channel, value]) => [channel, Number(value)]));

  it('exports each channel’s limit, in flight, health and counts from one store read per scrape', async () => {
    const metrics = createMetrics(store, { processMetrics: false, channels: configured, clock: { now: () => later(60_000) } });
    reads = 0;
    const text = await metrics.registry.metrics();
    expect(reads).toBe(1);
    expect(samples(text, 'vidgen_upstream_limit')).toEqual({ 'bp-a': 5, 'bp-b': 3, 'bp-idle': 7 });
    expect(samples(text, 'vidgen_upstream_in_flight')).toEqual({ 'bp-a': 1, 'bp-b': 0, 'bp-idle': 0, 'old-ch': 0 });
    expect(samples(text, 'vidgen_upstream_consecutive_failures')).toEqual({ 'bp-a': 0, 'bp-b': 1, 'bp-idle': 0, 'old-ch': 1 });
    expect(samples(text, 'vidgen_upstream_cooling_down')).toEqual({ 'bp-a': 0, 'bp-b': 1, 'bp-idle': 0, 'old-ch': 0 });
    expect(samples(text, 'vidgen_upstream_creates')).toEqual({ 'bp-a': 4, 'bp-b': 0, 'bp-idle': 0, 'old-ch': 0 });
    expect(samples(text, 'vidgen_upstream_create_failures')).toEqual({ 'bp-a': 0, 'bp-b': 1, 'bp-idle': 0, 'old-ch': 1 });
    expect(samples(text, 'vidgen_upstream_lost_creates')).toEqual({ 'bp-a': 1, 'bp-b': 0, 'bp-idle': 0, 'old-ch': 0 });
    expect(samples(text, 'vidgen_upstream_discarded_results')).toEqual({ 'bp-a': 1, 'bp-b': 0, 'bp-idle': 0, 'old-ch': 0 });
    expect(text).not.toContain(KEY_B);

    // The next scrape reads again.
    await metrics.registry.metrics();
    expect(reads).toBe(2);
  });

  it('stops reporting a cool-down once it is over', async () => {
    const metrics = createMetrics(store, { processMetrics: false, channels: configured, clock: { now: () => new Date(later(12_000).getTime() + CENTURY_MS) } });
    expect(samples(await metrics.registry.metrics(), 'vidgen_upstream_cooling_down')).toEqual({ 'bp-a': 0, 'bp-b': 0, 'bp-idle': 0, 'old-ch': 0 });
  });
});
