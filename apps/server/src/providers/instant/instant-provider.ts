/**
 * The instant provider: for benchmarks and multi-process tests of the
 * pipeline, never a default. It answers every task with the same small MP4
 * (one second, 160×90, made once with ffmpeg when the provider is built),
 * after an optional delay. Selected only by routing a model to `instant` in
 * VIDGEN_PROVIDERS.
 *
 * Each output is a hard link to the prepared file: a directory entry, where a
 * copy created and wrote a file anew (1.1 ms of a thread's CPU a task against
 * 0.06 ms on the benchmark's 2-core machine, about half of all the CPU a task
 * of the SQLite pipeline cost: the stand-in's own work, not the service's;
 * BENCHMARKS.md, twenty-fourth pass). Nothing writes to an output once it is
 * in place, so the outputs may share the one file. Where a link is refused
 * (another file system; past the file system's links to one file, 65,000 on
 * ext4) the output is a copy.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, link, mkdir, rename } from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';
import type { GenerationRequest, GenerationResult, Provider } from '../provider.js';
import { defaultFfmpegPath } from '../local/local-provider.js';

const run = promisify(execFile);

/** Makes the prepared MP4 at `path` unless it is there already. */
async function prepare(path: string, ffmpegPath: string): Promise<void> {
  if (existsSync(path)) return;
  await mkdir(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.partial.mp4`;
  await run(ffmpegPath, ['-y', '-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc=size=160x90:rate=10:duration=1', '-pix_fmt', 'yuv420p', '-c:v', 'libx264', '-preset', 'ultrafast', partial]);
  await rename(partial, path);
}

export function createInstantProvider(options: { preparedPath: string; delayMs: number; ffmpegPath?: string }): Provider {
  const ready = prepare(options.preparedPath, options.ffmpegPath ?? defaultFfmpegPath());
  // Surfaces on the first task if ffmpeg failed; never an unhandled rejection.
  ready.catch(() => {});
  return {
    name: 'instant',
    needsLocalMedia: false,
    async generate(request: GenerationRequest): Promise<GenerationResult> {
      await ready;
      if (options.delayMs > 0 && !request.signal.aborted) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, options.delayMs);
          request.signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
        });
      }
      if (request.signal.aborted) return { ok: false, error: { code: 'internal_error', message: 'stopped' } };
      await link(options.preparedPath, request.outputPath).catch(() => copyFile(options.preparedPath, request.outputPath));
      return { ok: true };
    },
  };
}
