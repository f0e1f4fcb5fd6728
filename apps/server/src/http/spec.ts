/**
 * Request validation compiled from the bundled spec (Ajv, JSON Schema 2020-12),
 * once at start-up. Nothing here restates a schema: bodies, query parameters
 * and headers are checked against the spec's own, and the scopes an operation
 * needs are read from its `security`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { ErrorDetail } from './errors.js';
import { explainUrl, kindPhrase, mediaKindOf } from '../domain/rules.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;
const require = createRequire(import.meta.url);

export const bundlePath = require.resolve('@vidgen/spec/openapi.json');
/** The bundle's exact bytes, served at /openapi.json. */
export const bundleText = readFileSync(bundlePath, 'utf8');
type Json = any;
const bundle: Json = JSON.parse(bundleText);
const BUNDLE_ID = 'openapi.json';

const METHODS = ['get', 'post', 'put', 'patch', 'delete'] as const;

export interface SpecOperation {
  operationId: string;
  method: string;
  /** The spec's path template, e.g. /api/open/v1/video/generations/{requestId}. */
  path: string;
  /** Scopes the key must hold; `undefined` when the operation needs no key. */
  scopes: string[] | undefined;
}

export const specOperations: SpecOperation[] = Object.entries(bundle.paths as Record<string, Json>).flatMap(([path, item]) =>
  METHODS.filter((method) => item[method]).map((method) => {
    const operation = item[method];
    const security: Json[] = operation.security ?? bundle.security ?? [];
    const bearer = security.find((requirement) => 'bearerAuth' in requirement);
    return { operationId: operation.operationId, method: method.toUpperCase(), path, scopes: bearer ? bearer.bearerAuth : undefined };
  }),
);

/** The spec's `/x/{id}` path template as a Hono route pattern `/x/:id`. */
export const honoPath = (template: string) => template.replace(/\{(\w+)\}/g, ':$1');

export function specOperation(operationId: string): SpecOperation {
  const found = specOperations.find((op) => op.operationId === operationId);
  if (!found) throw new Error(`the spec has no operation ${operationId}`);
  return found;
}

const escape = (part: string) => part.replace(/~/g, '~0').replace(/\//g, '~1');
const pointerOf = (op: SpecOperation) => `#/paths/${escape(op.path)}/${op.method.toLowerCase()}`;

// Bodies are validated as sent; parameters arrive as strings and are coerced.
const bodyAjv = new Ajv2020({ strict: false, allErrors: true, verbose: true });
const paramAjv = new Ajv2020({ strict: false, allErrors: true, coerceTypes: true });
for (const ajv of [bodyAjv, paramAjv]) {
  addFormats(ajv);
  ajv.addSchema(bundle, BUNDLE_ID);
}

export type Validated<T> = { ok: true; value: T } | { ok: false; details: ErrorDetail[] };

/** Validates a JSON request body against the operation's request schema. */
export function bodyValidator<T>(operationId: string): (body: unknown) => Validated<T> {
  const op = specOperation(operationId);
  const validate = bodyAjv.compile({ $ref: `${BUNDLE_ID}${pointerOf(op)}/requestBody/content/application~1json/schema` });
  return (body) => (validate(body) ? { ok: true, value: body as T } : { ok: false, details: describeBodyErrors(validate.errors ?? [], body) });
}

interface ParamInfo {
  name: string;
  in: 'query' | 'header' | 'path';
  schemaRef: string;
  required: boolean;
}

function parametersOf(op: SpecOperation): ParamInfo[] {
  const base = pointerOf(op);
  const itemPointer = base.slice(0, base.lastIndexOf('/'));
  const resolve = (ref: string): Json => ref.slice(2).split('/').reduce((node: Json, key) => node[key.replace(/~1/g, '/').replace(/~0/g, '~')], bundle);
  const out: ParamInfo[] = [];
  for (const listPointer of [`${itemPointer}/parameters`, `${base}/parameters`]) {
    const list: Json[] = resolve(listPointer) ?? [];
    list.forEach((entry, i) => {
      const paramPointer = entry.$ref ?? `${listPointer}/${i}`;
      const param = resolve(paramPointer);
      out.push({ name: param.name, in: param.in, schemaRef: `${BUNDLE_ID}${paramPointer}/schema`, required: param.required === true });
    });
  }
  return out;
}

/**
 * Validates (and coerces) an operation's query or header parameters. Header
 * names are matched case-insensitively; the result is keyed by the spec's names.
 */
export function paramsValidator<T extends Record<string, unknown>>(
  operationId: string,
  location: 'query' | 'header',
): (raw: Record<string, string | undefined>) => Validated<T> {
  const params = parametersOf(specOperation(operationId)).filter((p) => p.in === location);
  // Coercion rewrites the holder's property, so each parameter is validated inside a holder object.
  const validators = params.map((param) => ({
    param,
    validate: paramAjv.compile({ type: 'object', properties: { v: { $ref: param.schemaRef } } }) as ValidateFunction,
  }));
  return (raw) => {
    const value: Record<string, unknown> = {};
    const details: ErrorDetail[] = [];
    for (const { param, validate } of validators) {
      const given = raw[location === 'header' ? param.name.toLowerCase() : param.name];
      if (given === undefined) {
        if (param.required) details.push({ field: param.name, message: 'is required' });
        continue;
      }
      const holder = { v: given };
      if (validate(holder)) value[param.name] = holder.v;
      else details.push(...(validate.errors ?? []).flatMap((e) => describeError(e) ?? []).map((d) => ({ ...d, field: param.name })));
    }
    return details.length ? { ok: false, details } : { ok: true, value: value as T };
  };
}

/** Whether a value satisfies one of the spec's component schemas (`RequestId`, …). */
export function componentValidator(name: string): (value: unknown) => boolean {
  const validate = bodyAjv.compile({ $ref: `${BUNDLE_ID}#/components/schemas/${name}` });
  return (value) => validate(value) as boolean;
}

/** The default of a property of a component schema, as the spec states it. */
export function schemaDefault(schema: string, property: string): unknown {
  return bundle.components.schemas[schema].properties[property].default;
}

// --- Ajv errors as the D2 `details` -----------------------------------------

/** One Ajv error in words; `undefined` for summaries of errors reported beside them. */
function describeError(e: ErrorObject): ErrorDetail | undefined {
  const field = e.instancePath;
  const params = e.params as Record<string, any>;
  switch (e.keyword) {
    case 'required':
      return { field: `${field}/${params.missingProperty}`, message: 'is required' };
    case 'additionalProperties':
    case 'unevaluatedProperties':
      return { field: `${field}/${params.additionalProperty ?? params.unevaluatedProperty}`, message: 'is not a known field' };
    case 'enum':
      return { field, message: `must be one of ${params.allowedValues.join(', ')}` };
    case 'const':
      return { field, message: `must be ${JSON.stringify(params.allowedValue)}` };
    case 'type':
      return { field, message: `must be ${String(params.type).replace(',', ' or ')}` };
    case 'if':
    case 'oneOf':
    case 'anyOf':
      return undefined;
    default:
      return { field, message: e.message ?? `fails ${e.keyword}` };
  }
}

/** Body errors, with words for the rules a bare pattern or branch cannot explain. */
function describeBodyErrors(errors: ErrorObject[], body: unknown): ErrorDetail[] {
  const model = (body as { model?: unknown } | null)?.model;
  const details = errors.flatMap((error): ErrorDetail[] => {
    const detail = describeError(error);
    if (!detail) return [];
    const underModelRule = error.schemaPath.includes('/then/') && typeof model === 'string';
    if (error.keyword === 'pattern' && typeof error.data === 'string') {
      const url = error.data;
      if (/^\/mediaUrls\/\d+$/.test(detail.field ?? '')) {
        const explained = explainUrl(url, { needsMediaKind: true });
        if (explained) return [{ ...detail, message: explained }];
        // The model's kind rule (the ImageUrl pattern), or the MediaUrl pattern's shape itself.
        const kind = mediaKindOf(url);
        const message = error.schemaPath.includes('/ImageUrl/')
          ? `is ${kind ? kindPhrase(kind) : 'not an image'}; ${String(model)} accepts images only`
          : 'must be a URL of the form https://host/path.ext, in lower-case https';
        return [{ ...detail, message }];
      }
      if (detail.field === '/webhookUrl') return [{ ...detail, message: explainUrl(url, { needsMediaKind: false }) ?? detail.message }];
      if (detail.field === '/prompt') return [{ ...detail, message: 'must not be blank' }];
    }
    return [underModelRule ? { ...detail, message: `${detail.message} for ${String(model)}` } : detail];
  });
  if (details.length === 0) details.push({ field: '', message: 'must be a JSON object' });
  // One entry per field and message: allErrors can report a rule twice (schema and branch).
  const seen = new Set<string>();
  return details.filter((d) => {
    const key = `${d.field} ${d.message}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}

/** A one-line summary of details: "duration must be one of 5, 10 for vidgen-1.5-pro". */
export function summarise(details: ErrorDetail[]): string {
  const [first] = details;
  if (!first) return 'the request is invalid';
  const name = first.field ? first.field.replace(/^\//, '').replace(/\//g, '.') : 'the body';
  const rest = details.length > 1 ? ` (and ${details.length - 1} more problem${details.length > 2 ? 's' : ''})` : '';
  return `${name} ${first.message}${rest}`;
}
