/**
 * End to end through the HTTP API on loopback: reference media from a real
 * HTTPS server, the real fetcher, the real ffmpeg renderer, output files
 * downloaded (whole and by range) and checked with ffprobe.
 */
import { serve, type ServerType } from '@hono/node-server';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalOutputFiles } from '../src/files/storage.js';
import { createMediaFetcher } from '../src/media/fetcher.js';
import { createLocalProvider, defaultFfmpegPath } from '../src/providers/local/local-provider.js';
import type { Worker } from '../src/queue/worker.js';
import { systemClock } from '../src/interfaces.js';
import { harness, SUBMIT, testConfig, type Harness, testWorker } from './support.js';
import { startHttpsFixture, type HttpsFixture } from './support/https-fixture.js';

const run = promisify(execFile);
const ffprobe = (createRequire(import.meta.url)('@ffprobe-installer/ffprobe') as { path: string }).path;

let dir: string;
let h: Harness;
let worker: Worker;
let server: ServerType;
let baseUrl: string;
let media: HttpsFixture;
let key: string;
let accountId: string;
let onRender: ((pid: number) => void) | undefined;

async function makeMedia(directory: string) {
  const ffmpeg = defaultFfmpegPath();
  const make = (args: string[]) => run(ffmpeg, ['-v', 'error', '-y', ...args]);
  await make(['-f', 'lavfi', '-i', 'color=c=red:s=320x240', '-frames:v', '1', join(directory, 'red.png')]);
  await make(['-f', 'lavfi', '-i', 'color=c=blue:s=320x240', '-frames:v', '1', join(directory, 'blue.png')]);
  await make(['-f', 'lavfi', '-i', 'testsrc=s=320x240:r=24', '-t', '2', '-pix_fmt', 'yuv420p', join(directory, 'clip.mp4')]);
  await make(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=1', join(directory, 'tone.wav')]);
  // An image that claims to be a video.
  writeFileSync(join(directory, 'fake.mp4'), readFileSync(join(directory, 'red.png')));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vidgen-e2e-'));
  const mediaDir = join(dir, 'media');
  await run('mkdir', ['-p', mediaDir]);
  await makeMedia(mediaDir);
  media = await startHttpsFixture((req, res) => {
    const file = join(mediaDir, (req.url ?? '/').slice(1));
    if (!existsSync(file)) return void res.writeHead(404).end();
    res.writeHead(200).end(readFileSync(file));
  });

  const files = createLocalOutputFiles({ directory: join(dir, 'outputs'), publicBaseUrl: () => baseUrl, secret: Buffer.from('e2e') });
  // The media server is on loopback: allowed, as a development deployment may (D5).
  h = harness({ files, clock: systemClock, wakeWorkers: () => worker.wake(), config: testConfig({ media: { allowLoopback: true } }) }, join(dir, 'vidgen.db'));
  worker = testWorker(h, {
    provider: createLocalProviderOnce(),
    fetcher: createMediaFetcher({ allowLoopback: true, ca: media.ca }),
    files,
    workDir: join(dir, 'work'),
    concurrency: { local: 2 },
    pollMs: 60_000,
  });
  server = serve({ fetch: h.app.fetch, port: 0, hostname: '127.0.0.1' });
  await new Promise<void>((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  worker.start();
  ({ key, accountId } = await h.account(100_000));
}, 60_000);

let provider: ReturnType<typeof createLocalProvider> | undefined;
function createLocalProviderOnce() {
  provider ??= createLocalProvider({
    concurrency: 2,
    onRenderStart: ({ pid }) => {
      onRender?.(pid!);
    },
  });
  return provider;
}

afterAll(async () => {
  await worker?.stop();
  await new Promise((resolve) => server?.close(resolve));
  await media?.close();
  await h?.store.close();
  rmSync(dir, { recursive: true, force: true });
});

const api = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, json: (await res.json()) as any };
};

async function untilStatus(id: string, wanted: (status: string) => boolean) {
  for (let i = 0; i < 20; i++) {
    const { json } = await api('GET', `${SUBMIT}/${id}?wait=10`);
    if (wanted(json.status)) return json;
  }
  throw new Error(`${id} never reached the wanted status`);
}
const terminal = (status: string) => ['succeeded', 'failed', 'cancelled'].includes(status);

interface Probe {
  streams: { codec_type: string; codec_name: string; width?: number; height?: number; pix_fmt?: string }[];
  format: { duration: string };
}

describe('a task through the whole pipeline', () => {
  const cases = [
    { name: 'text to video', body: { model: 'vidgen-2.0-fast', duration: 4, resolution: '480p', aspectRatio: '16:9' }, refs: [], size: [854, 480], audio: false },
    { name: 'first frame', body: { model: 'vidgen-1.5-pro', duration: 5, resolution: '480p', aspectRatio: '9:16' }, refs: ['red.png'], size: [480, 854], audio: false },
    { name: 'first and last frame', body: { model: 'vidgen-1.5-pro', duration: 5, resolution: '480p', aspectRatio: '1:1' }, refs: ['red.png', 'blue.png'], size: [480, 480], audio: false },
    { name: 'multimodal with video and audio', body: { model: 'vidgen-2.0', duration: 4, resolution: '720p', aspectRatio: '16:9' }, refs: ['red.png', 'clip.mp4', 'tone.wav'], size: [1280, 720], audio: true },
  ];

  it.each(cases)('$name: succeeds, downloads whole and by range, and ffprobe agrees', async ({ body, refs, size, audio }) => {
    const submitted = await api('POST', SUBMIT, { ...body, prompt: `e2e: ${refs.join(' + ') || 'text only'}`, ...(refs.length ? { mediaUrls: refs.map((r) => media.url(`/${r}`)) } : {}) });
    expect(submitted.status).toBe(202);
    const task = await untilStatus(submitted.json.requestId, terminal);
    expect(task.status, JSON.stringify(task.error)).toBe('succeeded');

    const file = join(dir, `${task.requestId}.download.mp4`);
    const whole = await fetch(task.output.url);
    expect(whole.status).toBe(200);
    const bytes = Buffer.from(await whole.arrayBuffer());
    writeFileSync(file, bytes);
    const ranged = await fetch(task.output.url, { headers: { Range: 'bytes=100-1123' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe(`bytes 100-1123/${bytes.length}`);
    expect(Buffer.from(await ranged.arrayBuffer())).toEqual(bytes.subarray(100, 1124));

    const { stdout } = await run(ffprobe, ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', file]);
    const probe = JSON.parse(stdout) as Probe;
    const video = probe.streams.find((s) => s.codec_type === 'video')!;
    expect(video).toMatchObject({ codec_name: 'h264', width: size[0], height: size[1], pix_fmt: 'yuv420p' });
    expect(Math.abs(Number(probe.format.duration) - body.duration)).toBeLessThanOrEqual(0.1);
    const audioStreams = probe.streams.filter((s) => s.codec_type === 'audio');
    expect(audioStreams.map((s) => s.codec_name)).toEqual(audio ? ['aac'] : []);
  });

  it('fails with media_unavailable when a reference is not what its extension says, refunded', async () => {
    const before = (await h.store.auditBalance(accountId))!.balance;
    const submitted = await api('POST', SUBMIT, { model: 'vidgen-2.0-fast', duration: 4, resolution: '480p', prompt: 'wrong kind', mediaUrls: [media.url('/fake.mp4')] });
    const task = await untilStatus(submitted.json.requestId, terminal);
    expect(task).toMatchObject({ status: 'failed', error: { code: 'media_unavailable' }, creditsRefunded: submitted.json.creditsCharged });
    expect((await h.store.auditBalance(accountId))!.balance).toBe(before);
  });

  it('cancel while processing kills the render: cancelled, refunded, no output later', async () => {
    const before = (await h.store.auditBalance(accountId))!.balance;
    const rendering = new Promise<number>((resolve) => (onRender = resolve));
    const submitted = await api('POST', SUBMIT, { model: 'vidgen-2.0', duration: 15, resolution: '1080p', prompt: 'a long render to cancel' });
    const id = submitted.json.requestId as string;
    const pid = await rendering;
    expect((await api('POST', `${SUBMIT}/${id}/cancel`)).status).toBe(200);
    await worker.idle();
    expect(() => process.kill(pid, 0)).toThrow(/ESRCH/);
    const task = (await api('GET', `${SUBMIT}/${id}`)).json;
    expect(task).toMatchObject({ status: 'cancelled', output: null, creditsRefunded: submitted.json.creditsCharged });
    expect((await h.store.auditBalance(accountId))!).toEqual({ balance: before, ledgerSum: before });
    expect(existsSync(join(dir, 'outputs', `${id}.mp4`))).toBe(false);
  });
});
