/**
 * Preloaded into a server process by bench/pipeline.ts (`node --import …/store-cost-hook.mjs dist/main.js`)
 * when VIDGEN_BENCH_COUNT_SQL=<dir> is set: counts what the process asks of its store, at the client.
 *
 * - PostgreSQL (`pg`, shared by the store, pg-boss and the LISTEN connection): every `Client#query` is one
 *   round trip (the extended protocol sends parse/bind/execute/sync together); a simple-protocol message may
 *   hold several statements (the store joins them with `;\n`: a submission, an ending with its COMMIT), each
 *   counted as a statement, per statement text.
 * - SQLite (`better-sqlite3`): every statement run (`run`/`get`/`all`/`iterate`, `exec`), counted per text;
 *   write commits and the WAL they appended, read from the WAL index (`-shm`: mxFrame and the salt that
 *   changes when the WAL restarts after a checkpoint) after each statement that ends a transaction.
 *
 * With VIDGEN_BENCH_TIME_SQL=1 also the time each SQLite statement text took to run (ms, summed; `byTime`), from the
 * clock read around each run: the statements' share of a task, which a CPU profile shows only as one sum.
 *
 * On SIGUSR2 the counts are written to `<dir>/<pid>.json` (with a sequence number, so the reader knows
 * it has the answer to its signal). Plain JavaScript: loaded before the built server, without tsx.
 */
import { closeSync, openSync, readSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const dir = process.env.VIDGEN_BENCH_COUNT_SQL;
const require = createRequire(import.meta.url);
const counts = {
  pg: { roundTrips: 0, statements: 0, begins: 0, commits: 0, rollbacks: 0, byText: {} },
  sqlite: { statements: 0, writeCommits: 0, walFrames: 0, walResets: 0, walBytes: 0, byText: {}, byTime: {} },
};
const timed = process.env.VIDGEN_BENCH_TIME_SQL === '1';
/** A statement's label: its start, whitespace folded (only the start is read: a message's statements hold whole webhook bodies). */
const label = (text) => String(text).slice(0, 160).replace(/\s+/g, ' ').trim().slice(0, 90);

if (dir) {
  // --- pg
  const pg = require('pg');
  const query = pg.Client.prototype.query;
  /**
   * A kept plan's EXECUTE is labelled by the statement it runs (its PREPARE, seen earlier on some connection), not by
   * its values: labelled with them, nearly every EXECUTE of a task was a label of its own, and counting them grew an
   * object by ten keys a task, which cost the PostgreSQL server processes CPU that SQLite's (a few labels, made once
   * per prepared text) did not pay (BENCHMARKS.md, eleventh pass).
   */
  const planLabels = new Map();
  /**
   * An EXECUTE's label found by its plan's name alone (the text up to its values' parenthesis), without folding the
   * statement's start: the EXECUTEs are most of what the PostgreSQL processes send, and labelling each one with two
   * regular expressions and a fold was 1.7–2.7 % of their main threads' time in a profile (twenty-fifth pass), which
   * SQLite's processes, labelling each prepared text once, did not pay.
   */
  const statementLabel = (statement) => {
    let start = 0;
    while (start < statement.length && statement.charCodeAt(start) <= 32) start++;
    if (statement.startsWith('EXECUTE ', start)) {
      const open = statement.indexOf('(', start);
      const name = statement.slice(start + 8, open < 0 ? undefined : open).trim();
      const prepared = planLabels.get(name);
      if (prepared !== undefined) return prepared;
    }
    const head = label(statement);
    const execute = /^EXECUTE (\w+)/.exec(head);
    if (execute) return `EXECUTE ${execute[1]}`;
    const prepared = /^PREPARE (\w+) AS (.*)$/.exec(head);
    if (prepared) planLabels.set(prepared[1], `EXECUTE ${prepared[2]}`);
    return head;
  };
  pg.Client.prototype.query = function countedQuery(config, ...rest) {
    const text = typeof config === 'string' ? config : config?.text;
    if (text !== undefined) {
      const c = counts.pg;
      c.roundTrips++;
      for (const statement of String(text).split(';\n')) {
        c.statements++;
        const key = statementLabel(statement);
        c.byText[key] = (c.byText[key] ?? 0) + 1;
        if (key.startsWith('EXECUTE ')) continue;
        if (/^\s*BEGIN/i.test(statement)) c.begins++;
        else if (/^\s*COMMIT/i.test(statement)) c.commits++;
        else if (/^\s*ROLLBACK/i.test(statement)) c.rollbacks++;
      }
    }
    return query.call(this, config, ...rest);
  };

  // --- better-sqlite3
  let Database;
  try {
    Database = require('better-sqlite3');
  } catch {
    Database = undefined;
  }
  if (Database) {
    /** Per database: the -shm file and the WAL index header last seen. */
    const wal = new WeakMap();
    const header = Buffer.alloc(48);
    const afterTransaction = (db) => {
      let state = wal.get(db);
      if (!state) {
        try {
          state = { fd: openSync(`${db.name}-shm`, 'r'), mxFrame: 0, salt: 0 };
        } catch {
          return;
        }
        wal.set(db, state);
      }
      if (readSync(state.fd, header, 0, 48, 0) < 48) return;
      const pageSize = header.readUInt16LE(14) === 1 ? 65536 : header.readUInt16LE(14);
      const mxFrame = header.readUInt32LE(16);
      const salt = header.readUInt32LE(32);
      const c = counts.sqlite;
      if (salt !== state.salt && state.salt !== 0) {
        // The WAL restarted (after a checkpoint that copied all of it): every frame in it now is new.
        c.walResets++;
        c.walFrames += mxFrame;
        c.walBytes += 32 + mxFrame * (24 + pageSize);
        if (mxFrame > 0) c.writeCommits++;
      } else if (mxFrame !== state.mxFrame) {
        const frames = mxFrame > state.mxFrame ? mxFrame - state.mxFrame : mxFrame;
        c.walFrames += frames;
        c.walBytes += frames * (24 + pageSize);
        c.writeCommits++;
      }
      state.mxFrame = mxFrame;
      state.salt = salt;
    };
    /** A prepared statement's label, made once per text (labelling every run was 2.4 % of a loaded server's CPU). */
    const labels = new Map();
    /** Counts a run of `text`; `startedAt` (performance.now() before it ran, when timed) adds its time. */
    const count = (text, startedAt) => {
      const c = counts.sqlite;
      c.statements++;
      let key = labels.get(text);
      if (key === undefined) labels.set(text, (key = label(text)));
      c.byText[key] = (c.byText[key] ?? 0) + 1;
      if (startedAt !== undefined) c.byTime[key] = (c.byTime[key] ?? 0) + performance.now() - startedAt;
    };
    const exec = Database.prototype.exec;
    Database.prototype.exec = function countedExec(sql) {
      const startedAt = timed ? performance.now() : undefined;
      const result = exec.call(this, sql);
      count(sql, startedAt);
      if (!this.inTransaction) afterTransaction(this);
      return result;
    };
    const prepare = Database.prototype.prepare;
    let patched = false;
    Database.prototype.prepare = function countedPrepare(...args) {
      const statement = prepare.apply(this, args);
      if (!patched) {
        patched = true;
        const proto = Object.getPrototypeOf(statement);
        for (const method of ['run', 'get', 'all', 'iterate']) {
          const original = proto[method];
          proto[method] = function countedStatement(...params) {
            const startedAt = timed ? performance.now() : undefined;
            const result = original.apply(this, params);
            count(this.source, startedAt);
            if (!this.database.inTransaction) afterTransaction(this.database);
            return result;
          };
        }
      }
      return statement;
    };
  }

  let seq = 0;
  process.on('SIGUSR2', () => {
    seq++;
    const path = join(dir, `${process.pid}.json`);
    writeFileSync(`${path}.tmp`, JSON.stringify({ seq, pid: process.pid, ...counts }));
    renameSync(`${path}.tmp`, path);
  });
  void closeSync;
}
