/**
 * The service's log destination (src/log-destination.ts): the lines of a turn of the event loop written together at
 * its end, in order, and none left behind when the process exits, however it exits short of being killed.
 */
import { execFile } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { turnBatchedDestination } from '../src/log-destination.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('the log destination', () => {
  it("writes a turn's lines at its end, in the order they were made, all of them", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vidgen-log-'));
    dirs.push(dir);
    const path = join(dir, 'out.log');
    const fd = openSync(path, 'w');
    const logger = pino({ base: null, timestamp: false }, turnBatchedDestination(fd));
    logger.info({ n: 1 }, 'first');
    logger.info({ n: 2 }, 'second');
    logger.warn({ n: 3 }, 'third');
    expect(readFileSync(path, 'utf8')).toBe('');
    await nextTurn();
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as { n: number; msg: string });
    expect(lines.map((line) => [line.n, line.msg])).toEqual([[1, 'first'], [2, 'second'], [3, 'third']]);
    // The next turn's lines come after, and nothing is written twice.
    logger.info({ n: 4 }, 'fourth');
    await nextTurn();
    expect(readFileSync(path, 'utf8').trimEnd().split('\n')).toHaveLength(4);
    closeSync(fd);
  });

  it.each([
    ['process.exit in the same turn', "process.exit(3)", 3],
    ['an uncaught exception in the same turn', "throw new Error('boom')", 1],
    ['the event loop running dry', '', 0],
  ])('leaves no line behind on %s', async (_name, ending, code) => {
    const script = [
      "import pino from 'pino';",
      "import { turnBatchedDestination } from './src/log-destination.ts';",
      'const logger = pino({ base: null, timestamp: false }, turnBatchedDestination());',
      "for (let i = 0; i < 500; i++) logger.info({ i }, 'line');",
      ending,
    ].join('\n');
    const outcome = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '..') }).then(
      ({ stdout }) => ({ stdout, code: 0 }),
      (error: { stdout: string; code: number }) => ({ stdout: error.stdout, code: error.code }),
    );
    expect(outcome.code).toBe(code);
    const lines = outcome.stdout.trimEnd().split('\n').map((line) => (JSON.parse(line) as { i: number }).i);
    expect(lines).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});
