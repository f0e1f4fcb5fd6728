/** The SQLite store: charges, refunds, idempotency and paging, straight through the Store port. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { newRequestId } from '../src/domain/ids.js';
import type { NewTask, StoredResponse } from '../src/store/store.js';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const later = (ms: number) => new Date(now.getTime() + ms);
const respond = (task: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { requestId: task.id, creditsCharged: task.creditsCharged } });

let stores: SqliteStore[] = [];
afterEach(async () => {
  for (const store of stores) await store.close();
  stores = [];
});

async function storeWithAccount(credits: number) {
  const store = new SqliteStore(':memory:');
  stores.push(store);
  await store.createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: credits, now });
  return store;
}

const task = (price: number, at = now): NewTask => ({
  id: newRequestId(at),
  accountId: 'acc_1',
  model: 'vidgen-2.0',
  prompt: 'p',
  duration: 5,
  aspectRatio: '16:9',
  resolution: '720p',
  mode: 'text_to_video',
  mediaUrls: [],
  metadata: null,
  webhookUrl: null,
  creditsCharged: price,
  deadlineAt: new Date(at.getTime() + 30 * 60_000),
});
const job = { maxAttempts: 3, provider: 'local' };

describe('SqliteStore', () => {
  it('charges with the task and records the charge in the ledger', async () => {
    const store = await storeWithAccount(100);
    const outcome = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    expect(outcome.kind).toBe('created');
    expect(await store.auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
    expect((await store.listLedger('acc_1')).map((e) => [e.kind, e.amount])).toEqual([['grant', 100], ['charge', -40]]);
  });

  it('refuses a charge above the balance and writes nothing', async () => {
    const store = await storeWithAccount(30);
    const outcome = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    expect(outcome).toEqual({ kind: 'insufficient_credits', required: 40, available: 30 });
    expect(await store.auditBalance('acc_1')).toEqual({ balance: 30, ledgerSum: 30 });
    expect(await store.listTasks({ accountId: 'acc_1', limit: 10 })).toEqual([]);
  });

  it('refunds a cancelled task exactly once', async () => {
    const store = await storeWithAccount(100);
    const created = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    const id = created.kind === 'created' ? created.task.id : '';
    expect((await store.cancelTask({ accountId: 'acc_1', id, now: later(1000) })).kind).toBe('cancelled');
    expect((await store.cancelTask({ accountId: 'acc_1', id, now: later(2000) })).kind).toBe('already_cancelled');
    expect(await store.auditBalance('acc_1')).toEqual({ balance: 100, ledgerSum: 100 });
    const cancelled = await store.getTask('acc_1', id);
    expect(cancelled).toMatchObject({ status: 'cancelled', creditsRefunded: 40, completedAt: later(1000) });
    expect((await store.listLedger('acc_1')).filter((e) => e.kind === 'refund')).toHaveLength(1);
  });

  it('refuses a second refund row for a task even if asked directly', async () => {
    const store = await storeWithAccount(100);
    const created = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    const id = created.kind === 'created' ? created.task.id : '';
    await store.cancelTask({ accountId: 'acc_1', id, now });
    const insert = () =>
      store.db.prepare("INSERT INTO ledger_entries (account_id, kind, amount, task_id, created_at) VALUES ('acc_1', 'refund', 40, ?, 0)").run(id);
    expect(insert).toThrow(/UNIQUE/);
  });

  it('does not cancel a finished task', async () => {
    const store = await storeWithAccount(100);
    const created = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    const id = created.kind === 'created' ? created.task.id : '';
    store.db.prepare("UPDATE tasks SET status = 'succeeded' WHERE id = ?").run(id);
    expect(await store.cancelTask({ accountId: 'acc_1', id, now })).toEqual({ kind: 'invalid_state', status: 'succeeded' });
    expect(await store.auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
  });

  it('hides tasks of other accounts', async () => {
    const store = await storeWithAccount(100);
    await store.createAccount({ id: 'acc_2', name: 'b', webhookSecret: 'whsec_y', openingGrant: 0, now });
    const created = await store.submitTask({ job, task: task(40), idempotency: null, now, respond });
    const id = created.kind === 'created' ? created.task.id : '';
    expect(await store.getTask('acc_2', id)).toBeUndefined();
    expect(await store.cancelTask({ accountId: 'acc_2', id, now })).toEqual({ kind: 'not_found' });
  });

  describe('idempotency', () => {
    const claim = (key: string, fingerprint = 'f1') => ({ key, fingerprint, expiresAt: later(24 * 3600_000) });

    it('replays the first answer for the same key and body, charging once', async () => {
      const store = await storeWithAccount(100);
      const first = await store.submitTask({ job, task: task(40), idempotency: claim('k'), now, respond });
      const again = await store.submitTask({ job, task: task(40), idempotency: claim('k'), now: later(10), respond });
      expect(first.kind).toBe('created');
      expect(again).toEqual({ kind: 'replayed', response: first.kind === 'created' ? first.response : undefined });
      expect(await store.auditBalance('acc_1')).toEqual({ balance: 60, ledgerSum: 60 });
    });

    it('refuses the same key with another body', async () => {
      const store = await storeWithAccount(100);
      await store.submitTask({ job, task: task(40), idempotency: claim('k', 'f1'), now, respond });
      expect(await store.submitTask({ job, task: task(40), idempotency: claim('k', 'f2'), now, respond })).toEqual({ kind: 'idempotency_key_reused' });
    });

    it('reports a claim still in progress', async () => {
      const store = await storeWithAccount(100);
      store.db
        .prepare("INSERT INTO idempotency_keys (account_id, key, fingerprint, state, created_at, expires_at) VALUES ('acc_1', 'k', 'f1', 'in_progress', ?, ?)")
        .run(now.getTime(), later(3600_000).getTime());
      expect(await store.submitTask({ job, task: task(40), idempotency: claim('k'), now, respond })).toEqual({ kind: 'idempotency_in_progress' });
    });

    it('forgets a key after it expires', async () => {
      const store = await storeWithAccount(100);
      await store.submitTask({ job, task: task(40), idempotency: { key: 'k', fingerprint: 'f1', expiresAt: later(1000) }, now, respond });
      const after = await store.submitTask({ job, task: task(40, later(2000)), idempotency: claim('k', 'f2'), now: later(2000), respond });
      expect(after.kind).toBe('created');
    });

    it('does not claim the key when the charge fails', async () => {
      const store = await storeWithAccount(30);
      expect((await store.submitTask({ job, task: task(40), idempotency: claim('k'), now, respond })).kind).toBe('insufficient_credits');
      await store.grantCredits({ accountId: 'acc_1', amount: 100, note: null, now });
      expect((await store.submitTask({ job, task: task(40), idempotency: claim('k'), now, respond })).kind).toBe('created');
    });
  });

  it('pages newest first by position, with and without a status', async () => {
    const store = await storeWithAccount(1000);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const created = await store.submitTask({ job, task: task(10, later(i * 1000)), idempotency: null, now: later(i * 1000), respond });
      ids.push(created.kind === 'created' ? created.task.id : '');
    }
    await store.cancelTask({ accountId: 'acc_1', id: ids[1]!, now: later(9000) });
    const first = await store.listTasks({ accountId: 'acc_1', limit: 2 });
    expect(first.map((t) => t.id)).toEqual([ids[4], ids[3]]);
    const next = await store.listTasks({ accountId: 'acc_1', limit: 10, after: { createdAt: first[1]!.createdAt, id: first[1]!.id } });
    expect(next.map((t) => t.id)).toEqual([ids[2], ids[1], ids[0]]);
    expect((await store.listTasks({ accountId: 'acc_1', status: 'cancelled', limit: 10 })).map((t) => t.id)).toEqual([ids[1]]);
  });

  it('keeps its data and migrations across reopening a file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vidgen-store-'));
    try {
      const path = join(dir, 'nested', 'vidgen.db');
      const first = new SqliteStore(path);
      await first.createAccount({ id: 'acc_1', name: 'a', webhookSecret: 'whsec_x', openingGrant: 5, now });
      await first.close();
      const second = new SqliteStore(path);
      expect((await second.getAccount('acc_1'))?.balance).toBe(5);
      expect(second.db.prepare('SELECT count(*) FROM schema_migrations').pluck().get()).toBe(4);
      expect(second.db.pragma('journal_mode', { simple: true })).toBe('wal');
      await second.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
