import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBreakingChanges, listOperations } from './breaking-changes.mjs';

const ref = (/** @type {string} */ name) => ({ $ref: `#/components/schemas/${name}` });
const json = (/** @type {object} */ schema) => ({ 'application/json': { schema } });

/** A small contract touching every rule: requests, responses, headers, unions, recursion, a webhook. */
function makeDoc() {
  return {
    openapi: '3.1.0',
    info: { title: 'fixture', version: '1.0.0', description: 'Items.' },
    servers: [{ url: 'https://api.example.test' }],
    tags: [{ name: 'Items' }],
    paths: {
      '/items': {
        get: {
          operationId: 'listItems',
          summary: 'List items',
          tags: ['Items'],
          parameters: [
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 100 } },
            { name: 'X-Trace-Id', in: 'header', schema: { type: 'string' } },
          ],
          responses: {
            200: {
              description: 'A page of items',
              headers: {
                'X-Total-Count': { required: true, schema: { type: 'integer', minimum: 0 } },
                'X-Hint': { schema: { type: 'string' } },
              },
              content: json(ref('ItemPage')),
            },
          },
        },
        post: {
          operationId: 'createItem',
          requestBody: { required: true, content: json(ref('ItemInput')) },
          responses: {
            201: { description: 'Created', content: json(ref('Item')) },
            400: { $ref: '#/components/responses/BadRequest' },
          },
        },
      },
      '/items/{id}': {
        parameters: [{ $ref: '#/components/parameters/ItemId' }],
        get: { operationId: 'getItem', responses: { 200: { description: 'The item', content: json(ref('Item')) } } },
        delete: { operationId: 'deleteItem', responses: { 204: { description: 'Deleted' } } },
      },
    },
    webhooks: {
      itemChanged: {
        post: {
          operationId: 'itemChanged',
          requestBody: { required: true, content: json(ref('ItemEvent')) },
          responses: { 200: { description: 'Received' } },
        },
      },
    },
    components: {
      parameters: { ItemId: { name: 'id', in: 'path', required: true, schema: { type: 'string', maxLength: 64 } } },
      responses: { BadRequest: { description: 'Invalid request', content: json(ref('Error')) } },
      schemas: {
        ItemInput: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: {
            name: { type: 'string', minLength: 1, maxLength: 100 },
            color: ref('Color'),
            size: { type: 'integer', minimum: 1, maximum: 10 },
            tags: { type: 'array', minItems: 1, maxItems: 5, items: { type: 'string', maxLength: 20 } },
            homepage: { type: 'string' },
            labels: { type: 'object', minProperties: 1, maxProperties: 10, additionalProperties: { type: 'string' } },
          },
        },
        Color: { type: 'string', enum: ['red', 'green'] },
        Item: {
          type: 'object',
          required: ['id', 'name', 'status'],
          properties: {
            id: { type: 'string' },
            kind: { type: 'string', const: 'item' },
            name: { type: 'string', minLength: 1, maxLength: 100 },
            status: ref('Status'),
            size: { type: 'integer', minimum: 1, maximum: 10 },
            note: { type: 'string', pattern: '^\\S' },
            createdAt: { type: 'string', format: 'date-time' },
            parent: { anyOf: [ref('Item'), { type: 'null' }] },
          },
        },
        Status: { type: 'string', enum: ['active', 'archived'] },
        ItemPage: {
          type: 'object',
          required: ['items', 'next'],
          properties: { items: { type: 'array', maxItems: 50, items: ref('Item') }, next: { type: ['string', 'null'] } },
        },
        ItemEvent: { oneOf: [ref('ItemCreated'), ref('ItemDeleted')], discriminator: { propertyName: 'type' } },
        ItemCreated: {
          type: 'object',
          required: ['type', 'item'],
          properties: { type: { const: 'item.created' }, item: ref('Item') },
        },
        ItemDeleted: {
          type: 'object',
          required: ['type', 'id'],
          properties: { type: { const: 'item.deleted' }, id: { type: 'string' } },
        },
        Error: {
          type: 'object',
          required: ['code', 'message'],
          properties: { code: { type: 'string', enum: ['invalid', 'not_found'] }, message: { type: 'string' } },
        },
      },
    },
  };
}

/**
 * Breaking changes from the fixture (after `setup`, applied to both sides) to a deep clone of it
 * changed by `mutate`.
 * @param {(doc: any) => void} mutate @param {(doc: any) => void} [setup]
 */
function diff(mutate, setup) {
  const base = makeDoc();
  setup?.(base);
  const head = structuredClone(base);
  mutate(head);
  return findBreakingChanges(base, head);
}
const schemas = (/** @type {any} */ doc) => doc.components.schemas;
const input = (/** @type {any} */ doc) => doc.components.schemas.ItemInput.properties;
const item = (/** @type {any} */ doc) => doc.components.schemas.Item.properties;
/** @param {string} location @param {string | RegExp} message */
const change = (location, message) => ({ location, message: typeof message === 'string' ? message : expect.stringMatching(message) });

describe('the fixture', () => {
  it('reports nothing for an identical document', () => {
    expect(findBreakingChanges(makeDoc(), makeDoc())).toEqual([]);
  });

  it('ignores descriptions, examples, summaries, tags, servers and new components', () => {
    const changes = diff((doc) => {
      doc.info.description = 'Other words.';
      doc.servers = [{ url: 'https://elsewhere.example.test' }];
      doc.tags.push({ name: 'More' });
      doc.paths['/items'].get.summary = 'Lists the items';
      doc.paths['/items'].get.tags = ['Other'];
      doc.paths['/items'].post.requestBody.content['application/json'].examples = { one: { value: { name: 'x' } } };
      schemas(doc).Item.description = 'An item.';
      item(doc).name.example = 'A name';
      schemas(doc).Unused = { type: 'string' };
    });
    expect(changes).toEqual([]);
  });
});

describe('paths and operations', () => {
  it('flags a removed operation', () => {
    expect(diff((doc) => delete doc.paths['/items/{id}'].delete)).toEqual([change('DELETE /items/{id}', 'operation removed')]);
  });

  it('flags a removed path once per operation', () => {
    expect(diff((doc) => delete doc.paths['/items/{id}'])).toEqual([
      change('GET /items/{id}', 'path removed'),
      change('DELETE /items/{id}', 'path removed'),
    ]);
  });

  it('accepts a new operation and a new path', () => {
    const changes = diff((doc) => {
      doc.paths['/items/{id}'].patch = { operationId: 'updateItem', responses: { 200: { description: 'ok' } } };
      doc.paths['/tags'] = { get: { operationId: 'listTags', responses: { 200: { description: 'ok' } } } };
    });
    expect(changes).toEqual([]);
  });

  it('flags a changed operationId', () => {
    expect(diff((doc) => (doc.paths['/items'].post.operationId = 'addItem'))).toEqual([
      change('POST /items', 'operationId changed from createItem to addItem'),
    ]);
  });

  it('accepts an operationId where there was none', () => {
    const getItem = (/** @type {any} */ doc) => doc.paths['/items/{id}'].get;
    expect(diff((doc) => (getItem(doc).operationId = 'getItem'), (doc) => delete getItem(doc).operationId)).toEqual([]);
  });

  it('flags a removed webhook and accepts a new one', () => {
    expect(diff((doc) => delete doc.webhooks.itemChanged)).toEqual([change('POST webhook itemChanged', 'webhook removed')]);
    expect(diff((doc) => (doc.webhooks.itemArchived = structuredClone(doc.webhooks.itemChanged)))).toEqual([]);
  });

  it('lists every operation, webhooks included', () => {
    expect(listOperations(makeDoc())).toEqual([
      'GET /items',
      'POST /items',
      'GET /items/{id}',
      'DELETE /items/{id}',
      'POST webhook itemChanged',
    ]);
  });
});

describe('parameters', () => {
  const params = (/** @type {any} */ doc) => doc.paths['/items'].get.parameters;

  it('flags a removed optional query parameter', () => {
    expect(diff((doc) => params(doc).splice(0, 1))).toEqual([change('GET /items › query parameter limit', 'parameter removed')]);
  });

  it('flags a removed optional header parameter', () => {
    expect(diff((doc) => params(doc).splice(1, 1))).toEqual([change('GET /items › header parameter X-Trace-Id', 'parameter removed')]);
  });

  it('matches header parameters case-insensitively', () => {
    expect(diff((doc) => (params(doc)[1].name = 'x-trace-id'))).toEqual([]);
  });

  it('matches path-level and operation-level parameters alike', () => {
    const moved = diff((doc) => {
      delete doc.paths['/items/{id}'].parameters;
      doc.paths['/items/{id}'].get.parameters = [{ $ref: '#/components/parameters/ItemId' }];
      doc.paths['/items/{id}'].delete.parameters = [{ $ref: '#/components/parameters/ItemId' }];
    });
    expect(moved).toEqual([]);
  });

  it('flags a new required parameter', () => {
    const changes = diff((doc) => params(doc).push({ name: 'tenant', in: 'query', required: true, schema: { type: 'string' } }));
    expect(changes).toEqual([change('GET /items › query parameter tenant', 'new required parameter')]);
  });

  it('accepts a new optional parameter', () => {
    expect(diff((doc) => params(doc).push({ name: 'cursor', in: 'query', schema: { type: 'string' } }))).toEqual([]);
  });

  it('flags an optional parameter that became required', () => {
    expect(diff((doc) => (params(doc)[0].required = true))).toEqual([
      change('GET /items › query parameter limit', 'parameter became required'),
    ]);
  });

  it('accepts a required parameter that became optional', () => {
    expect(diff((doc) => (params(doc)[0].required = false), (doc) => (params(doc)[0].required = true))).toEqual([]);
  });

  it('compares parameter schemas with request rules', () => {
    expect(diff((doc) => (params(doc)[0].schema.maximum = 50))).toEqual([
      change('GET /items › query parameter limit', 'maximum changed from 100 to 50'),
    ]);
    expect(diff((doc) => (params(doc)[0].schema.maximum = 500))).toEqual([]);
    expect(diff((doc) => (doc.components.parameters.ItemId.schema.maxLength = 32))).toEqual([
      change('GET /items/{id} › path parameter id', 'maxLength changed from 64 to 32'),
      change('DELETE /items/{id} › path parameter id', 'maxLength changed from 64 to 32'),
    ]);
  });
});

describe('request bodies', () => {
  const body = (/** @type {any} */ doc) => doc.paths['/items'].post.requestBody;

  it('flags a request body that became required', () => {
    expect(diff((doc) => (body(doc).required = true), (doc) => (body(doc).required = false))).toEqual([
      change('POST /items › requestBody', 'request body became required'),
    ]);
  });

  it('accepts a request body that became optional', () => {
    expect(diff((doc) => (body(doc).required = false))).toEqual([]);
  });

  it('flags a new required request body on an operation that had none', () => {
    const changes = diff((doc) => (doc.paths['/items/{id}'].delete.requestBody = { required: true, content: json({ type: 'object' }) }));
    expect(changes).toEqual([change('DELETE /items/{id} › requestBody', 'request body became required')]);
  });

  it('flags a removed request media type', () => {
    const changes = diff(
      (doc) => delete body(doc).content['application/x-www-form-urlencoded'],
      (doc) => (body(doc).content['application/x-www-form-urlencoded'] = { schema: ref('ItemInput') }),
    );
    expect(changes).toEqual([change('POST /items › requestBody', 'media type application/x-www-form-urlencoded removed')]);
  });

  it('accepts a new request media type', () => {
    expect(diff((doc) => (body(doc).content['application/merge-patch+json'] = { schema: ref('ItemInput') }))).toEqual([]);
  });

  it('names a media type other than JSON in the location', () => {
    const changes = diff(
      (doc) => (body(doc).content['text/plain'].schema.maxLength = 10),
      (doc) => (body(doc).content['text/plain'] = { schema: { type: 'string' } }),
    );
    expect(changes).toEqual([change('POST /items › requestBody › text/plain', 'maxLength changed from (none) to 10')]);
  });
});

describe('request schemas (old requests must still be accepted)', () => {
  it('reports locations as METHOD path › requestBody › /pointer', () => {
    expect(diff((doc) => (input(doc).size.maximum = 5))).toEqual([
      change('POST /items › requestBody › /size', 'maximum changed from 10 to 5'),
    ]);
  });

  it('flags a new required request property', () => {
    const changes = diff((doc) => {
      input(doc).sku = { type: 'string' };
      schemas(doc).ItemInput.required.push('sku');
    });
    expect(changes).toEqual([change('POST /items › requestBody › /sku', 'new required property')]);
  });

  it('flags an optional request property that became required', () => {
    expect(diff((doc) => schemas(doc).ItemInput.required.push('size'))).toEqual([
      change('POST /items › requestBody › /size', 'property became required'),
    ]);
  });

  it('accepts a new optional request field', () => {
    expect(diff((doc) => (input(doc).sku = { type: 'string', maxLength: 20, pattern: '^[A-Z]+$' }))).toEqual([]);
  });

  it('accepts a required request property that became optional', () => {
    expect(diff((doc) => (schemas(doc).ItemInput.required = []))).toEqual([]);
  });

  it('flags a narrowed type', () => {
    expect(diff((doc) => (input(doc).size.type = 'string'), (doc) => (input(doc).size.type = ['integer', 'string']))).toEqual([
      change('POST /items › requestBody › /size', 'type no longer allows integer'),
    ]);
    expect(diff((doc) => (input(doc).homepage.type = 'string'), (doc) => (input(doc).homepage.type = ['string', 'null']))).toEqual([
      change('POST /items › requestBody › /homepage', 'type no longer allows null'),
    ]);
  });

  it('flags a type where any value was accepted', () => {
    expect(diff((doc) => (input(doc).homepage = { type: 'string' }), (doc) => (input(doc).homepage = {}))).toEqual([
      change('POST /items › requestBody › /homepage', 'type restricted to string'),
    ]);
  });

  it('accepts a widened type, including null and integer to number', () => {
    expect(diff((doc) => (input(doc).homepage.type = ['string', 'null']))).toEqual([]);
    expect(diff((doc) => (input(doc).size.type = 'number'))).toEqual([]);
    expect(diff((doc) => delete input(doc).homepage.type)).toEqual([]);
  });

  it('flags an enum value removed from a request', () => {
    expect(diff((doc) => (schemas(doc).Color.enum = ['red']))).toEqual([
      change('POST /items › requestBody › /color', 'value "green" no longer accepted'),
    ]);
  });

  it('accepts an enum value added to a request', () => {
    expect(diff((doc) => schemas(doc).Color.enum.push('blue'))).toEqual([]);
  });

  it('flags a new enum or const where there was none', () => {
    expect(diff((doc) => (input(doc).homepage.enum = ['a', 'b']))).toEqual([
      change('POST /items › requestBody › /homepage', 'values now restricted to "a", "b"'),
    ]);
    expect(diff((doc) => (input(doc).homepage.const = 'a'))).toEqual([
      change('POST /items › requestBody › /homepage', 'values now restricted to "a"'),
    ]);
  });

  it('flags a changed const and accepts a removed one', () => {
    expect(diff((doc) => (input(doc).homepage.const = 'b'), (doc) => (input(doc).homepage.const = 'a'))).toEqual([
      change('POST /items › requestBody › /homepage', 'value "a" no longer accepted'),
    ]);
    expect(diff((doc) => delete input(doc).homepage.const, (doc) => (input(doc).homepage.const = 'a'))).toEqual([]);
    expect(diff((doc) => delete schemas(doc).Color.enum)).toEqual([]);
  });

  it.each([
    ['minimum increased', 'size', 'minimum', 2],
    ['minLength increased', 'name', 'minLength', 3],
    ['minItems increased', 'tags', 'minItems', 2],
    ['minProperties increased', 'labels', 'minProperties', 2],
    ['maximum decreased', 'size', 'maximum', 9],
    ['maxLength decreased', 'name', 'maxLength', 99],
    ['maxItems decreased', 'tags', 'maxItems', 4],
    ['maxProperties decreased', 'labels', 'maxProperties', 9],
    ['exclusiveMinimum added', 'size', 'exclusiveMinimum', 1],
    ['exclusiveMaximum added', 'size', 'exclusiveMaximum', 10],
  ])('flags %s in a request', (_, property, keyword, value) => {
    const changes = diff((doc) => (input(doc)[property][keyword] = value));
    expect(changes).toEqual([change(`POST /items › requestBody › /${property}`, new RegExp(`^${keyword} changed from .* to ${value}$`))]);
  });

  it.each([
    ['minimum decreased', 'size', 'minimum', 0],
    ['minLength removed', 'name', 'minLength', undefined],
    ['minItems decreased', 'tags', 'minItems', 0],
    ['minProperties removed', 'labels', 'minProperties', undefined],
    ['maximum increased', 'size', 'maximum', 20],
    ['maxLength increased', 'name', 'maxLength', 200],
    ['maxItems removed', 'tags', 'maxItems', undefined],
    ['maxProperties increased', 'labels', 'maxProperties', 20],
  ])('accepts %s in a request', (_, property, keyword, value) => {
    expect(diff((doc) => (input(doc)[property][keyword] = value))).toEqual([]);
  });

  it('flags a pattern added to or changed in a request', () => {
    expect(diff((doc) => (input(doc).homepage.pattern = '^https://'))).toEqual([
      change('POST /items › requestBody › /homepage', 'pattern changed from (none) to ^https://'),
    ]);
    expect(diff((doc) => (input(doc).homepage.pattern = '^https://'), (doc) => (input(doc).homepage.pattern = '^https?://'))).toEqual([
      change('POST /items › requestBody › /homepage', 'pattern changed from ^https?:// to ^https://'),
    ]);
  });

  it('accepts a pattern removed from a request', () => {
    expect(diff((doc) => delete input(doc).homepage.pattern, (doc) => (input(doc).homepage.pattern = '^https://'))).toEqual([]);
  });

  it('flags a format added to or changed in a request', () => {
    expect(diff((doc) => (input(doc).homepage.format = 'uri'))).toEqual([
      change('POST /items › requestBody › /homepage', 'format changed from (none) to uri'),
    ]);
    expect(diff((doc) => (input(doc).homepage.format = 'uri'), (doc) => (input(doc).homepage.format = 'uri-reference'))).toEqual([
      change('POST /items › requestBody › /homepage', 'format changed from uri-reference to uri'),
    ]);
  });

  it('accepts a format removed from a request', () => {
    expect(diff((doc) => delete input(doc).homepage.format, (doc) => (input(doc).homepage.format = 'uri'))).toEqual([]);
  });

  it('flags a property removed while additionalProperties is false', () => {
    expect(diff((doc) => delete input(doc).homepage)).toEqual([
      change('POST /items › requestBody › /homepage', 'property removed while unknown properties are rejected'),
    ]);
  });

  it('flags a property removed while unevaluatedProperties is false', () => {
    const closedByUnevaluated = (/** @type {any} */ doc) => {
      delete schemas(doc).ItemInput.additionalProperties;
      schemas(doc).ItemInput.unevaluatedProperties = false;
    };
    expect(diff((doc) => delete input(doc).homepage, closedByUnevaluated)).toEqual([
      change('POST /items › requestBody › /homepage', 'property removed while unknown properties are rejected'),
    ]);
  });

  it('accepts a property removed from an open request schema', () => {
    expect(diff((doc) => delete input(doc).homepage, (doc) => delete schemas(doc).ItemInput.additionalProperties)).toEqual([]);
  });

  it('checks a property removed from a request against the additionalProperties schema', () => {
    const open = (/** @type {any} */ doc) => (schemas(doc).ItemInput.additionalProperties = { type: 'string' });
    expect(diff((doc) => delete input(doc).homepage, open)).toEqual([]);
    expect(diff((doc) => delete input(doc).size, open)).toEqual([
      change('POST /items › requestBody › /size', 'type no longer allows integer'),
    ]);
  });

  it('flags additionalProperties changed from true or absent to false', () => {
    const open = (/** @type {any} */ doc) => delete schemas(doc).ItemInput.additionalProperties;
    expect(diff((doc) => (schemas(doc).ItemInput.additionalProperties = false), open)).toEqual([
      change('POST /items › requestBody', 'unknown properties are now rejected'),
    ]);
    const openTrue = (/** @type {any} */ doc) => (schemas(doc).ItemInput.additionalProperties = true);
    expect(diff((doc) => (schemas(doc).ItemInput.additionalProperties = false), openTrue)).toEqual([
      change('POST /items › requestBody', 'unknown properties are now rejected'),
    ]);
  });

  it('accepts additionalProperties changed from false to true', () => {
    expect(diff((doc) => (schemas(doc).ItemInput.additionalProperties = true))).toEqual([]);
  });

  it('compares additionalProperties schemas, items and prefixItems', () => {
    expect(diff((doc) => (input(doc).labels.additionalProperties.maxLength = 5))).toEqual([
      change('POST /items › requestBody › /labels/*', 'maxLength changed from (none) to 5'),
    ]);
    expect(diff((doc) => (input(doc).labels.additionalProperties = true))).toEqual([]);
    expect(diff((doc) => (input(doc).tags.items.maxLength = 10))).toEqual([
      change('POST /items › requestBody › /tags[]', 'maxLength changed from 20 to 10'),
    ]);
    const pair = (/** @type {any} */ doc) => (input(doc).point = { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }] });
    expect(diff((doc) => (input(doc).point.prefixItems[1].minimum = 0), pair)).toEqual([
      change('POST /items › requestBody › /point[1]', 'minimum changed from (none) to 0'),
    ]);
  });
});

describe('responses', () => {
  const ok = (/** @type {any} */ doc) => doc.paths['/items'].get.responses[200];

  it('flags a removed status code', () => {
    expect(diff((doc) => delete doc.paths['/items'].post.responses[400])).toEqual([
      change('POST /items › response 400', 'response removed'),
    ]);
  });

  it('accepts new status codes, 4xx and 5xx included', () => {
    const changes = diff((doc) => {
      doc.paths['/items'].post.responses[200] = { description: 'Already there', content: json(ref('Item')) };
      doc.paths['/items'].post.responses[409] = { $ref: '#/components/responses/BadRequest' };
      doc.paths['/items'].post.responses[503] = { description: 'Unavailable' };
    });
    expect(changes).toEqual([]);
  });

  it('flags a removed response media type and accepts a new one', () => {
    expect(diff((doc) => delete ok(doc).content['application/json'])).toEqual([
      change('GET /items › response 200', 'media type application/json removed'),
    ]);
    expect(diff((doc) => (ok(doc).content['text/csv'] = { schema: { type: 'string' } }))).toEqual([]);
  });

  it('flags a required response header that was removed or made optional', () => {
    expect(diff((doc) => delete ok(doc).headers['X-Total-Count'])).toEqual([
      change('GET /items › response 200 › header X-Total-Count', 'required header removed'),
    ]);
    expect(diff((doc) => (ok(doc).headers['X-Total-Count'].required = false))).toEqual([
      change('GET /items › response 200 › header X-Total-Count', 'header no longer required'),
    ]);
  });

  it('accepts new response headers and a removed optional one', () => {
    const changes = diff((doc) => {
      delete ok(doc).headers['X-Hint'];
      ok(doc).headers['x-total-count'] = ok(doc).headers['X-Total-Count'];
      delete ok(doc).headers['X-Total-Count'];
      ok(doc).headers['X-Request-Id'] = { required: true, schema: { type: 'string' } };
    });
    expect(changes).toEqual([]);
  });

  it('compares response header schemas with response rules', () => {
    expect(diff((doc) => delete ok(doc).headers['X-Total-Count'].schema.minimum)).toEqual([
      change('GET /items › response 200 › header X-Total-Count', 'minimum changed from 0 to (none)'),
    ]);
    expect(diff((doc) => (ok(doc).headers['X-Total-Count'].schema.maximum = 1000))).toEqual([]);
  });
});

describe('response schemas (clients only see what they were promised)', () => {
  it('flags a widened response type', () => {
    const changes = diff((doc) => (item(doc).size.type = ['integer', 'string']));
    expect(changes).toContainEqual(change('GET /items/{id} › response 200 › /size', 'type now also allows string'));
    expect(changes).toContainEqual(change('POST /items › response 201 › /size', 'type now also allows string'));
    expect(changes).toContainEqual(change('GET /items › response 200 › /items[]/size', 'type now also allows string'));
  });

  it('flags nullability added to a response', () => {
    expect(diff((doc) => (item(doc).name.type = ['string', 'null']))).toContainEqual(
      change('GET /items/{id} › response 200 › /name', 'type now also allows null (became nullable)'),
    );
  });

  it('accepts a narrowed response type', () => {
    expect(diff((doc) => (schemas(doc).ItemPage.properties.next.type = 'string'))).toEqual([]);
    expect(diff((doc) => (item(doc).size.type = 'integer'), (doc) => (item(doc).size.type = 'number'))).toEqual([]);
  });

  it('accepts an enum value added to a response (clients must tolerate new values)', () => {
    expect(diff((doc) => schemas(doc).Status.enum.push('deleted'))).toEqual([]);
    expect(diff((doc) => schemas(doc).Error.properties.code.enum.push('conflict'))).toEqual([]);
  });

  it('accepts an enum value removed from a response', () => {
    expect(diff((doc) => (schemas(doc).Status.enum = ['active']))).toEqual([]);
  });

  it('flags a changed response const', () => {
    expect(diff((doc) => (item(doc).kind.const = 'thing'))).toContainEqual(
      change('GET /items/{id} › response 200 › /kind', 'const changed from "item" to "thing"'),
    );
    expect(diff((doc) => delete item(doc).kind.const)).toContainEqual(
      change('GET /items/{id} › response 200 › /kind', 'const changed from "item" to (any value)'),
    );
  });

  it('flags a property removed from a response', () => {
    expect(diff((doc) => delete item(doc).note)).toContainEqual(change('GET /items/{id} › response 200 › /note', 'property removed'));
    expect(diff((doc) => delete item(doc).id)).toContainEqual(change('GET /items/{id} › response 200 › /id', 'property removed'));
  });

  it('accepts a new response property, required or not', () => {
    const changes = diff((doc) => {
      item(doc).color = { type: 'string' };
      item(doc).updatedAt = { type: 'string', format: 'date-time' };
      schemas(doc).Item.required.push('updatedAt');
    });
    expect(changes).toEqual([]);
  });

  it('flags a property dropped from required in a response', () => {
    const changes = diff((doc) => (schemas(doc).Item.required = ['id', 'name']));
    expect(changes).toContainEqual(change('GET /items/{id} › response 200 › /status', 'property no longer required'));
  });

  it('accepts a response property that became required', () => {
    expect(diff((doc) => schemas(doc).Item.required.push('size'))).toEqual([]);
  });

  it.each([
    ['minimum decreased', 'size', 'minimum', 0],
    ['minLength removed', 'name', 'minLength', undefined],
    ['maximum increased', 'size', 'maximum', 20],
    ['maxLength increased', 'name', 'maxLength', 200],
  ])('flags %s in a response', (_, property, keyword, value) => {
    expect(diff((doc) => (item(doc)[property][keyword] = value))).toContainEqual(
      change(`GET /items/{id} › response 200 › /${property}`, new RegExp(`^${keyword} changed from`)),
    );
  });

  it('flags maxItems increased in a response', () => {
    expect(diff((doc) => (schemas(doc).ItemPage.properties.items.maxItems = 100))).toEqual([
      change('GET /items › response 200 › /items', 'maxItems changed from 50 to 100'),
    ]);
  });

  it.each([
    ['minimum increased', 'size', 'minimum', 2],
    ['minLength increased', 'name', 'minLength', 2],
    ['maximum decreased', 'size', 'maximum', 5],
    ['maxLength decreased', 'name', 'maxLength', 50],
    ['maxLength added', 'id', 'maxLength', 64],
  ])('accepts %s in a response', (_, property, keyword, value) => {
    expect(diff((doc) => (item(doc)[property][keyword] = value))).toEqual([]);
  });

  it('flags a pattern or format removed from a response and accepts one added', () => {
    expect(diff((doc) => delete item(doc).note.pattern)).toContainEqual(
      change('GET /items/{id} › response 200 › /note', 'pattern changed from ^\\S to (none)'),
    );
    expect(diff((doc) => delete item(doc).createdAt.format)).toContainEqual(
      change('GET /items/{id} › response 200 › /createdAt', 'format changed from date-time to (none)'),
    );
    expect(diff((doc) => (item(doc).id.pattern = '^itm_'))).toEqual([]);
    expect(diff((doc) => (item(doc).id.format = 'uuid'))).toEqual([]);
  });
});

describe('schema structure', () => {
  it('resolves $refs on both sides, so inlining or renaming a component is not a change', () => {
    const changes = diff((doc) => {
      input(doc).color = { type: 'string', enum: ['red', 'green'] };
      schemas(doc).ItemState = schemas(doc).Status;
      delete schemas(doc).Status;
      item(doc).status = ref('ItemState');
    });
    expect(changes).toEqual([]);
  });

  it('applies keywords beside a $ref', () => {
    expect(diff((doc) => (input(doc).color = { ...ref('Color'), enum: ['red'] }))).toEqual([
      change('POST /items › requestBody › /color', 'value "green" no longer accepted'),
    ]);
  });

  it('compares allOf as one merged schema', () => {
    const split = (/** @type {any} */ doc) => {
      const { name, ...rest } = input(doc);
      schemas(doc).ItemInput = {
        allOf: [{ type: 'object', required: ['name'], properties: { name } }, { properties: rest }],
        unevaluatedProperties: false,
      };
    };
    const fromAllOf = (/** @type {any} */ doc) => schemas(doc).ItemInput.allOf;
    expect(diff(split)).toEqual([]);
    expect(diff((doc) => (fromAllOf(doc)[0].properties.size = fromAllOf(doc)[1].properties.size), split)).toEqual([]);
    expect(diff((doc) => fromAllOf(doc)[1].required = ['size'], split)).toEqual([
      change('POST /items › requestBody › /size', 'property became required'),
    ]);
    expect(diff((doc) => delete fromAllOf(doc)[1].properties.homepage, split)).toEqual([
      change('POST /items › requestBody › /homepage', 'property removed while unknown properties are rejected'),
    ]);
    expect(diff((doc) => fromAllOf(doc).push({ properties: { size: { maximum: 5 } } }), split)).toEqual([
      change('POST /items › requestBody › /size', 'maximum changed from 10 to 5'),
    ]);
  });

  it('matches oneOf branches by $ref name, whatever their order', () => {
    expect(diff((doc) => schemas(doc).ItemEvent.oneOf.reverse())).toEqual([]);
  });

  it('flags a new response variant and a changed one, and accepts a removed one', () => {
    const added = diff((doc) => {
      schemas(doc).ItemArchived = { type: 'object', required: ['type'], properties: { type: { const: 'item.archived' } } };
      schemas(doc).ItemEvent.oneOf.push(ref('ItemArchived'));
    });
    expect(added).toEqual([change('POST webhook itemChanged › requestBody', 'new variant ItemArchived may be sent')]);
    expect(diff((doc) => (schemas(doc).ItemDeleted.properties.id.type = ['string', 'integer']))).toEqual([
      change('POST webhook itemChanged › requestBody › (ItemDeleted)/id', 'type now also allows integer'),
    ]);
    expect(diff((doc) => schemas(doc).ItemEvent.oneOf.pop())).toEqual([]);
  });

  const shapes = (/** @type {any} */ doc) => {
    input(doc).shape = {
      oneOf: [
        { type: 'object', properties: { kind: { const: 'circle' }, radius: { type: 'number', maximum: 10 } } },
        { type: 'object', properties: { kind: { const: 'square' }, side: { type: 'number', maximum: 10 } } },
      ],
    };
  };

  it('matches inline branches by a distinguishing const, whatever their order', () => {
    expect(diff((doc) => input(doc).shape.oneOf.reverse(), shapes)).toEqual([]);
    expect(diff((doc) => (input(doc).shape.oneOf.reverse()[0].properties.side.maximum = 5), shapes)).toEqual([
      change('POST /items › requestBody › /shape(kind=square)/side', 'maximum changed from 10 to 5'),
    ]);
  });

  it('flags a removed request variant and accepts a new one', () => {
    expect(diff((doc) => input(doc).shape.oneOf.shift(), shapes)).toEqual([
      change('POST /items › requestBody › /shape', 'variant kind=circle removed (no longer accepted)'),
    ]);
    const triangle = { type: 'object', properties: { kind: { const: 'triangle' } } };
    expect(diff((doc) => input(doc).shape.oneOf.unshift(triangle), shapes)).toEqual([]);
  });

  it('matches anonymous branches by position', () => {
    const either = (/** @type {any} */ doc) => (input(doc).code = { anyOf: [{ type: 'string' }, { type: 'integer', maximum: 99 }] });
    expect(diff((doc) => (input(doc).code.anyOf[1].maximum = 9), either)).toEqual([
      change('POST /items › requestBody › /code(#1)', 'maximum changed from 99 to 9'),
    ]);
    expect(diff((doc) => input(doc).code.anyOf.pop(), either)).toEqual([
      change('POST /items › requestBody › /code', 'variant #1 removed (no longer accepted)'),
    ]);
  });

  it('compares a plain schema with the matching branch of a new union', () => {
    expect(diff((doc) => (input(doc).size = { oneOf: [input(doc).size, { type: 'string', enum: ['small', 'large'] }] }))).toEqual([]);
    expect(diff((doc) => (item(doc).size = { oneOf: [item(doc).size, { type: 'string' }] }))).toContainEqual(
      change('GET /items/{id} › response 200 › /size', 'new variant #1 may be sent'),
    );
    expect(diff((doc) => (item(doc).note = { anyOf: [item(doc).note, { type: 'null' }] }))).toContainEqual(
      change('GET /items/{id} › response 200 › /note', 'new variant #1 may be sent'),
    );
  });

  it('terminates on recursive schemas and still reports changes inside them', () => {
    const tree = (/** @type {any} */ doc) => {
      schemas(doc).Node = { type: 'object', properties: { value: { type: 'string' }, children: { type: 'array', items: ref('Node') } } };
      input(doc).tree = ref('Node');
    };
    expect(diff(() => {}, tree)).toEqual([]);
    expect(diff((doc) => (schemas(doc).Node.properties.value.maxLength = 3), tree)).toEqual([
      change('POST /items › requestBody › /tree/value', 'maxLength changed from (none) to 3'),
    ]);
    expect(diff((doc) => (item(doc).parent.anyOf[1] = { type: 'string' }))).toContainEqual(
      change('GET /items/{id} › response 200 › /parent(#1)', 'type now also allows string'),
    );
  });

  it('terminates on $ref cycles that never line up on both sides', () => {
    const changes = diff(
      (doc) => {
        schemas(doc).Chain = { type: 'object', properties: { next: ref('Link') } };
        schemas(doc).Link = { type: 'object', properties: { next: { type: 'object', properties: { next: ref('Link') } } } };
      },
      (doc) => {
        schemas(doc).Chain = { type: 'object', properties: { next: { type: 'object', properties: { next: ref('Chain') } } } };
        input(doc).chain = ref('Chain');
      },
    );
    expect(changes).toEqual([]);
  });
});

describe('webhooks (the service sends the request)', () => {
  const event = (/** @type {any} */ doc) => schemas(doc).ItemDeleted;

  it('checks a webhook request body with response rules', () => {
    expect(diff((doc) => delete event(doc).properties.id)).toEqual([
      change('POST webhook itemChanged › requestBody › (ItemDeleted)/id', 'property removed'),
    ]);
    expect(diff((doc) => (event(doc).properties.id.maxLength = 10))).toEqual([]);
  });

  it('accepts a new required field in a webhook body, which only the service sends', () => {
    const changes = diff((doc) => {
      event(doc).properties.reason = { type: 'string' };
      event(doc).required.push('reason');
    });
    expect(changes).toEqual([]);
  });

  it('flags a webhook body that may now be left out', () => {
    expect(diff((doc) => (doc.webhooks.itemChanged.post.requestBody.required = false))).toEqual([
      change('POST webhook itemChanged › requestBody', 'request body no longer always sent'),
    ]);
  });

  it('flags a removed webhook media type', () => {
    expect(diff((doc) => (doc.webhooks.itemChanged.post.requestBody.content = {}))).toEqual([
      change('POST webhook itemChanged › requestBody', 'media type application/json removed'),
    ]);
  });

  it('checks what receivers answer with request rules', () => {
    const withAnswer = (/** @type {any} */ doc) => {
      schemas(doc).Receipt = { type: 'object', properties: { ok: { type: 'boolean' } } };
      doc.webhooks.itemChanged.post.responses[200].content = json(ref('Receipt'));
    };
    expect(diff((doc) => delete schemas(doc).Receipt.properties.ok, withAnswer)).toEqual([]);
    expect(diff((doc) => (schemas(doc).Receipt.required = ['ok']), withAnswer)).toEqual([
      change('POST webhook itemChanged › response 200 › /ok', 'property became required'),
    ]);
  });
});

describe('the command line', () => {
  const script = resolve(import.meta.dirname, 'breaking-changes.mjs');
  /** @param {object} base @param {object} head */
  function run(base, head) {
    const dir = mkdtempSync(join(tmpdir(), 'breaking-changes-'));
    try {
      writeFileSync(join(dir, 'base.json'), JSON.stringify(base));
      writeFileSync(join(dir, 'head.json'), JSON.stringify(head));
      return spawnSync(process.execPath, [script, join(dir, 'base.json'), join(dir, 'head.json')], { encoding: 'utf8' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('prints the number of operations compared and exits 0 without breaking changes', () => {
    const result = run(makeDoc(), makeDoc());
    expect(result.stdout).toBe('no breaking changes (5 operations compared)\n');
    expect(result.status).toBe(0);
  });

  it('prints each breaking change on its own line and exits 1', () => {
    const head = makeDoc();
    delete head.paths['/items/{id}'].delete;
    head.components.schemas.Color.enum = ['red'];
    const result = run(makeDoc(), head);
    expect(result.stdout.trim().split('\n')).toEqual([
      'POST /items › requestBody › /color: value "green" no longer accepted',
      'DELETE /items/{id}: operation removed',
    ]);
    expect(result.status).toBe(1);
  });

  it('exits 2 on a usage error', () => {
    const result = spawnSync(process.execPath, [script], { encoding: 'utf8' });
    expect(result.stderr).toMatch(/usage/);
    expect(result.status).toBe(2);
  });
});

describe('the real contract', () => {
  const released = resolve(import.meta.dirname, '../released/openapi.v1.json');
  const current = resolve(import.meta.dirname, '../dist/openapi.json');
  const load = (/** @type {string} */ file) => JSON.parse(readFileSync(file, 'utf8'));
  const SUBMIT = '/api/open/v1/video/generations';
  const CANCEL = '/api/open/v1/video/generations/{requestId}/cancel';
  /** Follows local $refs to the object itself, so a test can change it in place. @param {any} doc @param {any} node @returns {any} */
  const follow = (doc, node) => {
    if (!node?.$ref) return node;
    return follow(doc, node.$ref.slice(2).split('/').reduce((/** @type {any} */ n, /** @type {string} */ k) => n[k], doc));
  };
  const submitSchema = (/** @type {any} */ doc) => {
    const body = follow(doc, doc.paths[SUBMIT].post.requestBody);
    return follow(doc, body.content['application/json'].schema);
  };

  it.skipIf(!existsSync(released) || !existsSync(current))('keeps the current bundle compatible with the released v1 contract', () => {
    expect(findBreakingChanges(load(released), load(current))).toEqual([]);
  });

  describe.skipIf(!existsSync(current))('deliberately broken copies of the current bundle', () => {
    const breakCopy = (/** @type {(doc: any) => void} */ mutate) => {
      const head = load(current);
      mutate(head);
      return findBreakingChanges(load(current), head);
    };

    it('finds nothing when the bundle is compared with itself', () => {
      expect(breakCopy(() => {})).toEqual([]);
    });

    it('flags the removed cancel operation', () => {
      expect(breakCopy((doc) => delete doc.paths[CANCEL].post)).toEqual([change(`POST ${CANCEL}`, 'operation removed')]);
    });

    it('flags an enum value removed from a request', () => {
      /** @type {{ name?: string, value?: unknown }} */
      const removed = {};
      const changes = breakCopy((doc) => {
        const [name, property] = Object.entries(submitSchema(doc).properties).find(([, p]) => follow(doc, p).enum?.length > 1) ?? [];
        Object.assign(removed, { name, value: name && follow(doc, property).enum.pop() });
      });
      expect(removed.name).toBeDefined();
      const message = `value ${JSON.stringify(removed.value)} no longer accepted`;
      expect(changes).toContainEqual(change(`POST ${SUBMIT} › requestBody › /${removed.name}`, message));
    });

    it('flags a new required request property', () => {
      const changes = breakCopy((doc) => {
        const schema = submitSchema(doc);
        schema.properties.priority = { type: 'string' };
        schema.required = [...(schema.required ?? []), 'priority'];
      });
      expect(changes).toContainEqual(change(`POST ${SUBMIT} › requestBody › /priority`, 'new required property'));
    });
  });
});
