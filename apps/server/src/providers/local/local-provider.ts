/**
 * The `local` provider (D14), the offline default: renders a real H.264 MP4 with
 * the ffmpeg of `@ffmpeg-installer/ffmpeg` from the references the service
 * fetched, with the prompt drawn in DejaVu Sans Bold from `dejavu-fonts-ttf`.
 * What is drawn is decided in `render-plan.ts`; this file runs it: a work
 * directory, a concurrency limit, cancellation, and an output file that appears
 * only when complete.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { systemClock, type Clock } from '../../interfaces.js';
import type { GenerationRequest, GenerationResult, Provider, ReferenceMedia } from '../provider.js';
import { runKillableProcess, type ProcessOutcome } from './killable-process.js';
import { buildRenderPlan, CAPTION_FILE, ffmpegArguments, FONT_FILE, type RenderPlan, type X264Preset } from './render-plan.js';
import { createSemaphore } from './semaphore.js';

export interface LocalProviderOptions {
  /** Default: the binary of `@ffmpeg-installer/ffmpeg`. */
  ffmpegPath?: string;
  /** Default: DejaVuSans-Bold.ttf of `dejavu-fonts-ttf`. */
  fontFile?: string;
  /** Renders at once; more wait their turn. Default 1. */
  concurrency?: number;
  /** Threads for x264 and the filter graph of each render. Default 2. */
  threads?: number;
  /** x264 speed/size trade-off. Default `veryfast`. */
  preset?: X264Preset;
  /** How long a cancelled ffmpeg has after SIGTERM before SIGKILL. Default 2000 ms. */
  killGraceMs?: number;
  clock?: Pick<Clock, 'setTimeout'>;
  /** Told when a render's ffmpeg has started (logging, tests). */
  onRenderStart?: (event: { taskId: string; pid: number | undefined }) => void;
}

const require = createRequire(import.meta.url);

export const defaultFfmpegPath = (): string => (require('@ffmpeg-installer/ffmpeg') as { path: string }).path;
export const defaultFontFile = (): string => join(dirname(require.resolve('dejavu-fonts-ttf/package.json')), 'ttf', 'DejaVuSans-Bold.ttf');

const cancelled = (): GenerationResult => ({ ok: false, error: { code: 'internal_error', message: 'cancelled' } });
const internalError = (message: string): GenerationResult => ({ ok: false, error: { code: 'internal_error', message } });

export function createLocalProvider(options: LocalProviderOptions = {}): Provider {
  const settings = {
    ffmpegPath: options.ffmpegPath ?? defaultFfmpegPath(),
    fontFile: options.fontFile ?? defaultFontFile(),
    threads: options.threads ?? 2,
    preset: options.preset ?? 'veryfast',
    killGraceMs: options.killGraceMs ?? 2000,
    clock: options.clock ?? systemClock,
  };
  const slots = createSemaphore(options.concurrency ?? 1);

  async function render(plan: RenderPlan, request: GenerationRequest, sources: readonly string[]): Promise<GenerationResult> {
    const outputDir = dirname(request.outputPath);
    await mkdir(outputDir, { recursive: true });
    // Same directory as the output, so the final rename is atomic and never crosses devices.
    const partialPath = join(outputDir, `.${basename(request.outputPath)}.${randomUUID()}.partial`);
    const workDir = await mkdtemp(join(outputDir, '.local-render-'));
    try {
      await writeFile(join(workDir, CAPTION_FILE), plan.caption.join('\n'), 'utf8');
      await symlink(resolve(settings.fontFile), join(workDir, FONT_FILE));
      const inputFiles = await Promise.all(
        sources.map(async (source, position) => {
          const name = inputFileName(position, source, request.references[plan.inputs[position]!.reference]!);
          await symlink(resolve(source), join(workDir, name));
          return name;
        }),
      );
      const outcome = await runKillableProcess(
        settings.ffmpegPath,
        ffmpegArguments(plan, { inputFiles, output: partialPath, threads: settings.threads, preset: settings.preset }),
        {
          cwd: workDir,
          signal: request.signal,
          killGraceMs: settings.killGraceMs,
          clock: settings.clock,
          onSpawn: (pid) => options.onRenderStart?.({ taskId: request.taskId, pid }),
        },
      );
      // A cancel that lands just after ffmpeg finished still wins: the task is cancelled.
      if (outcome.kind === 'cancelled' || request.signal.aborted) return cancelled();
      if (outcome.kind === 'failed_to_start') return internalError(`could not start ffmpeg (${outcome.reason})`);
      if (outcome.code !== 0) return { ok: false, error: { code: 'provider_error', message: describeFailure(outcome, [workDir, outputDir, plan.filterGraph]) } };
      await rename(partialPath, request.outputPath);
      return { ok: true };
    } finally {
      await rm(partialPath, { force: true });
      await rm(workDir, { recursive: true, force: true });
    }
  }

  return {
    name: 'local',
    needsLocalMedia: true,
    async generate(request) {
      const planned = buildRenderPlan({ ...request, referenceKinds: request.references.map((r) => r.kind) });
      if (!planned.ok) return internalError(planned.message);
      const sources = planned.plan.inputs.map((input) => request.references[input.reference]?.path);
      const missing = sources.findIndex((path) => path === undefined);
      if (missing >= 0) return internalError(`reference ${planned.plan.inputs[missing]!.reference + 1} was not fetched to a local file`);

      const release = await slots.acquire(request.signal);
      if (!release) return cancelled();
      try {
        return await render(planned.plan, request, sources as string[]);
      } catch (error) {
        // The work directory or the output could not be written (disk full,
        // permissions): the task fails. Anything without a system code is a bug.
        const code = (error as NodeJS.ErrnoException).code;
        if (typeof code !== 'string') throw error;
        return internalError(`local render failed (${code})`);
      } finally {
        release();
      }
    },
  };
}

/**
 * `ref-0.png`: a plain name keeps paths out of ffmpeg's messages and out of its
 * `%d` pattern parsing. The extension helps ffmpeg pick a demuxer (it also probes
 * the content); the URL's comes first because it decided the kind (D5), and the
 * service stores fetched files without one.
 */
function inputFileName(position: number, source: string, reference: ReferenceMedia): string {
  const fromUrl = (() => {
    try {
      return extname(new URL(reference.url).pathname);
    } catch {
      return '';
    }
  })();
  const extension = [fromUrl, extname(source)].map((e) => e.toLowerCase()).find((e) => /^\.[a-z0-9]{1,8}$/.test(e)) ?? '';
  return `ref-${position}${extension}`;
}

/**
 * The last lines ffmpeg printed, without this machine's directories and without
 * the filter graph ffmpeg quotes whole (`Stream specifier ':v' in filtergraph
 * description … matches no streams`).
 */
function describeFailure(outcome: Extract<ProcessOutcome, { kind: 'exited' }>, omitted: readonly string[]): string {
  const how = outcome.code === null ? `was killed by ${outcome.signal}` : `exited with code ${outcome.code}`;
  const lines = outcome.stderrTail
    .split(/\r?\n/)
    // `[png @ 0x55d…]` → `[png]`: the address differs per run and means nothing to a caller.
    .map((line) => line.replace(/\[(\w+) @ 0x[0-9a-f]+\]/g, '[$1]').trim())
    .filter((line, index, all) => line !== '' && line !== all[index - 1]);
  let tail = lines.slice(-5).join('; ');
  for (const text of omitted) tail = tail.split(`${text}/`).join('').split(text).join('…');
  if (tail.length > 600) tail = `…${tail.slice(-600)}`;
  return tail ? `ffmpeg ${how}: ${tail}` : `ffmpeg ${how}`;
}
