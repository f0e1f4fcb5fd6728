/**
 * The SQLite store's memory of terminal tasks (src/store/sqlite/terminal-tasks.ts): what it
 * keeps, and the rules that keep it from answering with a task as it no longer is. The
 * behaviour through the store, on both stores, is in store-conformance.test.ts.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TerminalTasks } from '../src/store/sqlite/terminal-tasks.js';
import type { TaskRecord } from '../src/store/store.js';

let dir: string;
let db: Database.Database;
let other: Database.Database;
let clock: number;
let tasks: TerminalTasks;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-terminal-tasks-'));
  db = new Database(join(dir, 'db.sqlite'));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (x INTEGER)');
  other = new Database(join(dir, 'db.sqlite'));
  clock = 0;
  tasks = new TerminalTasks(db, { recheckMs: 100, maxEntries: 3, now: () => clock });
});

afterEach(() => {
  db.close();
  other.close();
  rmSync(dir, { recursive: true, force: true });
});

const task = (id: string, status: TaskRecord['status'], accountId = 'acc_1') => ({ id, accountId, status }) as TaskRecord;

describe('terminal tasks kept for the query', () => {
  it('keeps a terminal task once its read has settled, for its own account only; never an active one', async () => {
    await tasks.remember(Promise.resolve(task('a', 'succeeded')));
    await tasks.remember(Promise.resolve(task('b', 'processing')));
    await tasks.remember(Promise.resolve(undefined));
    expect(tasks.find('acc_1', 'a')).toMatchObject({ id: 'a' });
    expect(tasks.find('acc_2', 'a')).toBeUndefined();
    expect(tasks.find('acc_1', 'b')).toBeUndefined();
  });

  it('keeps nothing from a read that failed (its batch did not commit) or that a forget overlapped', async () => {
    await expect(tasks.remember(Promise.reject(new Error('commit failed')))).rejects.toThrow('commit failed');
    let settle!: (value: TaskRecord) => void;
    const overlapped = tasks.remember(new Promise((resolve) => (settle = resolve)));
    tasks.forget('other task');
    settle(task('a', 'failed'));
    await overlapped;
    expect(tasks.find('acc_1', 'a')).toBeUndefined();
  });

  it('forgets a task on demand', async () => {
    await tasks.remember(Promise.resolve(task('a', 'cancelled')));
    tasks.forget('a');
    expect(tasks.find('acc_1', 'a')).toBeUndefined();
  });

  it('forgets everything once another connection has committed, within recheckMs', async () => {
    await tasks.remember(Promise.resolve(task('a', 'succeeded')));
    other.exec('INSERT INTO t VALUES (1)');
    clock = 99;
    expect(tasks.find('acc_1', 'a')).toMatchObject({ id: 'a' });
    clock = 100;
    expect(tasks.find('acc_1', 'a')).toBeUndefined();
    // This connection's own commits are not another's: what it keeps afterwards stays.
    await tasks.remember(Promise.resolve(task('a', 'succeeded')));
    db.exec('INSERT INTO t VALUES (2)');
    clock = 300;
    expect(tasks.find('acc_1', 'a')).toMatchObject({ id: 'a' });
  });

  it('holds at most maxEntries, dropping the oldest', async () => {
    for (const id of ['a', 'b', 'c', 'd']) await tasks.remember(Promise.resolve(task(id, 'succeeded')));
    expect(tasks.find('acc_1', 'a')).toBeUndefined();
    expect(['b', 'c', 'd'].map((id) => tasks.find('acc_1', id)?.id)).toEqual(['b', 'c', 'd']);
  });
});
