/** The instant provider (benchmarks and multi-process tests): one prepared MP4, linked (or copied) per task. */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createInstantProvider } from '../src/providers/instant/instant-provider.js';
import type { GenerationRequest } from '../src/providers/provider.js';

const ffprobe = (createRequire(import.meta.url)('@ffprobe-installer/ffprobe') as { path: string }).path;
const dir = mkdtempSync(join(tmpdir(), 'vidgen-instant-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const request = (name: string, signal = new AbortController().signal): GenerationRequest => ({
  taskId: name,
  model: 'vidgen-2.0-fast',
  prompt: 'x',
  duration: 4,
  aspectRatio: '16:9',
  resolution: '480p',
  mode: 'text_to_video',
  references: [],
  outputPath: join(dir, `${name}.mp4`),
  signal,
});

describe('the instant provider', () => {
  it('answers every task with the same prepared, playable MP4', async () => {
    const provider = createInstantProvider({ preparedPath: join(dir, 'prepared', 'instant.mp4'), delayMs: 0 });
    expect(await provider.generate(request('a'))).toEqual({ ok: true });
    expect(await provider.generate(request('b'))).toEqual({ ok: true });
    expect(statSync(join(dir, 'a.mp4')).size).toBe(statSync(join(dir, 'prepared', 'instant.mp4')).size);
    const { stdout } = await promisify(execFile)(ffprobe, ['-v', 'error', '-show_streams', '-of', 'json', join(dir, 'b.mp4')]);
    expect(JSON.parse(stdout).streams[0]).toMatchObject({ codec_type: 'video', codec_name: 'h264', width: 160, height: 90 });
  });

  it('links each output to the prepared file, and copies it where a link is refused', async () => {
    const preparedPath = join(dir, 'prepared', 'instant.mp4');
    const provider = createInstantProvider({ preparedPath, delayMs: 0 });
    expect(await provider.generate(request('linked'))).toEqual({ ok: true });
    expect(statSync(join(dir, 'linked.mp4')).ino).toBe(statSync(preparedPath).ino);
    // A name already there (a link would fail with EEXIST): written over with a copy.
    writeFileSync(join(dir, 'taken.mp4'), 'not a video');
    expect(await provider.generate(request('taken'))).toEqual({ ok: true });
    expect(readFileSync(join(dir, 'taken.mp4'))).toEqual(readFileSync(preparedPath));
    expect(statSync(join(dir, 'taken.mp4')).ino).not.toBe(statSync(preparedPath).ino);
  });

  it.skipIf(!existsSync('/dev/shm'))('copies the prepared file to another file system, where no link can be made', async () => {
    const preparedPath = join(dir, 'prepared', 'instant.mp4');
    const provider = createInstantProvider({ preparedPath, delayMs: 0 });
    const elsewhere = mkdtempSync('/dev/shm/vidgen-instant-');
    try {
      expect(await provider.generate({ ...request('x'), outputPath: join(elsewhere, 'x.mp4') })).toEqual({ ok: true });
      expect(readFileSync(join(elsewhere, 'x.mp4'))).toEqual(readFileSync(preparedPath));
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('stops waiting out its delay when the task is cancelled, and writes nothing', async () => {
    const provider = createInstantProvider({ preparedPath: join(dir, 'prepared', 'instant.mp4'), delayMs: 600_000 });
    const controller = new AbortController();
    const result = provider.generate(request('cancelled', controller.signal));
    controller.abort('cancelled');
    expect((await result).ok).toBe(false);
    expect(() => statSync(join(dir, 'cancelled.mp4'))).toThrow();
  });

  it('is never a default: only a model routed to it in VIDGEN_PROVIDERS uses it', () => {
    expect(Object.values(loadConfig({}).providers)).toEqual(['local', 'local', 'local']);
    expect(loadConfig({ VIDGEN_PROVIDERS: '{"vidgen-2.0":"instant"}' }).providers['vidgen-2.0']).toBe('instant');
  });
});
