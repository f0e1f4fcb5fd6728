/**
 * Group commit (src/store/sqlite/group-commit.ts) on a real SQLite file, seen
 * from a second connection as another process would see it.
 */
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/store/sqlite/group-commit.js';
import { PendingUsage } from '../src/store/sqlite/pending-usage.js';

let dir: string;
let db: Database.Database;
let other: Database.Database;
let group: GroupCommit;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-group-commit-'));
  db = new Database(join(dir, 'db.sqlite'));
  db.pragma('journal_mode = WAL');
  db.pragma('foreign_keys = ON');
  db.exec(`
    CREATE TABLE parents (id INTEGER PRIMARY KEY);
    CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
                        parent INTEGER REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED);
    -- A write of 'lose the batch' makes SQLite roll back the whole transaction, as a full disk would.
    CREATE TRIGGER lose_the_batch BEFORE INSERT ON items WHEN NEW.name = 'lose the batch'
      BEGIN SELECT RAISE(ROLLBACK, 'the transaction was rolled back'); END;
  `);
  other = new Database(join(dir, 'db.sqlite'));
  group = new GroupCommit(db);
});

afterEach(() => {
  group.flush();
  db.close();
  other.close();
  rmSync(dir, { recursive: true, force: true });
});

const insert = (name: string, parent: number | null = null) => () => db.prepare('INSERT INTO items (name, parent) VALUES (?, ?)').run(name, parent).lastInsertRowid;
const namesSeenByAnotherConnection = () => other.prepare('SELECT name FROM items ORDER BY id').pluck().all();
/** Resolves once the current turn of the event loop, and the group's end-of-turn work, are over. */
const turnEnded = () => new Promise<void>((resolve) => setImmediate(resolve));
const commitsSeenByAnotherConnection = () => other.pragma('data_version', { simple: true }) as number;

describe('group commit', () => {
  it('commits the writes of one turn of the event loop together, and settles none of them before that commit', async () => {
    const before = commitsSeenByAnotherConnection();
    const writes = [group.write(insert('a')), group.write(insert('b')), group.write(insert('c'))];
    expect(namesSeenByAnotherConnection()).toEqual([]);
    let settled = false;
    void Promise.all(writes).then(() => (settled = true));
    await Promise.resolve();
    expect(settled).toBe(false);

    expect(await Promise.all(writes)).toEqual([1, 2, 3]);
    expect(namesSeenByAnotherConnection()).toEqual(['a', 'b', 'c']);
    expect(commitsSeenByAnotherConnection()).toBe(before + 1);

    // The next turn's writes are the next commit.
    await group.write(insert('d'));
    expect(commitsSeenByAnotherConnection()).toBe(before + 2);
  });

  it('rolls a write that throws back to its savepoint: its statements are undone, the others in the batch commit', async () => {
    const failing = group.write(() => {
      insert('x')();
      insert('a')();
      throw new Error('changed its mind');
    });
    const ok = group.write(insert('a'));
    await expect(failing).rejects.toThrow('changed its mind');
    await ok;
    expect(namesSeenByAnotherConnection()).toEqual(['a']);
  });

  it('fails a write whose statement fails (a constraint) alone', async () => {
    const first = group.write(insert('a'));
    const duplicate = group.write(insert('a'));
    const third = group.write(insert('b'));
    await expect(duplicate).rejects.toThrow(/UNIQUE constraint failed/);
    await Promise.all([first, third]);
    expect(namesSeenByAnotherConnection()).toEqual(['a', 'b']);
  });

  it('fails every write and read of a batch whose commit fails, and keeps none of it', async () => {
    const fine = group.write(insert('a'));
    // A deferred foreign key is checked at COMMIT: this batch cannot commit.
    const orphan = group.write(insert('orphan', 42));
    const read = group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get());
    for (const member of [fine, orphan, read]) await expect(member).rejects.toThrow(/FOREIGN KEY constraint failed/);
    expect(namesSeenByAnotherConnection()).toEqual([]);
    expect(db.inTransaction).toBe(false);

    await group.write(insert('after'));
    expect(namesSeenByAnotherConnection()).toEqual(['after']);
  });

  it('fails the batch when SQLite rolls the whole transaction back, and opens a new one for the writes after it', async () => {
    const earlier = group.write(insert('a'));
    const losing = group.write(insert('lose the batch'));
    const later = group.write(insert('b'));
    await expect(losing).rejects.toThrow('the transaction was rolled back');
    await expect(earlier).rejects.toThrow('the transaction was rolled back');
    await later;
    expect(namesSeenByAnotherConnection()).toEqual(['b']);
  });

  it('answers a read at once when no batch is open, and after the commit when one is (it may have seen the batch)', async () => {
    await group.write(insert('a'));
    expect(db.inTransaction).toBe(false);
    expect(await group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get())).toBe(1);

    const order: string[] = [];
    const write = group.write(insert('b')).then(() => order.push('write'));
    const read = group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get()).then((count) => order.push(`read ${count}`));
    await Promise.all([write, read]);
    expect(order).toEqual(['write', 'read 2']);
  });

  it('runs the reads of a turn with no batch open in one read transaction, one snapshot, ended when the turn ends', async () => {
    const count = () => group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get());
    expect(await count()).toBe(0);
    expect(db.inTransaction).toBe(true);
    // Another process commits during the turn: this turn's reads still see the snapshot of its first one.
    other.prepare('INSERT INTO items (name) VALUES (?)').run('x');
    expect(await count()).toBe(0);

    await turnEnded();
    expect(db.inTransaction).toBe(false);
    expect(await count()).toBe(1);
  });

  it('ends the turn’s read transaction when a write opens a batch: the write sees what others committed since', async () => {
    expect(await group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get())).toBe(0);
    other.prepare('INSERT INTO items (name) VALUES (?)').run('x');
    // Writing on the old snapshot would fail (SQLITE_BUSY_SNAPSHOT); the batch starts a transaction of its own.
    expect(await group.write(() => db.prepare('SELECT count(*) FROM items').pluck().get())).toBe(1);
    await group.write(insert('y'));
    expect(namesSeenByAnotherConnection()).toEqual(['x', 'y']);
  });

  it('holds no snapshot between turns: another connection can checkpoint the whole WAL then', async () => {
    other.prepare('INSERT INTO items (name) VALUES (?)').run('x');
    await group.read(() => db.prepare('SELECT count(*) FROM items').pluck().get());
    other.prepare('INSERT INTO items (name) VALUES (?)').run('y');
    // The snapshot pins the WAL frames after it: a full checkpoint is refused while it is held…
    other.pragma('busy_timeout = 0');
    expect(other.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 1, log: expect.any(Number), checkpointed: expect.any(Number) }]);
    await turnEnded();
    // …and done once the turn is over.
    expect(other.pragma('wal_checkpoint(TRUNCATE)')).toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
  });

  it('ends the read transaction on flush, and opens none inside a transaction someone else began on the connection', async () => {
    await group.read(() => db.prepare('SELECT 1').get());
    group.flush();
    expect(db.inTransaction).toBe(false);

    db.exec('BEGIN');
    await group.read(() => db.prepare('SELECT 1').get());
    await turnEnded();
    expect(db.inTransaction).toBe(true);
    db.exec('COMMIT');
  });

  it('rejects a read that throws without touching the batch', async () => {
    const write = group.write(insert('a'));
    await expect(group.read(() => db.prepare('SELECT * FROM missing_table').get())).rejects.toThrow(/no such table/);
    await write;
    expect(namesSeenByAnotherConnection()).toEqual(['a']);
  });

  it('waits out another connection holding the write lock (busy_timeout), then fails the write if it is still held', async () => {
    db.pragma('busy_timeout = 50');
    other.exec('BEGIN IMMEDIATE');
    await expect(group.write(insert('a'))).rejects.toThrow(/database is locked/);
    other.exec('ROLLBACK');
    await group.write(insert('a'));
    expect(namesSeenByAnotherConnection()).toEqual(['a']);
  });

  it('commits the open batch on flush (before the database closes)', async () => {
    const write = group.write(insert('a'));
    group.flush();
    expect(namesSeenByAnotherConnection()).toEqual(['a']);
    await write;
  });
});

describe('usage totals of a batch (PendingUsage)', () => {
  const H = 3_600_000;
  const day = Date.UTC(2026, 10, 22);
  let usage: PendingUsage;
  let upserts: number;

  beforeEach(() => {
    group.flush();
    db.exec(`
      CREATE TABLE usage_hourly (account_id TEXT, hour_start INTEGER, model TEXT, credits_charged INTEGER, credits_refunded INTEGER, succeeded INTEGER,
                                 failed INTEGER, cancelled INTEGER, seconds_delivered INTEGER, PRIMARY KEY (account_id, hour_start, model));
      CREATE TABLE usage_daily (account_id TEXT, day_start INTEGER, model TEXT, credits_charged INTEGER, credits_refunded INTEGER, succeeded INTEGER,
                                failed INTEGER, cancelled INTEGER, seconds_delivered INTEGER, PRIMARY KEY (account_id, day_start, model));
    `);
    const upsert = (table: string, key: string) => {
      const statement = db.prepare(
        `INSERT INTO ${table} VALUES (@account_id, @${key}, @model, @credits_charged, @credits_refunded, @succeeded, @failed, @cancelled, @seconds_delivered)
         ON CONFLICT DO UPDATE SET credits_charged = credits_charged + excluded.credits_charged, succeeded = succeeded + excluded.succeeded,
           seconds_delivered = seconds_delivered + excluded.seconds_delivered`,
      );
      return { run: (row: object) => (upserts++, statement.run(row)) };
    };
    upserts = 0;
    usage = new PendingUsage({ hourly: upsert('usage_hourly', 'hour_start'), daily: upsert('usage_daily', 'day_start') });
    group = new GroupCommit(db, usage);
  });

  const hourly = () => other.prepare('SELECT hour_start, model, credits_charged, succeeded, seconds_delivered FROM usage_hourly ORDER BY hour_start, model').raw().all();
  const daily = () => other.prepare('SELECT day_start, model, credits_charged, succeeded FROM usage_daily ORDER BY day_start, model').raw().all();
  const adding = (at: number, add: { credits_charged?: number; succeeded?: number; seconds_delivered?: number }, name = `w${at}-${JSON.stringify(add)}`) => () => {
    insert(name)();
    usage.add('acc_1', 'vidgen-2.0', at, add);
  };

  it('writes one upsert per hour and per day a batch touched, as it commits, with the sums of its writes', async () => {
    const writes = Array.from({ length: 50 }, (_, i) => group.write(adding(day + 10 * H + i, { credits_charged: 2 }, `a${i}`)));
    writes.push(group.write(adding(day + 11 * H, { succeeded: 1, seconds_delivered: 5 })));
    expect(hourly()).toEqual([]);
    await Promise.all(writes);
    expect(hourly()).toEqual([
      [day + 10 * H, 'vidgen-2.0', 100, 0, 0],
      [day + 11 * H, 'vidgen-2.0', 0, 1, 5],
    ]);
    expect(daily()).toEqual([[day, 'vidgen-2.0', 100, 1]]);
    expect(upserts).toBe(3);
    // The next batch adds to the same rows.
    await group.write(adding(day + 10 * H, { credits_charged: 3 }));
    expect(hourly()[0]).toEqual([day + 10 * H, 'vidgen-2.0', 103, 0, 0]);
    expect(daily()).toEqual([[day, 'vidgen-2.0', 103, 1]]);
  });

  it('keeps the totals of each account, model, hour and day of one batch apart', async () => {
    const at = [day + 23 * H + 5, day + 24 * H + 5, day + 25 * H + 5];
    const accounts = ['acc_1', 'acc_2'];
    const models = ['vidgen-2.0', 'vidgen-2.0-fast'];
    const writes: Promise<void>[] = [];
    for (const [a, accountId] of accounts.entries()) {
      for (const [m, model] of models.entries()) {
        for (const [h, time] of at.entries()) {
          // Distinct sums for every row: account × 100 + model × 10 + hour, twice.
          for (const copy of [0, 1]) {
            writes.push(group.write(() => {
              insert(`${accountId}-${model}-${h}-${copy}`)();
              usage.add(accountId, model, time, { credits_charged: (a + 1) * 100 + (m + 1) * 10 + h });
            }));
          }
        }
      }
    }
    await Promise.all(writes);
    // 2 accounts × 2 models × 3 hours, and × 2 days (the first hour is the first day's last).
    expect(upserts).toBe(12 + 8);
    const rows = (table: string, key: string) =>
      other.prepare(`SELECT account_id, ${key}, model, credits_charged FROM ${table} ORDER BY account_id, ${key}, model`).raw().all();
    const expectedHourly = accounts.flatMap((accountId, a) =>
      at.flatMap((time, h) => models.map((model, m) => [accountId, time - 5, model, 2 * ((a + 1) * 100 + (m + 1) * 10 + h)])),
    );
    expect(rows('usage_hourly', 'hour_start')).toEqual(expectedHourly);
    const expectedDaily = accounts.flatMap((accountId, a) => [
      ...models.map((model, m) => [accountId, day, model, 2 * ((a + 1) * 100 + (m + 1) * 10)]),
      ...models.map((model, m) => [accountId, day + 24 * H, model, 2 * ((a + 1) * 100 + (m + 1) * 10 + 1) + 2 * ((a + 1) * 100 + (m + 1) * 10 + 2)]),
    ]);
    expect(rows('usage_daily', 'day_start')).toEqual(expectedDaily);
  });

  it('counts nothing of a write that throws, and the rest of its batch', async () => {
    const failing = group.write(() => {
      adding(day, { credits_charged: 1000 }, 'x')();
      throw new Error('changed its mind');
    });
    const ok = group.write(adding(day, { credits_charged: 4 }));
    await expect(failing).rejects.toThrow('changed its mind');
    await ok;
    expect(hourly()).toEqual([[day, 'vidgen-2.0', 4, 0, 0]]);
  });

  it('counts nothing of a batch whose commit fails, nor of one SQLite rolls back, and carries none of it into the next batch', async () => {
    const fine = group.write(adding(day, { credits_charged: 5 }));
    const orphan = group.write(() => db.prepare('INSERT INTO items (name, parent) VALUES (?, ?)').run('orphan', 42));
    await expect(fine).rejects.toThrow(/FOREIGN KEY constraint failed/);
    await expect(orphan).rejects.toThrow(/FOREIGN KEY constraint failed/);
    const earlier = group.write(adding(day, { credits_charged: 6 }));
    const losing = group.write(insert('lose the batch'));
    await expect(losing).rejects.toThrow('the transaction was rolled back');
    await expect(earlier).rejects.toThrow('the transaction was rolled back');
    await group.write(adding(day, { credits_charged: 7 }));
    expect(hourly()).toEqual([[day, 'vidgen-2.0', 7, 0, 0]]);
    expect(daily()).toEqual([[day, 'vidgen-2.0', 7, 0]]);
  });

  it('lets a read in the batch see its totals so far (writeNow), and counts every write once', async () => {
    const first = group.write(adding(day, { credits_charged: 1 }));
    const read = group.read(() => {
      usage.writeNow();
      return db.prepare('SELECT credits_charged FROM usage_hourly').pluck().get();
    });
    const second = group.write(adding(day, { credits_charged: 2 }));
    expect(await read).toBe(1);
    await Promise.all([first, second]);
    expect(hourly()).toEqual([[day, 'vidgen-2.0', 3, 0, 0]]);
  });
});
