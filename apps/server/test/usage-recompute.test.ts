/**
 * The usage answer against a recomputation from first principles. On both stores, a seeded fuzzed
 * sequence of submissions (models, durations, resolutions, two accounts), cancels, failures,
 * completions and clock moves of minutes to days; then every account's usage (by hour and by day,
 * grouped by model and not) must equal what the ledger (charges and refunds, by entry time) and
 * the tasks (final status, completedAt, duration, model) give bucketed the same way, and creditsNet
 * summed must be minus the ledger's charges and refunds. And on SQLite, the migration's backfill
 * must agree with the running totals kept since.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../src/accounts.js';
import { DEFAULT_PRICES, MODEL_IDS, MODEL_RULES, priceOf, type ModelId, type Resolution } from '../src/domain/catalog.js';
import { newRequestId } from '../src/domain/ids.js';
import { MAX_RANGE_MS } from '../src/domain/usage.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { LedgerEntry, Store, TaskRecord, UsageHour } from '../src/store/store.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { responseProblems } from './support/spec-responses.js';
import { harness, type Harness } from './support.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const USAGE = '/api/open/v1/account/usage';
const RESOLUTIONS: Resolution[] = ['480p', '720p', '1080p'];
const START = Date.parse('2026-11-22T10:00:00.000Z');

type Json = any;
type Granularity = 'hour' | 'day';

type Step =
  | { kind: 'submit'; account: number; model: ModelId; durationIndex: number; resolution: Resolution }
  | { kind: 'cancel' | 'fail' | 'complete' | 'start'; task: number }
  | { kind: 'advance'; ms: number };

const stepArb: fc.Arbitrary<Step> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('submit' as const), account: fc.nat(1), model: fc.constantFrom(...MODEL_IDS), durationIndex: fc.nat(20), resolution: fc.constantFrom(...RESOLUTIONS) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constantFrom('cancel' as const, 'fail' as const, 'complete' as const, 'start' as const), task: fc.nat(60) }) },
  {
    weight: 3,
    arbitrary: fc.oneof(
      // Minutes, hours (crossing hour and day boundaries) and days.
      fc.integer({ min: 1, max: 59 }).map((m) => ({ kind: 'advance' as const, ms: m * 60_000 + 1_234 })),
      fc.integer({ min: 1, max: 30 }).map((h) => ({ kind: 'advance' as const, ms: h * HOUR - 60_000 })),
      fc.integer({ min: 1, max: 3 }).map((d) => ({ kind: 'advance' as const, ms: d * DAY + 7 * 60_000 })),
    ),
  },
);

/** Runs the steps against the store directly, as the API and the workers do. */
async function play(h: Harness<Store>, accounts: string[], steps: Step[]): Promise<string[]> {
  const tasks: string[] = [];
  for (const step of steps) {
    const now = h.clock.now();
    switch (step.kind) {
      case 'submit': {
        const durations = MODEL_RULES[step.model].durations;
        const duration = durations[step.durationIndex % durations.length]!;
        const outcome = await h.store.submitTask({
          task: {
            id: newRequestId(now),
            accountId: accounts[step.account]!,
            model: step.model,
            prompt: 'usage',
            duration,
            aspectRatio: '16:9',
            resolution: step.resolution,
            mode: 'text_to_video',
            mediaUrls: [],
            metadata: null,
            webhookUrl: null,
            creditsCharged: priceOf(DEFAULT_PRICES, step.model, step.resolution, duration),
            deadlineAt: new Date(now.getTime() + 30 * 60_000),
          },
          job: { maxAttempts: 3, provider: 'local' },
          idempotency: null,
          now,
          respond: (task) => ({ status: 202, body: { requestId: task.id } }),
        });
        if (outcome.kind === 'created') tasks.push(outcome.task.id);
        break;
      }
      case 'advance':
        h.clock.advance(step.ms);
        break;
      default: {
        if (tasks.length === 0) break;
        const id = tasks[step.task % tasks.length]!;
        const task = (await h.store.findTask(id))!;
        if (step.kind === 'cancel') await h.store.cancelTask({ accountId: task.accountId, id, now });
        else if (step.kind === 'fail') await h.store.failTask({ id, now, code: 'provider_error', message: 'failed' });
        else if (step.kind === 'start') await h.store.startTask({ id, now });
        else {
          await h.store.startTask({ id, now });
          await h.store.completeTask({ id, now, outputKey: `${id}.mp4`, outputUrl: `https://files.example.com/${id}.mp4`, outputExpiresAt: new Date(now.getTime() + DAY) });
        }
      }
    }
  }
  return tasks;
}

interface Cell {
  succeeded: number;
  failed: number;
  cancelled: number;
  secondsDelivered: number;
  creditsCharged: number;
  creditsRefunded: number;
}

/** The usage recomputed from the ledger and the tasks, per bucket start and model. */
function recompute(ledger: LedgerEntry[], tasks: Map<string, TaskRecord>, granularity: Granularity): Map<string, Cell> {
  const step = granularity === 'day' ? DAY : HOUR;
  const cells = new Map<string, Cell>();
  const cell = (at: Date, model: string) => {
    const key = `${Math.floor(at.getTime() / step) * step} ${model}`;
    let found = cells.get(key);
    if (!found) cells.set(key, (found = { succeeded: 0, failed: 0, cancelled: 0, secondsDelivered: 0, creditsCharged: 0, creditsRefunded: 0 }));
    return found;
  };
  for (const entry of ledger) {
    if (entry.kind === 'grant') continue;
    const task = tasks.get(entry.taskId!)!;
    if (entry.kind === 'charge') cell(entry.createdAt, task.model).creditsCharged += -entry.amount;
    else cell(entry.createdAt, task.model).creditsRefunded += entry.amount;
  }
  for (const task of tasks.values()) {
    if (task.status !== 'succeeded' && task.status !== 'failed' && task.status !== 'cancelled') continue;
    const c = cell(task.completedAt!, task.model);
    c[task.status] += 1;
    if (task.status === 'succeeded') c.secondsDelivered += task.duration;
  }
  return cells;
}

/** The whole usage of [from, to) asked in ranges the API accepts, bucket by bucket. */
async function usageOver(h: Harness<Store>, key: string, from: number, to: number, granularity: Granularity, byModel: boolean): Promise<Json[]> {
  const data: Json[] = [];
  const span = MAX_RANGE_MS[granularity];
  for (let start = from; start < to; start += span) {
    const end = Math.min(to, start + span);
    const params = new URLSearchParams({ from: new Date(start).toISOString(), to: new Date(end).toISOString(), granularity, ...(byModel ? { groupBy: 'model' } : {}) });
    const res = await h.request('GET', `${USAGE}?${params}`, { key });
    const text = await res.text();
    expect(responseProblems({ status: res.status, headers: res.headers, text }, { operationId: 'getUsage' })).toEqual([]);
    expect(res.status, text.slice(0, 300)).toBe(200);
    const body = JSON.parse(text);
    expect([Date.parse(body.from), Date.parse(body.to)]).toEqual([start, end]);
    data.push(...body.data);
  }
  return data;
}

async function tasksOf(store: Store, accountId: string): Promise<Map<string, TaskRecord>> {
  const tasks = new Map<string, TaskRecord>();
  let after: { createdAt: Date; id: string } | undefined;
  for (;;) {
    const page = await store.listTasks({ accountId, limit: 100, after });
    for (const task of page) tasks.set(task.id, task);
    if (page.length < 100) return tasks;
    after = page.at(-1)!;
  }
}

/** Checks every account's usage answers against the recomputation. */
async function checkUsage(h: Harness<Store>, accounts: { accountId: string; key: string }[]): Promise<void> {
  const to = Math.ceil((h.clock.now().getTime() + 1) / DAY) * DAY;
  const from = Math.floor(START / DAY) * DAY - DAY;
  for (const { accountId, key } of accounts) {
    const ledger = await h.store.listLedger(accountId);
    const tasks = await tasksOf(h.store, accountId);
    // Every task's charge is in the ledger, and every ledger task is the account's.
    for (const entry of ledger) if (entry.taskId) expect(tasks.has(entry.taskId)).toBe(true);
    const usageAmounts = ledger.filter((e) => e.kind !== 'grant').reduce((sum, e) => sum + e.amount, 0);
    for (const granularity of ['hour', 'day'] as const) {
      const expected = recompute(ledger, tasks, granularity);
      for (const byModel of [false, true]) {
        const data = await usageOver(h, key, from, to, granularity, byModel);
        const step = granularity === 'day' ? DAY : HOUR;
        expect(data).toHaveLength(((to - from) / step) * (byModel ? MODEL_IDS.length : 1));
        for (const [i, bucket] of data.entries()) {
          const start = from + Math.floor(i / (byModel ? MODEL_IDS.length : 1)) * step;
          expect(Date.parse(bucket.start)).toBe(start);
          expect(Date.parse(bucket.end)).toBe(start + step);
          const models = byModel ? [MODEL_IDS[i % MODEL_IDS.length]!] : MODEL_IDS;
          if (byModel) expect(bucket.model).toBe(models[0]);
          else expect(bucket).not.toHaveProperty('model');
          const want = { succeeded: 0, failed: 0, cancelled: 0, secondsDelivered: 0, creditsCharged: 0, creditsRefunded: 0 };
          for (const model of models) {
            const c = expected.get(`${start} ${model}`);
            if (c) for (const k of Object.keys(want) as (keyof Cell)[]) want[k] += c[k];
          }
          expect(bucket, `${accountId} ${granularity} ${bucket.start} ${bucket.model ?? ''}`).toEqual({
            start: bucket.start,
            end: bucket.end,
            ...(byModel ? { model: models[0] } : {}),
            tasks: { succeeded: want.succeeded, failed: want.failed, cancelled: want.cancelled },
            secondsDelivered: want.secondsDelivered,
            creditsCharged: want.creditsCharged,
            creditsRefunded: want.creditsRefunded,
            creditsNet: want.creditsCharged - want.creditsRefunded,
          });
        }
        expect(data.reduce((sum, b) => sum + b.creditsNet, 0) + usageAmounts).toBe(0);
      }
    }
  }
}

describe.each(backendKinds)('usage against a recomputation on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });

  it.skipIf(skip)(
    'a fuzzed sequence of submissions, cancels, failures, completions and clock moves',
    async () => {
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { minLength: 1, maxLength: 40 }), fc.integer({ min: 0, max: 59 }), async (steps, offsetMinutes) => {
          runs++;
          const h = backendHarness(await opened.fresh());
          h.clock.advance(offsetMinutes * 60_000);
          const accounts = [await h.account(20_000, ['tasks:read']), await h.account(3_000, ['tasks:read'])];
          await play(
            h,
            accounts.map((a) => a.accountId),
            steps,
          );
          await checkUsage(h, accounts);
          // The ledger's balances are consistent too.
          for (const { accountId } of accounts) {
            let balance = 0;
            for (const entry of await h.store.listLedger(accountId)) expect(entry.balanceAfter).toBe((balance += entry.amount));
            expect((await h.store.getAccount(accountId))!.balance).toBe(balance);
          }
        }),
        { seed: 20261122, numRuns: 30, endOnFailure: true },
      );
      expect(runs).toBe(30);
    },
    60_000,
  );
});

describe('the migration backfill on SQLite', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'vidgen-usage-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('recomputes the same usage and ledger balances as the running totals kept since', async () => {
    const path = join(dir, 'store.db');
    const h = harness({}, path) as unknown as Harness<Store>;
    const accounts = [await h.account(20_000, ['tasks:read']), await h.account(5_000, ['tasks:read'])];
    const steps = fc.sample(fc.array(stepArb, { minLength: 60, maxLength: 60 }), { seed: 7, numRuns: 1 })[0]!;
    const tasks = await play(
      h,
      accounts.map((a) => a.accountId),
      steps,
    );
    expect(tasks.length).toBeGreaterThan(5);
    await createAccount(h.store, { name: 'granted only', credits: 10, now: h.clock.now() });
    await h.store.grantCredits({ accountId: accounts[0]!.accountId, amount: 77, note: 'top-up', now: h.clock.now() });

    const range = { from: new Date(START - 30 * DAY), to: new Date(h.clock.now().getTime() + DAY) };
    const before: { hours: UsageHour[]; ledger: LedgerEntry[] }[] = [];
    for (const { accountId } of accounts) {
      before.push({ hours: await h.store.usageHours({ accountId, ...range }), ledger: await h.store.listLedger(accountId) });
    }
    expect(before[0]!.hours.length).toBeGreaterThan(0);
    const answerBefore = await usageOver(h, accounts[0]!.key, Math.floor(range.from.getTime() / DAY) * DAY, Math.ceil(range.to.getTime() / DAY) * DAY, 'day', true);

    (h.store as SqliteStore).db.exec(
      'DELETE FROM schema_migrations WHERE version IN (8, 9); ALTER TABLE ledger_entries DROP COLUMN balance_after; DROP TABLE usage_daily; DROP TABLE usage_hourly;',
    );
    await h.store.close();

    const reopened = harness({}, path) as unknown as Harness<Store>;
    try {
      for (const [i, { accountId }] of accounts.entries()) {
        expect(await reopened.store.usageHours({ accountId, ...range })).toEqual(before[i]!.hours);
        expect(await reopened.store.listLedger(accountId)).toEqual(before[i]!.ledger);
      }
      const answerAfter = await usageOver(reopened, accounts[0]!.key, Math.floor(range.from.getTime() / DAY) * DAY, Math.ceil(range.to.getTime() / DAY) * DAY, 'day', true);
      expect(answerAfter).toEqual(answerBefore);
    } finally {
      await reopened.store.close();
    }
  });
});
