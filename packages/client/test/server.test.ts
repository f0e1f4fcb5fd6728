/** Every operation against the real server (started by the global setup), through the client. */
import { describe, expect, inject, it } from 'vitest';
import { createClient, isTerminal, VidgenError, VidgenTaskError, type Task } from '../src/index.js';
import { countingFetch } from './helpers.js';

const fixture = inject('fixture');
const client = createClient({ baseUrl: fixture.baseUrl, apiKey: fixture.apiKey });

async function rejection(promise: Promise<unknown>): Promise<VidgenError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(VidgenError);
  return error as VidgenError;
}

describe('against the real server', () => {
  it('lists the models with their prices', async () => {
    const models = await client.models();
    expect(models.success).toBe(true);
    const model = models.data.find((m) => m.id === 'vidgen-2.0');
    expect(model?.prices).toContainEqual({ resolution: '480p', creditsPerSecond: 5 });
  });

  it('submits, reads, waits for a real render and downloads the video', async () => {
    const submitted = await client.submit({ model: 'vidgen-2.0', prompt: 'A paper boat on a rainy street', duration: 4, resolution: '480p' });
    expect(submitted).toMatchObject({ success: true, status: 'queued', creditsCharged: 20 });
    expect(submitted.requestId).toMatch(/^gen_/);

    const task = await client.get(submitted.requestId);
    expect(task).toMatchObject({ requestId: submitted.requestId, aspectRatio: '16:9', mode: 'text_to_video' });

    const seen: Task['status'][] = [];
    const done = await client.waitForCompletion(submitted.requestId, { timeout: 25_000, onUpdate: (update) => seen.push(update.status) });
    expect(done.status).toBe('succeeded');
    expect(done.output.type).toBe('video');
    expect(seen.at(-1)).toBe('succeeded');
    expect(seen.filter((status) => !isTerminal(status)).length).toBeLessThanOrEqual(2);

    const video = await fetch(done.output.url);
    expect(video.status).toBe(200);
    expect(video.headers.get('content-type')).toMatch(/video\/mp4/);
    const bytes = new Uint8Array(await video.arrayBuffer());
    expect(new TextDecoder().decode(bytes.subarray(4, 8))).toBe('ftyp');
  });

  it('submitAndWait resolves with the succeeded task', async () => {
    const task = await client.submitAndWait({ model: 'vidgen-2.0-fast', prompt: 'A lighthouse at dawn', duration: 4, resolution: '480p' }, { timeout: 25_000 });
    expect(task).toMatchObject({ status: 'succeeded', model: 'vidgen-2.0-fast', duration: 4 });
  });

  it('cancels a task, refunds it, answers a second cancel the same, and waiting on it rejects with the task', async () => {
    // A long 1080p render: the cancel arrives while it is queued or processing.
    const { requestId, creditsCharged } = await client.submit({ model: 'vidgen-2.0', prompt: 'A slow sunset', duration: 15, resolution: '1080p' });
    expect(await client.cancel(requestId)).toEqual({ success: true, requestId, status: 'cancelled' });
    expect(await client.cancel(requestId)).toEqual({ success: true, requestId, status: 'cancelled' });
    const task = await client.get(requestId);
    expect(task).toMatchObject({ status: 'cancelled', creditsRefunded: creditsCharged });

    const error = await client.waitForCompletion(requestId, { timeout: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(VidgenTaskError);
    expect((error as VidgenTaskError).task.status).toBe('cancelled');
    expect((error as VidgenTaskError).error).toBeNull();
  });

  it('replays a submission with the same Idempotency-Key instead of creating a second task', async () => {
    const idempotencyKey = `client-test-${crypto.randomUUID()}`;
    const body = { model: 'vidgen-1.5-pro', prompt: 'Once only', duration: 5, resolution: '480p' } as const;
    const first = await client.submit(body, { idempotencyKey });
    const second = await client.submit(body, { idempotencyKey });
    expect(second).toEqual(first);
    await client.cancel(first.requestId);
  });

  it('lists a page with a status filter', async () => {
    const page = await client.list({ status: 'succeeded', limit: 1 });
    expect(page.data).toHaveLength(1);
    expect(page.data[0]!.status).toBe('succeeded');
  });

  describe('errors are VidgenError with the code and the correlation id, and 4xx are not retried', () => {
    it('404 not_found for an unknown task', async () => {
      const counting = countingFetch();
      const counted = createClient({ baseUrl: fixture.baseUrl, apiKey: fixture.apiKey, fetch: counting.fetch });
      const error = await rejection(counted.get('gen_01JD6Z8K4T9QW3M5R7X2B6C8N0'));
      expect(error).toMatchObject({ status: 404, code: 'not_found' });
      expect(error.correlationId).toMatch(/^\S+$/);
      expect(error.message).toBeTruthy();
      expect(counting.requests).toHaveLength(1);
    });

    it('400 invalid_request naming the bad field', async () => {
      const error = await rejection(client.submit({ model: 'vidgen-1.5-pro', prompt: 'x', duration: 7 }));
      expect(error).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(error.details?.some((detail) => detail.field?.includes('duration'))).toBe(true);
      expect(error.correlationId).toBeTruthy();
    });

    it('401 unauthorized for a wrong key', async () => {
      const stranger = createClient({ baseUrl: fixture.baseUrl, apiKey: 'vg_test_notarealkeynotarealkeynotareal000000' });
      expect(await rejection(stranger.models())).toMatchObject({ status: 401, code: 'unauthorized' });
    });

    it('403 forbidden for a read-only key submitting', async () => {
      const readOnly = createClient({ baseUrl: fixture.baseUrl, apiKey: fixture.readOnlyApiKey });
      expect(await rejection(readOnly.submit({ model: 'vidgen-2.0', prompt: 'no' }))).toMatchObject({ status: 403, code: 'forbidden' });
    });

    it('409 invalid_state with the status when cancelling a succeeded task', async () => {
      const [succeeded] = (await client.list({ status: 'succeeded', limit: 1 })).data;
      if (!succeeded) throw new Error('an earlier test leaves a succeeded task');
      const error = await rejection(client.cancel(succeeded.requestId));
      expect(error).toMatchObject({ status: 409, code: 'invalid_state' });
      expect(error.details).toContainEqual(expect.objectContaining({ field: 'status', value: 'succeeded' }));
    });
  });
});
