/** A few calls against the Prism mock: the client and the spec's own examples agree. */
import { describe, expect, inject, it } from 'vitest';
import { createClient, VidgenError, VidgenTaskError } from '../src/index.js';

const fixture = inject('fixture');
const apiKey = 'vg_test_mockmockmockmockmockmock0';

/** A fetch that adds Prism's `Prefer` header, to choose an example or a documented status. */
const preferring = (prefer: string) => (request: Request) => {
  request.headers.set('Prefer', prefer);
  return fetch(request);
};

describe('against the Prism mock', () => {
  it('submit answers the documented example', async () => {
    const client = createClient({ baseUrl: fixture.mockBaseUrl, apiKey });
    expect(await client.submit({ model: 'vidgen-2.0', prompt: 'A paper boat drifting down a rainy street' })).toEqual({
      success: true,
      requestId: 'gen_01JD6Z8K4T9QW3M5R7X2B6C8N0',
      status: 'queued',
      creditsCharged: 40,
    });
  });

  it('waitForCompletion resolves with the succeeded example, and rejects on the failed one', async () => {
    const succeeded = createClient({ baseUrl: fixture.mockBaseUrl, apiKey, fetch: preferring('example=succeeded') });
    const task = await succeeded.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 5_000 });
    expect(task.output.url).toMatch(/^https?:\/\//);

    const failed = createClient({ baseUrl: fixture.mockBaseUrl, apiKey, fetch: preferring('example=failed') });
    const error = await failed.waitForCompletion('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', { timeout: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VidgenTaskError);
    expect((error as VidgenTaskError).error?.code).toBeTruthy();
  });

  it('models and list answer their examples', async () => {
    const client = createClient({ baseUrl: fixture.mockBaseUrl, apiKey });
    expect((await client.models()).data.length).toBeGreaterThan(0);
    expect((await client.list({ limit: 2 })).success).toBe(true);
  });

  it('a documented error becomes a VidgenError with its code, details and correlation id', async () => {
    const client = createClient({ baseUrl: fixture.mockBaseUrl, apiKey, fetch: preferring('code=402') });
    const error = (await client.submit({ model: 'vidgen-2.0', prompt: 'too expensive' }).catch((e: unknown) => e)) as VidgenError;
    expect(error).toBeInstanceOf(VidgenError);
    expect(error).toMatchObject({ status: 402, code: 'insufficient_credits' });
    expect(error.details?.length).toBeGreaterThan(0);
    expect(error.correlationId).toBeTruthy();
  });
});

describe('the account holder API against the Prism mock (which validates each request against the spec)', () => {
  it('account, ledger, usage, keys and webhooks answer their examples', async () => {
    const client = createClient({ baseUrl: fixture.mockBaseUrl, apiKey, retry: false });
    expect((await client.account()).balance).toBeTypeOf('number');
    expect((await client.ledger({ kind: 'refund', requestId: 'gen_01JD6ZC3V2E8H5K9P1S4W7Y0A3', limit: 2 })).success).toBe(true);
    expect((await client.usage({ from: new Date('2026-11-20T00:00:00Z'), to: '2026-11-23T00:00:00Z', granularity: 'day', groupBy: 'model' })).data.length).toBeGreaterThan(0);
    expect((await client.keys.list()).data.length).toBeGreaterThan(0);
    expect((await client.keys.create({ name: 'Dashboard (read-only)', scopes: ['tasks:read'], expiresInDays: 90 })).key).toMatch(/^vg_/);
    expect((await client.keys.create()).key).toMatch(/^vg_/);
    expect((await client.keys.revoke('key_01JD7A4C6E8G0J2K4M6P8R0T2V')).key.revokedAt).toBeTruthy();
    expect((await client.webhooks.deliveries({ status: 'failed', limit: 5 })).success).toBe(true);
    expect((await client.webhooks.delivery('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5')).attemptHistory.length).toBeGreaterThan(0);
    expect((await client.webhooks.redeliver('msg_01JD6ZG7K9M1N3P5Q7R9S1T3V5')).delivery.status).toBe('pending');
    expect((await client.webhooks.secret()).secret).toMatch(/^whsec_/);
    expect((await client.webhooks.rotateSecret({ overlapHours: 0 })).secret).toMatch(/^whsec_/);
    expect((await client.webhooks.rotateSecret()).secret).toMatch(/^whsec_/);
  });

  it('a request the spec does not allow is refused (the mock checks the query)', async () => {
    const client = createClient({ baseUrl: fixture.mockBaseUrl, apiKey, retry: false });
    // @ts-expect-error not a LedgerEntryKind
    const error = await client.ledger({ kind: 'bonus' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VidgenError);
    expect((error as VidgenError).status).toBeGreaterThanOrEqual(400);
  });
});
