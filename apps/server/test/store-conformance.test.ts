/**
 * The store and job-queue conformance suite: the same expectations of the
 * Store and JobQueue ports on embedded SQLite and on PostgreSQL (with
 * pg-boss). Charges, refunds, idempotency, paging, the webhook outbox and the
 * queue's claims, retries, burials and leases, also under concurrency.
 * PostgreSQL runs when reachable (always under CI=true).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPostgresTaskEvents } from '../src/events/postgres.js';
import { openBackend, type Backend } from '../src/store/open.js';
import { backendKinds } from './support/backends.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';
import type { NewTask, PendingDelivery, Store, StoredResponse, TaskRecord } from '../src/store/store.js';
import { pageKeyPosition, taskPageKeyOf } from '../src/domain/task-view.js';
import { newTask, silentLogger } from './support.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const later = (ms: number) => new Date(now.getTime() + ms);
const respond = (task: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { requestId: task.id, creditsCharged: task.creditsCharged } });

const task = (price: number, at = now, patch: Partial<NewTask> = {}): NewTask => newTask('acc_1', price, at, patch);
const job = { maxAttempts: 3, provider: 'local' };
/** The lease the queue tests use: short, so that a lost one comes back within the test. */
const LEASE_MS = 1_000;

/** Polls `probe` in real time until it returns something (leases and retries run on the database's clock). */
async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`nothing within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

interface Kit {
  backend: Backend;
  /** Runs raw SQL: the SQLite text with ? placeholders, the PostgreSQL text with $n. */
  sql(sqlite: string, postgres: string, params?: unknown[]): Promise<void>;
}

const kinds = backendKinds.map((kind) => ({
  ...kind,
  async open(): Promise<{ kit: () => Promise<Kit>; done: () => Promise<void> }> {
    const opened = await kind.open({ leaseMs: LEASE_MS });
    return {
      async kit() {
        const backend = await opened.fresh();
        const sql: Kit['sql'] =
          kind.name === 'SQLite'
            ? async (text, _pg, params = []) => void (backend.store as SqliteStore).db.prepare(text).run(...params)
            : async (_sqlite, text, params = []) => void (await (backend.store as PgStore).pool.query(text, params));
        return { backend, sql };
      },
      done: () => opened.done(),
    };
  },
}));

describe.each(kinds)('the store and queue on $name', ({ name, skip, open }) => {
  /**
   * Whether a task's generation job ends with the task's terminal move: on PostgreSQL it is the task row's
   * (pg-generation-lane.ts); SQLite's queue keeps it until its claim completes it (a worker finding the task ended).
   */
  const jobsEndWithTask = name === 'PostgreSQL';
  let opened: Awaited<ReturnType<typeof open>>;
  let kit: Kit;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });
  beforeEach(async (context) => {
    if (skip) return context.skip();
    kit = await opened.kit();
    await kit.backend.store.createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: 100, now });
  });
  const store = () => kit.backend.store;
  const queue = () => kit.backend.queue;
  const submit = async (price: number, at = now, patch: Partial<NewTask> = {}) => {
    const outcome = await store().submitTask({ job, task: task(price, at, patch), idempotency: null, now: at, respond });
    if (outcome.kind !== 'created') throw new Error(`not created: ${outcome.kind}`);
    return outcome.task;
  };
  /** One job of the first of `providers` that has one due. */
  const claim = async (providers = ['local', 'byteplus', 'webhooks'], at = new Date()) => {
    for (const provider of providers) {
      const [job] = await queue().claim({ workerId: 'worker_test', now: at, leaseMs: LEASE_MS, provider, limit: 1 });
      if (job) return job;
    }
    return undefined;
  };

  describe('credits', () => {
    it('charges with the task and records the charge in the ledger', async () => {
      await submit(40);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
      expect((await store().listLedger('acc_1')).map((e) => [e.kind, e.amount])).toEqual([['grant', 100], ['charge', -40]]);
    });

    it('answers the submitted task as a read of it answers, metadata as sent, and the answer it stores for replays likewise', async () => {
      const metadata = JSON.parse('{"z": 1, "a": {"y": [1, "x", null, 1e400], "é": "\\u00e9"}, "n": -0.5}');
      const patch = { metadata, mediaUrls: ['https://media.example.com/a.png'], webhookUrl: 'https://hooks.example.com/x', mode: 'first_frame' as const };
      const plain = await submit(10, later(1), patch);
      expect(plain).toEqual(await store().findTask(plain.id));
      expect(plain).toEqual(await store().getTask('acc_1', plain.id));
      expect(Object.keys(plain.metadata!)).toEqual(['z', 'a', 'n']);
      const keyed = await store().submitTask({ job, task: task(10, later(2), patch), idempotency: { key: 'k-json', fingerprint: 'f', expiresAt: later(3600_000) }, now: later(2), respond });
      if (keyed.kind !== 'created') throw new Error(keyed.kind);
      expect(keyed.task).toEqual(await store().findTask(keyed.task.id));
      const replayed = await store().submitTask({ job, task: task(10, later(3), patch), idempotency: { key: 'k-json', fingerprint: 'f', expiresAt: later(3600_000) }, now: later(3), respond });
      expect(replayed).toEqual({ kind: 'replayed', response: keyed.response });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 80, ledgerSum: 80 });
    });

    it('writes nothing, not even the job, when the active-task cap refuses a submission', async () => {
      await submit(10);
      const outcome = await store().submitTask({ job, task: task(10, later(1)), idempotency: null, maxActiveTasks: 1, now: later(1), respond });
      expect(outcome).toEqual({ kind: 'too_many_active_tasks', limit: 1 });
      expect(await store().listTasks({ accountId: 'acc_1', limit: 10 })).toHaveLength(1);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 90, ledgerSum: 90 });
      expect(await claim()).toBeDefined();
      expect(await claim()).toBeUndefined();
    });

    it('refuses a charge above the balance and writes nothing, no job either', async () => {
      const outcome = await store().submitTask({ job, task: task(140), idempotency: null, now, respond });
      expect(outcome).toEqual({ kind: 'insufficient_credits', required: 140, available: 100 });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await store().listTasks({ accountId: 'acc_1', limit: 10 })).toEqual([]);
      expect(await claim()).toBeUndefined();
    });

    it('refunds a cancelled task exactly once', async () => {
      const { id } = await submit(40);
      expect((await store().cancelTask({ accountId: 'acc_1', id, now: later(1000) })).kind).toBe('cancelled');
      expect((await store().cancelTask({ accountId: 'acc_1', id, now: later(2000) })).kind).toBe('already_cancelled');
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await store().getTask('acc_1', id)).toMatchObject({ status: 'cancelled', creditsRefunded: 40, completedAt: later(1000) });
      expect((await store().listLedger('acc_1')).filter((e) => e.kind === 'refund')).toHaveLength(1);
    });

    it('refuses a second refund row for a task even if asked directly', async () => {
      const { id } = await submit(40);
      await store().cancelTask({ accountId: 'acc_1', id, now });
      await expect(
        kit.sql(
          "INSERT INTO ledger_entries (account_id, kind, amount, task_id, created_at) VALUES ('acc_1', 'refund', 40, ?, 0)",
          "INSERT INTO ledger_entries (account_id, kind, amount, task_id, created_at) VALUES ('acc_1', 'refund', 40, $1, now())",
          [id],
        ),
      ).rejects.toThrow(/UNIQUE|unique/);
    });

    it('does not cancel a finished task', async () => {
      const { id } = await submit(40);
      await kit.sql("UPDATE tasks SET status = 'succeeded' WHERE id = ?", "UPDATE tasks SET status = 'succeeded' WHERE id = $1", [id]);
      expect(await store().cancelTask({ accountId: 'acc_1', id, now })).toEqual({ kind: 'invalid_state', status: 'succeeded' });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
    });

    it('replays the first answer byte for byte, its keys in their order', async () => {
      const answer = (t: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { success: true, requestId: t.id, status: 'queued', creditsCharged: t.creditsCharged, z: { b: 1, a: 2 } } });
      const first = await store().submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(3600_000) }, now, respond: answer });
      const again = await store().submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(3600_000) }, now: later(10), respond: answer });
      expect(again.kind).toBe('replayed');
      expect(JSON.stringify(again.kind === 'replayed' && again.response.body)).toBe(JSON.stringify(first.kind === 'created' && first.response.body));
    });

    it('hides tasks of other accounts', async () => {
      await store().createAccount({ id: 'acc_2', name: 'b', webhookSecret: 'whsec_y', openingGrant: 0, now });
      const { id } = await submit(40);
      expect(await store().getTask('acc_2', id)).toBeUndefined();
      expect(await store().cancelTask({ accountId: 'acc_2', id, now })).toEqual({ kind: 'not_found' });
    });

    it('fails a task once, refunding once, whatever races it (fail, cancel, fail)', async () => {
      const { id } = await submit(40);
      await store().startTask({ id, now });
      const outcomes = await Promise.all([
        store().failTask({ id, now, code: 'provider_error', message: 'x' }),
        store().cancelTask({ accountId: 'acc_1', id, now }),
        store().failTask({ id, now, code: 'timeout', message: 'y' }),
      ]);
      expect(outcomes.filter((o) => o.kind === 'failed' || o.kind === 'cancelled')).toHaveLength(1);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
    });

    it('accepts exactly as many concurrent submits as the balance pays for', async () => {
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, (_, i) => store().submitTask({ job, task: task(30, later(i)), idempotency: null, now: later(i), respond })),
      );
      expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(3);
      expect(outcomes.filter((o) => o.kind === 'insufficient_credits')).toHaveLength(9);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 10, ledgerSum: 10 });
    });
  });

  it('caps active tasks per account in the submit transaction, under concurrency too', async () => {
    const outcomes = await Promise.all(
      Array.from({ length: 8 }, (_, i) => store().submitTask({ job, task: task(1, later(i)), idempotency: null, maxActiveTasks: 3, now: later(i), respond })),
    );
    expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(3);
    expect(outcomes.filter((o) => o.kind === 'too_many_active_tasks')).toEqual(Array(5).fill({ kind: 'too_many_active_tasks', limit: 3 }));
    expect(await store().auditBalance('acc_1')).toEqual({ balance: 97, ledgerSum: 97 });
  });

  it('keeps one usage total per hour and model however many transactions added to it at once (PostgreSQL: summed over shards)', async () => {
    const submitted = await Promise.all(Array.from({ length: 40 }, (_, i) => submit(2, later(i))));
    for (const t of submitted.slice(0, 20)) await store().startTask({ id: t.id, now: later(50) });
    await Promise.all(
      submitted.slice(0, 30).map((t, i) =>
        i < 20
          ? store().completeTask({ id: t.id, now: later(100 + i), outputKey: `${t.id}.mp4`, outputUrl: `https://x/${t.id}.mp4`, outputExpiresAt: later(3_600_000) })
          : store().failTask({ id: t.id, now: later(100 + i), code: 'provider_error', message: 'x' }),
      ),
    );
    const hour = { hourStart: new Date('2026-11-22T10:00:00.000Z'), model: 'vidgen-2.0' };
    const expected = { ...hour, creditsCharged: 80, creditsRefunded: 20, succeeded: 20, failed: 10, cancelled: 0, secondsDelivered: 100 };
    expect(await store().usageHours({ accountId: 'acc_1', from: now, to: later(3_600_000) })).toEqual([expected]);
    const day = new Date('2026-11-22T00:00:00.000Z');
    expect(await store().usageTotals({ accountId: 'acc_1', from: day, to: new Date(day.getTime() + 86_400_000), bucketMs: 86_400_000, byModel: true })).toEqual([
      { ...expected, hourStart: day },
    ]);
  });

  it("counts the tasks by status, the ended ones as their endings were counted, every account's, each ending once however it raced", async () => {
    const none = { queued: 0, processing: 0, succeeded: 0, failed: 0, cancelled: 0 };
    expect(await store().countTasksByStatus()).toEqual(none);
    await store().createAccount({ id: 'acc_2', name: 'b', webhookSecret: 'whsec_y', openingGrant: 100, now });
    const [queued, started, succeeded, failed, cancelled, raced] = await Promise.all(Array.from({ length: 6 }, (_, i) => submit(1, later(i))));
    const other = await store().submitTask({ job, task: newTask('acc_2', 1, later(7)), idempotency: null, now: later(7), respond });
    if (other.kind !== 'created') throw new Error(other.kind);
    expect(await store().countTasksByStatus()).toEqual({ ...none, queued: 7 });

    for (const t of [started!, succeeded!, failed!]) await store().startTask({ id: t.id, now: later(10) });
    await store().completeTask({ id: succeeded!.id, now: later(20), outputKey: 'a.mp4', outputUrl: 'https://x/a.mp4', outputExpiresAt: later(3_600_000) });
    await store().failTask({ id: failed!.id, now: later(20), code: 'provider_error', message: 'x' });
    await store().cancelTask({ accountId: 'acc_1', id: cancelled!.id, now: later(20) });
    // A failure and a cancel racing for one task: it ends once, counted once.
    await Promise.all([
      store().failTask({ id: raced!.id, now: later(30), code: 'timeout', message: 'y' }),
      store().cancelTask({ accountId: 'acc_1', id: raced!.id, now: later(30) }),
      store().failTask({ id: raced!.id, now: later(30), code: 'provider_error', message: 'z' }),
    ]);
    await store().startTask({ id: other.task.id, now: later(40) });
    await store().completeTask({ id: other.task.id, now: later(40), outputKey: 'b.mp4', outputUrl: 'https://x/b.mp4', outputExpiresAt: later(3_600_000) });
    const ended = (await store().findTask(raced!.id))!.status as 'failed' | 'cancelled';
    expect(await store().countTasksByStatus()).toEqual({ queued: 1, processing: 1, succeeded: 2, failed: 1, cancelled: 1, [ended]: 2 });
    expect((await store().findTask(queued!.id))!.status).toBe('queued');
  });

  it('counts every task once when the count comes in the same turn as endings (SQLite: inside their open write batch)', async () => {
    const [a, b, c] = await Promise.all([submit(1), submit(1, later(1)), submit(1, later(2))]);
    await store().startTask({ id: b!.id, now: later(5) });
    const total = (counts: Record<string, number>) => Object.values(counts).reduce((sum, n) => sum + n, 0);
    const outcomes = await Promise.all([
      store().countTasksByStatus(),
      store().cancelTask({ accountId: 'acc_1', id: a!.id, now: later(10) }),
      store().countTasksByStatus(),
      store().completeTask({ id: b!.id, now: later(10), outputKey: 'b.mp4', outputUrl: 'https://x/b.mp4', outputExpiresAt: later(3_600_000) }),
      store().failTask({ id: c!.id, now: later(10), code: 'provider_error', message: 'x' }),
      store().countTasksByStatus(),
    ]);
    for (const counts of [outcomes[0], outcomes[2], outcomes[5]] as Record<string, number>[]) expect(total(counts)).toBe(3);
    expect(await store().countTasksByStatus()).toEqual({ queued: 0, processing: 0, succeeded: 1, failed: 1, cancelled: 1 });
  });

  it('PostgreSQL: counts the totals written before the shards, and by a previous release during a deploy, with them', async (context) => {
    if (name !== 'PostgreSQL') return context.skip();
    const pool = (store() as PgStore).pool;
    // What a process of the previous release writes (0006's statements: the unsharded tables).
    await pool.query(`INSERT INTO usage_hourly (account_id, hour_start, model, credits_charged, succeeded) VALUES ('acc_1', '2026-11-22T10:00:00Z', 'vidgen-2.0', 7, 1)`);
    await pool.query(`INSERT INTO usage_daily (account_id, day_start, model, credits_charged, succeeded) VALUES ('acc_1', '2026-11-22T00:00:00Z', 'vidgen-2.0', 7, 1)`);
    await submit(2);
    const totals = { model: 'vidgen-2.0', creditsCharged: 9, creditsRefunded: 0, succeeded: 1, failed: 0, cancelled: 0, secondsDelivered: 0 };
    expect(await store().usageHours({ accountId: 'acc_1', from: now, to: later(3_600_000) })).toEqual([{ ...totals, hourStart: now }]);
    const day = new Date('2026-11-22T00:00:00.000Z');
    expect(await store().usageTotals({ accountId: 'acc_1', from: day, to: new Date(day.getTime() + 86_400_000), bucketMs: 86_400_000, byModel: false })).toEqual([
      { ...totals, model: '*', hourStart: day },
    ]);
  });

  it('answers a submission both short of credits and over the cap as short of credits, on either store', async () => {
    await submit(1);
    const outcome = await store().submitTask({ job, task: task(500, later(1)), idempotency: null, maxActiveTasks: 1, now: later(1), respond });
    expect(outcome).toEqual({ kind: 'insufficient_credits', required: 500, available: 99 });
  });

  describe('idempotency', () => {
    const claimKey = (key: string, fingerprint = 'f1') => ({ key, fingerprint, expiresAt: later(24 * 3600_000) });

    it('purges Idempotency-Keys past their window, and only those', async () => {
      for (const [key, hours] of [['old1', 1], ['old2', 2], ['young', 48]] as const) {
        await store().submitTask({ job, task: task(10), idempotency: { key, fingerprint: 'f1', expiresAt: later(hours * 3600_000) }, now, respond });
      }
      expect(await store().purgeExpiredIdempotencyKeys({ now: later(3 * 3600_000), limit: 1 })).toBe(1);
      expect(await store().purgeExpiredIdempotencyKeys({ now: later(3 * 3600_000), limit: 100 })).toBe(1);
      expect(await store().purgeExpiredIdempotencyKeys({ now: later(3 * 3600_000), limit: 100 })).toBe(0);
      // The young key still replays; a purged one starts a new task.
      const replay = await store().submitTask({ job, task: task(10), idempotency: { key: 'young', fingerprint: 'f1', expiresAt: later(72 * 3600_000) }, now: later(3 * 3600_000), respond });
      expect(replay.kind).toBe('replayed');
      const fresh = await store().submitTask({ job, task: task(10), idempotency: { key: 'old1', fingerprint: 'f1', expiresAt: later(72 * 3600_000) }, now: later(3 * 3600_000), respond });
      expect(fresh.kind).toBe('created');
    });

    it('replays the first answer for the same key and body, charging once', async () => {
      const first = await store().submitTask({ job, task: task(40), idempotency: claimKey('k'), now, respond });
      const again = await store().submitTask({ job, task: task(40), idempotency: claimKey('k'), now: later(10), respond });
      expect(first.kind).toBe('created');
      expect(again).toEqual({ kind: 'replayed', response: first.kind === 'created' ? first.response : undefined });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
    });

    it('creates one task and one charge for 20 concurrent submits with one key', async () => {
      const outcomes = await Promise.all(Array.from({ length: 20 }, () => store().submitTask({ job, task: task(40), idempotency: claimKey('k'), now, respond })));
      expect(outcomes.filter((o) => o.kind === 'created')).toHaveLength(1);
      expect(outcomes.filter((o) => o.kind === 'replayed')).toHaveLength(19);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
      expect(await store().listTasks({ accountId: 'acc_1', limit: 10 })).toHaveLength(1);
    });

    it('refuses the same key with another body', async () => {
      await store().submitTask({ job, task: task(40), idempotency: claimKey('k', 'f1'), now, respond });
      expect(await store().submitTask({ job, task: task(40), idempotency: claimKey('k', 'f2'), now, respond })).toEqual({ kind: 'idempotency_key_reused' });
    });

    it('forgets a key after it expires', async () => {
      await store().submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(1000) }, now, respond });
      const after = await store().submitTask({ job, task: task(40, later(2000)), idempotency: claimKey('k', 'f2'), now: later(2000), respond });
      expect(after.kind).toBe('created');
    });

    it('does not claim the key when the charge fails', async () => {
      expect((await store().submitTask({ job, task: task(140), idempotency: claimKey('k'), now, respond })).kind).toBe('insufficient_credits');
      await store().grantCredits({ accountId: 'acc_1', amount: 100, note: null, now });
      expect((await store().submitTask({ job, task: task(140), idempotency: claimKey('k'), now, respond })).kind).toBe('created');
    });
  });

  it('pages newest first by position, with and without a status', async () => {
    await store().grantCredits({ accountId: 'acc_1', amount: 1000, note: null, now });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit(10, later(i * 1000))).id);
    await store().cancelTask({ accountId: 'acc_1', id: ids[1]!, now: later(9000) });
    const first = await store().listTasks({ accountId: 'acc_1', limit: 2 });
    expect(first.map((t) => t.id)).toEqual([ids[4], ids[3]]);
    const next = await store().listTasks({ accountId: 'acc_1', limit: 10, after: { createdAt: first[1]!.createdAt, id: first[1]!.id } });
    expect(next.map((t) => t.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect((await store().listTasks({ accountId: 'acc_1', status: 'cancelled', limit: 10 })).map((t) => t.id)).toEqual([ids[1]]);
  });

  describe('pages by key (listTaskPage)', () => {
    /** The page as listTaskPage reads it when no answer is kept: every entry with its record. */
    const unkept = (query: Parameters<Store['listTasks']>[0]) => store().listTaskPage(query, () => undefined);

    it('reads the same tasks in the same order as listTasks, each keyed as taskPageKeyOf keys its record, with and without a status or a position', async () => {
      await store().grantCredits({ accountId: 'acc_1', amount: 1000, note: null, now });
      const ids: string[] = [];
      for (let i = 0; i < 6; i++) ids.push((await submit(10, later(i * 1000), i % 2 ? { webhookUrl: 'https://hooks.example.com/v' } : {})).id);
      await store().startTask({ id: ids[0]!, now: later(10_000) });
      await store().completeTask({ id: ids[0]!, now: later(10_001), outputKey: 'a.mp4', outputUrl: 'https://files.example.com/a', outputExpiresAt: later(3_600_000) });
      await store().startTask({ id: ids[1]!, now: later(10_002) });
      await store().failTask({ id: ids[1]!, now: later(10_003), code: 'provider_error', message: 'x' });
      await store().cancelTask({ accountId: 'acc_1', id: ids[3]!, now: later(10_004) });
      const delivery = (await store().getDeliveryForTask(ids[3]!))!;
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(10_005), statusCode: 500, error: null, durationMs: 3 }, status: 'pending', nextAttemptAt: later(20_000) });
      await store().startTask({ id: ids[4]!, now: later(10_006) });
      const queries = [
        { accountId: 'acc_1', limit: 10 },
        { accountId: 'acc_1', limit: 2 },
        { accountId: 'acc_1', limit: 10, after: { createdAt: later(4000), id: ids[4]! } },
        { accountId: 'acc_1', status: 'cancelled' as const, limit: 10 },
        { accountId: 'acc_1', status: 'queued' as const, limit: 1, after: { createdAt: later(5000), id: ids[5]! } },
        { accountId: 'acc_other', limit: 10 },
      ];
      for (const query of queries) {
        const records = await store().listTasks(query);
        const entries = await unkept(query);
        expect(entries.map((entry) => entry.task)).toEqual(records);
        expect(entries.map((entry) => entry.key)).toEqual(records.map(taskPageKeyOf));
      }
      const keys = (await unkept({ accountId: 'acc_1', limit: 10 })).map((entry) => entry.key);
      expect(keys.map(pageKeyPosition)).toEqual([5, 4, 3, 2, 1, 0].map((i) => ({ id: ids[i], createdAt: later(i * 1000) })));
      // The webhook's progress is in the key of the task that has a delivery, and only there.
      expect(keys[2]).toBe(`${ids[3]} ${later(3000).getTime()} cancelled ${later(10_004).getTime()} pending 1 ${later(10_005).getTime()}`);
      expect(keys[0]).toBe(`${ids[5]} ${later(5000).getTime()} queued ${later(5000).getTime()}`);
    });

    it("gives a new key for every change of a task's answer, and the same key while it does not change", async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      const keyNow = async () => (await unkept({ accountId: 'acc_1', limit: 1 }))[0]!.key;
      const seen = [await keyNow()];
      const changed = async () => {
        const key = await keyNow();
        expect(seen).not.toContain(key);
        expect(await keyNow()).toBe(key);
        seen.push(key);
      };
      await store().startTask({ id, now: later(1) });
      await changed();
      // Started again (a lease ran out) in the same millisecond: nothing in the answer changed, nor the key.
      await store().startTask({ id, now: later(1) });
      expect(await keyNow()).toBe(seen.at(-1));
      await store().startTask({ id, now: later(2) });
      await changed();
      // Completed in the millisecond it was started: the status alone tells the two apart.
      await store().completeTask({ id, now: later(2), outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3_600_000) });
      await changed();
      const delivery = (await store().getDeliveryForTask(id))!;
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(3), statusCode: 500, error: null, durationMs: 3 }, status: 'pending', nextAttemptAt: later(10) });
      await changed();
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(3), statusCode: 200, error: null, durationMs: 3 }, status: 'delivered', nextAttemptAt: null });
      await changed();
      await store().redeliver({ deliveryId: delivery.id, now: later(4) });
      await changed();
      // The output swept: not in the answer, not in the key.
      const before = (await store().getTask('acc_1', id))!;
      await kit.sql('UPDATE tasks SET output_key = NULL WHERE id = ?', 'UPDATE tasks SET output_key = NULL WHERE id = $1', [id]);
      expect(await keyNow()).toBe(seen.at(-1));
      expect({ ...(await store().getTask('acc_1', id))!, outputKey: before.outputKey }).toEqual(before);
    });

    it('hands back what the caller keeps for a key instead of the record, where the store reads keys alone', async () => {
      await store().grantCredits({ accountId: 'acc_1', amount: 1000, note: null, now });
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push((await submit(10, later(i))).id);
      const records = await store().listTasks({ accountId: 'acc_1', limit: 10 });
      const keys = records.map(taskPageKeyOf);
      const kept = new Map([[keys[1]!, 'kept answer']]);
      const asked: string[] = [];
      const entries = await store().listTaskPage({ accountId: 'acc_1', limit: 10 }, (key) => (asked.push(key), kept.get(key)));
      expect(entries.map((entry) => entry.key)).toEqual(keys);
      for (const [i, entry] of entries.entries()) {
        // PostgreSQL reads every record in its one round trip (and asks nothing); SQLite reads the keys, then the records it lacks.
        if (entry.task === undefined) expect(entry.known).toBe(kept.get(entry.key));
        else expect(entry.task).toEqual(records[i]);
      }
      if (name === 'SQLite') {
        expect(asked).toEqual(keys);
        expect(entries.map((entry) => entry.known)).toEqual([undefined, 'kept answer', undefined]);
      }
    });
  });

  it("keeps a task's metadata as sent, its keys in their order (D5)", async () => {
    const metadata = { zeta: 1, a: { y: 2, b: 3 }, mid: 'x', list: [{ q: 1, p: 2 }] };
    const created = await submit(10, now, { metadata });
    expect(JSON.stringify((await store().getTask('acc_1', created.id))!.metadata)).toBe(JSON.stringify(metadata));
  });

  it('keeps a task as submitted: media, metadata, webhook URL, deadline', async () => {
    const created = await submit(10, now, { mediaUrls: ['https://cdn.example.com/a.png'], metadata: { order: 7, tags: ['x'] }, webhookUrl: 'https://hooks.example.com/v' });
    expect(await store().findTask(created.id)).toEqual(created);
    expect(created).toMatchObject({ status: 'queued', mediaUrls: ['https://cdn.example.com/a.png'], metadata: { order: 7, tags: ['x'] }, webhook: null });
  });

  describe('the webhook outbox', () => {
    it('writes the event and its delivery job with the terminal move, not before', async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      expect(await store().getDeliveryForTask(id)).toBeUndefined();
      await store().startTask({ id, now });
      const completed = await store().completeTask({ id, now: later(5), outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3600_000) });
      expect(completed.kind).toBe('succeeded');
      const delivery = await store().getDeliveryForTask(id);
      expect(delivery).toMatchObject({ taskId: id, status: 'pending', eventType: 'video.generation.succeeded', attempts: 0 });
      expect(JSON.parse(delivery!.body).data.requestId).toBe(id);
      const generate = await claim(['local']);
      if (jobsEndWithTask) expect(generate).toBeUndefined();
      else expect(generate).toMatchObject({ taskId: id, kind: 'generate' });
      expect(await claim(['webhooks'])).toMatchObject({ taskId: id, kind: 'deliver', provider: 'webhooks' });
    });

    it('reads a pending delivery with the secrets to sign it with now, and nothing for a task whose delivery is settled or absent', async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      expect(await store().pendingDelivery(id, now)).toBeUndefined();
      await store().cancelTask({ accountId: 'acc_1', id, now });
      const delivery = (await store().getDeliveryForTask(id))!;
      expect(await store().pendingDelivery(id, later(1))).toEqual({ delivery, secrets: ['whsec_x'] });
      await store().rotateWebhookSecret({ accountId: 'acc_1', secret: 'whsec_new', previousValidUntil: later(100) });
      expect(await store().pendingDelivery(id, later(99))).toEqual({ delivery, secrets: ['whsec_new', 'whsec_x'] });
      expect(await store().pendingDelivery(id, later(100))).toEqual({ delivery, secrets: ['whsec_new'] });
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(2), statusCode: 200, error: null, durationMs: 3 }, status: 'delivered', nextAttemptAt: null });
      expect(await store().pendingDelivery(id, later(3))).toBeUndefined();
      expect(await store().pendingDelivery('gen_unknown', later(3))).toBeUndefined();
    });

    it('answers a held delivery with its completion as pendingDelivery reads it: as written, with the secrets of that moment', async () => {
      await store().rotateWebhookSecret({ accountId: 'acc_1', secret: 'whsec_new', previousValidUntil: later(100) });
      // Completed as its start left it (the one-message completion) and after it changed (the completion on its own).
      for (const [at, passStart] of [[later(5), true], [later(150), false]] as const) {
        const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
        const started = await store().startTask({ id, now });
        const completed = await store().completeTask({
          id,
          now: at,
          outputKey: `${id}.mp4`,
          outputUrl: 'https://files.example.com/x',
          outputExpiresAt: later(3600_000),
          holdDelivery: { leaseUntil: later(60_000), workerId: 'w1' },
          ...(passStart ? { started: (started as { task: TaskRecord }).task } : {}),
        });
        expect(completed).toMatchObject({ kind: 'succeeded', heldDelivery: expect.any(String) });
        const pending = (completed as { pendingDelivery?: PendingDelivery }).pendingDelivery;
        expect(pending).toEqual(await store().pendingDelivery(id, at));
        expect(pending!.secrets).toEqual(passStart ? ['whsec_new', 'whsec_x'] : ['whsec_new']);
      }
    });

    it('records attempts and redelivers from now with a fresh job', async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      await store().cancelTask({ accountId: 'acc_1', id, now });
      const delivery = (await store().getDeliveryForTask(id))!;
      const deliver = (await claim(['webhooks']))!;
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(1), statusCode: 500, error: null, durationMs: 12 }, status: 'failed', nextAttemptAt: null });
      await queue().complete(deliver.id, new Date());
      expect(await store().getTask('acc_1', id)).toMatchObject({ webhook: { status: 'failed', attempts: 1, lastAttemptAt: later(1) } });
      expect(await store().listDeliveryAttempts(delivery.id)).toEqual([{ attemptedAt: later(1), statusCode: 500, error: null, durationMs: 12 }]);
      expect(await claim(['webhooks'])).toBeUndefined();
      expect(await store().redeliver({ deliveryId: delivery.id, now: later(2) })).toMatchObject({ status: 'pending' });
      expect(await claim(['webhooks'])).toMatchObject({ taskId: id, kind: 'deliver' });
    });

    it('keeps a redelivery made while an attempt is under way: that attempt neither settles the delivery nor doubles its chain of jobs', async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      await store().cancelTask({ accountId: 'acc_1', id, now });
      const delivery = (await store().getDeliveryForTask(id))!;
      expect(delivery.redeliveries).toBe(0);
      const running = (await claim(['webhooks']))!;
      // The operator redelivers while the attempt is out; the receiver then answers 410.
      expect(await store().redeliver({ deliveryId: delivery.id, now: later(2) })).toMatchObject({ status: 'pending', redeliveries: 1 });
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(3), statusCode: 410, error: null, durationMs: 5 }, status: 'failed', nextAttemptAt: null });
      expect(await store().getDeliveryForTask(id)).toMatchObject({ status: 'pending', attempts: 1, lastAttemptAt: later(3), nextAttemptAt: later(2) });
      expect(await store().listDeliveryAttempts(delivery.id)).toHaveLength(1);
      // The stale run hands its job on as a retry, or completes it: neither adds a second chain.
      await queue().retry({ jobId: running.id, runAt: new Date(), error: 'stale', now: new Date() });
      await queue().complete(running.id, new Date());
      expect(await claim(['webhooks'])).toMatchObject({ taskId: id, kind: 'deliver' });
      expect(await claim(['webhooks'])).toBeUndefined();
    });

    it("completes the attempt's job with its record, and settles nothing for a claim that no longer holds its job", async () => {
      const attempt = (at: number) => ({ attemptedAt: later(at), statusCode: 200, error: null, durationMs: 3 });
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      await store().cancelTask({ accountId: 'acc_1', id, now });
      const delivery = (await store().getDeliveryForTask(id))!;
      const deliver = (await claim(['webhooks']))!;
      expect(
        await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: attempt(1), status: 'delivered', nextAttemptAt: null, job: { id: deliver.id, now: later(1) } }),
      ).toBe(true);
      expect(await store().getDeliveryForTask(id)).toMatchObject({ status: 'delivered', attempts: 1 });
      // (The cancelled task's generation job stays available on SQLite: no worker here. On PostgreSQL it ended with the cancel.)
      expect(await queue().countJobs()).toMatchObject({ leased: 0, done: jobsEndWithTask ? 2 : 1 });

      // Another claim holds the job now (this one's lease ran out): the attempt is counted, settles nothing, completes nothing.
      const second = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      await store().cancelTask({ accountId: 'acc_1', id: second.id, now });
      const pending = (await store().getDeliveryForTask(second.id))!;
      const stale = (await claim(['webhooks']))!;
      await queue().release({ jobId: stale.id, workerId: 'worker_test', now });
      const holder = (await claim(['webhooks']))!;
      // (A release counts as done on pg-boss, whose successor job takes over, not on SQLite's queue.)
      const held = await queue().countJobs();
      expect(held).toMatchObject({ leased: 1 });
      expect(
        await store().recordDeliveryAttempt({ deliveryId: pending.id, redeliveries: 0, attempt: attempt(2), status: 'delivered', nextAttemptAt: null, job: { id: stale.id, now: later(2) } }),
      ).toBe(false);
      expect(await store().getDeliveryForTask(second.id)).toMatchObject({ status: 'pending', attempts: 1, lastAttemptAt: later(2) });
      expect(await store().listDeliveryAttempts(pending.id)).toEqual([attempt(2)]);
      expect(await queue().countJobs()).toEqual(held);
      // The holder's own attempt settles it, and its job with it.
      expect(
        await store().recordDeliveryAttempt({ deliveryId: pending.id, redeliveries: 0, attempt: attempt(3), status: 'delivered', nextAttemptAt: null, job: { id: holder.id, now: later(3) } }),
      ).toBe(true);
      expect(await store().getDeliveryForTask(second.id)).toMatchObject({ status: 'delivered', attempts: 2 });
      expect(await queue().countJobs()).toMatchObject({ leased: 0, done: held.done + 1 });
    });

    it("answers a terminal task's query with every later change: attempts, a redelivery, the swept output, never another account", async () => {
      const { id } = await submit(10, now, { webhookUrl: 'https://hooks.example.com/v' });
      await store().startTask({ id, now });
      await store().completeTask({ id, now: later(5), outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3600_000) });
      // Read between every change: a store that keeps terminal tasks (SQLite) must not answer from before it.
      expect(await store().getTask('acc_1', id)).toMatchObject({ status: 'succeeded', webhook: { status: 'pending', attempts: 0 } });
      const delivery = (await store().getDeliveryForTask(id))!;
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: later(6), statusCode: 500, error: null, durationMs: 3 }, status: 'failed', nextAttemptAt: null });
      expect(await store().getTask('acc_1', id)).toMatchObject({ webhook: { status: 'failed', attempts: 1, lastAttemptAt: later(6) } });
      await store().redeliver({ deliveryId: delivery.id, now: later(7) });
      expect(await store().getTask('acc_1', id)).toMatchObject({ webhook: { status: 'pending', attempts: 1 } });
      await store().recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 1, attempt: { attemptedAt: later(8), statusCode: 200, error: null, durationMs: 3 }, status: 'delivered', nextAttemptAt: null });
      expect(await store().getTask('acc_1', id)).toMatchObject({ webhook: { status: 'delivered', attempts: 2, lastAttemptAt: later(8) } });
      expect((await store().getTask('acc_1', id))!.outputKey).toBe(`${id}.mp4`);
      await store().clearOutputKey(id);
      expect((await store().getTask('acc_1', id))!.outputKey).toBeNull();
      await store().createAccount({ id: 'acc_2', name: 'b', webhookSecret: 'whsec_y', openingGrant: 0, now });
      expect(await store().getTask('acc_2', id)).toBeUndefined();
    });
  });

  describe('the job queue', () => {
    it('gives a task its job in the same transaction, on its provider lane only', async () => {
      const { id } = await submit(10);
      expect(await claim(['byteplus', 'webhooks'])).toBeUndefined();
      const claimed = await claim(['local']);
      expect(claimed).toMatchObject({ taskId: id, kind: 'generate', provider: 'local', attempts: 1, maxAttempts: 3 });
      expect(await claim(['local'])).toBeUndefined();
      await queue().complete(claimed!.id, new Date());
      expect(await claim(['local'])).toBeUndefined();
      expect(await queue().countJobs()).toMatchObject({ available: 0, leased: 0, done: 1 });
    });

    it('starts what it claims when asked, each task answered as a start answers it; a task it cannot start comes without one', async () => {
      const first = await submit(10, later(1));
      const second = await submit(10, later(2));
      await store().cancelTask({ accountId: 'acc_1', id: second.id, now: later(3) });
      const jobs = await queue().claim({ workerId: 'worker_test', now: later(10), leaseMs: LEASE_MS, provider: 'local', limit: 10, start: true });
      expect(jobs[0]).toMatchObject({ taskId: first.id, kind: 'generate', started: { id: first.id, status: 'processing', updatedAt: later(10) } });
      expect(jobs[0]!.started).toEqual(await store().findTask(first.id));
      // A task cancelled while queued: PostgreSQL's claim does not take its job, SQLite's does and leaves it unstarted.
      if (jobsEndWithTask) expect(jobs).toHaveLength(1);
      else expect(jobs[1]).toMatchObject({ taskId: second.id, kind: 'generate' });
      expect(jobs[1]?.started).toBeUndefined();
      expect((await store().findTask(second.id))!.status).toBe('cancelled');
      // Not asked: nothing started.
      const third = await submit(10, later(11));
      const [plain] = await queue().claim({ workerId: 'worker_test', now: later(12), leaseMs: LEASE_MS, provider: 'local', limit: 10 });
      expect(plain).toMatchObject({ taskId: third.id });
      expect(plain!.started).toBeUndefined();
      expect((await store().findTask(third.id))!.status).toBe('queued');
    });

    it("completes the claim's job with its task when the task succeeds, and leaves it when the task is discarded", async () => {
      const out = (id: string) => ({ id, now, outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3600_000) });
      const { id } = await submit(10);
      const claimed = (await claim(['local']))!;
      await store().startTask({ id, now });
      expect(await store().completeTask({ ...out(id), job: claimed.id })).toMatchObject({ kind: 'succeeded' });
      expect(await queue().countJobs()).toMatchObject({ available: 0, leased: 0, done: 1 });
      // A claim that no longer holds its job (another took it) completes nothing with the task.
      const second = await submit(10);
      const stale = (await claim(['local']))!;
      await queue().release({ jobId: stale.id, workerId: 'worker_test', now });
      const holder = (await claim(['local']))!;
      await store().startTask({ id: second.id, now });
      expect(await store().completeTask({ ...out(second.id), job: stale.id })).toMatchObject({ kind: 'succeeded' });
      // (On PostgreSQL the task's move ended its job, whichever claim held it.)
      expect(await queue().countJobs()).toMatchObject({ leased: jobsEndWithTask ? 0 : 1 });
      await queue().complete(holder.id, new Date());
      // Discarded (cancelled while it rendered): its job stays with the claim, which completes it itself.
      const third = await submit(10);
      const cancelledJob = (await claim(['local']))!;
      await store().startTask({ id: third.id, now });
      await store().cancelTask({ accountId: 'acc_1', id: third.id, now });
      expect(await store().completeTask({ ...out(third.id), job: cancelledJob.id })).toMatchObject({ kind: 'discarded', status: 'cancelled' });
      expect(await queue().countJobs()).toMatchObject({ leased: jobsEndWithTask ? 0 : 1 });
      await queue().complete(cancelledJob.id, new Date());
      expect(await queue().countJobs()).toMatchObject({ available: 0, leased: 0 });
    });

    it('completes a task given as its start answered it exactly as without it, and as before when it has changed since', async () => {
      const out = (id: string, at = 5) => ({ id, now: later(at), outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3600_000) });
      const hook = { webhookUrl: 'https://hooks.example.com/v' };
      const start = async (id: string, at = 0) => {
        const started = await store().startTask({ id, now: later(at) });
        expect(started.kind).toBe('started');
        // The task as it is read (SQLite answers the row its move returned, not read back through the view).
        expect((started as { task: TaskRecord }).task).toEqual(await store().getTask('acc_1', id));
        return (started as { task: TaskRecord }).task;
      };
      // Unchanged since its start: the same answer and the same writes as a completion without it.
      const plain = await submit(10, now, hook);
      await start(plain.id);
      const withoutStart = await store().completeTask(out(plain.id));
      const given = await submit(10, now, hook);
      // (Its job ended with it on PostgreSQL.)
      const claimed = jobsEndWithTask ? undefined : (await claim(['local']))!;
      if (claimed) expect(claimed.taskId).toBe(plain.id);
      const givenJob = (await claim(['local']))!;
      expect(givenJob.taskId).toBe(given.id);
      const givenStart = await start(given.id);
      // PostgreSQL: in one message, without the ending that waits for the moved row (two round trips).
      // SQLite: without reading the task back.
      const endings = name === 'PostgreSQL' ? vi.spyOn(store() as unknown as { ending: () => unknown }, 'ending') : undefined;
      const readBack = name === 'SQLite' ? vi.spyOn((store() as unknown as { sql: Record<string, { get: () => unknown }> }).sql.selectTaskById!, 'get') : undefined;
      const completed = await store().completeTask({ ...out(given.id), job: givenJob.id, started: givenStart });
      for (const spy of [endings, readBack]) {
        if (spy) expect(spy).not.toHaveBeenCalled();
        spy?.mockRestore();
      }
      expect(completed).toMatchObject({ kind: 'succeeded' });
      const task = (completed as { task: TaskRecord }).task;
      expect(task).toEqual(await store().getTask('acc_1', given.id));
      const { task: other } = withoutStart as { task: TaskRecord };
      expect({ ...task, id: other.id, createdAt: other.createdAt, outputKey: other.outputKey }).toEqual(other);
      const event = (await store().getDeliveryForTask(given.id))!;
      expect(event).toMatchObject({ status: 'pending', eventType: 'video.generation.succeeded', attempts: 0 });
      // The same event as the other's but for its id (both tasks were created at the same instant).
      expect(event.body.replaceAll(given.id, plain.id)).toBe((await store().getDeliveryForTask(plain.id))!.body);
      expect(await queue().countJobs()).toMatchObject(jobsEndWithTask ? { leased: 0, done: 2 } : { leased: 1, done: 1 });
      if (claimed) await queue().complete(claimed.id, new Date());

      // Cancelled since (refunded): discarded, nothing of the completion written.
      const cancelled = await submit(10, now, hook);
      const cancelledStart = await start(cancelled.id);
      await store().cancelTask({ accountId: 'acc_1', id: cancelled.id, now: later(2) });
      const balance = (await store().getAccount('acc_1'))!.balance;
      expect(await store().completeTask({ ...out(cancelled.id), started: cancelledStart })).toEqual({ kind: 'discarded', status: 'cancelled' });
      expect(await store().getTask('acc_1', cancelled.id)).toMatchObject({ status: 'cancelled', outputKey: null, webhook: { status: 'pending' } });
      expect(JSON.parse((await store().getDeliveryForTask(cancelled.id))!.body).type).toBe('video.generation.cancelled');
      expect((await store().getAccount('acc_1'))!.balance).toBe(balance);

      // Started again by another claim since (a later updated_at): completed as without it, once.
      const restarted = await submit(10, now, hook);
      const stale = await start(restarted.id, 1);
      await start(restarted.id, 3);
      expect(await store().completeTask({ ...out(restarted.id), started: stale })).toMatchObject({ kind: 'succeeded', task: { status: 'succeeded', completedAt: later(5) } });
      expect(await store().completeTask({ ...out(restarted.id, 6), started: stale })).toEqual({ kind: 'discarded', status: 'succeeded' });
      expect((await store().listLedger('acc_1')).filter((entry) => entry.taskId === restarted.id)).toHaveLength(1);
    });

    it('hands 10 jobs to 10 concurrent claims, each once', async () => {
      for (let i = 0; i < 10; i++) await submit(1, later(i));
      const claimed = await Promise.all(Array.from({ length: 12 }, () => claim(['local'])));
      const taskIds = claimed.filter((j) => j !== undefined).map((j) => j!.taskId);
      expect(taskIds).toHaveLength(10);
      expect(new Set(taskIds).size).toBe(10);
    });

    it('retries a job at the time asked, counting the attempt', async () => {
      const { id } = await submit(10);
      const first = (await claim(['local']))!;
      const runAt = new Date(Date.now() + 600);
      await queue().retry({ jobId: first.id, runAt, error: 'boom', now: new Date() });
      expect(await claim(['local'])).toBeUndefined();
      const again = await eventually(() => claim(['local']));
      expect(Date.now()).toBeGreaterThanOrEqual(runAt.getTime());
      expect(again).toMatchObject({ taskId: id, attempts: 2 });
    });

    it('never hands out a buried job again', async () => {
      await submit(10);
      const claimed = (await claim(['local']))!;
      await queue().bury({ jobId: claimed.id, error: 'gave up', now: new Date() });
      expect(await claim(['local'], new Date(Date.now() + 3_600_000))).toBeUndefined();
      expect(await queue().countJobs()).toMatchObject({ dead: 1, available: 0, leased: 0 });
    });

    it("hands a job out again once its worker stops extending the lease, and not while it does", async () => {
      const { id } = await submit(10);
      const held = (await claim(['local']))!;
      // Extended for twice the lease: nobody else gets it meanwhile.
      const until = Date.now() + 2 * LEASE_MS;
      while (Date.now() < until) {
        expect(await queue().extendLease({ jobId: held.id, workerId: 'worker_test', now: new Date(), leaseMs: LEASE_MS })).toBe(true);
        expect(await claim(['local'], new Date())).toBeUndefined();
        await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 4));
      }
      // Then its worker "dies": the job comes back, as a further attempt.
      const again = await eventually(() => claim(['local'], new Date()));
      expect(again).toMatchObject({ taskId: id, attempts: 2 });
    });

    it('lets only the claim holding a job finish it, not one whose lease ran out and was claimed again', async () => {
      await submit(10);
      const stale = (await claim(['local']))!;
      const current = await eventually(() => claim(['local'], new Date()));
      expect(current.id).not.toBe(stale.id);
      await queue().complete(stale.id, new Date());
      await queue().retry({ jobId: stale.id, runAt: new Date(), error: 'stale', now: new Date() });
      await queue().bury({ jobId: stale.id, error: 'stale', now: new Date() });
      await queue().release({ jobId: stale.id, workerId: 'worker_test', now: new Date() });
      expect(await queue().extendLease({ jobId: stale.id, workerId: 'worker_test', now: new Date(), leaseMs: LEASE_MS })).toBe(false);
      expect(await queue().countJobs()).toMatchObject({ leased: 1, available: 0, done: 0, dead: 0 });
      expect(await queue().extendLease({ jobId: current.id, workerId: 'worker_test', now: new Date(), leaseMs: 60_000 })).toBe(true);
      await queue().complete(current.id, new Date());
      expect(await queue().countJobs()).toMatchObject({ leased: 0, available: 0, done: 1, dead: 0 });
    });
  });

  describe('upstream tasks', () => {
    const channels = (...specs: [name: string, limit: number][]) => specs.map(([name, limit]) => ({ name, limit }));
    const reserve = (taskId: string, offered = channels(['ch_a', 1]), at = now) => store().reserveUpstream({ taskId, channels: offered, now: at });
    const upstream = async (taskId: string) => (await store().getUpstreamTask(taskId))!;
    const channel = async (name: string) => (await store().listUpstreamChannels()).find((c) => c.name === name);
    const claimWork = (kind: 'check' | 'download', at: Date, workerId = 'w1', limit = 10) => store().claimUpstreamWork({ kind, workerId, now: at, leaseMs: 30_000, limit });
    const refunds = async () => (await store().listLedger('acc_1')).filter((e) => e.kind === 'refund');
    /** A task reserved on `on` and created upstream (`following`, its next check at `checkAt`). */
    const following = async (checkAt = later(5_000), on = 'ch_a', patch: Partial<NewTask> = {}, price = 10, at = now) => {
      const { id } = await submit(price, at, patch);
      expect((await reserve(id, channels([on, 100]), at)).kind).toBe('reserved');
      expect((await store().recordUpstreamCreated({ taskId: id, upstreamId: `cgt-${id}`, now: new Date(at.getTime() + 1), nextCheckAt: checkAt })).started).toBe(true);
      return id;
    };
    const output = (id: string) => ({ outputKey: `${id}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: later(3600_000) });

    it('reserves a slot on the first channel with room, writing its creating row; all full: full', async () => {
      const [a, b, c] = [await submit(10), await submit(10), await submit(10)];
      const offered = channels(['ch_a', 1], ['ch_b', 1]);
      const first = await reserve(a.id, offered);
      expect(first).toMatchObject({ kind: 'reserved', channel: 'ch_a', task: { id: a.id, status: 'queued' } });
      expect(await store().getUpstreamTask(a.id)).toEqual({
        taskId: a.id,
        channel: 'ch_a',
        state: 'creating',
        upstreamId: null,
        upstreamStatus: null,
        outcome: null,
        videoUrl: null,
        usage: null,
        nextCheckAt: null,
        downloadAttempts: 0,
        lastError: null,
        createdAt: now,
        updatedAt: now,
        endedAt: null,
        taskStatus: 'queued',
      });
      // ch_a is full: skipped.
      expect(await reserve(b.id, offered)).toMatchObject({ kind: 'reserved', channel: 'ch_b' });
      expect(await reserve(c.id, offered)).toEqual({ kind: 'full' });
      expect(await store().getUpstreamTask(c.id)).toBeUndefined();
      expect((await store().findTask(c.id))!.status).toBe('queued');
      // A channel that can take nothing is skipped too.
      expect(await reserve(c.id, channels(['ch_none', 0]))).toEqual({ kind: 'full' });
      expect((await store().listUpstreamChannels()).map((ch) => [ch.name, ch.inFlight])).toEqual([['ch_a', 1], ['ch_b', 1]]);
    });

    it('answers exists for a task that has its row, not_queued for one no longer queued', async () => {
      const { id } = await submit(10);
      await reserve(id);
      expect(await reserve(id, channels(['ch_b', 5]))).toMatchObject({ kind: 'exists', upstream: { taskId: id, channel: 'ch_a', state: 'creating' } });
      const cancelled = await submit(10);
      await store().cancelTask({ accountId: 'acc_1', id: cancelled.id, now });
      expect(await reserve(cancelled.id)).toEqual({ kind: 'not_queued', status: 'cancelled' });
      expect(await reserve('gen_unknown')).toEqual({ kind: 'not_queued', status: undefined });
      expect(await store().getUpstreamTask(cancelled.id)).toBeUndefined();
    });

    it('never overfills a channel, nor reserves one task twice, under concurrent reservations', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 20; i++) ids.push((await submit(1, later(i))).id);
      const outcomes = await Promise.all(ids.map((id) => reserve(id, channels(['ch_a', 5]))));
      expect(outcomes.filter((o) => o.kind === 'reserved')).toHaveLength(5);
      expect(outcomes.filter((o) => o.kind === 'full')).toHaveLength(15);
      expect(await channel('ch_a')).toMatchObject({ inFlight: 5 });
      // Two channels offered in turn: still no more than each one's limit.
      const spread = await Promise.all(ids.map((id) => reserve(id, channels(['ch_a', 5], ['ch_b', 3], ['ch_c', 4]))));
      expect(spread.filter((o) => o.kind === 'exists')).toHaveLength(5);
      expect(spread.filter((o) => o.kind === 'reserved')).toHaveLength(7);
      expect(spread.filter((o) => o.kind === 'full')).toHaveLength(8);
      expect((await store().listUpstreamChannels()).map((c) => [c.name, c.inFlight])).toEqual([['ch_a', 5], ['ch_b', 3], ['ch_c', 4]]);
      // One task reserved by several workers at once: one slot, the others see its row.
      const { id } = await submit(1, later(100));
      const same = await Promise.all(Array.from({ length: 6 }, () => reserve(id, channels(['ch_d', 10]))));
      expect(same.filter((o) => o.kind === 'reserved')).toHaveLength(1);
      expect(same.filter((o) => o.kind === 'exists')).toHaveLength(5);
      expect(await channel('ch_d')).toMatchObject({ inFlight: 1 });
    });

    it('takes reservations offered the same channels in different orders at once without a deadlock, and gives freed slots out once', async () => {
      const [first, second] = [await submit(1), await submit(1)];
      expect(await reserve(first.id, channels(['ch_a', 1]))).toMatchObject({ kind: 'reserved' });
      expect(await reserve(second.id, channels(['ch_b', 1]))).toMatchObject({ kind: 'reserved' });
      const ids: string[] = [];
      for (let i = 0; i < 30; i++) ids.push((await submit(1, later(i))).id);
      // Both full, offered in both orders (the submitter draws the order per task): each looks at both.
      const orders = [channels(['ch_a', 1], ['ch_b', 1]), channels(['ch_b', 1], ['ch_a', 1])];
      for (let round = 0; round < 3; round++) {
        const outcomes = await Promise.all(ids.map((id, i) => reserve(id, orders[i % 2])));
        expect(outcomes.map((o) => o.kind)).toEqual(ids.map(() => 'full'));
      }
      // Slots freed on both: taken by two of them, whatever the order they were offered in.
      await store().releaseUpstreamReservation({ taskId: first.id, channel: 'ch_a', error: 'freed', now, countFailure: false, cooldownAfter: 3, cooldownMs: 1_000 });
      await store().releaseUpstreamReservation({ taskId: second.id, channel: 'ch_b', error: 'freed', now, countFailure: false, cooldownAfter: 3, cooldownMs: 1_000 });
      const outcomes = await Promise.all(ids.map((id, i) => reserve(id, orders[i % 2])));
      expect(outcomes.filter((o) => o.kind === 'reserved').map((o) => (o as { channel: string }).channel).sort()).toEqual(['ch_a', 'ch_b']);
      expect(outcomes.filter((o) => o.kind === 'full')).toHaveLength(28);
      expect((await store().listUpstreamChannels()).map((c) => [c.name, c.inFlight])).toEqual([['ch_a', 1], ['ch_b', 1]]);
    });

    it('frees the slot on a release and counts failures: cooldownAfter in a row cool the channel, a create resets them', async () => {
      const a = await submit(10);
      const b = await submit(10);
      const release = (taskId: string, at: Date, countFailure = true) =>
        store().releaseUpstreamReservation({ taskId, channel: 'ch_a', error: `429 at ${at.getTime()}`, now: at, countFailure, cooldownAfter: 2, cooldownMs: 60_000 });
      expect(await reserve(a.id)).toMatchObject({ kind: 'reserved' });
      expect(await reserve(b.id)).toEqual({ kind: 'full' });
      await release(a.id, later(10));
      expect(await store().getUpstreamTask(a.id)).toBeUndefined();
      expect(await channel('ch_a')).toMatchObject({ inFlight: 0, consecutiveFailures: 1, createFailures: 1, cooldownUntil: null, lastError: `429 at ${later(10).getTime()}`, lastErrorAt: later(10) });
      expect(await reserve(b.id)).toMatchObject({ kind: 'reserved', channel: 'ch_a' });
      await release(b.id, later(20));
      expect(await channel('ch_a')).toMatchObject({ inFlight: 0, consecutiveFailures: 2, createFailures: 2, cooldownUntil: later(60_020) });
      // Not counted: the slot goes, the channel's health stays.
      expect(await reserve(a.id)).toMatchObject({ kind: 'reserved' });
      await release(a.id, later(30), false);
      expect(await channel('ch_a')).toMatchObject({ inFlight: 0, consecutiveFailures: 2, createFailures: 2, cooldownUntil: later(60_020), lastErrorAt: later(20) });
      // A release of another channel's row leaves that row alone.
      expect(await reserve(a.id, channels(['ch_b', 1]))).toMatchObject({ kind: 'reserved', channel: 'ch_b' });
      await release(a.id, later(35), false);
      expect(await upstream(a.id)).toMatchObject({ channel: 'ch_b', state: 'creating' });
      // A create answered: following, the task started, the channel's failures in a row forgotten.
      const created = await store().recordUpstreamCreated({ taskId: b.id, upstreamId: 'cgt-1', now: later(40), nextCheckAt: later(5_040) }).catch((e: Error) => e);
      expect(created).toBeInstanceOf(Error); // b's row was released: there is nothing being created
      expect(await reserve(b.id)).toMatchObject({ kind: 'reserved' });
      const recorded = await store().recordUpstreamCreated({ taskId: b.id, upstreamId: 'cgt-1', now: later(40), nextCheckAt: later(5_040) });
      expect(recorded).toMatchObject({ started: true, task: { id: b.id, status: 'processing', updatedAt: later(40) } });
      expect(await upstream(b.id)).toMatchObject({ state: 'following', upstreamId: 'cgt-1', upstreamStatus: 'queued', nextCheckAt: later(5_040), updatedAt: later(40), taskStatus: 'processing' });
      expect(await channel('ch_a')).toMatchObject({ inFlight: 1, consecutiveFailures: 0, cooldownUntil: null, creates: 1, createFailures: 2 });
      // Only a row being created can be recorded as created.
      await expect(store().recordUpstreamCreated({ taskId: b.id, upstreamId: 'cgt-2', now: later(50), nextCheckAt: later(5_050) })).rejects.toThrow();
      expect(await upstream(b.id)).toMatchObject({ upstreamId: 'cgt-1', nextCheckAt: later(5_040) });
      expect(await channel('ch_a')).toMatchObject({ creates: 1 });
    });

    it('checks at once a task that was cancelled while its create was on the wire', async () => {
      const { id } = await submit(10);
      await reserve(id);
      await store().cancelTask({ accountId: 'acc_1', id, now: later(5) });
      const recorded = await store().recordUpstreamCreated({ taskId: id, upstreamId: 'cgt-1', now: later(10), nextCheckAt: later(60_000) });
      expect(recorded).toMatchObject({ started: false, task: { status: 'cancelled' } });
      expect(await upstream(id)).toMatchObject({ state: 'following', upstreamId: 'cgt-1', nextCheckAt: later(10), taskStatus: 'cancelled' });
      expect(await refunds()).toHaveLength(1);
    });

    it('leases due following rows, each to one worker, until the lease runs out', async () => {
      const a = await following(later(1_000));
      const b = await following(later(2_000));
      const notYet = await following(later(10_000));
      const creating = (await submit(10)).id;
      await reserve(creating, channels(['ch_a', 100]));
      expect((await claimWork('check', later(1_500))).map((u) => u.taskId)).toEqual([a]);
      const [second] = await claimWork('check', later(2_500), 'w2');
      expect(second).toMatchObject({ taskId: b, state: 'following', upstreamId: `cgt-${b}`, taskStatus: 'processing' });
      expect(await claimWork('check', later(2_500), 'w3')).toEqual([]);
      expect(await claimWork('download', later(2_500), 'w3')).toEqual([]);
      // Held: only its worker keeps it.
      expect(await store().extendUpstreamLease({ taskId: a, workerId: 'w1', now: later(3_000), leaseMs: 30_000 })).toBe(true);
      expect(await store().extendUpstreamLease({ taskId: a, workerId: 'w2', now: later(3_000), leaseMs: 30_000 })).toBe(false);
      // b's lease (until 32.5 s) ran out; a's was extended to 33 s.
      // (The port promises no order among the rows of one claim.)
      expect((await claimWork('check', later(32_600), 'w3')).map((u) => u.taskId).sort()).toEqual([b, notYet].sort());
      expect((await claimWork('check', later(33_000), 'w4')).map((u) => u.taskId)).toEqual([a]);
      expect(await store().extendUpstreamLease({ taskId: a, workerId: 'w1', now: later(33_100), leaseMs: 30_000 })).toBe(false);
      expect(await claimWork('check', later(0), 'w5', 0)).toEqual([]);
    });

    it('hands each due row to one of several workers claiming at once', async () => {
      const ids: string[] = [];
      for (let i = 0; i < 10; i++) ids.push(await following(later(1_000 + i), 'ch_a', {}, 1, later(i)));
      const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => claimWork('check', later(2_000), `w${i}`, 3)));
      const claimed = claims.flat().map((u) => u.taskId);
      expect(claimed).toHaveLength(10);
      expect(new Set(claimed)).toEqual(new Set(ids));
    });

    it('records checks: the status seen and the next check, the lease given back', async () => {
      const id = await following(later(1_000));
      expect(await claimWork('check', later(1_000))).toHaveLength(1);
      // Not the holder: nothing recorded.
      await store().recordUpstreamChecks({ workerId: 'w2', now: later(1_100), checks: [{ taskId: id, upstreamStatus: 'failed', nextCheckAt: later(2_000) }] });
      expect(await upstream(id)).toMatchObject({ upstreamStatus: 'queued', nextCheckAt: later(1_000) });
      await store().recordUpstreamChecks({ workerId: 'w1', now: later(1_200), checks: [{ taskId: id, upstreamStatus: 'running', nextCheckAt: later(9_000), error: 'slow answer' }] });
      expect(await upstream(id)).toMatchObject({ upstreamStatus: 'running', nextCheckAt: later(9_000), lastError: 'slow answer', updatedAt: later(1_200) });
      expect(await claimWork('check', later(8_999), 'w2')).toEqual([]);
      // Due again well within the old lease (31 s): it was given back.
      expect((await claimWork('check', later(9_000), 'w2')).map((u) => u.taskId)).toEqual([id]);
      await store().recordUpstreamChecks({ workerId: 'w2', now: later(9_100), checks: [{ taskId: id, upstreamStatus: 'running', nextCheckAt: later(12_000) }] });
      expect(await upstream(id)).toMatchObject({ lastError: 'slow answer', nextCheckAt: later(12_000) });
    });

    it('downloads a succeeded task, retrying counted, then completes it in the same move: succeeded, charged, its webhook written', async () => {
      const id = await following(later(1_000), 'ch_a', { webhookUrl: 'https://hooks.example.com/v' });
      await store().markUpstreamSucceeded({ taskId: id, videoUrl: 'https://upstream.example.com/v.mp4', usage: { completionTokens: 1_000, totalTokens: 1_200 }, now: later(2_000) });
      expect(await upstream(id)).toMatchObject({
        state: 'downloading',
        upstreamStatus: 'succeeded',
        videoUrl: 'https://upstream.example.com/v.mp4',
        usage: { completionTokens: 1_000, totalTokens: 1_200 },
        nextCheckAt: later(2_000),
      });
      expect(await claimWork('check', later(3_000))).toEqual([]);
      expect(await claimWork('download', later(3_000))).toMatchObject([{ taskId: id, state: 'downloading' }]);
      expect(await claimWork('download', later(3_000), 'w2')).toEqual([]);
      await store().retryUpstreamDownload({ taskId: id, now: later(3_500), nextAt: later(8_000), error: 'connection reset' });
      expect(await upstream(id)).toMatchObject({ state: 'downloading', downloadAttempts: 1, lastError: 'connection reset', nextCheckAt: later(8_000) });
      expect(await claimWork('download', later(7_999), 'w2')).toEqual([]);
      expect(await claimWork('download', later(8_000), 'w2')).toMatchObject([{ taskId: id, downloadAttempts: 1 }]);
      await store().retryUpstreamDownload({ taskId: id, now: later(8_500), nextAt: later(9_000), error: 'short read' });
      expect(await upstream(id)).toMatchObject({ downloadAttempts: 2, lastError: 'short read' });
      expect(await claimWork('download', later(9_000), 'w3')).toHaveLength(1);
      const ended = await store().endUpstream({ taskId: id, now: later(10_000), outcome: 'succeeded', upstreamStatus: 'succeeded', complete: output(id) });
      expect(ended).toMatchObject({ changed: true, outcome: 'succeeded', task: { status: 'succeeded', outputKey: `${id}.mp4`, completedAt: later(10_000) } });
      expect(await upstream(id)).toMatchObject({ state: 'ended', outcome: 'succeeded', endedAt: later(10_000), nextCheckAt: null, taskStatus: 'succeeded', usage: { completionTokens: 1_000, totalTokens: 1_200 } });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 90, ledgerSum: 90 });
      expect(await refunds()).toEqual([]);
      expect(await store().getDeliveryForTask(id)).toMatchObject({ status: 'pending', eventType: 'video.generation.succeeded' });
      expect(await claim(['webhooks'])).toMatchObject({ taskId: id, kind: 'deliver' });
      expect(await claimWork('download', later(100_000))).toEqual([]);
      expect(await store().extendUpstreamLease({ taskId: id, workerId: 'w3', now: later(10_001), leaseMs: 30_000 })).toBe(false);
      expect(await channel('ch_a')).toMatchObject({ inFlight: 0, creates: 1, lostCreates: 0, discardedResults: 0 });
    });

    it('discards the result of a task cancelled meanwhile: counted, the task stays cancelled, refunded once', async () => {
      const id = await following(later(60_000));
      await store().cancelTask({ accountId: 'acc_1', id, now: later(3_000) });
      // Due at the cancel: the follower looks at once.
      expect(await upstream(id)).toMatchObject({ state: 'following', nextCheckAt: later(3_000), taskStatus: 'cancelled' });
      await store().markUpstreamSucceeded({ taskId: id, videoUrl: 'https://upstream.example.com/v.mp4', usage: null, now: later(4_000) });
      expect(await upstream(id)).toMatchObject({ state: 'downloading', usage: null });
      const ended = await store().endUpstream({ taskId: id, now: later(5_000), outcome: 'succeeded', upstreamStatus: 'succeeded', complete: output(id) });
      expect(ended).toMatchObject({ changed: false, outcome: 'discarded', task: { status: 'cancelled', outputKey: null, creditsRefunded: 10 } });
      expect(await upstream(id)).toMatchObject({ state: 'ended', outcome: 'discarded', taskStatus: 'cancelled' });
      expect(await channel('ch_a')).toMatchObject({ discardedResults: 1, lostCreates: 0, inFlight: 0 });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await refunds()).toHaveLength(1);
      // Ended already: a second end counts nothing again.
      expect(await store().endUpstream({ taskId: id, now: later(6_000), outcome: 'succeeded', complete: output(id) })).toMatchObject({ changed: false, outcome: 'discarded' });
      expect(await channel('ch_a')).toMatchObject({ discardedResults: 1 });
      expect(await upstream(id)).toMatchObject({ endedAt: later(5_000) });
    });

    it('fails the task with the upstream outcome, refunded exactly once', async () => {
      const id = await following(later(1_000));
      const ended = await store().endUpstream({ taskId: id, now: later(2_000), outcome: 'failed', upstreamStatus: 'failed', error: 'content policy', fail: { code: 'content_rejected', message: 'refused by the provider' } });
      expect(ended).toMatchObject({ changed: true, outcome: 'failed', task: { status: 'failed', errorCode: 'content_rejected', creditsRefunded: 10 } });
      expect(await upstream(id)).toMatchObject({ state: 'ended', outcome: 'failed', upstreamStatus: 'failed', lastError: 'content policy', nextCheckAt: null, endedAt: later(2_000) });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await refunds()).toHaveLength(1);
      // Again, and racing a cancel and a plain fail: no second refund.
      const again = await Promise.all([
        store().endUpstream({ taskId: id, now: later(3_000), outcome: 'failed', fail: { code: 'provider_error', message: 'x' } }),
        store().cancelTask({ accountId: 'acc_1', id, now: later(3_000) }),
        store().failTask({ id, now: later(3_000), code: 'timeout', message: 'y' }),
      ]);
      expect(again[0]).toMatchObject({ changed: false, outcome: 'failed', task: { status: 'failed', errorCode: 'content_rejected' } });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await refunds()).toHaveLength(1);
      expect(await upstream(id)).toMatchObject({ endedAt: later(2_000), lastError: 'content policy' });
    });

    it('fails a task refunded once when its end races a cancel', async () => {
      for (let i = 0; i < 5; i++) {
        const id = await following(later(1_000), 'ch_a', {}, 10, later(i));
        await Promise.all([
          store().endUpstream({ taskId: id, now: later(2_000), outcome: 'failed', fail: { code: 'provider_error', message: 'x' } }),
          store().cancelTask({ accountId: 'acc_1', id, now: later(2_000) }),
        ]);
        expect(await upstream(id)).toMatchObject({ state: 'ended', outcome: 'failed' });
      }
      expect(await refunds()).toHaveLength(5);
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
    });

    it('counts a lost create against its channel', async () => {
      const { id } = await submit(10);
      await reserve(id);
      const ended = await store().endUpstream({ taskId: id, now: later(1_000), outcome: 'lost', error: 'no answer to the create', fail: { code: 'provider_error', message: 'lost' } });
      expect(ended).toMatchObject({ changed: true, outcome: 'lost', task: { status: 'failed' } });
      expect(await upstream(id)).toMatchObject({ state: 'ended', outcome: 'lost', upstreamId: null, lastError: 'no answer to the create' });
      expect(await channel('ch_a')).toMatchObject({ lostCreates: 1, discardedResults: 0, inFlight: 0 });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      await expect(store().endUpstream({ taskId: 'gen_unknown', now, outcome: 'lost' })).rejects.toThrow();
    });

    it('makes a followed task due at once when it is cancelled or fails, never later than it was', async () => {
      const cancelled = await following(later(60_000));
      const failed = await following(later(60_000));
      const due = await following(later(50));
      const downloading = await following(later(60_000));
      await store().markUpstreamSucceeded({ taskId: downloading, videoUrl: 'https://upstream.example.com/v.mp4', usage: null, now: later(20) });
      await store().retryUpstreamDownload({ taskId: downloading, now: later(30), nextAt: later(60_000), error: 'x' });
      await store().cancelTask({ accountId: 'acc_1', id: cancelled, now: later(100) });
      await store().failTask({ id: failed, now: later(200), code: 'timeout', message: 'no result within the deadline' });
      await store().failTask({ id: due, now: later(300), code: 'timeout', message: 'no result within the deadline' });
      await store().cancelTask({ accountId: 'acc_1', id: downloading, now: later(400) });
      expect(await upstream(cancelled)).toMatchObject({ nextCheckAt: later(100), taskStatus: 'cancelled' });
      expect(await upstream(failed)).toMatchObject({ nextCheckAt: later(200), taskStatus: 'failed' });
      expect(await upstream(due)).toMatchObject({ nextCheckAt: later(50) });
      expect(await upstream(downloading)).toMatchObject({ state: 'downloading', nextCheckAt: later(400) });
      expect((await claimWork('check', later(400))).map((u) => u.taskId).sort()).toEqual([cancelled, failed, due].sort());
      expect((await claimWork('download', later(400))).map((u) => u.taskId)).toEqual([downloading]);
    });

    it('asks for a check at once only of a task being followed', async () => {
      const id = await following(later(60_000));
      expect(await store().requestUpstreamCheck({ taskId: id, now: later(10) })).toBe(true);
      expect(await upstream(id)).toMatchObject({ nextCheckAt: later(10) });
      expect(await store().requestUpstreamCheck({ taskId: id, now: later(20) })).toBe(true);
      expect(await upstream(id)).toMatchObject({ nextCheckAt: later(10) });
      expect(await store().requestUpstreamCheck({ taskId: 'gen_unknown', now: later(30) })).toBe(false);
      const creating = (await submit(10)).id;
      await reserve(creating, channels(['ch_a', 100]));
      expect(await store().requestUpstreamCheck({ taskId: creating, now: later(30) })).toBe(false);
      await store().endUpstream({ taskId: id, now: later(40), outcome: 'expired', fail: { code: 'timeout', message: 'expired upstream' } });
      expect(await store().requestUpstreamCheck({ taskId: id, now: later(50) })).toBe(false);
      expect(await upstream(id)).toMatchObject({ nextCheckAt: null });
    });

    if (name === 'PostgreSQL') {
      it('wakes the worker processes when a check is asked for (NOTIFY at commit)', async () => {
        const id = await following(later(60_000));
        const listener = await (kit.backend.store as PgStore).pool.connect();
        const heard: string[] = [];
        try {
          listener.on('notification', (message) => message.channel === 'vidgen_jobs' && heard.push(message.payload ?? ''));
          await listener.query('LISTEN vidgen_jobs');
          expect(await store().requestUpstreamCheck({ taskId: 'gen_unknown', now: later(10) })).toBe(false);
          expect(await store().requestUpstreamCheck({ taskId: id, now: later(10) })).toBe(true);
          await eventually(async () => (heard.length > 0 ? true : undefined), 5_000);
          expect(heard).toEqual(['upstream']);
        } finally {
          await listener.query('UNLISTEN *');
          listener.release();
        }
      });
    }

    it('lists every channel with what it has in flight', async () => {
      await following(later(1_000), 'ch_a');
      const downloading = await following(later(1_000), 'ch_a');
      await store().markUpstreamSucceeded({ taskId: downloading, videoUrl: 'https://upstream.example.com/v.mp4', usage: null, now: later(10) });
      const ended = await following(later(1_000), 'ch_a');
      await store().endUpstream({ taskId: ended, now: later(20), outcome: 'cancelled', fail: { code: 'cancelled_upstream', message: 'x' } });
      const creating = (await submit(10)).id;
      await reserve(creating, channels(['ch_a', 100]));
      await reserve((await submit(10)).id, channels(['ch_b', 100]));
      expect(await store().listUpstreamChannels()).toEqual([
        { name: 'ch_a', inFlight: 2, consecutiveFailures: 0, cooldownUntil: null, lastError: null, lastErrorAt: null, creates: 3, createFailures: 0, lostCreates: 0, discardedResults: 0 },
        { name: 'ch_b', inFlight: 1, consecutiveFailures: 0, cooldownUntil: null, lastError: null, lastErrorAt: null, creates: 0, createFailures: 0, lostCreates: 0, discardedResults: 0 },
      ]);
    });

    it('PostgreSQL: keeps each channel\'s in-flight count on its row through every move, and for rows a previous release writes', async (context) => {
      if (name !== 'PostgreSQL') return context.skip();
      const pool = (store() as PgStore).pool;
      /** What the channel's row says, and what counting upstream_tasks says: always the same. */
      const counts = async () =>
        (
          await pool.query(`SELECT c.name, c.in_flight, (SELECT count(*)::int FROM upstream_tasks u WHERE u.channel = c.name AND u.state IN ('creating', 'following')) AS counted
                            FROM upstream_channels c ORDER BY c.name`)
        ).rows.map((r) => [r.name, r.in_flight, r.counted]);
      const a = await following(later(1_000), 'ch_a');
      const b = await following(later(1_000), 'ch_a');
      const c = await following(later(1_000), 'ch_b');
      const creating = (await submit(10)).id;
      await reserve(creating, channels(['ch_a', 100]));
      expect(await counts()).toEqual([['ch_a', 3, 3], ['ch_b', 1, 1]]);
      // Out of flight: succeeded (downloading), ended, a reservation released, a lost create.
      await store().markUpstreamSucceeded({ taskId: a, videoUrl: 'https://upstream.example.com/v.mp4', usage: null, now: later(10) });
      await store().endUpstream({ taskId: c, now: later(20), outcome: 'cancelled', fail: { code: 'cancelled_upstream', message: 'x' } });
      expect(await counts()).toEqual([['ch_a', 2, 2], ['ch_b', 0, 0]]);
      await store().releaseUpstreamReservation({ taskId: creating, channel: 'ch_a', error: '429', now: later(30), countFailure: true, cooldownAfter: 5, cooldownMs: 1 });
      expect(await counts()).toEqual([['ch_a', 1, 1], ['ch_b', 0, 0]]);
      // Ending a downloading task, or ending one twice, moves nothing.
      await store().endUpstream({ taskId: a, now: later(40), outcome: 'succeeded', complete: output(a) });
      await store().endUpstream({ taskId: c, now: later(50), outcome: 'cancelled' });
      expect(await counts()).toEqual([['ch_a', 1, 1], ['ch_b', 0, 0]]);
      const lost = (await submit(10)).id;
      await reserve(lost, channels(['ch_b', 100]));
      await store().endUpstream({ taskId: lost, now: later(60), outcome: 'lost', fail: { code: 'provider_error', message: 'lost' } });
      expect(await counts()).toEqual([['ch_a', 1, 1], ['ch_b', 0, 0]]);
      expect(await channel('ch_b')).toMatchObject({ lostCreates: 1, inFlight: 0 });
      // A previous release's process writes the rows without knowing the column: the triggers count them, even on a channel with no row yet.
      const old = (await submit(10)).id;
      await pool.query(`INSERT INTO upstream_tasks (task_id, channel, state, created_at, updated_at) VALUES ($1, 'ch_old', 'creating', now(), now())`, [old]);
      expect(await counts()).toEqual([['ch_a', 1, 1], ['ch_b', 0, 0], ['ch_old', 1, 1]]);
      await pool.query(`UPDATE upstream_tasks SET channel = 'ch_b' WHERE task_id = $1`, [old]);
      await pool.query(`UPDATE upstream_tasks SET state = 'following', upstream_id = 'cgt-old' WHERE task_id = $1`, [old]);
      expect(await counts()).toEqual([['ch_a', 1, 1], ['ch_b', 1, 1], ['ch_old', 0, 0]]);
      await pool.query(`DELETE FROM upstream_tasks WHERE task_id = $1`, [b]);
      expect(await counts()).toEqual([['ch_a', 0, 0], ['ch_b', 1, 1], ['ch_old', 0, 0]]);
      // A reservation reads the row's count: full is full.
      expect(await reserve((await submit(10)).id, channels(['ch_b', 1]))).toEqual({ kind: 'full' });
    });

    it('PostgreSQL: migration 0008 counts what is in flight when it runs', async (context) => {
      if (name !== 'PostgreSQL') return context.skip();
      const pool = (store() as PgStore).pool;
      await following(later(1_000), 'ch_a');
      await following(later(1_000), 'ch_b');
      const done = await following(later(1_000), 'ch_b');
      await store().markUpstreamSucceeded({ taskId: done, videoUrl: 'https://upstream.example.com/v.mp4', usage: null, now: later(10) });
      // The database as the previous release left it (0007), with rows in flight, one on a channel without its row.
      await pool.query(`DROP TRIGGER upstream_tasks_in_flight_insert ON upstream_tasks; DROP TRIGGER upstream_tasks_in_flight_delete ON upstream_tasks;
                        DROP TRIGGER upstream_tasks_in_flight_update ON upstream_tasks; DROP FUNCTION vidgen_upstream_in_flight();
                        ALTER TABLE upstream_channels DROP COLUMN in_flight`);
      await pool.query(`INSERT INTO upstream_tasks (task_id, channel, state, created_at, updated_at) VALUES ($1, 'ch_c', 'creating', now(), now())`, [(await submit(10)).id]);
      await pool.query(readFileSync(new URL('../src/store/postgres/migrations/0008_upstream_in_flight.sql', import.meta.url), 'utf8'));
      expect((await store().listUpstreamChannels()).map((ch) => [ch.name, ch.inFlight])).toEqual([['ch_a', 1], ['ch_b', 1], ['ch_c', 1]]);
      await following(later(1_000), 'ch_c');
      expect(await channel('ch_c')).toMatchObject({ inFlight: 2 });
    });

    it('sums tokens and credits per channel and model, of tasks created within the range only', async () => {
      await store().grantCredits({ accountId: 'acc_1', amount: 1_000, note: null, now });
      const day = 24 * 3600_000;
      const succeeded = await following(later(1_000), 'ch_a', {}, 10, later(0));
      await store().markUpstreamSucceeded({ taskId: succeeded, videoUrl: 'https://upstream.example.com/v.mp4', usage: { completionTokens: 100, totalTokens: 120 }, now: later(100) });
      await store().endUpstream({ taskId: succeeded, now: later(200), outcome: 'succeeded', complete: output(succeeded) });
      const failed = await following(later(1_000), 'ch_a', {}, 20, later(1_000));
      await store().endUpstream({ taskId: failed, now: later(2_000), outcome: 'failed', fail: { code: 'provider_error', message: 'x' } });
      const fast = await following(later(1_000), 'ch_a', { model: 'vidgen-2.0-fast' }, 5, later(2_000));
      await store().markUpstreamSucceeded({ taskId: fast, videoUrl: 'https://upstream.example.com/f.mp4', usage: { completionTokens: 50, totalTokens: 60 }, now: later(3_000) });
      const other = await following(later(1_000), 'ch_b', {}, 7, later(3_000));
      await store().markUpstreamSucceeded({ taskId: other, videoUrl: 'https://upstream.example.com/o.mp4', usage: { completionTokens: 9, totalTokens: null }, now: later(4_000) });
      // Outside the range: before it, and at its end (exclusive).
      await following(later(1_000), 'ch_a', {}, 30, new Date(now.getTime() - 1));
      await following(later(1_000), 'ch_a', {}, 40, later(day));
      // Never upstream: not in the report.
      await submit(50, later(5_000));
      expect(await store().upstreamUsageReport({ from: now, to: later(day) })).toEqual([
        { channel: 'ch_a', model: 'vidgen-2.0', tasks: 2, succeeded: 1, completionTokens: 100, totalTokens: 120, creditsCharged: 30, creditsRefunded: 20 },
        { channel: 'ch_a', model: 'vidgen-2.0-fast', tasks: 1, succeeded: 0, completionTokens: 50, totalTokens: 60, creditsCharged: 5, creditsRefunded: 0 },
        { channel: 'ch_b', model: 'vidgen-2.0', tasks: 1, succeeded: 0, completionTokens: 9, totalTokens: 0, creditsCharged: 7, creditsRefunded: 0 },
      ]);
      expect(await store().upstreamUsageReport({ from: later(2 * day), to: later(3 * day) })).toEqual([]);
    });
  });

  if (name === 'SQLite') {
    it('keeps its data and migrations across reopening a file', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'vidgen-store-'));
      try {
        const path = join(dir, 'nested', 'vidgen.db');
        const first = new SqliteStore(path);
        await first.createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: 5, now });
        await first.close();
        const second = new SqliteStore(path);
        expect((await second.getAccount('acc_1'))?.balance).toBe(5);
        expect(second.db.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(9);
        expect(second.db.pragma('journal_mode', { simple: true })).toBe('wal');
        // Savepoint journals in memory, not a temporary file written page by page (2: MEMORY).
        expect(second.db.pragma('temp_store', { simple: true })).toBe(2);
        await second.close();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('reports a claim still in progress (a key written by another process mid-transaction)', async () => {
      await kit.sql(
        "INSERT INTO idempotency_keys (account_id, key, fingerprint, state, created_at, expires_at) VALUES ('acc_1', 'k', 'f1', 'in_progress', ?, ?)",
        '',
        [now.getTime(), later(3600_000).getTime()],
      );
      const outcome = await store().submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(3600_000) }, now, respond });
      expect(outcome).toEqual({ kind: 'idempotency_in_progress' });
    });
  }

  if (name === 'PostgreSQL') {
    it("runs a generation job's lease on the claimers' clock: extended from the caller's now, claimed again only once it has run out", async () => {
      const { id } = await submit(10);
      // On the real clock's scale: countJobs tells leased from available by the database's now().
      const t0 = Date.now();
      const at = (ms: number) => new Date(t0 + ms);
      const held = (await claim(['local'], at(0)))!;
      expect(held).toMatchObject({ taskId: id, attempts: 1 });
      expect(await queue().extendLease({ jobId: held.id, workerId: 'worker_test', now: at(50_000), leaseMs: LEASE_MS })).toBe(true);
      expect(await claim(['local'], at(50_000 + LEASE_MS - 1))).toBeUndefined();
      const again = (await claim(['local'], at(50_000 + LEASE_MS)))!;
      expect(again).toMatchObject({ taskId: id, attempts: 2 });
      // The first claim holds nothing any more: it extends, retries, releases and buries nothing.
      expect(await queue().extendLease({ jobId: held.id, workerId: 'worker_test', now: at(60_000), leaseMs: LEASE_MS })).toBe(false);
      await queue().retry({ jobId: held.id, runAt: at(60_000), error: 'x', now: at(60_000) });
      await queue().release({ jobId: held.id, workerId: 'worker_test', now: at(60_000) });
      await queue().bury({ jobId: held.id, error: 'x', now: at(60_000) });
      expect(await queue().countJobs()).toMatchObject({ leased: 1, dead: 0 });
      expect(await queue().extendLease({ jobId: again.id, workerId: 'worker_test', now: at(60_000), leaseMs: LEASE_MS })).toBe(true);
    });

    it('a submit with a key another transaction holds waits for its commit, then replays its answer', async () => {
      const pg = kit.backend.store as PgStore;
      let holding!: () => void;
      const isHolding = new Promise<void>((resolve) => (holding = resolve));
      const first = pg.submitTask({
        job,
        task: task(40),
        idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(3600_000) },
        now,
        respond: (t) => {
          holding();
          return respond(t);
        },
      });
      await isHolding;
      let secondDone = false;
      const second = pg.submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(3600_000) }, now, respond }).finally(() => {
        secondDone = true;
      });
      const [a, b] = await Promise.all([first, second]);
      expect(secondDone).toBe(true);
      expect(a.kind).toBe('created');
      expect(b).toEqual({ kind: 'replayed', response: a.kind === 'created' ? a.response : undefined });
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
    });

    it('an ending whose connection is lost before its COMMIT leaves nothing of it, and the next attempt ends the task once', async () => {
      const pg = kit.backend.store as PgStore;
      const { id } = await submit(40, now, { webhookUrl: 'https://hooks.example.com/v' });
      expect((await claim(['local']))?.taskId).toBe(id);
      await pg.startTask({ id, now });
      // Another transaction holds the account's row: the ending's second message (delivery, job, refund, usage, COMMIT)
      // waits for it after its first (BEGIN and the task's move) has run. Its connection is cut there, as a killed
      // process's would be.
      const blocker = await pg.pool.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query("SELECT balance FROM accounts WHERE id = 'acc_1' FOR UPDATE");
        const failing = pg.failTask({ id, now: later(10), code: 'provider_error', message: 'upstream failed' });
        const pid = await eventually(async () => {
          const { rows } = await pg.pool.query(
            // The one backend waiting for a lock: the blocker's (its statements inlined, or EXECUTEs of their kept plans).
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
          );
          return rows[0]?.pid as number | undefined;
        });
        // Its rejection handled before the cut: the cut connection's error may come before the terminating query's answer.
        const refused = expect(failing).rejects.toThrow();
        await pg.pool.query('SELECT pg_terminate_backend($1)', [pid]);
        await refused;
      } finally {
        await blocker.query('ROLLBACK');
        blocker.release();
      }
      // Nothing of it: the task still processing, no refund, no delivery, no webhook job, no usage counted.
      expect(await store().findTask(id)).toMatchObject({ status: 'processing', creditsRefunded: 0, webhook: null });
      expect(await store().getDeliveryForTask(id)).toBeUndefined();
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
      expect(await claim(['webhooks'])).toBeUndefined();
      const day = new Date('2026-11-22T00:00:00.000Z');
      const usage = async () => (await store().usageTotals({ accountId: 'acc_1', from: day, to: new Date(day.getTime() + 86_400_000), bucketMs: 86_400_000, byModel: false }))[0];
      expect(await usage()).toMatchObject({ creditsCharged: 40, creditsRefunded: 0, failed: 0 });
      // The next attempt (the job's lease brings it back) ends it, once.
      expect((await store().failTask({ id, now: later(20), code: 'provider_error', message: 'upstream failed' })).kind).toBe('failed');
      expect((await store().failTask({ id, now: later(30), code: 'provider_error', message: 'upstream failed' })).kind).toBe('already_terminal');
      expect(await store().auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
      expect(await store().getDeliveryForTask(id)).toMatchObject({ status: 'pending', eventType: 'video.generation.failed' });
      expect(await claim(['webhooks'])).toMatchObject({ taskId: id, kind: 'deliver' });
      expect(await usage()).toMatchObject({ creditsCharged: 40, creditsRefunded: 40, failed: 1 });
    });

    it('announces every status change to other processes at commit (LISTEN/NOTIFY)', async () => {
      const seen: string[] = [];
      const { id } = await submit(10);
      const unsubscribe = kit.backend.events.subscribe(id, (status) => seen.push(status));
      // Another process's store: its moves reach this process's listeners through the database.
      const other = await openBackend(
        { database: { kind: 'postgres', url: (kit.backend.store as PgStore).pool.options.connectionString!, poolSize: 2 }, jobLeaseMs: LEASE_MS },
        { logger: silentLogger, listen: false, supervise: false },
      );
      try {
        await other.store.startTask({ id, now });
        await other.store.cancelTask({ accountId: 'acc_1', id, now });
        await eventually(async () => (seen.length >= 2 ? true : undefined), 5_000);
        expect(seen).toEqual(['processing', 'cancelled']);
      } finally {
        unsubscribe();
        await other.close();
      }
    });

    it('tells a listener that subscribes just after a cancel was announced of it at once, for a while', async () => {
      const url = (kit.backend.store as PgStore).pool.options.connectionString!;
      let clock = 1_000_000;
      const worker = createPostgresTaskEvents({ connectionString: url, logger: silentLogger, statuses: 'cancels', recentCancelMs: 30_000, now: () => clock });
      const { id } = await submit(10);
      try {
        await worker.ready;
        const heard: string[] = [];
        const first = worker.subscribe(id, (status) => heard.push(status));
        await store().cancelTask({ accountId: 'acc_1', id, now });
        await eventually(async () => (heard.length >= 1 ? true : undefined), 5_000);
        first();
        // A claim that started the task answered after the cancel's notice came: its worker subscribes now and is told.
        clock += 29_999;
        const late: string[] = [];
        worker.subscribe(id, (status) => late.push(status))();
        expect(late).toEqual(['cancelled']);
        // Long after, no more.
        clock += 1;
        const later: string[] = [];
        worker.subscribe(id, (status) => later.push(status))();
        expect(later).toEqual([]);
      } finally {
        await worker.close();
      }
    });

    it('tells a process that listens for cancels only (a worker alone) of the cancel, not of the other moves', async () => {
      const url = (kit.backend.store as PgStore).pool.options.connectionString!;
      const worker = createPostgresTaskEvents({ connectionString: url, logger: silentLogger, statuses: 'cancels' });
      const seen: string[] = [];
      const { id } = await submit(10);
      const started = await submit(10);
      await worker.ready;
      const unsubscribe = worker.subscribe(id, (status) => seen.push(`${id} ${status}`));
      const unsubscribeStarted = worker.subscribe(started.id, (status) => seen.push(`${started.id} ${status}`));
      try {
        await store().startTask({ id, now });
        await store().startTask({ id: started.id, now });
        await store().completeTask({ id: started.id, now, outputKey: 'x.mp4', outputUrl: 'https://x/x.mp4', outputExpiresAt: later(3_600_000) });
        await store().cancelTask({ accountId: 'acc_1', id, now });
        // Notices arrive in commit order on the one connection: the moves before the cancel would have come first.
        await eventually(async () => (seen.length >= 1 ? true : undefined), 5_000);
        expect(seen).toEqual([`${id} cancelled`]);
        // Its own publishes still reach its listeners, whatever the status.
        worker.publish(started.id, 'succeeded');
        expect(seen).toEqual([`${id} cancelled`, `${started.id} succeeded`]);
      } finally {
        unsubscribe();
        unsubscribeStarted();
        await worker.close();
      }
    });
  }
});
