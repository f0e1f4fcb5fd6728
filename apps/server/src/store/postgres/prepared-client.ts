/**
 * A `pg` client that sends every statement with parameters as a named (prepared) statement: the
 * server parses and plans each distinct text once per connection instead of on every call. The
 * store's statements are a fixed set of texts (pg-boss's sends among them), so each connection
 * holds a few dozen plans. Texts beyond `MAX_NAMED` distinct ones go unnamed, so a caller building
 * texts on the fly cannot make the server keep plans without bound.
 */
import pg from 'pg';

const MAX_NAMED = 500;
const names = new Map<string, string>();

function nameOf(text: string): string | undefined {
  let name = names.get(text);
  if (name === undefined && names.size < MAX_NAMED) {
    name = `vidgen_${names.size}`;
    names.set(text, name);
  }
  return name;
}

type Query = (this: pg.Client, ...args: unknown[]) => unknown;
const plainQuery = pg.Client.prototype.query as unknown as Query;

export class PreparingClient extends pg.Client {}

// pg's overloads: the (text, values) form, with or without a callback (the pool's query() passes one),
// is rewritten; anything else (a config object, a text without values) passes through.
(PreparingClient.prototype as unknown as { query: Query }).query = function (this: pg.Client, ...args: unknown[]) {
  const [text, values, callback] = args;
  if (typeof text === 'string' && Array.isArray(values)) {
    const name = nameOf(text);
    if (name) return callback === undefined ? plainQuery.call(this, { name, text, values }) : plainQuery.call(this, { name, text, values }, callback);
  }
  return plainQuery.apply(this, args);
};
