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
