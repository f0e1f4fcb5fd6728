/**
 * The local provider (D14): the pure render plan, then real renders with the
 * bundled ffmpeg, checked with ffprobe and by sampling decoded frames.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants, copyFileSync, chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AspectRatio, GenerationMode, MediaKind, Resolution } from '../src/domain/catalog.js';
import { createLocalProvider, defaultFfmpegPath, type LocalProviderOptions } from '../src/providers/local/local-provider.js';
import { buildRenderPlan, captionLayout, chooseInputs, ffmpegArguments, frameSize, sceneFromPrompt, wrapCaption, type RenderSpec } from '../src/providers/local/render-plan.js';
import { createSemaphore } from '../src/providers/local/semaphore.js';
import type { GenerationRequest, ReferenceMedia } from '../src/providers/provider.js';

const run = promisify(execFile);
const ffmpeg = defaultFfmpegPath();
const dir = mkdtempSync(join(tmpdir(), 'vidgen-local-provider-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * pnpm 10 skips the postinstall that marks @ffprobe-installer's binary
 * executable; a copy in the temp dir gets the bit instead.
 */
function executableFfprobe(): string {
  const path = (createRequire(import.meta.url)('@ffprobe-installer/ffprobe') as { path: string }).path;
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch {
    const copy = join(dir, 'ffprobe');
    copyFileSync(path, copy);
    chmodSync(copy, 0o755);
    return copy;
  }
}
let ffprobe: string;

const inputs = {
  red: join(dir, 'red.png'),
  blue: join(dir, 'blue.png'),
  clip: join(dir, 'clip.mp4'),
  tone: join(dir, 'tone.wav'),
  broken: join(dir, 'broken.png'),
};

beforeAll(async () => {
  ffprobe = executableFfprobe();
  const lavfi = (source: string, output: string, ...extra: string[]) =>
    run(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', source, ...extra, output]);
  await Promise.all([
    lavfi('color=c=red:s=320x240', inputs.red, '-frames:v', '1'),
    lavfi('color=c=blue:s=200x200', inputs.blue, '-frames:v', '1'),
    lavfi('testsrc=s=320x240:r=30:d=2', inputs.clip, '-c:v', 'libx264', '-pix_fmt', 'yuv420p'),
    lavfi('sine=f=440:d=1', inputs.tone),
  ]);
  writeFileSync(inputs.broken, 'this is not a picture\n');
});

interface Probe {
  streams: { codec_type: string; codec_name: string; width?: number; height?: number; pix_fmt?: string; duration?: string }[];
  format: { duration: string };
}
async function probe(file: string): Promise<Probe> {
  const { stdout } = await run(ffprobe, ['-v', 'error', '-show_streams', '-show_format', '-of', 'json', file]);
  return JSON.parse(stdout) as Probe;
}

/** Frame `index` shrunk to `size` pixels of RGB, away from the caption at the bottom. */
async function frameRgb(file: string, index: number, size = '1x1'): Promise<Buffer> {
  const filter = `select=eq(n\\,${index}),crop=iw/4:ih/8,scale=${size.replace('x', ':')}:flags=area,format=rgb24`;
  const { stdout } = await run(ffmpeg, ['-v', 'error', '-i', file, '-vf', filter, '-frames:v', '1', '-f', 'rawvideo', '-'], { encoding: 'buffer' });
  return stdout;
}
const isRed = ([r, g, b]: Buffer) => r! > 200 && g! < 60 && b! < 60;
const isBlue = ([r, g, b]: Buffer) => r! < 60 && g! < 60 && b! > 200;

let taskCount = 0;
const ref = (path: string, kind: MediaKind): ReferenceMedia => ({ url: `https://cdn.example.com/${path.split('/').pop()}`, kind, path });
function request(overrides: Partial<GenerationRequest> & { mode: GenerationMode }): GenerationRequest {
  taskCount += 1;
  return {
    taskId: `gen_${taskCount}`,
    model: 'vidgen-2.0',
    prompt: 'a lighthouse at dusk',
    duration: 2,
    aspectRatio: '16:9',
    resolution: '480p',
    references: [],
    outputPath: join(dir, `out-${taskCount}`, 'output.mp4'),
    signal: new AbortController().signal,
    ...overrides,
  };
}

async function expectVideo(file: string, expected: { width: number; height: number; duration: number; audio: boolean }) {
  const { streams, format } = await probe(file);
  const video = streams.filter((s) => s.codec_type === 'video');
  const audio = streams.filter((s) => s.codec_type === 'audio');
  expect(video).toHaveLength(1);
  expect(video[0]).toMatchObject({ codec_name: 'h264', pix_fmt: 'yuv420p', width: expected.width, height: expected.height });
  expect(Math.abs(Number(video[0]!.duration) - expected.duration)).toBeLessThanOrEqual(0.1);
  expect(Math.abs(Number(format.duration) - expected.duration)).toBeLessThanOrEqual(0.1);
  expect(audio.map((s) => s.codec_name)).toEqual(expected.audio ? ['aac'] : []);
}

/** Nothing but the finished output in the task's directory: no partial file, no work directory. */
const leftovers = (outputPath: string) => readdirSync(join(outputPath, '..')).filter((name) => name !== 'output.mp4');

describe('the render plan', () => {
  it('sizes the frame by aspect ratio, the resolution naming the short side, both sides even', () => {
    const sizes = (['16:9', '9:16', '1:1'] as AspectRatio[]).flatMap((aspect) =>
      (['480p', '720p', '1080p'] as Resolution[]).map((resolution) => `${aspect} ${resolution} ${frameSize(aspect, resolution).width}x${frameSize(aspect, resolution).height}`),
    );
    expect(sizes).toEqual([
      '16:9 480p 854x480', '16:9 720p 1280x720', '16:9 1080p 1920x1080',
      '9:16 480p 480x854', '9:16 720p 720x1280', '9:16 1080p 1080x1920',
      '1:1 480p 480x480', '1:1 720p 720x720', '1:1 1080p 1080x1080',
    ]);
  });

  it('uses the references each mode calls for, and the first audio as soundtrack', () => {
    const roles = (mode: GenerationMode, kinds: MediaKind[]) => {
      const chosen = chooseInputs(mode, kinds);
      return chosen.ok ? chosen.inputs.map((i) => `${i.role}:${i.reference}`) : chosen.message;
    };
    expect(roles('text_to_video', [])).toEqual([]);
    expect(roles('first_frame', ['image'])).toEqual(['first_frame:0']);
    expect(roles('first_last_frame', ['image', 'image'])).toEqual(['first_frame:0', 'last_frame:1']);
    expect(roles('multimodal_reference', ['image', 'audio', 'video', 'audio', 'image'])).toEqual(['background:2', 'thumbnail:0', 'thumbnail:4', 'soundtrack:1']);
    expect(roles('multimodal_reference', ['image', 'image', 'image', 'image', 'image'])).toEqual(['background:0', 'thumbnail:1', 'thumbnail:2', 'thumbnail:3']);
    expect(roles('multimodal_reference', ['video', 'video'])).toEqual(['background:0']);
    expect(roles('first_frame', ['audio'])).toBe('first_frame needs an image reference');
    expect(roles('first_last_frame', ['image'])).toBe('first_last_frame needs two image references');
    expect(roles('multimodal_reference', ['audio'])).toBe('multimodal_reference needs an image or video reference');
  });

  const spec = (overrides: Partial<RenderSpec>): RenderSpec => ({
    prompt: 'p', duration: 5, aspectRatio: '16:9', resolution: '720p', mode: 'text_to_video', referenceKinds: [], ...overrides,
  });

  it('builds arguments that loop only a background video, map audio only when there is a soundtrack, and pin the format', () => {
    const planned = buildRenderPlan(spec({ mode: 'multimodal_reference', referenceKinds: ['video', 'image', 'audio'], duration: 7 }));
    if (!planned.ok) throw new Error(planned.message);
    const args = ffmpegArguments(planned.plan, { inputFiles: ['ref-0.mp4', 'ref-1.png', 'ref-2.wav'], output: 'out.mp4', threads: 1, preset: 'veryfast' });
    expect(args.join(' ')).toContain('-stream_loop -1 -i ref-0.mp4 -i ref-1.png -i ref-2.wav');
    expect(args.join(' ')).toContain('-map [v] -map [a] -c:a aac');
    expect(args.join(' ')).toContain('-t 7 -r 24 -c:v libx264 -preset veryfast');
    expect(args).toEqual(expect.arrayContaining(['-pix_fmt', 'yuv420p', '-movflags', '+faststart']));
    expect(planned.plan.filterGraph).toContain('[2:a:0]aresample=48000,apad[a]');

    const silent = buildRenderPlan(spec({ mode: 'first_frame', referenceKinds: ['image'] }));
    if (!silent.ok) throw new Error(silent.message);
    const silentArgs = ffmpegArguments(silent.plan, { inputFiles: ['ref-0.png'], output: 'out.mp4', threads: 1, preset: 'veryfast' });
    expect(silentArgs).not.toContain('-stream_loop');
    expect(silentArgs).not.toContain('[a]');
    expect(silent.plan).toMatchObject({ width: 1280, height: 720, frames: 120, hasAudio: false });
  });

  it('keeps the prompt out of the filter graph: drawtext reads it from a file, unexpanded', () => {
    const planned = buildRenderPlan(spec({ prompt: "it's 100% {x}: [v]; a,b \\ %{pts}" }));
    if (!planned.ok) throw new Error(planned.message);
    expect(planned.plan.filterGraph).toContain('textfile=caption.txt:expansion=none');
    expect(planned.plan.filterGraph).not.toContain('100%');
    expect(planned.plan.caption).toEqual(["it's 100% {x}: [v]; a,b \\ %{pts}"]);
  });

  it('rejects a mode without its references and a duration that is not positive', () => {
    expect(buildRenderPlan(spec({ mode: 'first_frame' }))).toEqual({ ok: false, message: 'first_frame needs an image reference' });
    expect(buildRenderPlan(spec({ duration: 0 })).ok).toBe(false);
  });

  it('wraps the caption by words, folds newlines, cuts long words and ends an overflow in an ellipsis', () => {
    expect(wrapCaption('one two three four', 9, 3)).toEqual(['one two', 'three', 'four']);
    expect(wrapCaption('line\none\r\n\ttabbed  ', 40, 3)).toEqual(['line one tabbed']);
    expect(wrapCaption('abcdefghijkl', 5, 3)).toEqual(['abcde', 'fghij', 'kl']);
    expect(wrapCaption('aa bb cc dd ee', 5, 2)).toEqual(['aa bb', 'cc d…']);
    expect(wrapCaption('👩‍👩‍👧👩‍👩‍👧👩‍👩‍👧', 2, 3)).toEqual(['👩‍👩‍👧👩‍👩‍👧', '👩‍👩‍👧']);
    expect(wrapCaption(' \n\u0007 ', 10, 3)).toEqual([]);
    // At 720p the font is 36 px: a portrait line holds about half of a landscape one.
    const perLine = (aspect: AspectRatio) => captionLayout(frameSize(aspect, '720p')).charactersPerLine;
    expect([perLine('16:9'), perLine('9:16'), perLine('1:1')]).toEqual([53, 27, 27]);
  });

  it('derives the generated scene from the prompt alone', () => {
    expect(sceneFromPrompt('a red fox')).toEqual(sceneFromPrompt('a red fox'));
    expect(sceneFromPrompt('a red fox')).not.toEqual(sceneFromPrompt('a blue fox'));
  });
});

describe('the render slots', () => {
  it('lets `limit` holders in, queues the rest in order, and lets an aborted waiter leave', async () => {
    const slots = createSemaphore(1);
    const never = new AbortController().signal;
    const first = await slots.acquire(never);
    const leaving = new AbortController();
    const abandoned = slots.acquire(leaving.signal);
    const second = slots.acquire(never);
    expect(slots).toMatchObject({ running: 1, waiting: 2 });
    leaving.abort();
    expect(await abandoned).toBeUndefined();
    first!();
    first!(); // releasing twice frees one slot only
    const release = await second;
    expect(slots).toMatchObject({ running: 1, waiting: 0 });
    release!();
    expect(slots.running).toBe(0);
  });
});

describe('the local provider', () => {
  const provider = createLocalProvider({ threads: 1 });

  it('is the offline provider that reads fetched files', () => {
    expect(provider).toMatchObject({ name: 'local', needsLocalMedia: true });
  });

  it('text_to_video: renders a moving scene at 16:9 with no audio stream', async () => {
    const task = request({ mode: 'text_to_video' });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 854, height: 480, duration: 2, audio: false });
    expect(await frameRgb(task.outputPath, 0, '16x9')).not.toEqual(await frameRgb(task.outputPath, 47, '16x9'));
    expect(leftovers(task.outputPath)).toEqual([]);
  });

  it('first_frame: the image is the first frame of a 9:16 video', async () => {
    const task = request({ mode: 'first_frame', aspectRatio: '9:16', duration: 3, references: [ref(inputs.red, 'image')] });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 480, height: 854, duration: 3, audio: false });
    expect(isRed(await frameRgb(task.outputPath, 0))).toBe(true);
  });

  it('first_last_frame: opens on the first image and ends on the second, 1:1', async () => {
    const task = request({ mode: 'first_last_frame', aspectRatio: '1:1', references: [ref(inputs.red, 'image'), ref(inputs.blue, 'image')] });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 480, height: 480, duration: 2, audio: false });
    expect(isRed(await frameRgb(task.outputPath, 0))).toBe(true);
    expect(isBlue(await frameRgb(task.outputPath, 47))).toBe(true);
    const middle = await frameRgb(task.outputPath, 24);
    expect(isRed(middle) || isBlue(middle)).toBe(false);
  });

  it('multimodal_reference: a shorter video loops as the background and the audio becomes an AAC soundtrack, at 720p', async () => {
    const references = [ref(inputs.red, 'image'), ref(inputs.clip, 'video'), ref(inputs.tone, 'audio')];
    const task = request({ mode: 'multimodal_reference', resolution: '720p', duration: 3, references });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 1280, height: 720, duration: 3, audio: true });
  });

  it('multimodal_reference without audio: images only, and no audio stream', async () => {
    const task = request({ mode: 'multimodal_reference', references: [ref(inputs.blue, 'image'), ref(inputs.red, 'image'), ref(inputs.red, 'image')] });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 854, height: 480, duration: 2, audio: false });
  });

  it('renders a prompt full of characters that break naive escaping', async () => {
    const prompt = `It's "quoted": 100% \\ back\\slash, %{pts} [v]; a=b\nnew line\ttab 🎬🦊 👩‍👩‍👧 ünïcødé ${'long '.repeat(200)}`;
    const task = request({ mode: 'text_to_video', aspectRatio: '9:16', prompt });
    expect(await provider.generate(task)).toEqual({ ok: true });
    await expectVideo(task.outputPath, { width: 480, height: 854, duration: 2, audio: false });
  });

  it('fails with provider_error when ffmpeg cannot read an input, leaving nothing behind', async () => {
    const task = request({ mode: 'first_frame', references: [ref(inputs.broken, 'image')] });
    const result = await provider.generate(task);
    expect(result).toMatchObject({ ok: false, error: { code: 'provider_error', message: expect.stringMatching(/^ffmpeg exited with code \d+: .*Invalid data/) } });
    if (!result.ok) expect(result.error.message).not.toContain(dir);
    expect(existsSync(task.outputPath)).toBe(false);
    expect(leftovers(task.outputPath)).toEqual([]);
  });

  it('says internal_error when a reference was not fetched, without starting ffmpeg', async () => {
    const task = request({ mode: 'first_frame', references: [{ url: 'https://cdn.example.com/a.png', kind: 'image' }] });
    expect(await provider.generate(task)).toEqual({ ok: false, error: { code: 'internal_error', message: 'reference 1 was not fetched to a local file' } });
  });

  it('kills a render when its signal aborts, and leaves no output file', async () => {
    const controller = new AbortController();
    const started: string[] = [];
    const cancellable = createLocalProvider({
      threads: 1,
      onRenderStart: ({ taskId }) => {
        started.push(taskId);
        controller.abort();
      },
    });
    // A minute of 1080p would take far longer than the bound below.
    const task = request({ mode: 'text_to_video', resolution: '1080p', duration: 60, signal: controller.signal });
    const begun = Date.now();
    expect(await cancellable.generate(task)).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(Date.now() - begun).toBeLessThan(10_000);
    expect(started).toEqual([task.taskId]);
    expect(existsSync(task.outputPath)).toBe(false);
    expect(leftovers(task.outputPath)).toEqual([]);
  });

  it('follows SIGTERM with SIGKILL after the grace period when the render ignores SIGTERM', async () => {
    // A stand-in for ffmpeg that ignores SIGTERM (the disposition survives exec)
    // and says when it has got that far.
    const ready = join(dir, 'stubborn-ready');
    const stubborn = join(dir, 'stubborn-ffmpeg.sh');
    writeFileSync(stubborn, `#!/bin/sh\ntrap '' TERM\n: > '${ready}'\nexec sleep 60\n`, { mode: 0o755 });
    const graces: number[] = [];
    // The grace period "passes" on the next turn of the event loop.
    const clock = {
      setTimeout: (callback: () => void, ms: number) => {
        graces.push(ms);
        const timer = setImmediate(callback);
        return () => clearImmediate(timer);
      },
    };
    const controller = new AbortController();
    const untilReady = async () => {
      while (!existsSync(ready)) await new Promise((next) => setImmediate(next));
      controller.abort();
    };
    const killing = createLocalProvider({ ffmpegPath: stubborn, killGraceMs: 1234, clock, onRenderStart: () => void untilReady() });
    const task = request({ mode: 'text_to_video', signal: controller.signal });
    const begun = Date.now();
    expect(await killing.generate(task)).toEqual({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
    expect(graces).toEqual([1234]);
    expect(Date.now() - begun).toBeLessThan(10_000);
    expect(leftovers(task.outputPath)).toEqual([]);
  });

  it('does not start a render whose signal has already aborted', async () => {
    const started: string[] = [];
    const controller = new AbortController();
    controller.abort();
    const watched = createLocalProvider({ onRenderStart: ({ taskId }) => started.push(taskId) });
    expect(await watched.generate(request({ mode: 'text_to_video', signal: controller.signal }))).toMatchObject({ ok: false, error: { message: 'cancelled' } });
    expect(started).toEqual([]);
  });

  it('runs one render at a time by default; a task cancelled while waiting never starts', async () => {
    const events: string[] = [];
    const options: LocalProviderOptions = { threads: 1, onRenderStart: ({ taskId }) => events.push(`start ${taskId}`) };
    const serial = createLocalProvider(options);
    const waiting = new AbortController();
    const [a, b, c] = [request({ mode: 'text_to_video', duration: 1 }), request({ mode: 'text_to_video', duration: 1, signal: waiting.signal }), request({ mode: 'text_to_video', duration: 1 })];
    const track = (task: GenerationRequest) => serial.generate(task).then((result) => {
      events.push(`${result.ok ? 'done' : 'cancelled'} ${task.taskId}`);
      return result;
    });
    const results = [track(a), track(b), track(c)];
    waiting.abort();
    await Promise.all(results);
    expect(events).toEqual([`cancelled ${b.taskId}`, `start ${a.taskId}`, `done ${a.taskId}`, `start ${c.taskId}`, `done ${c.taskId}`]);
  });
});
