/**
 * SQL literals for statements sent in one message (src/store/postgres/literals.ts): a string is quoted character for
 * character as node-postgres's escapeLiteral quotes it, for any string; and PostgreSQL reads every literal back as the
 * value it was made from.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { literal, quoted } from '../src/store/postgres/literals.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

/** Strings rich in what a literal must escape: quotes and backslashes among any other characters. */
const tricky = fc.string({ unit: fc.oneof(fc.constantFrom("'", '\\', "''", '\\\\', 'E', ' ', '\n'), fc.string({ unit: 'grapheme', maxLength: 3 })), maxLength: 40 });

describe('quoted', () => {
  it("writes what pg.escapeLiteral writes, for any string (quotes, backslashes, any UTF-16, lone surrogates included)", () => {
    fc.assert(
      fc.property(fc.oneof(tricky, fc.string({ unit: 'binary' }), fc.string({ unit: 'binary-ascii' })), (text) => {
        expect(quoted(text)).toBe(pg.escapeLiteral(text));
      }),
      { numRuns: 2_000 },
    );
    for (const text of ['', "'", '\\', "\\'", "it's", 'C:\\dir', "a'\\'b", '💥\'\\']) expect(quoted(text)).toBe(pg.escapeLiteral(text));
  });

  it('refuses a value it has no literal for instead of writing something else', () => {
    expect(() => literal([1, 2])).toThrow(/no SQL literal/);
    expect(() => literal(1.5)).toThrow(/no SQL literal/);
    expect(() => literal(Buffer.from('x'))).toThrow(/no SQL literal/);
  });
});

/** A UTF-16 surrogate without its other half: no UTF-8 for it, so no PostgreSQL text. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe.skipIf(!hasPostgres)('literals read back by PostgreSQL', () => {
  let database: { url: string; drop: () => Promise<void> };
  let client: pg.Client;
  beforeAll(async () => {
    database = await createTestDatabase();
    client = new pg.Client(database.url);
    await client.connect();
  });
  afterAll(async () => {
    await client?.end();
    await database?.drop();
  });

  it('reads every string back as it was (PostgreSQL text holds no NUL and no lone surrogate)', async () => {
    const texts = fc.sample(tricky.filter((text) => !text.includes('\u0000') && !LONE_SURROGATE.test(text)), 300);
    texts.push("it's", 'C:\\dir\\', "a'\\'b", '\\x41', "E'x'", '');
    const { rows } = await client.query({ text: `SELECT ${texts.map((text, i) => `${quoted(text)} AS c${i}`).join(', ')}`, rowMode: 'array' });
    expect(rows[0]).toEqual(texts);
  });

  it('reads dates, integers, booleans, null and objects back as the values they were made from', async () => {
    const at = new Date('2026-11-25T02:03:04.567Z');
    const object = { prompt: "it's a \\ test", n: 3, nested: { ok: true } };
    const { rows } = await client.query({
      text: `SELECT ${literal(at)}::timestamptz, ${literal(-42)}::int, ${literal(true)}, ${literal(null)}::text, ${literal(undefined)}::text, ${literal(object)}::jsonb`,
      rowMode: 'array',
    });
    expect(rows[0]).toEqual([at, -42, true, null, null, object]);
  });
});
