/**
 * Fills a SQLite store with tasks fast, by writing the rows directly (a
 * million in seconds, where the API would take minutes): each one a copy of a
 * real task (`template`, made through the API) with its own id and an earlier
 * creation time, its job (a copy of the template's) and its charge in the
 * ledger, the account's balance lowered by the same amount, so that
 * `vidgen ledger` still finds the balance equal to the ledger. Safe while the
 * server runs (WAL; writers take turns), in transactions of `BATCH` tasks, with
 * the WAL checkpointed at the end so that reads after it do not go through a
 * large WAL.
 */
import Database from 'better-sqlite3';
import { newUlid } from '../../src/domain/ids.js';

const BATCH = 50_000;

type Row = Record<string, unknown>;

/** A task's row and its generate job's row, to be copied by seedTasks. */
export interface TaskTemplate {
  task: Row;
  job: Row | undefined;
}

export function readTemplate(dbPath: string, taskId: string): TaskTemplate {
  const db = new Database(dbPath, { readonly: true });
  try {
    db.pragma('busy_timeout = 30000');
    const task = db.prepare('SELECT * FROM tasks WHERE id = ?').get(taskId) as Row | undefined;
    if (!task) throw new Error(`no task ${taskId} to copy`);
    return { task, job: db.prepare(`SELECT * FROM jobs WHERE task_id = ? AND kind = 'generate'`).get(taskId) as Row | undefined };
  } finally {
    db.close();
  }
}

/**
 * Writes `count` copies of the template on `accountId`, created 1 ms apart,
 * the newest at `newestAt` (ms). Their output expiry and deadline stay the
 * template's, so that no sweep picks them up during the run.
 */
export function seedTasks(dbPath: string, input: { template: TaskTemplate; accountId: string; count: number; newestAt: number }): { seconds: number } {
  const started = performance.now();
  const db = new Database(dbPath);
  try {
    db.pragma('busy_timeout = 30000');
    const { task, job } = input.template;
    const insertOf = (table: string, row: Row, skip: string[]) => {
      const columns = Object.keys(row).filter((column) => !skip.includes(column));
      return db.prepare(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`);
    };
    const insertTask = insertOf('tasks', task, []);
    const insertJob = job ? insertOf('jobs', job, ['id']) : undefined;
    const insertLedger = db.prepare(
      'INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at) VALUES (@account_id, @kind, @amount, @task_id, NULL, @created_at)',
    );
    const lowerBalance = db.prepare('UPDATE accounts SET balance = balance - @amount WHERE id = @id');

    const accountId = input.accountId;
    const charged = task.credits_charged as number;
    const refunded = task.credits_refunded as number;
    const createdAt = task.created_at as number;
    const shift = (value: unknown, delta: number) => (typeof value === 'number' ? value + delta : value);

    const writeBatch = db.transaction((from: number, to: number) => {
      for (let i = from; i < to; i++) {
        const at = input.newestAt - (input.count - 1 - i);
        const delta = at - createdAt;
        const id = `gen_${newUlid(at)}`;
        insertTask.run({ ...task, id, account_id: accountId, created_at: at, updated_at: shift(task.updated_at, delta), completed_at: shift(task.completed_at, delta) });
        if (insertJob && job) insertJob.run({ ...job, task_id: id, created_at: at, updated_at: shift(job.updated_at, delta), run_at: shift(job.run_at, delta) });
        insertLedger.run({ account_id: accountId, kind: 'charge', amount: -charged, task_id: id, created_at: at });
        if (refunded > 0) insertLedger.run({ account_id: accountId, kind: 'refund', amount: refunded, task_id: id, created_at: at });
      }
      if (lowerBalance.run({ id: accountId, amount: (charged - refunded) * (to - from) }).changes !== 1) throw new Error(`no account ${accountId}`);
    });
    for (let from = 0; from < input.count; from += BATCH) writeBatch(from, Math.min(input.count, from + BATCH));
    db.pragma('wal_checkpoint(TRUNCATE)');
  } finally {
    db.close();
  }
  return { seconds: (performance.now() - started) / 1000 };
}

/** Reads one row from the store (one snapshot for all its columns). */
export function selectRow<T>(dbPath: string, sql: string, ...params: unknown[]): T {
  const db = new Database(dbPath, { readonly: true });
  try {
    db.pragma('busy_timeout = 30000');
    return db.prepare(sql).get(...params) as T;
  } finally {
    db.close();
  }
}

/** Reads from the store: one value per row of `sql`. */
export function selectColumn<T>(dbPath: string, sql: string, ...params: unknown[]): T[] {
  const db = new Database(dbPath, { readonly: true });
  try {
    db.pragma('busy_timeout = 30000');
    return db.prepare(sql).pluck().all(...params) as T[];
  } finally {
    db.close();
  }
}
