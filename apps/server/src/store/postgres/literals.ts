/**
 * Values as SQL literals, for the statements sent in one message (the simple protocol takes no parameters:
 * commitWith, atomically, kept plans' EXECUTE). Strings are quoted as node-postgres's `escapeLiteral` quotes
 * them, without its building the literal a character at a time: a webhook's body (hundreds of characters) in an
 * ending's message was that many string additions, then flattened to be written (BENCHMARKS.md, eleventh pass).
 */

const NEEDS_ESCAPING = /['\\]/;

/**
 * `text` as a string literal, character for character as pg.escapeLiteral writes it: quotes doubled, and, when it
 * holds a backslash, backslashes doubled and the literal written E'…' (with a space before it).
 */
export function quoted(text: string): string {
  if (!NEEDS_ESCAPING.test(text)) return `'${text}'`;
  const escaped = text.replaceAll("'", "''");
  return text.includes('\\') ? ` E'${escaped.replaceAll('\\', '\\\\')}'` : `'${escaped}'`;
}

/**
 * A value as a SQL literal: strings quoted, dates as ISO text, integers as written, booleans, null and undefined as
 * NULL, other objects as their JSON text (as node-postgres sends them as parameters).
 */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (typeof value === 'string') return quoted(value);
  if (value instanceof Date) return quoted(value.toISOString());
  if (typeof value === 'number' && Number.isSafeInteger(value)) return String(value);
  if (typeof value === 'boolean') return String(value);
  if (typeof value === 'object' && !Array.isArray(value) && !Buffer.isBuffer(value)) return quoted(JSON.stringify(value));
  throw new Error(`no SQL literal for ${typeof value} ${String(value)}`);
}
