/** The `byteplus` provider against a local stand-in of BytePlus ModelArk's task API (D14). */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ModelId } from '../src/domain/catalog.js';
import {
  abortableSleep,
  backoffDelay,
  createBytePlusProvider,
  type BytePlusProviderOptions,
} from '../src/providers/byteplus/byteplus-provider.js';
import type { GenerationRequest, GenerationResult, ReferenceMedia } from '../src/providers/provider.js';
import { type BytePlusStandin, errorReply, makeTestVideo, scripts, startBytePlusStandin } from './support/byteplus-standin.js';

const API_KEY = 'ark-test-0f1e2d3c4b5a69788796a5b4c3d2e1f0';
const MODEL_IDS: Record<ModelId, string> = {
  'vidgen-2.0': 'dreamina-seedance-2-0-260128',
  'vidgen-2.0-fast': 'dreamina-seedance-2-0-fast-260128',
  'vidgen-1.5-pro': 'seedance-1-5-pro-251215',
};
const TASKS = '/contents/generations/tasks';

let dir: string;
let video: Buffer;
let standin: BytePlusStandin;
let outputs = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-byteplus-'));
  video = readFileSync(await makeTestVideo(dir));
  standin = await startBytePlusStandin({ apiKey: API_KEY, video });
});
afterAll(async () => {
  await standin.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => standin.reset());

/** A sleep that returns at once and records what it was asked to wait. */
function recordingSleep(onSleep?: (ms: number, count: number) => void) {
  const delays: number[] = [];
  const sleep = async (ms: number) => {
    delays.push(ms);
    onSleep?.(ms, delays.length);
  };
  return { delays, sleep };
}

function provider(overrides: Partial<BytePlusProviderOptions> = {}) {
  const { delays, sleep } = recordingSleep();
  const p = createBytePlusProvider({ baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, sleep, random: () => 0, ...overrides });
  return { provider: p, delays };
}

function request(overrides: Partial<GenerationRequest> = {}): GenerationRequest {
  return {
    taskId: 'gen_test',
    model: 'vidgen-2.0',
    prompt: 'A paper boat drifting down a rainy city street at dusk',
    duration: 5,
    aspectRatio: '16:9',
    resolution: '720p',
    mode: 'text_to_video',
    references: [],
    outputPath: join(dir, 'out', `video-${++outputs}.mp4`),
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** Generates, and checks on every failure that the key stayed out of the message. */
async function run(p: { generate(r: GenerationRequest): Promise<GenerationResult> }, r: GenerationRequest) {
  const result = await p.generate(r);
  if (!result.ok) expect(result.error.message).not.toContain(API_KEY);
  return result;
}

const createBody = () => standin.requestsTo('POST', TASKS)[0]?.body as Record<string, unknown>;
const leftovers = () => (existsSync(join(dir, 'out')) ? readdirSync(join(dir, 'out')).filter((f) => f.endsWith('.part')) : []);
const ref = (kind: ReferenceMedia['kind'], name: string): ReferenceMedia => ({ kind, url: `https://media.example.com/${name}` });

describe('the create request', () => {
  it('sends text only for text to video, with the mapped model and ratio, duration, resolution as body fields', async () => {
    const { provider: p } = provider();
    const result = await run(p, request({ model: 'vidgen-2.0-fast', aspectRatio: '9:16', duration: 8, resolution: '480p' }));
    expect(result).toEqual({ ok: true });
    expect(createBody()).toEqual({
      model: 'dreamina-seedance-2-0-fast-260128',
      content: [{ type: 'text', text: 'A paper boat drifting down a rainy city street at dusk' }],
      ratio: '9:16',
      duration: 8,
      resolution: '480p',
      watermark: false,
    });
    // The parameters are not smuggled into the prompt as `--ratio …` commands as well.
    expect(JSON.stringify(createBody())).not.toContain('--');
  });

  it('sends the image as the first frame', async () => {
    const { provider: p } = provider();
    await run(p, request({ model: 'vidgen-1.5-pro', mode: 'first_frame', references: [ref('image', 'a.png')] }));
    expect(createBody()).toMatchObject({
      model: 'seedance-1-5-pro-251215',
      content: [
        { type: 'text', text: expect.any(String) },
        { type: 'image_url', image_url: { url: 'https://media.example.com/a.png' }, role: 'first_frame' },
      ],
    });
  });

  it('sends two images as the first and the last frame, in submission order', async () => {
    const { provider: p } = provider();
    await run(p, request({ mode: 'first_last_frame', references: [ref('image', 'first.png'), ref('image', 'last.png')] }));
    expect((createBody().content as unknown[]).slice(1)).toEqual([
      { type: 'image_url', image_url: { url: 'https://media.example.com/first.png' }, role: 'first_frame' },
      { type: 'image_url', image_url: { url: 'https://media.example.com/last.png' }, role: 'last_frame' },
    ]);
  });

  it('sends multimodal references as reference image, video and audio, in submission order', async () => {
    const { provider: p } = provider();
    const references = [ref('image', 'face.png'), ref('video', 'motion.mp4'), ref('audio', 'song.mp3'), ref('image', 'room.png')];
    await run(p, request({ mode: 'multimodal_reference', references, resolution: '1080p', aspectRatio: '1:1', duration: 15 }));
    expect(createBody()).toMatchObject({
      model: 'dreamina-seedance-2-0-260128',
      ratio: '1:1',
      duration: 15,
      resolution: '1080p',
      content: [
        { type: 'text', text: expect.any(String) },
        { type: 'image_url', image_url: { url: 'https://media.example.com/face.png' }, role: 'reference_image' },
        { type: 'video_url', video_url: { url: 'https://media.example.com/motion.mp4' }, role: 'reference_video' },
        { type: 'audio_url', audio_url: { url: 'https://media.example.com/song.mp3' }, role: 'reference_audio' },
        { type: 'image_url', image_url: { url: 'https://media.example.com/room.png' }, role: 'reference_image' },
      ],
    });
  });

  it('authenticates every API call with the Bearer key, and not the video download', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.succeedsAfter(2));
    await run(p, request());
    const api = standin.requests.filter((r) => r.path.startsWith('/api/v3/'));
    expect(api.map((r) => r.method)).toEqual(['POST', 'GET', 'GET', 'GET']);
    for (const r of api) expect(r.authorization).toBe(`Bearer ${API_KEY}`);
    const downloads = standin.requests.filter((r) => r.path.startsWith('/media/'));
    expect(downloads).toHaveLength(1);
    expect(downloads[0]!.authorization).toBeUndefined();
  });

  it('reports a mode that does not match the references as our own inconsistency, without calling upstream', async () => {
    const { provider: p } = provider();
    const result = await run(p, request({ mode: 'first_last_frame', references: [ref('image', 'only.png')] }));
    expect(result).toEqual({ ok: false, error: { code: 'internal_error', message: expect.stringContaining('first_last_frame') } });
    expect(standin.requests).toHaveLength(0);
  });
});

describe('a task that succeeds', () => {
  it('leaves the downloaded video at outputPath, byte for byte, and no temporary file', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.succeedsAfter(1));
    const r = request();
    expect(await run(p, r)).toEqual({ ok: true });
    expect(readFileSync(r.outputPath).equals(video)).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it('polls a slow task with growing waits up to the cap', async () => {
    const { provider: p, delays } = provider({ pollIntervalMs: 2000, maxPollIntervalMs: 15_000 });
    standin.enqueue(scripts.succeedsAfter(6));
    expect(await run(p, request())).toEqual({ ok: true });
    expect(standin.requestsTo('GET', TASKS)).toHaveLength(7);
    expect(delays).toEqual([2000, 4000, 8000, 15_000, 15_000, 15_000, 15_000]);
  });

  it('jitters each wait down by at most a fifth, never above the cap, still growing until it', async () => {
    const { provider: p, delays } = provider({ random: () => 0.999 });
    standin.enqueue(scripts.succeedsAfter(5));
    await run(p, request());
    const bases = [2000, 4000, 8000, 15_000, 15_000, 15_000];
    expect(delays).toHaveLength(bases.length);
    delays.forEach((d, i) => {
      expect(d).toBeGreaterThanOrEqual(bases[i]! * 0.8);
      expect(d).toBeLessThanOrEqual(bases[i]!);
    });
    expect(delays[1]!).toBeGreaterThan(delays[0]!);
    expect(delays[2]!).toBeGreaterThan(delays[1]!);
  });

  it('rides out a few failed polls (500, malformed 502, dropped connection)', async () => {
    const { provider: p } = provider();
    standin.enqueue({
      polls: [
        { status: 'running' },
        { reply: errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError') },
        { reply: { status: 502, raw: '<html>Bad Gateway</html>', contentType: 'text/html' } },
        { reply: { reset: true } },
        { status: 'succeeded' },
      ],
    });
    expect(await run(p, request())).toEqual({ ok: true });
  });
});

describe('a task that does not succeed', () => {
  it('fails with provider_error when the task fails', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.failsWith('InternalServiceError', 'The service encountered an unexpected internal error.'));
    const r = request();
    const result = await run(p, r);
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('InternalServiceError') } });
    expect(existsSync(r.outputPath)).toBe(false);
  });

  it.each([
    ['OutputVideoSensitiveContentDetected', 'The request failed because the output video may contain sensitive information.'],
    ['InputImageSensitiveContentDetected.PrivacyInformation', 'The request failed because the input image may contain real person.'],
  ])('fails with content_rejected when moderation stops the task (%s)', async (code, message) => {
    const { provider: p } = provider();
    standin.enqueue(scripts.failsWith(code, message));
    expect(await run(p, request())).toEqual({ ok: false, error: { code: 'content_rejected', message: expect.stringContaining(code) } });
  });

  it.each(['InputTextSensitiveContentDetected', 'SensitiveContentDetected.Violence', 'InputImageRiskDetection'])(
    'fails with content_rejected when moderation refuses the create (%s), without retrying',
    async (code) => {
      const { provider: p } = provider();
      standin.enqueue(scripts.rejectedAtCreate(code, 'The request failed because the input may contain sensitive information.'));
      expect(await run(p, request())).toEqual({ ok: false, error: { code: 'content_rejected', message: expect.stringContaining(code) } });
      expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
      expect(standin.requestsTo('GET', TASKS)).toHaveLength(0);
    },
  );

  it('fails with provider_error, not retried, on any other refusal of the create', async () => {
    const { provider: p } = provider({ modelIds: { ...MODEL_IDS, 'vidgen-2.0': 'no-such-model' } });
    standin.enqueue({ create: [errorReply(404, 'InvalidEndpointOrModel.NotFound', 'The model or endpoint no-such-model does not exist.', 'NotFound')] });
    const result = await run(p, request());
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('HTTP 404 InvalidEndpointOrModel.NotFound') } });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
  });

  it('fails with timeout when the task expires upstream', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.expires());
    expect(await run(p, request())).toEqual({ ok: false, error: { code: 'timeout', message: expect.stringContaining('expired') } });
  });

  it('fails with provider_error when the task was cancelled upstream by someone else', async () => {
    const { provider: p } = provider();
    standin.enqueue({ polls: [{ status: 'running' }, { status: 'cancelled' }] });
    expect(await run(p, request())).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('cancelled upstream') } });
  });

  it('gives up with provider_error after too many failed polls in a row', async () => {
    const { provider: p } = provider({ maxPollFailures: 3 });
    standin.enqueue({ polls: [{ reply: errorReply(503, 'ServiceUnavailable', 'Service is temporarily unavailable.', 'ServiceUnavailable') }] });
    const result = await run(p, request());
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('failed 3 times in a row') } });
    expect(standin.requestsTo('GET', TASKS)).toHaveLength(3);
  });

  it('fails with provider_error when a query is refused (4xx)', async () => {
    const { provider: p } = provider();
    standin.enqueue({ polls: [{ reply: errorReply(404, 'ResourceNotFound', 'The specified task is not found.', 'NotFound') }] });
    expect(await run(p, request())).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('ResourceNotFound') } });
    expect(standin.requestsTo('GET', TASKS)).toHaveLength(1);
  });
});

describe('malformed answers', () => {
  it.each<[string, Parameters<BytePlusStandin['enqueue']>[0], string]>([
    ['a create answer that is not JSON', { create: [{ status: 200, raw: '{"id": "cgt-1' }] }, 'create request with malformed JSON'],
    ['a create answer without an id', { create: [{ status: 200, json: { task: 'cgt-1' } }] }, 'no task id'],
    ['a query answer that is not JSON', { polls: [{ reply: { status: 200, raw: 'OK' } }] }, 'malformed JSON'],
    ['a query answer with an unknown status', { polls: [{ reply: { status: 200, json: { id: 'x', status: 'done' } } }] }, 'unknown task status "done"'],
    ['a query answer that is an array', { polls: [{ reply: { status: 200, json: [] } }] }, 'not an object'],
    [
      'a succeeded task without a video URL',
      { polls: [{ reply: { status: 200, json: { id: 'x', status: 'succeeded', content: {} } } }] },
      'without an http(s) content.video_url',
    ],
  ])('fails with provider_error on %s', async (_, script, message) => {
    const { provider: p } = provider();
    standin.enqueue(script);
    const r = request();
    expect(await run(p, r)).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining(message) } });
    expect(existsSync(r.outputPath)).toBe(false);
  });
});

describe('retrying the create', () => {
  it('retries a create that got a 500, then succeeds', async () => {
    const { provider: p, delays } = provider();
    standin.enqueue({ create: [errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError')] });
    expect(await run(p, request())).toEqual({ ok: true });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(2);
    expect(delays[0]).toBe(2000);
  });

  it('honours Retry-After on a 429, up to the cap', async () => {
    const { provider: p, delays } = provider();
    const tooMany = errorReply(429, 'RateLimitExceeded.EndpointRPMExceeded', 'Too many requests.', 'TooManyRequests') as { status: number; json: unknown };
    standin.enqueue({ create: [{ ...tooMany, headers: { 'retry-after': '7' } }, { ...tooMany, headers: { 'retry-after': '60' } }] });
    expect(await run(p, request())).toEqual({ ok: true });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(3);
    expect(delays.slice(0, 2)).toEqual([7000, 15_000]);
  });

  it('gives up with provider_error after the last attempt', async () => {
    const { provider: p } = provider({ createAttempts: 3 });
    const busy = errorReply(503, 'ServiceUnavailable', 'Service is temporarily unavailable.', 'ServiceUnavailable');
    standin.enqueue({ create: [busy, busy, busy, busy] });
    const result = await run(p, request());
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringMatching(/after 3 attempts: HTTP 503 ServiceUnavailable/) } });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(3);
  });

  it('does not retry a create that timed out, since the task may exist upstream', async () => {
    const { provider: p } = provider({ requestTimeoutMs: 100 });
    standin.enqueue({ create: [{ hang: true }] });
    expect(await run(p, request())).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('within 100 ms') } });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
  });

  it('retries when the upstream cannot be reached, then reports it', async () => {
    // Port 1 is privileged and unused on loopback, so the connection is refused at once.
    const { provider: p } = provider({ baseUrl: 'http://127.0.0.1:1/api/v3', createAttempts: 2 });
    const result = await run(p, request());
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('after 2 attempts: unreachable') } });
  });
});

describe('the download', () => {
  it.each<[string, Parameters<BytePlusStandin['enqueue']>[0]['download']]>([
    ['answers 403 (the signed URL expired)', { status: 403, raw: '<Error><Code>AccessDenied</Code></Error>', contentType: 'application/xml' }],
    ['is cut off half way', { truncateAfter: 1000 }],
    ['is empty', { status: 200, raw: '', contentType: 'video/mp4' }],
  ])('fails with provider_error and leaves no file when the video %s', async (_, download) => {
    const { provider: p } = provider();
    standin.enqueue({ download });
    const r = request();
    const result = await run(p, r);
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('downloading the BytePlus video') } });
    expect(existsSync(r.outputPath)).toBe(false);
    expect(leftovers()).toEqual([]);
  });
  it('fails with internal_error when our side cannot store the video', async () => {
    const { provider: p } = provider();
    const notADirectory = join(dir, 'standin.mp4');
    const result = await run(p, request({ outputPath: join(notADirectory, 'video.mp4') }));
    expect(result).toEqual({ ok: false, error: { code: 'internal_error', message: expect.stringContaining('output directory') } });
  });
});

describe('cancelling', () => {
  it('sends DELETE for a task cancelled while polling, answers cancelled, and writes nothing', async () => {
    const controller = new AbortController();
    const { delays, sleep } = recordingSleep((_, count) => count === 3 && controller.abort());
    const p = createBytePlusProvider({ baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, sleep, random: () => 0 });
    standin.enqueue(scripts.queuedForever());
    const r = request({ signal: controller.signal });
    expect(await run(p, r)).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(delays).toHaveLength(3);
    expect(standin.requestsTo('GET', TASKS)).toHaveLength(2);
    const deletes = standin.requestsTo('DELETE', TASKS);
    expect(deletes).toHaveLength(1);
    const taskId = (standin.requestsTo('GET', TASKS)[0]!.path.split('/').pop())!;
    expect(deletes[0]!.path).toBe(`/api/v3${TASKS}/${taskId}`);
    expect(deletes[0]!.authorization).toBe(`Bearer ${API_KEY}`);
    expect(existsSync(r.outputPath)).toBe(false);
  });

  it('answers cancelled even when the upstream refuses to cancel a running task', async () => {
    const controller = new AbortController();
    const { sleep } = recordingSleep((_, count) => count === 2 && controller.abort());
    const p = createBytePlusProvider({ baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, sleep });
    standin.enqueue(scripts.runsForever());
    expect(await run(p, request({ signal: controller.signal }))).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(standin.requestsTo('DELETE', TASKS)).toHaveLength(1);
  });

  it('aborts a query in flight', async () => {
    const controller = new AbortController();
    const p = createBytePlusProvider({ baseUrl: standin.baseUrl, apiKey: API_KEY, modelIds: MODEL_IDS, sleep: async () => {} });
    standin.enqueue({ polls: [{ reply: { hang: true } }] });
    const pending = run(p, request({ signal: controller.signal }));
    await standin.received('GET', TASKS);
    controller.abort();
    expect(await pending).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(standin.requestsTo('DELETE', TASKS)).toHaveLength(1);
  });

  it('does nothing upstream for a task cancelled before it started', async () => {
    const controller = new AbortController();
    controller.abort();
    const { provider: p } = provider();
    expect(await run(p, request({ signal: controller.signal }))).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(standin.requests).toHaveLength(0);
  });

  it('the default sleep ends as soon as the signal aborts', async () => {
    const controller = new AbortController();
    const slept = abortableSleep(60_000, controller.signal);
    controller.abort();
    await expect(slept).resolves.toBeUndefined();
  });
});

describe('the API key', () => {
  it('is reported as an authentication failure when wrong, and never appears in the message', async () => {
    const wrongKey = 'ark-wrong-key-1234567890';
    const { provider: p } = provider({ apiKey: wrongKey });
    const result = await run(p, request());
    expect(result).toEqual({ ok: false, error: { code: 'provider_error', message: expect.stringContaining('HTTP 401 AuthenticationError') } });
    expect(JSON.stringify(result)).not.toContain(wrongKey);
  });

  it('is redacted even when the upstream echoes it back', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.failsWith('InvalidParameter', `bad header Authorization: Bearer ${API_KEY}`));
    const result = await run(p, request());
    expect(result.ok).toBe(false);
    expect(JSON.stringify(result)).not.toContain(API_KEY);
    expect(JSON.stringify(result)).toContain('[redacted]');
  });

  it('is redacted even where a long upstream message is cut short', async () => {
    const { provider: p } = provider();
    standin.enqueue(scripts.failsWith('InvalidParameter', `${'x'.repeat(290)} Bearer ${API_KEY}`));
    const result = await run(p, request());
    expect(JSON.stringify(result)).not.toContain(API_KEY.slice(0, 8));
  });
});

describe('backoffDelay', () => {
  it('doubles from the initial wait to the cap', () => {
    expect([0, 1, 2, 3, 4].map((n) => backoffDelay(n, 1000, 5000, () => 0))).toEqual([1000, 2000, 4000, 5000, 5000]);
  });
});
