/**
 * Against the mock: every documented response of every operation, with every
 * named example, is served and conforms to the spec — what a front-end
 * developer gets from `Prefer: code=…, example=…` is what the server will send.
 */
import { describe, it } from 'vitest';
import { minimalSubmit, MOCK_DELIVERY_ID, MOCK_KEY_ID, MOCK_TASK_ID } from '../src/fixtures.js';
import { call, expectConforms, type CallOptions } from '../src/http.js';
import { deref, operations, type JsonObject } from '../src/spec.js';
import { isMock } from '../src/target.js';

function validRequest(operationId: string): CallOptions {
  if (operationId === 'submitGeneration') return { body: minimalSubmit() };
  if (operationId === 'getGeneration' || operationId === 'cancelGeneration') return { path: { requestId: MOCK_TASK_ID } };
  if (operationId === 'receiveUpstreamCallback') return { path: { requestId: MOCK_TASK_ID }, query: { token: '3yQmE0bq7xWk2nV9cR1tZ5pL8sD4fH6jA0uG2oI7eKw' }, body: { status: 'succeeded' }, apiKey: null };
  if (operationId === 'revokeApiKey') return { path: { keyId: MOCK_KEY_ID } };
  if (operationId === 'getWebhookDelivery' || operationId === 'redeliverWebhook') return { path: { deliveryId: MOCK_DELIVERY_ID } };
  if (operationId === 'getOutputFile') return { path: { fileName: `${MOCK_TASK_ID}.mp4` }, query: { expires: '1764410462', sig: '6q1oVbQf3WcR0m2xk3P9' }, apiKey: null };
  return {};
}

const cases = operations
  .filter((op) => !op.webhook)
  .flatMap((op) =>
    Object.entries(op.operation.responses as JsonObject).flatMap(([status, ref]) => {
      const response = deref(ref, '').node as JsonObject;
      const contents = Object.values((response.content ?? {}) as JsonObject) as JsonObject[];
      const names = contents.flatMap((media) => Object.keys((media.examples ?? {}) as JsonObject));
      return (names.length ? names : [undefined]).map((example) => ({ op, status: Number(status), example }));
    }),
  );

describe.skipIf(!isMock)('the mock serves every documented response', () => {
  it.each(cases.map((c) => [`${c.op.operationId} ${c.status} ${c.example ?? ''}`, c] as const))('%s', async (_, c) => {
    const options = validRequest(c.op.operationId);
    options.prefer = `code=${c.status}${c.example ? `, example=${c.example}` : ''}`;
    if (c.status === 401) options.apiKey = null;
    const reply = await call(c.op.operationId, options);
    expectConforms(c.op.operationId, reply, c.status);
  });
});
