#!/usr/bin/env node
// Finds the changes between two bundled OpenAPI 3.1 documents (every $ref local) that break
// existing clients. Direction decides: what clients send (requests) may only get looser, since
// the server must keep accepting it; what the service sends (responses, webhook bodies) may only
// get tighter, since clients built on the old contract must understand all of it.
//
//   node spec/tools/breaking-changes.mjs <released.json> <current.json>
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * @typedef {{ location: string, message: string }} BreakingChange
 * @typedef {'request' | 'response'} Direction  request: base values must stay valid; response: head values must have been valid
 * @typedef {Record<string, any>} Node
 * @typedef {{ base: Node, head: Node, out: BreakingChange[] }} Ctx
 * @typedef {Ctx & { seen: Set<string> }} SchemaCtx
 * @typedef {{ location: string, section: string, key: string, method: string, pathItem: Node }} Operation
 * @typedef {{ raw: any, name?: string, index: number, consts: Record<string, string> }} Branch
 */

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const LOWER = ['minimum', 'exclusiveMinimum', 'minLength', 'minItems', 'minProperties'];
const UPPER = ['maximum', 'exclusiveMaximum', 'maxLength', 'maxItems', 'maxProperties'];
// Ref pairs catch ordinary cycles; this catches a cycle whose refs never line up on both sides at once.
const MAX_DEPTH = 64;

const has = Object.hasOwn;
/** @param {unknown} x @returns {x is Node} */
const isObj = (x) => x !== null && typeof x === 'object' && !Array.isArray(x);
const json = (/** @type {unknown} */ v) => JSON.stringify(v);
/** @param {Ctx} c @param {string[]} at @param {string} message */
const report = (c, at, message) => c.out.push({ location: at.filter(Boolean).join(' › '), message });

/** @param {Node} doc @param {string} ref */
function pointer(doc, ref) {
  if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported, got ${ref}`);
  const unescape = (/** @type {string} */ k) => decodeURIComponent(k).replaceAll('~1', '/').replaceAll('~0', '~');
  const target = ref.slice(2).split('/').reduce((node, key) => node?.[unescape(key)], doc);
  if (target === undefined) throw new Error(`unresolved $ref ${ref}`);
  return target;
}

/** Resolves a parameter, response, header or body, whose $ref siblings are mere annotations. @param {Node} doc @param {any} node */
function deref(doc, node) {
  for (let i = 0; isObj(node) && typeof node.$ref === 'string'; i++) {
    if (i > MAX_DEPTH) throw new Error(`$ref loop at ${node.$ref}`);
    node = pointer(doc, node.$ref);
  }
  return node;
}

/**
 * Resolves a schema and merges its allOf into one, so that moving keywords into a component or
 * between allOf members is not mistaken for a change.
 * @param {Node} doc @param {any} schema @returns {Node}
 */
function flatten(doc, schema, depth = 0) {
  if (depth > MAX_DEPTH) throw new Error('$ref/allOf nesting too deep: is there a cycle through allOf?');
  if (!isObj(schema)) return {};
  if (typeof schema.$ref === 'string') {
    // In 3.1 keywords beside $ref apply as well, which is what allOf means.
    const { $ref, ...siblings } = schema;
    const target = pointer(doc, $ref);
    return flatten(doc, Object.keys(siblings).length ? { allOf: [target, siblings] } : target, depth + 1);
  }
  if (!Array.isArray(schema.allOf)) return schema;
  const { allOf, ...own } = schema;
  return [...allOf, own].map((s) => flatten(doc, s, depth + 1)).reduce(merge, {});
}

/** Two allOf members as one, simplified: the stricter bound wins; a shared property becomes an allOf. @param {Node} a @param {Node} b */
function merge(a, b) {
  const out = { ...a, ...b };
  for (const k of LOWER) if (a[k] !== undefined && b[k] !== undefined) out[k] = Math.max(a[k], b[k]);
  for (const k of UPPER) if (a[k] !== undefined && b[k] !== undefined) out[k] = Math.min(a[k], b[k]);
  if (a.required && b.required) out.required = [...new Set([...a.required, ...b.required])];
  if (a.enum && b.enum) out.enum = a.enum.filter((/** @type {unknown} */ v) => b.enum.map(json).includes(json(v)));
  if (a.type && b.type) {
    const common = [a.type].flat().filter((t) => [b.type].flat().includes(t));
    if (common.length) out.type = common;
  }
  if (a.properties && b.properties) {
    out.properties = { ...a.properties };
    for (const [k, v] of Object.entries(b.properties)) {
      out.properties[k] = has(a.properties, k) ? { allOf: [a.properties[k], v] } : v;
    }
  }
  return out;
}

/** @param {Node} s @returns {unknown[] | null} */
const valuesOf = (s) => (has(s, 'const') ? [s.const] : Array.isArray(s.enum) ? s.enum : null);
const jsonType = (/** @type {unknown} */ v) =>
  v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v;
/** The allowed JSON types, or null for any; a bare enum/const implies its values' types. @param {Node} s */
function typesOf(s) {
  if (s.type !== undefined) return new Set([s.type].flat());
  const values = valuesOf(s);
  return values ? new Set(values.map(jsonType)) : null;
}
/** Types of `a` that `b` does not allow; an integer is a number. @param {Set<string>} a @param {Set<string>} b */
const notIn = (a, b) => [...a].filter((t) => !b.has(t) && !(t === 'integer' && b.has('number')));
const closed = (/** @type {Node} */ s) => s.additionalProperties === false || s.unevaluatedProperties === false;
const refName = (/** @type {any} */ raw) => (isObj(raw) && typeof raw.$ref === 'string' ? raw.$ref.split('/').pop() : undefined);

/**
 * A union's branches, or the schema itself as the only branch. When the other side has no union,
 * the union's own keywords are folded into each branch so that both sides are whole alternatives.
 * @param {Node} doc @param {any} raw @param {Node} flat @param {boolean} fold @returns {Branch[]}
 */
function branchesOf(doc, raw, flat, fold) {
  const list = flat.oneOf ?? flat.anyOf;
  const { oneOf, anyOf, ...own } = flat;
  const items = list ? list.map((/** @type {any} */ br) => (fold ? { allOf: [own, br] } : br)) : [raw];
  return items.map((/** @type {any} */ br, /** @type {number} */ index) => {
    /** @type {Record<string, string>} */
    const consts = {};
    for (const [k, v] of Object.entries(flatten(doc, br).properties ?? {})) {
      const values = valuesOf(flatten(doc, v));
      if (values?.length === 1) consts[k] = json(values[0]);
    }
    return { raw: br, name: refName(list ? list[index] : raw), index, consts };
  });
}

/**
 * Pairs base and head branches by $ref name, then by a const that tells the base branches apart
 * (`status`, `type`; not `success: true` on all), then by position when nothing contradicts it.
 * @param {SchemaCtx} c @param {string[]} at @param {any} bRaw @param {any} hRaw @param {Node} b @param {Node} h
 * @param {Direction} dir @param {string} ptr @param {number} depth
 */
function compareBranches(c, at, bRaw, hRaw, b, h, dir, ptr, depth) {
  const fold = !((b.oneOf ?? b.anyOf) && (h.oneOf ?? h.anyOf));
  const bs = branchesOf(c.base, bRaw, b, fold), hs = branchesOf(c.head, hRaw, h, fold);
  const distinct = (/** @type {Branch[]} */ side, /** @type {string} */ p) => {
    const values = side.map((x) => x.consts[p]).filter((v) => v !== undefined);
    return new Set(values).size === values.length;
  };
  const disc = Object.keys(bs[0]?.consts ?? {}).find((p) => bs.every((x) => has(x.consts, p)) && distinct(bs, p) && distinct(hs, p));
  const tag = (/** @type {Branch} */ x) => (disc && has(x.consts, disc) ? x.consts[disc] : undefined);
  const label = (/** @type {Branch} */ x) => x.name ?? (tag(x) ? `${disc}=${JSON.parse(tag(x))}` : `#${x.index}`);
  const used = new Set();
  const free = (/** @type {(y: Branch) => boolean} */ pred) => hs.find((y) => !used.has(y) && pred(y));
  const clash = (/** @type {any} */ u, /** @type {any} */ v) => u !== undefined && v !== undefined && u !== v;
  for (const x of bs) {
    const y =
      (x.name && free((y) => y.name === x.name)) ||
      (tag(x) && free((y) => tag(y) === tag(x))) ||
      free((y) => y.index === x.index && !clash(x.name, y.name) && !clash(tag(x), tag(y)));
    if (!y) {
      if (dir === 'request') report(c, [...at, ptr], `variant ${label(x)} removed (no longer accepted)`);
      continue;
    }
    used.add(y);
    compareSchema(c, at, x.raw, y.raw, dir, `${ptr}(${label(b.oneOf ?? b.anyOf ? x : y)})`, depth + 1);
  }
  if (dir === 'response') for (const y of hs) if (!used.has(y)) report(c, [...at, ptr], `new variant ${label(y)} may be sent`);
}

/**
 * @param {SchemaCtx} c @param {string[]} at operation-level location @param {any} bRaw @param {any} hRaw
 * @param {Direction} dir @param {string} ptr where in the instance, e.g. /data[]/status
 */
function compareSchema(c, at, bRaw, hRaw, dir, ptr = '', depth = 0) {
  if (depth > MAX_DEPTH) return;
  if (refName(bRaw) && refName(hRaw)) {
    const pair = `${bRaw.$ref} ${hRaw.$ref}`;
    if (c.seen.has(pair)) return;
    c.seen.add(pair);
  }
  const b = flatten(c.base, bRaw), h = flatten(c.head, hRaw);
  const here = [...at, ptr];
  /** @param {boolean} tighter @param {boolean} looser @param {string} message */
  const flag = (tighter, looser, message) => (dir === 'request' ? tighter : looser) && report(c, here, message);
  /** @param {any} bs @param {any} hs @param {string} p */
  const sub = (bs, hs, p) => compareSchema(c, at, bs, hs, dir, p, depth + 1);
  const change = (/** @type {string} */ k) => `${k} changed from ${b[k] ?? '(none)'} to ${h[k] ?? '(none)'}`;

  const bUnion = b.oneOf ?? b.anyOf, hUnion = h.oneOf ?? h.anyOf;
  if (bUnion || hUnion) {
    compareBranches(c, at, bRaw, hRaw, b, h, dir, ptr, depth);
    // With a union on one side only, the other side's keywords were compared with each branch.
    if (!(bUnion && hUnion)) return;
  }

  const bt = typesOf(b), ht = typesOf(h);
  if (bt && !ht) flag(false, true, `type constraint removed (was ${[...bt].join(', ')})`);
  if (!bt && ht) flag(true, false, `type restricted to ${[...ht].join(', ')}`);
  if (bt && ht) {
    const lost = notIn(bt, ht), gained = notIn(ht, bt);
    if (lost.length) flag(true, false, `type no longer allows ${lost.join(', ')}`);
    const nullable = gained.includes('null') ? ' (became nullable)' : '';
    if (gained.length) flag(false, true, `type now also allows ${gained.join(', ')}${nullable}`);
  }

  const bv = valuesOf(b)?.map(json), hv = valuesOf(h)?.map(json);
  if (dir === 'request') {
    if (!bv && hv) report(c, here, `values now restricted to ${hv.join(', ')}`);
    for (const v of bv && hv ? bv.filter((v) => !hv.includes(v)) : []) report(c, here, `value ${v} no longer accepted`);
  } else if (bv && has(b, 'const') && !(hv?.length === 1 && hv[0] === bv[0])) {
    // New enum values are policy-tolerated in responses; a const is a promise of exactly one value.
    report(c, here, `const changed from ${bv[0]} to ${hv ? hv.join(' | ') : '(any value)'}`);
  }

  for (const k of [...LOWER, ...UPPER]) {
    const x = b[k], y = h[k];
    if (x === y) continue;
    const lower = LOWER.includes(k);
    flag(
      y !== undefined && (x === undefined || (lower ? y > x : y < x)),
      x !== undefined && (y === undefined || (lower ? y < x : y > x)),
      change(k),
    );
  }
  for (const k of ['pattern', 'format']) if (b[k] !== h[k]) flag(h[k] !== undefined, b[k] !== undefined, change(k));

  const bp = b.properties ?? {}, hp = h.properties ?? {}, br = b.required ?? [], hr = h.required ?? [];
  for (const [name, schema] of Object.entries(bp)) {
    const p = `${ptr}/${name}`;
    if (has(hp, name)) sub(schema, hp[name], p);
    else if (dir === 'response') report(c, [...at, p], 'property removed');
    else if (closed(h)) report(c, [...at, p], 'property removed while unknown properties are rejected');
    else if (isObj(h.additionalProperties)) sub(schema, h.additionalProperties, p);
  }
  if (dir === 'request') {
    for (const name of hr.filter((n) => !br.includes(n))) {
      report(c, [...at, `${ptr}/${name}`], has(bp, name) ? 'property became required' : 'new required property');
    }
    if (!closed(b) && closed(h)) report(c, here, 'unknown properties are now rejected');
  } else {
    // A property removed altogether was reported above.
    const dropped = br.filter((n) => !hr.includes(n) && (has(hp, n) || !has(bp, n)));
    for (const name of dropped) report(c, [...at, `${ptr}/${name}`], 'property no longer required');
  }
  const bAP = b.additionalProperties, hAP = h.additionalProperties;
  if ((isObj(bAP) || isObj(hAP)) && bAP !== false && hAP !== false) {
    sub(isObj(bAP) ? bAP : {}, isObj(hAP) ? hAP : {}, `${ptr}/*`);
  }

  if (b.items !== undefined || h.items !== undefined) sub(b.items ?? {}, h.items ?? {}, `${ptr}[]`);
  const tuple = Math.max(b.prefixItems?.length ?? 0, h.prefixItems?.length ?? 0);
  for (let i = 0; i < tuple; i++) sub(b.prefixItems?.[i] ?? b.items ?? {}, h.prefixItems?.[i] ?? h.items ?? {}, `${ptr}[${i}]`);
}

/**
 * Each root schema gets its own cycle guard, so a change to a shared component is reported at every location using it.
 * @param {Ctx} c @param {string[]} at @param {any} b @param {any} h @param {Direction} dir
 */
function compareRoot(c, at, b, h, dir) {
  if (b !== undefined || h !== undefined) compareSchema({ ...c, seen: new Set() }, at, b ?? {}, h ?? {}, dir);
}

const schemaOf = (/** @type {Node} */ x) => x.schema ?? Object.values(x.content ?? {})[0]?.schema;

/** @param {Ctx} c @param {string[]} at @param {Node | undefined} bc @param {Node | undefined} hc @param {Direction} dir */
function compareContent(c, at, bc, hc, dir) {
  for (const [type, media] of Object.entries(bc ?? {})) {
    if (!hc || !has(hc, type)) report(c, at, `media type ${type} removed`);
    else compareRoot(c, type === 'application/json' ? at : [...at, type], media.schema, hc[type].schema, dir);
  }
}

/** Path and operation parameters by in+name, header names case-insensitive. @param {Node} doc @param {Node} pathItem @param {Node} op */
function parameters(doc, pathItem, op) {
  /** @type {Map<string, Node>} */
  const map = new Map();
  for (const raw of [...(pathItem.parameters ?? []), ...(op.parameters ?? [])]) {
    const p = deref(doc, raw);
    map.set(`${p.in}:${p.in === 'header' ? p.name.toLowerCase() : p.name}`, p);
  }
  return map;
}

/** @param {Node} doc @returns {Generator<Operation>} */
function* operations(doc) {
  for (const [section, prefix] of [['paths', ''], ['webhooks', 'webhook ']]) {
    for (const [key, item] of Object.entries(doc[section] ?? {})) {
      const pathItem = deref(doc, item);
      for (const method of METHODS.filter((m) => isObj(pathItem[m]))) {
        yield { location: `${method.toUpperCase()} ${prefix}${key}`, section, key, method, pathItem };
      }
    }
  }
}

/** @param {Ctx} c @param {Operation} b @param {Operation} h */
function compareOperation(c, b, h) {
  const at = [b.location], bo = b.pathItem[b.method], ho = h.pathItem[h.method];
  // A webhook flips the roles: the service sends its request and the receiver answers it.
  /** @type {Direction} */ const inbound = b.section === 'webhooks' ? 'response' : 'request';
  /** @type {Direction} */ const outbound = inbound === 'request' ? 'response' : 'request';

  if (bo.operationId !== undefined && bo.operationId !== ho.operationId) {
    report(c, at, `operationId changed from ${bo.operationId} to ${ho.operationId ?? '(none)'}`);
  }

  const bps = parameters(c.base, b.pathItem, bo), hps = parameters(c.head, h.pathItem, ho);
  for (const [key, p] of bps) {
    const q = hps.get(key), pat = [...at, `${p.in} parameter ${p.name}`];
    if (!q) {
      // Clients sending even an optional parameter would get a different behaviour.
      if (inbound === 'request' || p.required) report(c, pat, 'parameter removed');
      continue;
    }
    if (inbound === 'request' && !p.required && q.required) report(c, pat, 'parameter became required');
    if (inbound === 'response' && p.required && !q.required) report(c, pat, 'parameter no longer required');
    compareRoot(c, pat, schemaOf(p), schemaOf(q), inbound);
  }
  for (const [key, q] of inbound === 'request' ? hps : []) {
    if (!bps.has(key) && q.required) report(c, [...at, `${q.in} parameter ${q.name}`], 'new required parameter');
  }

  const bb = deref(c.base, bo.requestBody) ?? {}, hb = deref(c.head, ho.requestBody) ?? {}, bat = [...at, 'requestBody'];
  if (inbound === 'request' && !bb.required && hb.required) report(c, bat, 'request body became required');
  if (inbound === 'response' && bb.required && !hb.required) report(c, bat, 'request body no longer always sent');
  compareContent(c, bat, bb.content, hb.content, inbound);

  for (const [code, raw] of Object.entries(bo.responses ?? {})) {
    const rat = [...at, `response ${code}`];
    if (!ho.responses || !has(ho.responses, code)) {
      report(c, rat, 'response removed');
      continue;
    }
    const br = deref(c.base, raw), hr = deref(c.head, ho.responses[code]);
    const headHeaders = new Map(Object.entries(hr.headers ?? {}).map(([n, x]) => [n.toLowerCase(), deref(c.head, x)]));
    for (const [name, x] of Object.entries(br.headers ?? {})) {
      const bh = deref(c.base, x), hh = headHeaders.get(name.toLowerCase()), hat = [...rat, `header ${name}`];
      if (bh.required && !hh?.required) report(c, hat, hh ? 'header no longer required' : 'required header removed');
      if (hh) compareRoot(c, hat, schemaOf(bh), schemaOf(hh), outbound);
    }
    compareContent(c, rat, br.content, hr.content, outbound);
  }
}

/** Locations (`METHOD path`, `METHOD webhook name`) of every operation in a document. @param {Node} doc */
export const listOperations = (doc) => [...operations(doc)].map((o) => o.location);

/**
 * The changes from `base` (released) to `head` (current) that break clients of `base`.
 * @param {Node} base @param {Node} head @returns {BreakingChange[]}
 */
export function findBreakingChanges(base, head) {
  /** @type {Ctx} */
  const c = { base, head, out: [] };
  const heads = new Map([...operations(head)].map((o) => [o.location, o]));
  for (const b of operations(base)) {
    const h = heads.get(b.location);
    if (h) compareOperation(c, b, h);
    else if (head[b.section]?.[b.key]) report(c, [b.location], 'operation removed');
    else report(c, [b.location], `${b.section === 'paths' ? 'path' : 'webhook'} removed`);
  }
  return c.out;
}

/** @param {string[]} args @returns {number} exit code */
function main(args) {
  if (args.length !== 2) {
    console.error('usage: node spec/tools/breaking-changes.mjs <released.json> <current.json>');
    return 2;
  }
  const [base, head] = args.map((file) => JSON.parse(readFileSync(file, 'utf8')));
  const changes = findBreakingChanges(base, head);
  for (const { location, message } of changes) console.log(`${location}: ${message}`);
  if (changes.length) {
    console.error(`${changes.length} breaking change(s)`);
    return 1;
  }
  const current = new Set(listOperations(head));
  console.log(`no breaking changes (${listOperations(base).filter((op) => current.has(op)).length} operations compared)`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    // Exit 2, not 1, so CI can tell an unreadable document from a breaking change.
    console.error(`breaking-changes: ${error instanceof Error ? error.message : error}`);
    process.exitCode = 2;
  }
}
