/**
 * Query plans of the SQLite store that must not depend on the planner's
 * statistics: an operator running ANALYZE (or PRAGMA optimize) must not turn
 * a claim into a scan of every job ever run.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { prepareStatements, SqliteStore } from '../src/store/sqlite/sqlite-store.js';

describe('SQLite query plans', () => {
  it('claims jobs through the partial index, with or without ANALYZE statistics, the oldest due ones of the lane first', async () => {
    const store = new SqliteStore(':memory:');
    const db = store.db;
    db.exec(`INSERT INTO accounts (id, name, balance, webhook_secret, created_at) VALUES ('acc', 'a', 0, 'whsec_x', 0)`);
    const task = db.prepare(
      `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, credits_charged, created_at, updated_at)
       VALUES (?, 'acc', 'queued', 'm', 'p', 5, '16:9', '720p', 'text-to-video', '[]', 1, 0, 0)`,
    );
    const job = db.prepare(`INSERT INTO jobs (task_id, kind, provider, state, max_attempts, run_at, created_at, updated_at) VALUES (?, ?, ?, ?, 3, ?, 0, 0)`);
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) {
        task.run(`t${i}`);
        job.run(`t${i}`, i % 2 ? 'generate' : 'deliver', i % 2 ? 'instant' : 'webhooks', i < 100 ? 'done' : 'available', 10_000 - i);
      }
    })();
    const claimSql = (store as unknown as { sql: { claimJobs: { source: string } } }).sql.claimJobs.source;
    const plan = () =>
      (db.prepare(`EXPLAIN QUERY PLAN ${claimSql}`).all({ worker: 'w', now: 1e9, lease_until: 2e9, provider: 'instant', limit: 2 }) as { detail: string }[]).map((row) => row.detail);

    expect(plan()).toContain('SEARCH jobs USING INDEX jobs_claimable_by_provider (provider=? AND state=?)');
    db.exec('ANALYZE');
    expect(plan()).toContain('SEARCH jobs USING INDEX jobs_claimable_by_provider (provider=? AND state=?)');
    expect(plan()).not.toContain('SCAN jobs');

    // The oldest due jobs of the lane asked for (the smallest run_at of the available ones), oldest first.
    const claim = async (provider: string, limit: number) => (await store.claim({ workerId: 'w', now: new Date(1e9), leaseMs: 1000, provider, limit })).map((job) => job.taskId);
    expect(await claim('instant', 2)).toEqual(['t1999', 't1997']);
    expect(await claim('webhooks', 1)).toEqual(['t1998']);
    expect(await claim('instant', 3)).toEqual(['t1995', 't1993', 't1991']);
    await store.close();
  });

  it('counts the active tasks through their partial index, with or without ANALYZE statistics, not by reading every task', () => {
    const store = new SqliteStore(':memory:');
    const db = store.db;
    db.exec(`INSERT INTO accounts (id, name, balance, webhook_secret, created_at) VALUES ('acc', 'a', 0, 'whsec_x', 0)`);
    const task = db.prepare(
      `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, credits_charged, created_at, updated_at)
       VALUES (?, 'acc', ?, 'm', 'p', 5, '16:9', '720p', 'text-to-video', '[]', 1, 0, 0)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) task.run(`t${i}`, i < 3 ? 'queued' : i < 5 ? 'processing' : 'succeeded');
    })();
    const countSql = (store as unknown as { sql: { countActiveByStatus: { source: string } } }).sql.countActiveByStatus.source;
    const plan = () => (db.prepare(`EXPLAIN QUERY PLAN ${countSql}`).all() as { detail: string }[]).map((row) => row.detail).join('\n');
    expect(plan()).toMatch(/USING INDEX tasks_active_by_deadline/);
    db.exec('ANALYZE');
    expect(plan()).toMatch(/USING INDEX tasks_active_by_deadline/);
    expect(db.prepare(countSql).all()).toEqual([
      { status: 'processing', count: 2 },
      { status: 'queued', count: 3 },
    ]);
  });

  // SQLite reads the value bound to a bare `LIMIT ?` when it plans the statement, so binding that parameter again (every
  // run) expires the statement and the next run prepares it again: 4 µs a run measured on this service's list page
  // (BENCHMARKS.md, thirteenth pass). `LIMIT +?` is an expression the planner does not read: planned once.
  it('binds no LIMIT as a bare parameter (the statement would be prepared again at every run)', () => {
    const store = new SqliteStore(':memory:');
    const sources: string[] = [];
    const recording = new Proxy(store.db, {
      get: (db, name) => (name === 'prepare' ? (sql: string) => (sources.push(sql), db.prepare(sql)) : Reflect.get(db, name, db)),
    }) as Database.Database;
    prepareStatements(recording);
    expect(sources.length).toBeGreaterThan(50);
    const limited = sources.filter((sql) => /\bLIMIT\b/i.test(sql));
    expect(limited.length).toBeGreaterThan(8);
    for (const sql of limited) expect(sql).not.toMatch(/\bLIMIT\s+[?@:$]/i);
  });
});
