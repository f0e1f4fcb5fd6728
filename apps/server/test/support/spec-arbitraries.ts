/**
 * fast-check arbitraries made from the bundled spec's JSON Schemas: values a
 * schema accepts (`validFor`), and near misses that break one of its rules
 * (`mutantsOf`). It understands what the spec uses: `$ref`, `enum`, `const`,
 * `type` (strings with lengths, `pattern` and `format: uri`; integers and
 * numbers with bounds; booleans, null; arrays with item counts; objects with
 * required, optional and additional properties), `oneOf`/`anyOf`/`allOf` and
 * allOf's `if`/`then`/`else`. The builder only aims at valid values; Ajv over
 * the same schema has the last word on every one.
 */
import fc from 'fast-check';
import type { ValidateFunction } from 'ajv';
import { ajv, at } from './spec-responses.js';

type Schema = { [keyword: string]: any };

// --- schemas ----------------------------------------------------------------

/** Local `$ref`s point into the bundle Ajv knows as openapi.json. */
function withBundleRefs(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(withBundleRefs);
  if (!schema || typeof schema !== 'object') return schema;
  return Object.fromEntries(
    Object.entries(schema).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#') ? `openapi.json${v}` : withBundleRefs(v)]),
  );
}

const compiled = new WeakMap<Schema, ValidateFunction>();
/** Whether a value satisfies a schema of (or made from) the bundle. */
export function validates(schema: Schema): (value: unknown) => boolean {
  let validate = compiled.get(schema);
  if (!validate) {
    validate = ajv.compile(withBundleRefs(schema) as Schema);
    compiled.set(schema, validate);
  }
  return (value) => validate(value) as boolean;
}

/** The schema behind a `$ref`, with the referring schema's own keywords (`default`, …) over it. */
function resolve(schema: Schema): Schema {
  let out = schema;
  for (let hops = 0; typeof out.$ref === 'string'; hops++) {
    if (hops > 32) throw new Error(`$ref loop at ${String(out.$ref)}`);
    const { $ref, ...rest } = out;
    out = { ...(at(String($ref).replace(/^#/, '')) as Schema), ...rest };
  }
  return out;
}

const intersect = (a: unknown[] | undefined, b: unknown[] | undefined) =>
  a && b ? a.filter((x) => b.some((y) => JSON.stringify(x) === JSON.stringify(y))) : (a ?? b);

/** Both schemas at once, keyword by keyword; a second pattern goes to `allOf`, for Ajv to enforce. */
function merge(a: Schema, b: Schema): Schema {
  a = resolve(a);
  b = resolve(b);
  const out: Schema = { ...a, ...b };
  const enumOf = (s: Schema) => ('const' in s ? [s.const] : s.enum);
  const values = intersect(enumOf(a), enumOf(b));
  delete out.const;
  if (values) out.enum = values;
  const tighter = (key: string, pick: (x: number, y: number) => number) => {
    if (a[key] !== undefined && b[key] !== undefined) out[key] = pick(a[key], b[key]);
  };
  for (const key of ['minimum', 'exclusiveMinimum', 'minLength', 'minItems']) tighter(key, Math.max);
  for (const key of ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems']) tighter(key, Math.min);
  if (a.type && b.type) {
    const types = intersect([a.type].flat(), [b.type].flat())!;
    out.type = types.length === 1 ? types[0] : types;
  }
  if (a.pattern && b.pattern && a.pattern !== b.pattern) {
    out.pattern = a.pattern;
    out.allOf = [...(a.allOf ?? []), ...(b.allOf ?? []), { pattern: b.pattern }];
  } else if (a.allOf || b.allOf) out.allOf = [...(a.allOf ?? []), ...(b.allOf ?? [])];
  if (a.required || b.required) out.required = [...new Set([...(a.required ?? []), ...(b.required ?? [])])];
  if (a.additionalProperties === false || b.additionalProperties === false) out.additionalProperties = false;
  if (a.properties && b.properties) {
    out.properties = { ...a.properties };
    for (const [key, schema] of Object.entries(b.properties as Schema)) out.properties[key] = key in a.properties ? merge(a.properties[key], schema) : schema;
  }
  if (a.items && b.items) out.items = merge(a.items, b.items);
  return out;
}

const omit = (schema: Schema, ...keys: string[]) => Object.fromEntries(Object.entries(schema).filter(([k]) => !keys.includes(k)));

const typesOf = (s: Schema): string[] => {
  if (s.type) return [s.type].flat();
  if (s.properties || s.required || 'additionalProperties' in s) return ['object'];
  if (s.items || 'minItems' in s || 'maxItems' in s) return ['array'];
  if (s.pattern || 'minLength' in s || 'maxLength' in s || s.format) return ['string'];
  if ('minimum' in s || 'maximum' in s) return ['number'];
  return [];
};

// --- valid values -----------------------------------------------------------

/** Text that stores and encodings find awkward, mixed into generated strings now and then. */
const AWKWARD_TEXT = ['\u0000', '\ud800', '\udfff', '\u202e', '\ufeff', '\u2028', 'é', '😀', '\n', '\t', '\\', '"', '%00', "'; DROP TABLE tasks; --"];

const text = (constraints: { minLength?: number; maxLength?: number } = {}) =>
  fc.oneof(
    { arbitrary: fc.string({ unit: 'grapheme-ascii', ...constraints }), weight: 6 },
    { arbitrary: fc.string({ unit: 'binary', ...constraints }), weight: 1 },
    { arbitrary: fc.array(fc.constantFrom(...AWKWARD_TEXT), { minLength: 1, maxLength: 3 }).map((parts) => parts.join('')), weight: 1 },
  );

/** Inserts a few arbitrary characters into a string (the schema filter keeps only the survivors). */
const sprinkled = (base: fc.Arbitrary<string>) =>
  base.chain((s) => fc.tuple(fc.nat(s.length), text({ minLength: 1, maxLength: 3 })).map(([i, extra]) => s.slice(0, i) + extra + s.slice(i)));

const jsonLeaf = fc.oneof(text({ maxLength: 12 }), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null));
const anyJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    jsonLeaf,
    fc.array(tie('value'), { maxLength: 3 }),
    fc.dictionary(text({ maxLength: 8 }), tie('value'), { maxKeys: 3 }),
  ),
})).value;

function build(raw: Schema): fc.Arbitrary<unknown> {
  const s = resolve(raw);
  if ('const' in s) return fc.constant(s.const);
  if (s.enum) return fc.constantFrom(...(s.enum as unknown[]));
  if (s.allOf) {
    // Plain branches merge into one schema (a second pattern is left to the filter); if/then picks a side.
    const conditionals = (s.allOf as Schema[]).filter((branch) => 'if' in branch);
    const merged = omit((s.allOf as Schema[]).filter((branch) => !('if' in branch)).reduce(merge, omit(s, 'allOf')), 'allOf');
    const [first, ...more] = conditionals;
    const rest = more.length ? { ...merged, allOf: more } : merged;
    if (!first) return build(rest).filter(validates(s));
    const holds = validates(first.if);
    return fc
      .oneof(build(merge(merge(rest, first.if), first.then ?? {})).filter(holds), build(merge(rest, first.else ?? {})).filter((value) => !holds(value)))
      .filter(validates(s));
  }
  const branches = (s.oneOf ?? s.anyOf) as Schema[] | undefined;
  if (branches) {
    const base = omit(s, 'oneOf', 'anyOf');
    return fc.oneof(...branches.map((branch) => build(merge(base, branch)))).filter(validates(s));
  }
  const types = typesOf(s);
  if (types.length !== 1) return types.length ? fc.oneof(...types.map((type) => build({ ...s, type }))) : anyJson;
  switch (types[0]) {
    case 'null':
      return fc.constant(null);
    case 'boolean':
      return fc.boolean();
    case 'integer':
    case 'number': {
      const min = s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : (s.minimum ?? -(2 ** 31));
      const max = s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : (s.maximum ?? 2 ** 31);
      return types[0] === 'integer' ? fc.integer({ min, max }) : fc.double({ min, max, noNaN: true });
    }
    case 'string': {
      const minLength = s.minLength ?? 0;
      const maxLength = Math.min(s.maxLength ?? Infinity, minLength + 64);
      let strings: fc.Arbitrary<string>;
      if (s.pattern) {
        const matching = fc.stringMatching(new RegExp(s.pattern as string, 'u'));
        strings = fc.oneof({ arbitrary: matching, weight: 3 }, { arbitrary: sprinkled(matching), weight: 1 });
      } else if (s.format === 'uri') strings = fc.webUrl({ withQueryParameters: true, withFragments: true });
      else if (s.format === 'date-time') strings = fc.date({ min: new Date(0), max: new Date(Date.UTC(2100, 0)), noInvalidDate: true }).map((d) => d.toISOString());
      else strings = text({ minLength, maxLength });
      return strings.filter(validates(s));
    }
    case 'array':
      return fc.array(build(s.items ?? {}), { minLength: s.minItems ?? 0, maxLength: Math.min(s.maxItems ?? 4, (s.minItems ?? 0) + 4) });
    case 'object': {
      const properties = (s.properties ?? {}) as Schema;
      const record = fc.record(Object.fromEntries(Object.entries(properties).map(([key, schema]) => [key, build(schema)])), {
        requiredKeys: (s.required ?? []) as string[],
      });
      if (s.additionalProperties === false) return record;
      const extraValue = typeof s.additionalProperties === 'object' ? build(s.additionalProperties) : anyJson;
      const extras = fc.dictionary(
        text({ maxLength: 12 }).filter((key) => !(key in properties)),
        extraValue,
        { maxKeys: 4 },
      );
      return fc.tuple(extras, record).map(([more, known]) => ({ ...more, ...known }));
    }
  }
  throw new Error(`no arbitrary for the schema ${JSON.stringify(s).slice(0, 200)}`);
}

/** Values the schema at this pointer of the bundle accepts. */
export function validFor(pointer: string): fc.Arbitrary<unknown> {
  const schema = { $ref: `#${pointer}` };
  return build(schema).filter(validates(schema));
}

// --- near misses ------------------------------------------------------------

export interface Mutant {
  /** What was changed, where: "/duration: above the maximum". */
  note: string;
  value: unknown;
}

/** Values of every JSON type, to put where a schema wants another. */
const WRONG_TYPES: unknown[] = [null, true, 0, -1, 1.5, 1e21, '', 'x', ' ', [], {}, [1, 'a'], { a: 1 }];
/** Names a closed object does not know, some of them traps for naive object handling. */
const UNKNOWN_KEYS = ['extra', '__proto__', 'constructor', 'toString', 'Model', 'prompt ', ''];

/** Sets a property as data, never through a setter (`__proto__` included). */
function put(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

function replaceAt(root: unknown, path: (string | number)[], replace: (old: unknown) => unknown | typeof DROP): unknown {
  if (path.length === 0) return replace(root);
  const [head, ...rest] = path;
  const copy: any = Array.isArray(root) ? [...root] : {};
  if (!Array.isArray(root)) for (const [key, item] of Object.entries(root as object)) put(copy, key, item);
  const next = replaceAt(copy[head!], rest, replace);
  if (next === DROP) {
    if (Array.isArray(copy)) copy.splice(Number(head), 1);
    else delete copy[head!];
  } else if (Array.isArray(copy)) copy[Number(head)] = next;
  else put(copy, String(head), next);
  return copy;
}
const DROP = Symbol('drop');

/** The near misses of `value` (which the schema accepts) that change one thing, each at one place. */
function mutationsAt(raw: Schema, value: unknown, path: (string | number)[]): { path: (string | number)[]; note: string; replace: (old: unknown) => unknown }[] {
  let s = resolve(raw);
  if (s.allOf) s = (s.allOf as Schema[]).filter((branch) => !('if' in branch)).reduce(merge, omit(s, 'allOf'));
  const here = (note: string, replace: (old: unknown) => unknown) => ({ path, note, replace });
  const types = typesOf(s);
  const fits = (wrong: unknown) => types.includes(jsonType(wrong)) || (jsonType(wrong) === 'integer' && types.includes('number'));
  const out = WRONG_TYPES.filter((wrong) => types.length && !fits(wrong)).map((wrong) => here(`${JSON.stringify(wrong)} (wrong type)`, () => wrong));
  if (s.enum || 'const' in s) {
    const str = String(value);
    for (const near of [str.toUpperCase(), `${str} `, `x${str}`, '']) out.push(here(`${JSON.stringify(near)} (not in the enum)`, () => near));
  }
  if (typeof value === 'number') {
    if (s.minimum !== undefined) out.push(here('below the minimum', () => s.minimum - 1), here('at the minimum', () => s.minimum));
    if (s.maximum !== undefined) out.push(here('above the maximum', () => s.maximum + 1), here('at the maximum', () => s.maximum));
    out.push(here('a fraction', () => value + 0.5), here('beyond 2^53', () => 2 ** 53 + 2));
  }
  if (typeof value === 'string') {
    if (s.maxLength !== undefined) {
      const pad = (n: number) => value + 'a'.repeat(Math.max(0, n - value.length));
      out.push(here('at the maximum length', () => pad(s.maxLength)), here('over the maximum length', () => pad(s.maxLength + 1)));
    }
    if (s.minLength) out.push(here('empty', () => ''));
    if (s.pattern || s.format) {
      for (const near of [' \t', 'http://cdn.example.com/a.png', 'https://user:pw@cdn.example.com/a.png', 'https://cdn.example.com/a.txt', 'https://cdn.example.com/a.MP3', `${value} x`, 'not a url'])
        out.push(here(`${JSON.stringify(near)} (pattern)`, () => near));
    }
  }
  if (Array.isArray(value)) {
    if (s.minItems) out.push(here('no items', () => []));
    if (s.maxItems !== undefined && value.length) out.push(here('too many items', () => Array.from({ length: s.maxItems + 1 }, (_, i) => value[i % value.length])));
    value.forEach((item, i) => out.push(...mutationsAt(s.items ?? {}, item, [...path, i])));
  }
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    for (const key of (s.required ?? []) as string[]) out.push({ path: [...path, key], note: `without ${key}`, replace: () => DROP });
    if (s.additionalProperties === false) for (const key of UNKNOWN_KEYS) out.push(here(`with the unknown field ${JSON.stringify(key)}`, (old) => replaceAt(old, [key], () => 1)));
    for (const [key, item] of Object.entries(value)) if (s.properties?.[key]) out.push(...mutationsAt(s.properties[key], item, [...path, key]));
  }
  return out;
}

const jsonType = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : Number.isInteger(value) ? 'integer' : typeof value);

/** A valid value of the schema at this pointer, then one thing about it broken (or pushed to a limit). */
export function mutantsOf(pointer: string): fc.Arbitrary<Mutant> {
  const schema = { $ref: `#${pointer}` };
  return validFor(pointer).chain((value) => {
    const options = mutationsAt(schema, value, []);
    return fc.constantFrom(...options).map(({ path, note, replace }) => ({
      note: `${path.length ? `/${path.join('/')}` : '(root)'}: ${note}`,
      value: replaceAt(value, path, replace),
    }));
  });
}
