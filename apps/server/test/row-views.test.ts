/** Rows read as arrays behind named getters (src/store/sqlite/row-views.ts) read like better-sqlite3's row objects. */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { viewedRows } from '../src/store/sqlite/row-views.js';

describe('viewed rows', () => {
  const db = new Database(':memory:');
  db.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, note TEXT, amount REAL, data BLOB);
           INSERT INTO t VALUES (1, 'a', NULL, 1.5, x'00ff'), (2, 'b', 'two', -3, NULL);`);
  const sql = 'SELECT * FROM t WHERE id >= ? ORDER BY id';

  it('gives every column by name, as the object row would, NULLs and blobs included', () => {
    const objects = db.prepare(sql).all(1) as Record<string, unknown>[];
    const views = viewedRows(db.prepare(sql)).all(1);
    expect(views).toHaveLength(2);
    views.forEach((view, i) => {
      for (const column of ['id', 'name', 'note', 'amount', 'data']) expect(view[column]).toEqual(objects[i]![column]);
      expect(Object.keys(Object.getPrototypeOf(view))).toEqual(['id', 'name', 'note', 'amount', 'data']);
    });
  });

  it('answers get() with one view, or undefined when there is no row', () => {
    const statement = viewedRows(db.prepare('SELECT * FROM t WHERE id = ?'));
    expect(statement.get(2)?.note).toBe('two');
    expect(statement.get(3)).toBeUndefined();
  });
});
