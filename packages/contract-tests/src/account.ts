/**
 * What the account holder's operations need set up: keys of the suite's own account with
 * chosen scopes (minted through createApiKey, so through the API itself), and a task with a
 * webhookUrl that ended, so its account has a webhook delivery. Against the mock these are
 * the spec's example ids and keys of the right shape (Prism checks no key).
 */
import { expect } from 'vitest';
import { MOCK_DELIVERY_ID, MOCK_KEY_ID, MOCK_TASK_ID, minimalSubmit } from './fixtures.js';
import { call, expectConforms } from './http.js';
import { isMock, target } from './target.js';

export type Scope = 'tasks:read' | 'tasks:write' | 'keys:manage' | 'webhooks:manage';

export interface MintedKey {
  id: string;
  key: string;
  scopes: Scope[];
  mode: 'live' | 'test';
}

/** A new key of the suite's account (never cached: for the tests that revoke it). */
export async function mintKey(body: { scopes?: Scope[]; mode?: 'live' | 'test'; name?: string } = {}, apiKey = target.apiKey): Promise<MintedKey> {
  if (isMock) return { id: MOCK_KEY_ID, key: `vg_${body.mode ?? 'test'}_mintedmintedmintedmintedmin0`, scopes: body.scopes ?? [], mode: body.mode ?? 'test' };
  const reply = await call('createApiKey', { body: { name: 'contract suite', ...body }, apiKey });
  expectConforms('createApiKey', reply, 201);
  return reply.json as MintedKey;
}

const withScopes = new Map<string, Promise<MintedKey>>();
/** A key of the suite's account with exactly these scopes, minted once per test file. */
export function keyWith(...scopes: Scope[]): Promise<MintedKey> {
  const name = scopes.join(',');
  let minted = withScopes.get(name);
  if (!minted) {
    minted = mintKey({ scopes, name: `contract suite: ${name}` });
    withScopes.set(name, minted);
  }
  return minted;
}

/** The calling key's own id (getAccount's `key`). */
export async function ownKeyId(apiKey: string): Promise<string> {
  if (isMock) return MOCK_KEY_ID;
  const reply = await call('getAccount', { apiKey });
  expectConforms('getAccount', reply, 200);
  return reply.json.key.id as string;
}

export interface EndedWebhookTask {
  requestId: string;
  deliveryId: string;
  charged: number;
}

/**
 * A new task of the key's account with the target's webhookUrl, cancelled at once:
 * cancelling ends it, and a task that ends with a webhookUrl has its delivery (made in
 * the same transaction as the ending).
 */
export async function endWebhookTask(apiKey = target.apiKey): Promise<EndedWebhookTask> {
  if (isMock) return { requestId: MOCK_TASK_ID, deliveryId: MOCK_DELIVERY_ID, charged: 0 };
  if (!target.webhookUrl) throw new Error('needs VIDGEN_CONTRACT_WEBHOOK_URL');
  // Long enough to render that the cancel finds it active; a delivery follows either way.
  const body = { ...minimalSubmit(), model: 'vidgen-2.0', duration: 15, resolution: '1080p', webhookUrl: target.webhookUrl };
  const submitted = await call('submitGeneration', { body, apiKey });
  expectConforms('submitGeneration', submitted, 202);
  const { requestId, creditsCharged } = submitted.json as { requestId: string; creditsCharged: number };
  const cancelled = await call('cancelGeneration', { path: { requestId }, apiKey });
  expectConforms('cancelGeneration', cancelled);
  expect([200, 409]).toContain(cancelled.status);
  const list = await call('listWebhookDeliveries', { query: { requestId }, apiKey });
  expectConforms('listWebhookDeliveries', list, 200);
  expect(list.json.data, `the delivery of ${requestId}`).toHaveLength(1);
  return { requestId, deliveryId: list.json.data[0].id as string, charged: creditsCharged };
}

const ended = new Map<string, Promise<EndedWebhookTask>>();
/** endWebhookTask, once per key and test file. */
export function endedWebhookTask(apiKey = target.apiKey): Promise<EndedWebhookTask> {
  let task = ended.get(apiKey);
  if (!task) {
    task = endWebhookTask(apiKey);
    ended.set(apiKey, task);
  }
  return task;
}
