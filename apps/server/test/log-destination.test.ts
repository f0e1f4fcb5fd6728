/**
 * The service's log destination (src/log-destination.ts): the lines of the last few milliseconds written together
 * when the hold ends, in order, and none left behind when the process exits, however it exits short of being killed.
 */
import { execFile, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { batchedLogDestination, HOLD_MS } from '../src/log-destination.js';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** Writes the destinations' held lines now, as their hold's timer would (the service's: after HOLD_MS). */
const held: (() => void)[] = [];
const holdEnds = () => {
  for (const write of held.splice(0)) write();
};
const heldByTest = (write: () => void) => {
  held.push(write);
};

/** Runs `lines` as an ES module in a child node (with tsx, from apps/server): its standard output and exit code. */
const runScript = (lines: string[]): Promise<{ stdout: string; code: number }> =>
  promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', lines.join('\n')], { cwd: join(import.meta.dirname, '..') }).then(
    ({ stdout }) => ({ stdout, code: 0 }),
    (error: { stdout: string; code: number }) => ({ stdout: error.stdout, code: error.code }),
  );

/** A logger writing through the destination into a new file: the file's path, its descriptor (the test closes it) and the logger. */
function fileLogger(make: (fd: number) => ReturnType<typeof batchedLogDestination> = (fd) => batchedLogDestination(fd, heldByTest)) {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-log-'));
  dirs.push(dir);
  const path = join(dir, 'out.log');
  const fd = openSync(path, 'w');
  return { path, fd, logger: pino({ base: null, timestamp: false }, make(fd)) };
}

describe('the log destination', () => {
  it('writes the lines held when the hold ends, in the order they were made, all of them', () => {
    const { path, fd, logger } = fileLogger();
    logger.info({ n: 1 }, 'first');
    logger.info({ n: 2 }, 'second');
    logger.warn({ n: 3 }, 'third');
    expect(readFileSync(path, 'utf8')).toBe('');
    holdEnds();
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as { n: number; msg: string });
    expect(lines.map((line) => [line.n, line.msg])).toEqual([[1, 'first'], [2, 'second'], [3, 'third']]);
    // The next hold's lines come after, and nothing is written twice.
    logger.info({ n: 4 }, 'fourth');
    holdEnds();
    expect(readFileSync(path, 'utf8').trimEnd().split('\n')).toHaveLength(4);
    closeSync(fd);
  });

  it('holds lines for HOLD_MS by default, and writes them once', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const dir = mkdtempSync(join(tmpdir(), 'vidgen-log-'));
      dirs.push(dir);
      const path = join(dir, 'out.log');
      const fd = openSync(path, 'w');
      const destination = batchedLogDestination(fd);
      destination.write('one\n');
      destination.write('two\n');
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(HOLD_MS - 1);
      expect(readFileSync(path, 'utf8')).toBe('');
      vi.advanceTimersByTime(1);
      expect(readFileSync(path, 'utf8')).toBe('one\ntwo\n');
      // The next line starts a hold of its own.
      destination.write('three\n');
      vi.advanceTimersByTime(HOLD_MS);
      expect(readFileSync(path, 'utf8')).toBe('one\ntwo\nthree\n');
      expect(vi.getTimerCount()).toBe(0);
      closeSync(fd);
    } finally {
      vi.useRealTimers();
    }
  });

  it('holds on a timer that keeps no process alive', () => {
    const timers: NodeJS.Timeout[] = [];
    const real = globalThis.setTimeout;
    const spy = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((write: () => void, ms: number) => {
      const timer = real(write, ms);
      timers.push(timer);
      return timer;
    }) as typeof setTimeout);
    try {
      const { fd, logger } = fileLogger(batchedLogDestination);
      logger.info('held');
      expect(timers).toHaveLength(1);
      expect(timers[0]!.hasRef()).toBe(false);
      clearTimeout(timers[0]);
      closeSync(fd);
    } finally {
      spy.mockRestore();
    }
  });

  it('writes what it holds when its buffer fills during a hold, and the rest when that hold ends, on the one timer', () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const { path, fd, logger } = fileLogger(batchedLogDestination);
      // ≈ 1 KiB lines: the 64th or so fills the 64 KiB buffer, which is then written at once.
      const said = Array.from({ length: 100 }, (_, i) => `${i} ${'b'.repeat(1000)}`);
      for (const msg of said) logger.info(msg);
      const early = readFileSync(path, 'utf8').trimEnd().split('\n');
      expect(early.length).toBeGreaterThan(50);
      expect(early.length).toBeLessThan(100);
      expect(vi.getTimerCount()).toBe(1);
      vi.advanceTimersByTime(HOLD_MS);
      const all = readFileSync(path, 'utf8').trimEnd().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg);
      expect(all).toEqual(said);
      expect(vi.getTimerCount()).toBe(0);
      closeSync(fd);
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps every byte and the order of a hold larger than its buffer, of a line larger than it, and of text in any script', async () => {
    const { path, fd, logger } = fileLogger();
    // 3,000 lines of ≈ 100 bytes (≈ 5 × the 64 KiB buffer), then a 200 KB line, then lines of 1-, 2-, 3- and 4-byte characters.
    const said: string[] = [];
    for (let i = 0; i < 3000; i++) said.push(`line ${i} ${'x'.repeat(i % 90)}`);
    said.push('y'.repeat(200_000));
    for (let i = 0; i < 2000; i++) said.push(`${i} prompt: ä ñ 雨の街 🚣 ${'é'.repeat(i % 40)}`);
    for (const msg of said) logger.info(msg);
    holdEnds();
    const written = readFileSync(path, 'utf8').trimEnd().split('\n').map((line) => (JSON.parse(line) as { msg: string }).msg);
    expect(written).toEqual(said);
    closeSync(fd);
  });

  it("takes a line's bytes put into its buffer in the order it takes lines as text, writing what it holds first when full", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vidgen-log-'));
    dirs.push(dir);
    const path = join(dir, 'out.log');
    const fd = openSync(path, 'w');
    const destination = batchedLogDestination(fd, heldByTest);
    const asBytes = (line: string) => {
      const at = destination.reserve(Buffer.byteLength(line));
      expect(at).toBeGreaterThanOrEqual(0);
      destination.commit(at + destination.bytes.write(line, at));
    };
    destination.write('text 1\n');
    asBytes('bytes 2\n');
    destination.write('text 3\n');
    asBytes('bytes 4 ä\n');
    expect(readFileSync(path, 'utf8')).toBe('');
    holdEnds();
    expect(readFileSync(path, 'utf8')).toBe('text 1\nbytes 2\ntext 3\nbytes 4 ä\n');
    // 64 KiB of lines as bytes, one byte over the buffer: the last one's room is made by writing the others first.
    const line = `${'z'.repeat(1023)}\n`;
    for (let i = 0; i < 65; i++) asBytes(line);
    const before = Buffer.byteLength('text 1\nbytes 2\ntext 3\nbytes 4 ä\n');
    expect(readFileSync(path).length).toBe(before + 64 * 1024);
    holdEnds();
    expect(readFileSync(path).subarray(before).toString()).toBe(line.repeat(65));
    // A line the buffer can never hold is refused: its writer sends it as text, which the destination writes whole.
    expect(destination.reserve(64 * 1024 + 1)).toBe(-1);
    closeSync(fd);
  });

  it('waits out a full pipe: a burst many times its capacity reaches a reader that reads late, whole and in order', async () => {
    // process.stdout makes the pipe non-blocking, as main.ts's does: writes past its 64 KiB then fail with EAGAIN until
    // the reader catches up, and the reader here only starts once the child has begun its 4 MB burst.
    const script = [
      "import pino from 'pino';",
      "import { batchedLogDestination } from './src/log-destination.ts';",
      'process.stdout;',
      'const logger = pino({ base: null, timestamp: false }, batchedLogDestination());',
      "process.stderr.write('writing\\n');",
      "for (let i = 0; i < 20000; i++) logger.info({ i }, 'x'.repeat(180));",
    ].join('\n');
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: join(import.meta.dirname, '..'), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.pause();
    await new Promise<void>((resolve) => child.stderr.once('data', () => resolve()));
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stdout.resume();
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(0);
    const lines = Buffer.concat(chunks).toString().trimEnd().split('\n').map((line) => (JSON.parse(line) as { i: number }).i);
    expect(lines).toEqual(Array.from({ length: 20000 }, (_, i) => i));
  });

  it.each([
    ['process.exit in the same turn', 'process.exit(3)', 3],
    ['an uncaught exception in the same turn', "throw new Error('boom')", 1],
  ])("leaves no request line written as bytes behind on %s, in order with the text lines", async (_name, ending, code) => {
    const script = [
      "import pino from 'pino';",
      "import { batchedLogDestination } from './src/log-destination.ts';",
      "import { requestLogWriter } from './src/http/request-log.ts';",
      "const logger = pino({ level: 'info', base: { service: 'vidgen', role: 'all' } }, batchedLogDestination());",
      'const write = requestLogWriter(logger);',
      'for (let i = 0; i < 500; i++) {',
      "  write({ correlationId: `c${i}`, method: 'GET', route: '/r', path: `/r/${i}`, status: 200, durationMs: 0.1, accountId: 'acc_1', keyId: 'key_1' });",
      "  logger.info({ i }, 'text');",
      '}',
      ending,
    ];
    const outcome = await runScript(script);
    expect(outcome.code).toBe(code);
    const lines = outcome.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as { correlationId?: string; i?: number });
    expect(lines.map((line) => line.correlationId ?? line.i)).toEqual(Array.from({ length: 500 }, (_, i) => [`c${i}`, i]).flat());
  });

  it.each([
    ['process.exit in the same turn', "process.exit(3)", 3],
    ['an uncaught exception in the same turn', "throw new Error('boom')", 1],
    ['the event loop running dry', '', 0],
    // Within the hold, a turn or a timer later.
    ['process.exit in a later turn', 'setImmediate(() => process.exit(3));', 3],
    ['an uncaught exception in a timer within the hold', "setTimeout(() => { throw new Error('boom'); }, 1);", 1],
  ])('leaves no line behind on %s', async (_name, ending, code) => {
    const script = [
      "import pino from 'pino';",
      "import { batchedLogDestination } from './src/log-destination.ts';",
      'const logger = pino({ base: null, timestamp: false }, batchedLogDestination());',
      "for (let i = 0; i < 500; i++) logger.info({ i }, 'line');",
      ending,
    ];
    const outcome = await runScript(script);
    expect(outcome.code).toBe(code);
    const lines = outcome.stdout.trimEnd().split('\n').map((line) => (JSON.parse(line) as { i: number }).i);
    expect(lines).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});
