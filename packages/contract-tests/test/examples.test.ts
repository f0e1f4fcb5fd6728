/** Every example in the bundle validates against the schema it illustrates. */
import { describe, expect, it } from 'vitest';
import { at, deref, document, operations, pointer, schemaErrors, type JsonObject } from '../src/spec.js';

interface ExampleCase {
  where: string;
  schemaPtr: string;
  value: unknown;
}

const SCHEMA_CHILDREN = new Set(['items', 'not', 'if', 'then', 'else', 'additionalProperties', 'unevaluatedProperties', 'contains']);
const SCHEMA_LISTS = new Set(['allOf', 'oneOf', 'anyOf', 'prefixItems']);
const SCHEMA_MAPS = new Set(['properties', '$defs', 'patternProperties']);

function collectExamples(): ExampleCase[] {
  const cases: ExampleCase[] = [];
  const walk = (node: unknown, ptr: string, inSchema: boolean) => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((child, i) => walk(child, `${ptr}/${i}`, false));
    const obj = node as JsonObject;
    if (inSchema && 'example' in obj) cases.push({ where: `${ptr}/example`, schemaPtr: ptr, value: obj.example });
    if (!inSchema && 'schema' in obj) {
      if ('example' in obj) cases.push({ where: `${ptr}/example`, schemaPtr: `${ptr}/schema`, value: obj.example });
      for (const name of Object.keys((obj.examples ?? {}) as JsonObject)) {
        const example = deref(at(`${ptr}${pointer('examples', name)}`), '').node as JsonObject;
        cases.push({ where: `${ptr}${pointer('examples', name)}`, schemaPtr: `${ptr}/schema`, value: example.value });
      }
    }
    for (const [key, child] of Object.entries(obj)) {
      if (key === 'example' || key === 'examples') continue;
      const childPtr = `${ptr}${pointer(key)}`;
      if (inSchema && SCHEMA_MAPS.has(key) && child && typeof child === 'object') {
        for (const [name, sub] of Object.entries(child as JsonObject)) walk(sub, `${childPtr}${pointer(name)}`, true);
      } else if (inSchema && SCHEMA_LISTS.has(key) && Array.isArray(child)) {
        child.forEach((sub, i) => walk(sub, `${childPtr}/${i}`, true));
      } else {
        walk(child, childPtr, (inSchema && SCHEMA_CHILDREN.has(key)) || key === 'schema');
      }
    }
  };
  walk(document.paths, '/paths', false);
  walk(document.webhooks, '/webhooks', false);
  const components = document.components as JsonObject;
  for (const [name, schema] of Object.entries(components.schemas as JsonObject)) {
    walk(schema, pointer('components', 'schemas', name), true);
  }
  for (const section of ['parameters', 'headers', 'responses', 'requestBodies']) {
    walk(components[section], pointer('components', section), false);
  }
  return cases;
}

const cases = collectExamples();

describe('spec examples', () => {
  it('finds the examples of every kind of place', () => {
    expect(cases.length).toBeGreaterThanOrEqual(75);
    expect(cases.some((c) => c.where.startsWith('/components/schemas/'))).toBe(true);
    expect(cases.some((c) => c.where.startsWith('/components/headers/'))).toBe(true);
    expect(cases.some((c) => c.where.startsWith('/components/parameters/'))).toBe(true);
    expect(cases.some((c) => c.where.startsWith('/webhooks/'))).toBe(true);
  });

  it.each(cases.map((c) => [c.where, c] as const))('%s validates against its schema', (_, c) => {
    expect(schemaErrors(c.schemaPtr, c.value)).toEqual([]);
  });

  it('has a named request example for every generation mode', () => {
    const submit = operations.find((op) => op.operationId === 'submitGeneration')!;
    const examples = at(`${submit.pointer}/requestBody/content/application~1json/examples`) as JsonObject;
    expect(Object.keys(examples).sort()).toEqual(['firstFrame', 'firstLastFrame', 'multimodalReference', 'textToVideo']);
  });

  it('has an example for every documented JSON response', () => {
    const missing: string[] = [];
    for (const op of operations) {
      for (const [status, ref] of Object.entries((op.operation.responses ?? {}) as JsonObject)) {
        const response = deref(ref, '').node as JsonObject;
        for (const [mediaType, media] of Object.entries((response.content ?? {}) as JsonObject)) {
          const m = media as JsonObject;
          if (!m.example && Object.keys((m.examples ?? {}) as JsonObject).length === 0) {
            missing.push(`${op.operationId} ${status} ${mediaType}`);
          }
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('rejects what the schemas forbid (the validators are not vacuous)', () => {
    const task = pointer('components', 'schemas', 'Task');
    const succeeded = (at(pointer('components', 'examples', 'TaskSucceeded')) as JsonObject).value as JsonObject;
    expect(schemaErrors(task, succeeded)).toEqual([]);
    expect(schemaErrors(task, { ...succeeded, output: null })).not.toEqual([]);
    expect(schemaErrors(task, { ...succeeded, status: 'processing' })).not.toEqual([]);
    expect(schemaErrors(task, { ...succeeded, surprise: 1 })).not.toEqual([]);
    const request = pointer('components', 'schemas', 'SubmitGenerationRequest');
    expect(schemaErrors(request, { model: 'vidgen-1.5-pro', prompt: 'x', duration: 7 })).not.toEqual([]);
    expect(schemaErrors(request, { model: 'vidgen-2.0', prompt: 'x', duration: 7 })).toEqual([]);
  });
});
