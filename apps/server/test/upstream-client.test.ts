/**
 * The remote provider client of one channel (create, list, query, cancel, download as result unions)
 * against a local stand-in of BytePlus ModelArk's task API (D14), and the pure protocol pieces it
 * rests on. Polling, retries and failover are the follower's and the submitter's, tested with them.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { AspectRatio, GenerationMode, ModelId, Resolution } from '../src/domain/catalog.js';
import { type CreateOutcome, createUpstreamClient, type RemoteProvider, taskErrorFor, type UpstreamClientOptions } from '../src/providers/byteplus/client.js';
import { buildContent, type CreateTaskBody, isChannelProblem, parseList, type UpstreamTask } from '../src/providers/byteplus/protocol.js';
import type { ReferenceMedia } from '../src/providers/provider.js';
import { type BytePlusStandin, errorReply, makeTestVideo, type Reply, scripts, startBytePlusStandin, type TaskScript } from './support/byteplus-standin.js';

const API_KEY = 'ark-test-0f1e2d3c4b5a69788796a5b4c3d2e1f0';
/** A channel's model map, as the submitter uses it for the body's `model`. */
const MODEL_IDS: Record<ModelId, string> = {
  'vidgen-2.0': 'dreamina-seedance-2-0-260128',
  'vidgen-2.0-fast': 'dreamina-seedance-2-0-fast-260128',
  'vidgen-1.5-pro': 'seedance-1-5-pro-251215',
};
const TASKS = '/contents/generations/tasks';
const PROMPT = 'A paper boat drifting down a rainy city street at dusk';

let dir: string;
let video: Buffer;
let standin: BytePlusStandin;
let outputs = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-upstream-client-'));
  video = readFileSync(await makeTestVideo(dir));
  standin = await startBytePlusStandin({ apiKey: API_KEY, video });
});
afterAll(async () => {
  await standin.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => standin.reset());

function client(overrides: Partial<UpstreamClientOptions> = {}): RemoteProvider {
  return createUpstreamClient({ baseUrl: standin.baseUrl, apiKey: API_KEY, ...overrides });
}

interface BodyInput {
  model?: ModelId;
  mode?: GenerationMode;
  references?: ReferenceMedia[];
  ratio?: AspectRatio;
  duration?: number;
  resolution?: Resolution;
  callbackUrl?: string;
}

/** The create body the way the submitter builds it for a task on this channel. */
function body(input: BodyInput = {}): CreateTaskBody {
  const content = buildContent(input.mode ?? 'text_to_video', PROMPT, input.references ?? []);
  if (!content.ok) throw new Error(content.message);
  return {
    model: MODEL_IDS[input.model ?? 'vidgen-2.0'],
    content: content.value,
    ratio: input.ratio ?? '16:9',
    duration: input.duration ?? 5,
    resolution: input.resolution ?? '720p',
    watermark: false,
    ...(input.callbackUrl ? { callback_url: input.callbackUrl } : {}),
  };
}

/** Creates and checks that the upstream accepted it; answers the upstream id. */
async function created(c: RemoteProvider, script?: TaskScript, b: CreateTaskBody = body()): Promise<string> {
  if (script) standin.enqueue(script);
  const outcome = await c.create(b);
  if (outcome.kind !== 'created') throw new Error(`expected created, got ${JSON.stringify(outcome)}`);
  return outcome.upstreamId;
}

/** Whatever an outcome says, the key is not in it. */
function keyless<T>(outcome: T, key = API_KEY): T {
  expect(JSON.stringify(outcome)).not.toContain(key);
  return outcome;
}

/** The video URL of a task that succeeds at its first observation. */
async function videoUrlOf(c: RemoteProvider, script: TaskScript = {}): Promise<string> {
  const id = await created(c, script);
  const queried = await c.query(id);
  if (!queried.ok || !queried.task.videoUrl) throw new Error(`expected a succeeded task, got ${JSON.stringify(queried)}`);
  return queried.task.videoUrl;
}

const outputPath = () => join(dir, 'out', `video-${++outputs}.mp4`);
const leftovers = () => (existsSync(join(dir, 'out')) ? readdirSync(join(dir, 'out'), { recursive: true }).map(String).filter((f) => f.endsWith('.part')) : []);
const createBody = () => standin.requestsTo('POST', TASKS)[0]?.body as Record<string, unknown>;
const ref = (kind: ReferenceMedia['kind'], name: string): ReferenceMedia => ({ kind, url: `https://media.example.com/${name}` });
const never = () => new AbortController().signal;

/** A loopback port the OS handed out and that nothing listens on any more: connections are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
  return port;
}

describe('create: the request', () => {
  it('sends text only for text to video, with the mapped model and ratio, duration, resolution as body fields, no watermark', async () => {
    const c = client();
    const outcome = await c.create(body({ model: 'vidgen-2.0-fast', ratio: '9:16', duration: 8, resolution: '480p' }));
    expect(outcome).toEqual({ kind: 'created', upstreamId: expect.stringMatching(/^cgt-/) });
    expect(standin.createdTasks().map((t) => t.id)).toEqual([(outcome as { upstreamId: string }).upstreamId]);
    expect(createBody()).toEqual({
      model: 'dreamina-seedance-2-0-fast-260128',
      content: [{ type: 'text', text: PROMPT }],
      ratio: '9:16',
      duration: 8,
      resolution: '480p',
      watermark: false,
    });
    // The parameters are not smuggled into the prompt as `--ratio …` commands as well.
    expect(JSON.stringify(createBody())).not.toContain('--');
  });

  it('sends the image as the first frame', async () => {
    await created(client(), undefined, body({ model: 'vidgen-1.5-pro', mode: 'first_frame', references: [ref('image', 'a.png')] }));
    expect(createBody()).toEqual({
      model: 'seedance-1-5-pro-251215',
      content: [
        { type: 'text', text: PROMPT },
        { type: 'image_url', image_url: { url: 'https://media.example.com/a.png' }, role: 'first_frame' },
      ],
      ratio: '16:9',
      duration: 5,
      resolution: '720p',
      watermark: false,
    });
  });

  it('sends two images as the first and the last frame, in submission order', async () => {
    await created(client(), undefined, body({ mode: 'first_last_frame', references: [ref('image', 'first.png'), ref('image', 'last.png')] }));
    expect(createBody().content).toEqual([
      { type: 'text', text: PROMPT },
      { type: 'image_url', image_url: { url: 'https://media.example.com/first.png' }, role: 'first_frame' },
      { type: 'image_url', image_url: { url: 'https://media.example.com/last.png' }, role: 'last_frame' },
    ]);
  });

  it('sends multimodal references as reference image, video and audio, in submission order', async () => {
    const references = [ref('image', 'face.png'), ref('video', 'motion.mp4'), ref('audio', 'song.mp3'), ref('image', 'room.png')];
    await created(client(), undefined, body({ mode: 'multimodal_reference', references, resolution: '1080p', ratio: '1:1', duration: 15 }));
    expect(createBody()).toEqual({
      model: 'dreamina-seedance-2-0-260128',
      ratio: '1:1',
      duration: 15,
      resolution: '1080p',
      watermark: false,
      content: [
        { type: 'text', text: PROMPT },
        { type: 'image_url', image_url: { url: 'https://media.example.com/face.png' }, role: 'reference_image' },
        { type: 'video_url', video_url: { url: 'https://media.example.com/motion.mp4' }, role: 'reference_video' },
        { type: 'audio_url', audio_url: { url: 'https://media.example.com/song.mp3' }, role: 'reference_audio' },
        { type: 'image_url', image_url: { url: 'https://media.example.com/room.png' }, role: 'reference_image' },
      ],
    });
  });

  it('passes callback_url when given, and sends none otherwise', async () => {
    const c = client();
    const callbackUrl = 'https://vidgen.example.com/v1/upstream/callback/gen_1?token=abc';
    const withCallback = await created(c, undefined, body({ callbackUrl }));
    const without = await created(c);
    const bodies = new Map(standin.createdTasks().map((t) => [t.id, t.body]));
    expect(bodies.get(withCallback)).toMatchObject({ callback_url: callbackUrl });
    expect(bodies.get(without)).not.toHaveProperty('callback_url');
  });

  it('authenticates every API call with the Bearer key, and not the video download', async () => {
    const c = client();
    const queued = await created(c, scripts.queuedForever());
    const url = await videoUrlOf(c);
    expect(await c.list([queued])).toMatchObject({ ok: true });
    expect(await c.cancel(queued)).toEqual({ ok: true });
    expect(await c.download(url, outputPath(), never())).toEqual({ ok: true });

    const api = standin.requests.filter((r) => r.path.startsWith('/api/v3/'));
    expect(api.map((r) => r.method)).toEqual(['POST', 'POST', 'GET', 'GET', 'DELETE']);
    for (const r of api) expect(r.authorization).toBe(`Bearer ${API_KEY}`);
    const downloads = standin.requests.filter((r) => r.path.startsWith('/media/'));
    expect(downloads).toHaveLength(1);
    expect(downloads[0]!.authorization).toBeUndefined();
  });

  it('refuses to be built without an http(s) base URL or a key', () => {
    expect(() => createUpstreamClient({ baseUrl: 'ftp://example.com/api/v3', apiKey: API_KEY })).toThrow(/baseUrl/);
    expect(() => createUpstreamClient({ baseUrl: standin.baseUrl, apiKey: '' })).toThrow(/apiKey/);
  });
});

describe('create: refused (nothing was created)', () => {
  it.each(['InputTextSensitiveContentDetected', 'SensitiveContentDetected.Violence', 'InputImageRiskDetection'])(
    'is the task’s own, final, content_rejected, when moderation refuses it (%s)',
    async (code) => {
      standin.enqueue(scripts.rejectedAtCreate(code, 'The request failed because the input may contain sensitive information.'));
      const outcome = await client().create(body());
      expect(outcome).toEqual({ kind: 'refused', elsewhere: false, code: 'content_rejected', message: expect.stringContaining(`HTTP 400 ${code}`), retryAfterMs: 0 });
      expect(standin.createdTasks()).toEqual([]);
    },
  );

  it('is the task’s own, final, provider_error, when its parameters are invalid (400 InvalidParameter)', async () => {
    standin.enqueue({ create: [errorReply(400, 'InvalidParameter', 'One or more parameters specified in the request are not valid.', 'BadRequest', 'duration')] });
    expect(await client().create(body())).toEqual({
      kind: 'refused',
      elsewhere: false,
      code: 'provider_error',
      message: expect.stringContaining('HTTP 400 InvalidParameter'),
      retryAfterMs: 0,
    });
  });

  it.each<[string, Reply, number]>([
    ['429 with Retry-After', { ...(errorReply(429, 'RateLimitExceeded.EndpointRPMExceeded', 'Too many requests.', 'TooManyRequests') as { status: number; json: unknown }), headers: { 'retry-after': '7' } }, 7000],
    ['429 QuotaExceeded', errorReply(429, 'QuotaExceeded', 'The request has exceeded the quota.', 'TooManyRequests'), 0],
    ['403 AccountOverdueError', errorReply(403, 'AccountOverdueError', 'The request failed because your account has an overdue balance.', 'Forbidden'), 0],
    ['500 InternalServiceError', errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError'), 0],
    ['503 with Retry-After', { ...(errorReply(503, 'ServiceUnavailable', 'Service is temporarily unavailable.', 'ServiceUnavailable') as { status: number; json: unknown }), headers: { 'retry-after': '30' } }, 30_000],
    ['502 without an error body', { status: 502, raw: '<html>Bad Gateway</html>', contentType: 'text/html' }, 0],
  ])('is the channel’s problem (elsewhere) on %s, with Retry-After as retryAfterMs', async (_, reply, retryAfterMs) => {
    // A failing account: every create answered so, none created.
    standin.configure({ createReply: reply });
    const outcome = keyless(await client().create(body()));
    expect(outcome).toEqual({ kind: 'refused', elsewhere: true, code: 'provider_error', message: expect.stringContaining(`HTTP ${(reply as { status: number }).status}`), retryAfterMs });
    expect(standin.createdTasks()).toEqual([]);
  });

  it('is the channel’s problem when the account is full (429 over its tasks in flight)', async () => {
    standin.configure({ maxActive: 1 });
    const c = client();
    await created(c, scripts.held());
    expect(await c.create(body())).toMatchObject({ kind: 'refused', elsewhere: true, code: 'provider_error', message: expect.stringContaining('HTTP 429 ServerOverloaded') });
    expect(standin.createdTasks()).toHaveLength(1);
  });

  it('is the channel’s problem when the key is wrong (401), and the key is not in the message', async () => {
    const wrongKey = 'ark-wrong-key-1234567890';
    const outcome = keyless(keyless(await client({ apiKey: wrongKey }).create(body())), wrongKey);
    expect(outcome).toEqual({ kind: 'refused', elsewhere: true, code: 'provider_error', message: expect.stringContaining('HTTP 401 AuthenticationError'), retryAfterMs: 0 });
    expect(standin.requestsTo('POST', TASKS)[0]!.authorization).toBe(`Bearer ${wrongKey}`);
  });

  it('redacts the key when the upstream echoes it back', async () => {
    standin.enqueue({ create: [errorReply(400, 'InvalidParameter', `bad header Authorization: Bearer ${API_KEY}`)] });
    const outcome = keyless(await client().create(body()));
    expect(outcome).toMatchObject({ kind: 'refused', message: expect.stringContaining('Bearer [redacted]') });
  });

  it('redacts the key before a long upstream message is cut short, so no part of it is left', async () => {
    // Cut first, the 300 characters would end inside the key, which a redaction then would not find.
    standin.enqueue({ create: [errorReply(400, 'InvalidParameter', `${'x'.repeat(280)} Bearer ${API_KEY} ${'y'.repeat(50)}`)] });
    const outcome = (await client().create(body())) as Extract<CreateOutcome, { kind: 'refused' }>;
    expect(outcome.kind).toBe('refused');
    expect(outcome.message).not.toContain(API_KEY.slice(0, 8));
    expect(outcome.message).toContain('[redacted]');
    expect(outcome.message).toMatch(/…$/);
    expect(outcome.message).not.toContain('y'.repeat(50));
  });
});

describe('create: unreached or unknown', () => {
  it('is unreached when the connection is refused (nothing was sent)', async () => {
    const port = await closedPort();
    const outcome = keyless(await client({ baseUrl: `http://127.0.0.1:${port}/api/v3` }).create(body()));
    expect(outcome).toEqual({ kind: 'unreached', message: expect.stringContaining('ECONNREFUSED') });
  });

  it('is unknown when the answer does not come in time, and the upstream did create the task', async () => {
    standin.configure({ createHangsAfterAccept: true });
    const outcome = await client({ requestTimeoutMs: 200 }).create(body());
    expect(outcome).toEqual({ kind: 'unknown', message: expect.stringContaining('within 200 ms') });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
    expect(standin.createdTasks()).toHaveLength(1);
  });

  it('is unknown when the connection is reset after the request was sent', async () => {
    standin.enqueue({ create: [{ reset: true }] });
    const outcome = keyless(await client().create(body()));
    expect(outcome).toEqual({ kind: 'unknown', message: expect.stringContaining('the connection failed during the create request') });
    expect(standin.requestsTo('POST', TASKS)).toHaveLength(1);
  });

  it('is unknown when our own signal abandons the request before its answer', async () => {
    standin.configure({ createHangsAfterAccept: true });
    const controller = new AbortController();
    const pending = client().create(body(), controller.signal);
    await standin.received('POST', TASKS);
    controller.abort();
    expect(await pending).toEqual({ kind: 'unknown', message: expect.stringContaining('abandoned') });
    expect(standin.createdTasks()).toHaveLength(1);
  });

  it.each<[string, Reply, string]>([
    ['not JSON', { status: 200, raw: '{"id": "cgt-1' }, 'malformed JSON'],
    ['JSON without an id', { status: 200, json: { task: 'cgt-1' } }, 'no task id'],
    ['an empty id', { status: 201, json: { id: '' } }, 'no task id'],
  ])('is unknown when a 2xx answer is %s (accepted, but which task?)', async (_, reply, message) => {
    standin.enqueue({ create: [reply] });
    expect(await client().create(body())).toEqual({ kind: 'unknown', message: expect.stringContaining(message) });
  });
});

describe('list', () => {
  it('asks for several ids in one request and reads each status, its error, video URL and usage; unknown ids are absent', async () => {
    const c = client();
    const queued = await created(c, scripts.queuedForever());
    const running = await created(c, scripts.runsForever());
    const succeeded = await created(c);
    const failed = await created(c, { polls: [{ status: 'failed', error: { code: 'InternalServiceError', message: 'The service encountered an unexpected internal error.' } }] });
    const unknown = 'cgt-20260101000000-abcdef';
    const ids = [queued, running, unknown, succeeded, failed];

    const listed = await c.list(ids);
    const lists = standin.requestsTo('GET', TASKS).filter((r) => r.path === `/api/v3${TASKS}`);
    expect(lists).toHaveLength(1);
    expect(lists[0]!.query.getAll('filter.task_ids')).toEqual(ids);
    expect(Number(lists[0]!.query.get('page_size'))).toBeGreaterThanOrEqual(ids.length);
    expect(lists[0]!.query.get('page_num')).toBe('1');

    if (!listed.ok) throw new Error(listed.message);
    const byId = new Map(listed.tasks.map((t) => [t.id, t]));
    expect([...byId.keys()].sort()).toEqual([queued, running, succeeded, failed].sort());
    expect(byId.has(unknown)).toBe(false);
    expect(byId.get(queued)).toEqual({ id: queued, status: 'queued' });
    expect(byId.get(running)).toEqual({ id: running, status: 'running' });
    expect(byId.get(succeeded)).toEqual({
      id: succeeded,
      status: 'succeeded',
      videoUrl: `${new URL(standin.baseUrl).origin}/media/${succeeded}.mp4`,
      usage: { completionTokens: 108900, totalTokens: 108900 },
    });
    expect(byId.get(failed)).toEqual({ id: failed, status: 'failed', error: { code: 'InternalServiceError', message: 'The service encountered an unexpected internal error.' } });
  });

  it('sends no request for no ids (an unfiltered list would answer tasks never asked for)', async () => {
    const c = client();
    await created(c);
    expect(await c.list([])).toEqual({ ok: true, tasks: [] });
    expect(standin.requestsTo('GET', TASKS)).toHaveLength(0);
  });

  it('redacts the key where a failed task’s error echoes it', async () => {
    const c = client();
    const id = await created(c, { polls: [{ status: 'failed', error: { code: 'InvalidParameter', message: `bad header Authorization: Bearer ${API_KEY}` } }] });
    const listed = keyless(await c.list([id]));
    expect(listed).toEqual({ ok: true, tasks: [{ id, status: 'failed', error: { code: 'InvalidParameter', message: 'bad header Authorization: Bearer [redacted]' } }] });
  });

  it.each<[string, Reply, string]>([
    ['500', errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError'), 'HTTP 500 InternalServiceError'],
    ['502 without an error body', { status: 502, raw: '<html>Bad Gateway</html>', contentType: 'text/html' }, 'HTTP 502 without an error body'],
    ['not JSON', { status: 200, raw: 'OK' }, 'malformed JSON'],
    ['without items', { status: 200, json: { tasks: [], total: 0 } }, 'no items array'],
    ['with an item of an unknown status', { status: 200, json: { items: [{ id: 'cgt-x', status: 'done' }], total: 1 } }, 'unknown task status "done"'],
    ['with a succeeded item without a video URL', { status: 200, json: { items: [{ id: 'cgt-x', status: 'succeeded', content: {} }], total: 1 } }, 'without an http(s) content.video_url'],
  ])('fails (ok: false) when the answer is %s', async (_, reply, message) => {
    const c = client();
    const id = await created(c, { polls: [{ reply }] });
    expect(await c.list([id])).toEqual({ ok: false, message: expect.stringContaining(message) });
  });

  it('fails (ok: false) when the upstream cannot be reached', async () => {
    const port = await closedPort();
    expect(await client({ baseUrl: `http://127.0.0.1:${port}/api/v3` }).list(['cgt-1'])).toEqual({ ok: false, message: expect.stringContaining('unreachable') });
  });

  it('fails (ok: false) when the answer does not come in time', async () => {
    const c = client({ requestTimeoutMs: 200 });
    const id = await created(c, { polls: [{ reply: { hang: true } }] });
    expect(await c.list([id])).toEqual({ ok: false, message: expect.stringContaining('within 200 ms') });
  });
});

describe('query', () => {
  it('reads a running task, then the succeeded one with its video URL and usage', async () => {
    const c = client();
    const id = await created(c, scripts.succeedsAfter(1));
    expect(await c.query(id)).toEqual({ ok: true, task: { id, status: 'running' } });
    expect(await c.query(id)).toEqual({
      ok: true,
      task: { id, status: 'succeeded', videoUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/media\//), usage: { completionTokens: 108900, totalTokens: 108900 } },
    });
    expect(standin.requestsTo('GET', TASKS).map((r) => r.path)).toEqual([`/api/v3${TASKS}/${id}`, `/api/v3${TASKS}/${id}`]);
  });

  it('says notFound when the upstream does not know the task (404)', async () => {
    expect(await client().query('cgt-20260101000000-abcdef')).toEqual({ ok: false, notFound: true, message: expect.stringContaining('HTTP 404 ResourceNotFound') });
  });

  it.each<[string, Reply, string]>([
    ['a 500', errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError'), 'HTTP 500 InternalServiceError'],
    ['not JSON', { status: 200, raw: 'OK' }, 'malformed JSON'],
    ['an array', { status: 200, json: [] }, 'not an object'],
    ['of an unknown status', { status: 200, json: { id: 'cgt-x', status: 'done' } }, 'unknown task status "done"'],
  ])('fails, not notFound, when the answer is %s', async (_, reply, message) => {
    const c = client();
    const id = await created(c, { polls: [{ reply }] });
    expect(await c.query(id)).toEqual({ ok: false, notFound: false, message: expect.stringContaining(message) });
  });

  it('redacts the key where a failed task’s error echoes it', async () => {
    const c = client();
    const id = await created(c, scripts.failsWith('InvalidParameter', `bad header Authorization: Bearer ${API_KEY}`));
    await c.query(id);
    const queried = keyless(await c.query(id));
    expect(queried).toMatchObject({ ok: true, task: { status: 'failed', error: { message: 'bad header Authorization: Bearer [redacted]' } } });
  });
});

describe('cancel', () => {
  it('cancels a queued task (DELETE of its path)', async () => {
    const c = client();
    const id = await created(c, scripts.queuedForever());
    expect(await c.cancel(id)).toEqual({ ok: true });
    expect(standin.requestsTo('DELETE', TASKS).map((r) => r.path)).toEqual([`/api/v3${TASKS}/${id}`]);
    expect(standin.createdTasks()[0]).toMatchObject({ id, status: 'cancelled' });
  });

  it('is refused for a running task, which runs on', async () => {
    const c = client();
    const id = await created(c, scripts.held());
    expect(await c.cancel(id)).toEqual({ ok: false, message: expect.stringContaining('HTTP 409 InvalidAction.TaskNotCancellable') });
    expect(standin.createdTasks()[0]).toMatchObject({ id, status: 'running' });
  });

  it('is refused for a task the upstream does not know', async () => {
    expect(await client().cancel('cgt-20260101000000-abcdef')).toEqual({ ok: false, message: expect.stringContaining('HTTP 404 ResourceNotFound') });
  });
});

describe('download', () => {
  it('leaves the video at outputPath, byte for byte, and no temporary file', async () => {
    const c = client();
    const url = await videoUrlOf(c);
    const path = outputPath();
    expect(await c.download(url, path, never())).toEqual({ ok: true });
    expect(readFileSync(path).equals(video)).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it.each<[string, TaskScript['download'], string]>([
    ['answers 403 (the signed URL expired)', { status: 403, raw: '<Error><Code>AccessDenied</Code></Error>', contentType: 'application/xml' }, 'HTTP 403'],
    ['is cut off half way', { truncateAfter: 1000 }, 'downloading the upstream video failed'],
    ['is empty', { status: 200, raw: '', contentType: 'video/mp4' }, 'empty'],
  ])('fails with provider_error and leaves no file when the video %s', async (_, download, message) => {
    const c = client();
    const url = await videoUrlOf(c, { download });
    const path = outputPath();
    expect(await c.download(url, path, never())).toEqual({ ok: false, code: 'provider_error', message: expect.stringContaining(message) });
    expect(existsSync(path)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('fails with provider_error when the storage host cannot be reached', async () => {
    const port = await closedPort();
    const path = outputPath();
    expect(await client().download(`http://127.0.0.1:${port}/media/x.mp4`, path, never())).toEqual({ ok: false, code: 'provider_error', message: expect.stringContaining('ECONNREFUSED') });
    expect(existsSync(path)).toBe(false);
  });

  it('fails with internal_error when our side cannot make the output directory', async () => {
    const c = client();
    const url = await videoUrlOf(c);
    const notADirectory = join(dir, 'standin.mp4');
    expect(await c.download(url, join(notADirectory, 'video.mp4'), never())).toEqual({ ok: false, code: 'internal_error', message: expect.stringContaining('output directory') });
  });

  it('fails with internal_error, and leaves no temporary file, when our side cannot put the video in place', async () => {
    const c = client();
    const url = await videoUrlOf(c);
    // A directory where the file should go: the rename fails after the whole video was written.
    const path = outputPath();
    mkdirSync(path, { recursive: true });
    expect(await c.download(url, path, never())).toEqual({ ok: false, code: 'internal_error', message: expect.stringContaining('writing the video failed') });
    expect(leftovers()).toEqual([]);
  });

  it('stops with aborted when the signal aborts before it starts, without a request', async () => {
    const c = client();
    const url = await videoUrlOf(c);
    const path = outputPath();
    expect(await c.download(url, path, AbortSignal.abort())).toEqual({ ok: false, code: 'internal_error', message: 'download stopped', aborted: true });
    expect(standin.requests.filter((r) => r.path.startsWith('/media/'))).toHaveLength(0);
    expect(existsSync(path)).toBe(false);
  });

  it('stops with aborted, and leaves no temporary file, when the signal aborts mid-transfer', async () => {
    const controller = new AbortController();
    // The body arrives in pieces; the signal aborts once the first one is in the temporary file's stream.
    const slowBody: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      const reader = response.body!.getReader();
      let pieces = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(stream) {
          if (pieces++ === 1) {
            controller.abort();
            stream.error(init?.signal?.reason ?? new Error('aborted'));
            return;
          }
          const { done, value } = await reader.read();
          if (done) stream.close();
          else stream.enqueue(value.subarray(0, 100));
        },
        cancel: (reason) => reader.cancel(reason),
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    const url = await videoUrlOf(client());
    const path = outputPath();
    expect(await client({ fetch: slowBody }).download(url, path, controller.signal)).toEqual({ ok: false, code: 'internal_error', message: 'download stopped', aborted: true });
    expect(existsSync(path)).toBe(false);
    expect(leftovers()).toEqual([]);
  });

  it('fails with provider_error when it takes longer than downloadTimeoutMs', async () => {
    const c = client({ downloadTimeoutMs: 200 });
    const url = await videoUrlOf(c, { download: { hang: true } });
    const path = outputPath();
    expect(await c.download(url, path, never())).toEqual({ ok: false, code: 'provider_error', message: expect.stringContaining('longer than 200 ms') });
    expect(existsSync(path)).toBe(false);
  });
});

describe('taskErrorFor: how an upstream ending maps to our task', () => {
  /** Follows the task through the stand-in until it ends, then maps it. */
  async function endingOf(script: TaskScript) {
    const c = client();
    const id = await created(c, script);
    for (;;) {
      const queried = await c.query(id);
      if (!queried.ok) throw new Error(queried.message);
      if (queried.task.status !== 'queued' && queried.task.status !== 'running') return taskErrorFor(queried.task);
    }
  }

  it('expired → timeout', async () => {
    expect(await endingOf(scripts.expires())).toEqual({ code: 'timeout', message: expect.stringContaining('expired') });
  });

  it.each([
    ['OutputVideoSensitiveContentDetected', 'The request failed because the output video may contain sensitive information.'],
    ['InputImageRiskDetection', 'The request failed because the input image may contain risky content.'],
    ['InputImageSensitiveContentDetected.PrivacyInformation', 'The request failed because the input image may contain real person.'],
  ])('failed by moderation (%s) → content_rejected', async (code, message) => {
    expect(await endingOf(scripts.failsWith(code, message))).toEqual({ code: 'content_rejected', message: expect.stringContaining(`${code}: ${message}`) });
  });

  it('failed otherwise → provider_error, naming the upstream code', async () => {
    expect(await endingOf(scripts.failsWith('InternalServiceError', 'The service encountered an unexpected internal error.'))).toEqual({
      code: 'provider_error',
      message: expect.stringContaining('InternalServiceError'),
    });
  });

  it('cancelled (by someone else, upstream) → provider_error', async () => {
    expect(await endingOf({ polls: [{ status: 'running' }, { status: 'cancelled' }] })).toEqual({ code: 'provider_error', message: expect.stringContaining('cancelled upstream') });
  });

  it('keeps the key out, even where the failed task’s message echoes it', async () => {
    const mapped = keyless(await endingOf(scripts.failsWith('InvalidParameter', `bad header Authorization: Bearer ${API_KEY}`)));
    expect(mapped).toEqual({ code: 'provider_error', message: expect.stringContaining('[redacted]') });
  });

  it('cuts a long message, and names a failure that gave no error', () => {
    const long = taskErrorFor({ id: 'cgt-1', status: 'failed', error: { code: 'InternalServiceError', message: 'x'.repeat(1000) } });
    expect(long.message.length).toBeLessThan(400);
    expect(taskErrorFor({ id: 'cgt-1', status: 'failed' })).toEqual({ code: 'provider_error', message: expect.stringContaining('unknown: no error given') });
  });
});

describe('isChannelProblem', () => {
  it.each([429, 500, 502, 503, 504, 401, 403])('is the channel’s on HTTP %i, whatever the code', (status) => {
    expect(isChannelProblem(status, undefined)).toBe(true);
    expect(isChannelProblem(status, 'InvalidParameter')).toBe(true);
  });

  it.each(['QuotaExceeded', 'RateLimitExceeded.EndpointRPMExceeded', 'AccountOverdueError', 'InsufficientBalance', 'ServerOverloaded', 'AccountSuspended', 'ModelNotOpen', 'InvalidEndpointOrModel.NotFound'])(
    'is the channel’s on the code %s, whatever the status',
    (code) => {
      expect(isChannelProblem(400, code)).toBe(true);
      expect(isChannelProblem(404, code)).toBe(true);
    },
  );

  it.each<[number, string | undefined]>([
    [400, 'InvalidParameter'],
    [400, 'MissingParameter'],
    [400, 'InputTextSensitiveContentDetected'],
    [400, 'InputImageRiskDetection'],
    [400, undefined],
    [409, undefined],
  ])('is the task’s own on HTTP %i %s', (status, code) => {
    expect(isChannelProblem(status, code)).toBe(false);
  });
});

describe('parseList', () => {
  it('reads every item as the query does, usage included', () => {
    const parsed = parseList({
      items: [
        { id: 'cgt-2', status: 'succeeded', content: { video_url: 'https://storage.example.com/v.mp4?sig=1' }, usage: { completion_tokens: 108900, total_tokens: 108900 } },
        { id: 'cgt-1', status: 'failed', error: { code: 'OutputVideoSensitiveContentDetected', message: 'sensitive' } },
        { id: 'cgt-0', status: 'queued', error: null },
      ],
      total: 3,
    });
    expect(parsed).toEqual<{ ok: true; value: UpstreamTask[] }>({
      ok: true,
      value: [
        { id: 'cgt-2', status: 'succeeded', videoUrl: 'https://storage.example.com/v.mp4?sig=1', usage: { completionTokens: 108900, totalTokens: 108900 } },
        { id: 'cgt-1', status: 'failed', error: { code: 'OutputVideoSensitiveContentDetected', message: 'sensitive' } },
        { id: 'cgt-0', status: 'queued' },
      ],
    });
  });

  it('reads an empty page', () => {
    expect(parseList({ items: [], total: 0 })).toEqual({ ok: true, value: [] });
  });

  it('keeps usage counts it cannot trust as null', () => {
    const parsed = parseList({ items: [{ id: 'cgt-1', status: 'succeeded', content: { video_url: 'https://s.example.com/v.mp4' }, usage: { completion_tokens: -1, total_tokens: '7' } }] });
    expect(parsed).toEqual({ ok: true, value: [expect.objectContaining({ usage: { completionTokens: null, totalTokens: null } })] });
  });

  it.each<[string, unknown, string]>([
    ['not an object', [], 'no items array'],
    ['null', null, 'no items array'],
    ['items that are not an array', { items: {} }, 'no items array'],
    ['an item without an id', { items: [{ status: 'queued' }] }, 'no id'],
    ['an item of an unknown status', { items: [{ id: 'cgt-1', status: 'queued' }, { id: 'cgt-2', status: 'done' }] }, 'unknown task status "done"'],
    ['a succeeded item without an http(s) video URL', { items: [{ id: 'cgt-1', status: 'succeeded', content: { video_url: 'file:///etc/passwd' } }] }, 'without an http(s) content.video_url'],
  ])('fails the whole page on %s', (_, value, message) => {
    expect(parseList(value)).toEqual({ ok: false, message: expect.stringContaining(message) });
  });
});
