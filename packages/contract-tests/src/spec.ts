/**
 * The bundled OpenAPI document and validators compiled from it (Ajv in JSON
 * Schema 2020-12 mode). Every check in this suite reads the same bundle the
 * server, the mock and the docs read: there is no second schema.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS; under NodeNext its default export is the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface OperationInfo {
  operationId: string;
  method: string;
  path: string;
  /** JSON Pointer of the operation object in the bundle. */
  pointer: string;
  operation: JsonObject;
  webhook: boolean;
}

export const bundlePath = createRequire(import.meta.url).resolve('@vidgen/spec/openapi.json');
export const bundleText = readFileSync(bundlePath, 'utf8');
export const document = JSON.parse(bundleText) as JsonObject;

const BUNDLE_ID = 'openapi.json';
export const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);
ajv.addSchema(document, BUNDLE_ID);

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

export const escapePointer = (part: string) => part.replace(/~/g, '~0').replace(/\//g, '~1');
export const pointer = (...parts: (string | number)[]) => parts.map((p) => `/${escapePointer(String(p))}`).join('');

/** The value at a JSON Pointer of the bundle. */
export function at(ptr: string): Json | undefined {
  return ptr
    .split('/')
    .slice(1)
    .reduce<Json | undefined>((node, raw) => {
      const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
      return node !== null && typeof node === 'object' ? (node as JsonObject)[key] : undefined;
    }, document);
}

/** Follows a local `$ref` (components of the bundle) to its target and its pointer. */
export function deref(node: Json | undefined, ptr: string): { node: Json | undefined; ptr: string } {
  const seen = new Set<string>();
  while (node && typeof node === 'object' && !Array.isArray(node) && typeof node.$ref === 'string') {
    const target = node.$ref.replace(/^#/, '');
    if (seen.has(target)) throw new Error(`$ref cycle at ${target}`);
    seen.add(target);
    ptr = target;
    node = at(target);
  }
  return { node, ptr };
}

const validators = new Map<string, ValidateFunction>();
/** A validator for the schema at a pointer of the bundle (its `$ref`s resolve inside the bundle). */
export function validatorAt(ptr: string): ValidateFunction {
  let validate = validators.get(ptr);
  if (!validate) {
    validate = ajv.compile({ $ref: `${BUNDLE_ID}#${ptr}` });
    validators.set(ptr, validate);
  }
  return validate;
}

export function schemaErrors(ptr: string, value: unknown): string[] {
  const validate = validatorAt(ptr);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? e.keyword} [${e.schemaPath}]`);
}

function listOperations(): OperationInfo[] {
  const found: OperationInfo[] = [];
  for (const section of ['paths', 'webhooks'] as const) {
    const items = (document[section] ?? {}) as JsonObject;
    for (const [path, item] of Object.entries(items)) {
      for (const method of METHODS) {
        const operation = (item as JsonObject)[method] as JsonObject | undefined;
        if (!operation) continue;
        found.push({
          operationId: String(operation.operationId),
          method: method.toUpperCase(),
          path,
          pointer: pointer(section, path, method),
          operation,
          webhook: section === 'webhooks',
        });
      }
    }
  }
  return found;
}

export const operations = listOperations();
export const operationsById = new Map(operations.map((op) => [op.operationId, op]));

export function operationById(operationId: string): OperationInfo {
  const op = operationsById.get(operationId);
  if (!op) throw new Error(`no operation ${operationId} in the spec`);
  return op;
}

/** Parameters of an operation, path-level ones included, with their pointers. */
export function parametersOf(op: OperationInfo): { ptr: string; param: JsonObject }[] {
  const itemPtr = op.pointer.slice(0, op.pointer.lastIndexOf('/'));
  const out: { ptr: string; param: JsonObject }[] = [];
  for (const base of [itemPtr, op.pointer]) {
    const params = at(`${base}/parameters`);
    if (!Array.isArray(params)) continue;
    params.forEach((_, i) => {
      const { node, ptr } = deref(at(`${base}/parameters/${i}`), `${base}/parameters/${i}`);
      out.push({ ptr, param: node as JsonObject });
    });
  }
  return out;
}
