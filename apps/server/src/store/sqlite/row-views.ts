/**
 * Rows read as arrays (better-sqlite3's raw mode) and seen through named
 * getters. better-sqlite3 builds a row object property by property from C++;
 * for the 27 columns of a task that was most of the cost of reading one
 * (12 µs a row against 7 µs as an array, measured on this service's task
 * query), and a list page reads twenty. The mappers in ../rows.ts read a view
 * exactly as they read an object.
 */
import type Database from 'better-sqlite3';
import type { Row } from '../rows.js';

export interface RowStatement {
  get(...params: unknown[]): Row | undefined;
  all(...params: unknown[]): Row[];
}

export function viewedRows(statement: Database.Statement): RowStatement {
  const raw = statement.raw(true);
  const prototype: Record<string, unknown> = {};
  raw.columns().forEach(({ name }, i) => {
    Object.defineProperty(prototype, name, {
      get(this: { values: unknown[] }) {
        return this.values[i];
      },
      enumerable: true,
    });
  });
  function View(this: { values: unknown[] }, values: unknown[]) {
    this.values = values;
  }
  View.prototype = prototype;
  const view = (values: unknown[]) => new (View as unknown as new (values: unknown[]) => Row)(values);
  return {
    get: (...params) => {
      const values = raw.get(...params) as unknown[] | undefined;
      return values && view(values);
    },
    all: (...params) => (raw.all(...params) as unknown[][]).map(view),
  };
}
