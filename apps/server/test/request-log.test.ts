/**
 * The request's log line (src/http/request-log.ts) is the line pino writes for `logger.info(line, 'request')`, byte
 * for byte, for the service's logger and any fields; a logger whose options change what pino writes gets pino's own
 * line; and redactSecrets' shortcut for text without a secret's prefix masks exactly what the replacements mask.
 */
import fc from 'fast-check';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino, { type LoggerOptions } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { requestLogWriter, type RequestLine } from '../src/http/request-log.js';
import { batchedLogDestination } from '../src/log-destination.js';
import { redactSecrets, withSafeErrors } from '../src/logging.js';

/** A logger as main.ts makes it (a fixed time, so that two lines can be compared), writing into `lines`. */
function capturing(options: LoggerOptions = {}) {
  const lines: string[] = [];
  const logger = pino({ level: 'info', base: { service: 'vidgen', role: 'all' }, timestamp: () => ',"time":1790000000000', ...options }, { write: (line: string) => lines.push(line) });
  return { lines, logger: withSafeErrors(logger) };
}

/** The line written through the writer, and the one pino writes for the same fields. */
function bothLines(line: RequestLine, options?: LoggerOptions): [string, string] {
  const fast = capturing(options);
  requestLogWriter(fast.logger)!(line);
  const slow = capturing(options);
  slow.logger.info({ ...line }, 'request');
  expect(fast.lines).toHaveLength(1);
  return [fast.lines[0]!, slow.lines[0]!];
}

const ordinary: RequestLine = {
  correlationId: '01KB5Z5ZQ3M0T7W2EJ6H1Y9C8D',
  method: 'POST',
  route: '/api/open/v1/video/generations',
  path: '/api/open/v1/video/generations',
  status: 202,
  durationMs: 0.4,
  accountId: 'acc_01M8FWCW6KCMRBPXNP9DWHCX3K',
  keyId: 'key_01M8FWCW6KCMRBPXNP9DWHCX3K',
};

/** Text pino and JSON.stringify write alike: pino (on Node 20) leaves a lone surrogate unescaped, JSON.stringify escapes it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const text = fc.string({ unit: 'binary', maxLength: 40 }).filter((value) => !LONE_SURROGATE.test(value));

describe('the request log line', () => {
  it("is pino's line for the service's logger, byte for byte, built without pino's writer", () => {
    const { logger, lines } = capturing();
    const info = vi.spyOn(logger, 'info');
    requestLogWriter(logger)!(ordinary);
    expect(info).not.toHaveBeenCalled();
    expect(lines).toHaveLength(1);
    const [fast, slow] = bothLines(ordinary);
    expect(fast).toBe(slow);
    expect(JSON.parse(fast)).toEqual({ level: 30, time: 1790000000000, service: 'vidgen', role: 'all', ...ordinary, msg: 'request' });
  });

  it('is pino\'s line for any fields: quotes, control characters, any text, no key, numbers that are not finite (fast-check)', () => {
    fc.assert(
      fc.property(
        fc.record({
          correlationId: text,
          method: text,
          route: text,
          path: text,
          status: fc.integer({ min: 100, max: 599 }),
          durationMs: fc.oneof(fc.double(), fc.constantFrom(Number.NaN, Number.POSITIVE_INFINITY, -0)),
          accountId: fc.option(text, { nil: undefined }),
          keyId: fc.option(text, { nil: undefined }),
        }),
        (line) => {
          const [fast, slow] = bothLines(line);
          expect(fast).toBe(slow);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("is pino's line for each of a run of lines through one writer, fields repeated or not from one line to the next (fast-check)", () => {
    // Few values for each field, so that consecutive lines share some and differ in others.
    const few = (values: (string | undefined)[]) => fc.constantFrom(...values);
    const line = fc.record({
      correlationId: text,
      method: few(['GET', 'POST']) as fc.Arbitrary<string>,
      route: few(['/api/open/v1/video/generations', '/api/open/v1/video/generations/:id', 'unmatched']) as fc.Arbitrary<string>,
      path: text,
      status: fc.constantFrom(200, 202, 401, 404),
      durationMs: fc.constantFrom(0, 0.4, 12.5),
      accountId: few(['acc_1', 'acc_2', undefined]),
      keyId: few(['key_1', 'key_2', undefined]),
    });
    fc.assert(
      fc.property(fc.array(line, { maxLength: 30 }), (lines) => {
        const fast = capturing();
        const slow = capturing();
        const write = requestLogWriter(fast.logger)!;
        for (const each of lines) {
          write(each);
          slow.logger.info({ ...each }, 'request');
        }
        expect(fast.lines).toEqual(slow.lines);
      }),
      { numRuns: 300 },
    );
  });

  it.each<[string, LoggerOptions]>([
    ['a mixin', { mixin: () => ({ extra: 1 }) }],
    ['redaction', { redact: ['path'] }],
    ['formatters.log', { formatters: { log: (object) => ({ ...object, shaped: true }) } }],
    ['a serializer for one of its fields', { serializers: { route: () => 'hidden' } }],
    ['another message key', { messageKey: 'message' }],
    ['a nested key', { nestedKey: 'payload' }],
    ['a message prefix', { msgPrefix: '[api] ' }],
    ['a stream hook', { hooks: { streamWrite: (line) => line.replace('request', 'REQUEST') } }],
    ['CRLF line ends', { crlf: true }],
  ])("is pino's own line for a logger with %s", (_name, options) => {
    const [fast, slow] = bothLines(ordinary, options);
    expect(fast).toBe(slow);
  });

  describe("through the service's destination (log-destination.ts), as main.ts makes its logger", () => {
    const dirs: string[] = [];
    afterEach(() => {
      vi.useRealTimers();
      for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
    });
    /** The destination's held lines, written when the test says (its hold's timer, in the service). */
    const held: (() => void)[] = [];
    const holdEnds = () => {
      for (const write of held.splice(0)) write();
    };

    /** The service's logger writing into a new file through the destination, with the clock (`Date`) in the test's hands. */
    function serviceLogger() {
      vi.useFakeTimers({ toFake: ['Date'] });
      const dir = mkdtempSync(join(tmpdir(), 'vidgen-request-log-'));
      dirs.push(dir);
      const path = join(dir, 'out.log');
      const fd = openSync(path, 'w');
      const destination = batchedLogDestination(fd, (write) => held.push(write));
      const logger = withSafeErrors(pino({ level: 'info', base: { service: 'vidgen', role: 'all' } }, destination));
      return { destination, logger, lines: () => readFileSync(path, 'utf8').split(/(?<=\n)/), close: () => closeSync(fd) };
    }
    /** pino's lines for the same fields, at the same times (its own epoch time, which the service's logger uses). */
    function pinoLines(lines: { at: number; line: RequestLine }[]): string[] {
      const said: string[] = [];
      const logger = withSafeErrors(pino({ level: 'info', base: { service: 'vidgen', role: 'all' } }, { write: (line: string) => said.push(line) }));
      for (const { at, line } of lines) {
        vi.setSystemTime(at);
        logger.info({ ...line }, 'request');
      }
      return said;
    }

    it("puts an ordinary line's bytes into the destination's buffer, no string written, and they are pino's line", async () => {
      const { destination, logger, lines, close } = serviceLogger();
      const asText = vi.spyOn(destination, 'write');
      const commit = vi.spyOn(destination, 'commit');
      vi.setSystemTime(1_790_000_000_123);
      requestLogWriter(logger)!(ordinary);
      expect(asText).not.toHaveBeenCalled();
      expect(commit).toHaveBeenCalledTimes(1);
      holdEnds();
      expect(lines()).toEqual(pinoLines([{ at: 1_790_000_000_123, line: ordinary }]));
      close();
    });

    it("writes pino's line for each of a run of lines, times and fields repeated or not, any text in the id and path (fast-check)", async () => {
      const few = (values: (string | undefined)[]) => fc.constantFrom(...values);
      // Ids and paths mostly as the service makes them, some with what JSON escapes or what is not ASCII (those go the text way).
      const idOrPath = fc.oneof(fc.constantFrom('01KB5Z5ZQ3M0T7W2EJ6H1Y9C8D', 'abc.DEF:_-9', '/api/open/v1/video/generations/gen_01KB5Z5ZQ3M0T7W2EJ6H1Y9C8D', '/x?y=1&z=%20', ''), text);
      const entry = fc.record({
        at: fc.integer({ min: 0, max: 4_102_444_800_000 }),
        line: fc.record({
          correlationId: idOrPath,
          method: few(['GET', 'POST', 'DE"LETE']) as fc.Arbitrary<string>,
          route: few(['/api/open/v1/video/generations', '/api/open/v1/video/generations/:id', 'unmatched', 'ü/"\\']) as fc.Arbitrary<string>,
          path: idOrPath,
          status: fc.constantFrom(200, 202, 401, 404, 500),
          durationMs: fc.oneof(fc.constantFrom(0, 0.4, 12.5, 1234.5), fc.double(), fc.constantFrom(Number.NaN, Number.NEGATIVE_INFINITY, -0)),
          accountId: few(['acc_1', 'acc_"2', undefined]),
          keyId: few(['key_1', 'kéy_2', undefined]),
        }),
      });
      await fc.assert(
        fc.asyncProperty(fc.array(entry, { maxLength: 25 }), async (entries) => {
          const { logger, lines, close } = serviceLogger();
          const write = requestLogWriter(logger)!;
          for (const { at, line } of entries) {
            vi.setSystemTime(at);
            write(line);
          }
          holdEnds();
          expect(entries.length ? lines() : []).toEqual(pinoLines(entries));
          close();
          vi.useRealTimers();
        }),
        { numRuns: 200 },
      );
    });

    it("writes a line longer than the destination's buffer whole, pino's line", async () => {
      const { logger, lines, close } = serviceLogger();
      const long = { ...ordinary, path: `/api/open/v1/video/generations/${'x'.repeat(70_000)}` };
      vi.setSystemTime(1_790_000_000_000);
      requestLogWriter(logger)!(long);
      holdEnds();
      expect(lines()).toEqual(pinoLines([{ at: 1_790_000_000_000, line: long }]));
      close();
    });
  });

  it('is not built when info lines are not written', () => {
    expect(requestLogWriter(pino({ level: 'warn' }, { write: () => {} }))).toBeUndefined();
    expect(requestLogWriter(pino({ level: 'silent' }, { write: () => {} }))).toBeUndefined();
  });
});

describe('redactSecrets', () => {
  const replaced = (value: string) => value.replace(/\bvg_(live|test)_[0-9A-Za-z]+/g, 'vg_$1_[redacted]').replace(/\bwhsec_(?:[0-9A-Za-z+/=]|%[0-9A-Fa-f]{2})+/g, 'whsec_[redacted]');

  it('masks exactly what the two replacements mask, for text with and without the prefixes (fast-check)', () => {
    const piece = fc.oneof(fc.constantFrom('vg_', 'vg_live_', 'vg_test_', 'whsec_', '%2F', '/', '_', 'x', ' ', 'AZ09', '+=', '%'), fc.string({ maxLength: 6 }));
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const value = pieces.join('');
        expect(redactSecrets(value)).toBe(replaced(value));
      }),
      { numRuns: 2000 },
    );
    expect(redactSecrets('/api/open/v1/video/generations/vg_test_abc123')).toBe('/api/open/v1/video/generations/vg_test_[redacted]');
    expect(redactSecrets('/webhooks/whsec_AbC%2F12')).toBe('/webhooks/whsec_[redacted]');
  });
});
