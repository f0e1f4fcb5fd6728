/**
 * Query plans of the SQLite store that must not depend on the planner's
 * statistics: an operator running ANALYZE (or PRAGMA optimize) must not turn
 * a claim into a scan of every job ever run.
 */
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/sqlite-store.js';

describe('SQLite query plans', () => {
  it('claims a job through its partial index, with or without ANALYZE statistics, and takes the oldest due one', async () => {
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
    const claimSql = (store as unknown as { sql: { claimJob: { source: string } } }).sql.claimJob.source;
    const plan = () =>
      (db.prepare(`EXPLAIN QUERY PLAN ${claimSql}`).all({ worker: 'w', now: 1e9, lease_until: 2e9, providers: '["instant","webhooks"]' }) as { detail: string }[]).map((row) => row.detail);

    expect(plan()).toContain('SEARCH jobs USING INDEX jobs_claimable_by_provider (provider=? AND state=?)');
    db.exec('ANALYZE');
    expect(plan()).toContain('SEARCH jobs USING INDEX jobs_claimable_by_provider (provider=? AND state=?)');
    expect(plan()).not.toContain('SCAN jobs');

    // The oldest due job of the providers asked for: t1999 has the smallest run_at of the available ones.
    expect(await store.claim({ workerId: 'w', now: new Date(1e9), leaseMs: 1000, providers: ['instant', 'webhooks'] })).toMatchObject({ taskId: 't1999' });
    expect(await store.claim({ workerId: 'w', now: new Date(1e9), leaseMs: 1000, providers: ['instant'] })).toMatchObject({ taskId: 't1997' });
    await store.close();
  });
});
