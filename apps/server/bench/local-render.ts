/**
 * How fast the local provider renders: 5 s of video at 480p, 720p and 1080p,
 * generated (text_to_video) and from a picture (first_frame), one after another.
 *
 *   npx tsx bench/local-render.ts            (from apps/server)
 *   taskset -c 0 npx tsx bench/local-render.ts   (to pin ffmpeg to one core as well)
 *
 * Target: a 5 s 720p render in at most 0.5× real time on one core. "One core"
 * here is the provider's `threads: 1` (`-threads 1 -filter_complex_threads 1`:
 * one x264 thread, one filter thread); the CPU column is the child's user+system
 * time from /proc, so CPU ≈ wall confirms a single busy core.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { GenerationMode, Resolution } from '../src/domain/catalog.js';
import { createLocalProvider, defaultFfmpegPath } from '../src/providers/local/local-provider.js';
import type { ReferenceMedia } from '../src/providers/provider.js';

const DURATION = 5;
const TARGET_RATIO_720P = 0.5;
const RESOLUTIONS: Resolution[] = ['480p', '720p', '1080p'];
const MODES: GenerationMode[] = ['text_to_video', 'first_frame'];

/** CPU seconds used by this process's finished children (Linux; undefined elsewhere). */
function childrenCpuSeconds(): number | undefined {
  try {
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ');
    const ticksPerSecond = 100; // USER_HZ, 100 on every mainstream Linux
    return (Number(fields[13]) + Number(fields[14])) / ticksPerSecond; // cutime, cstime
  } catch {
    return undefined;
  }
}

const dir = mkdtempSync(join(tmpdir(), 'vidgen-bench-'));
try {
  const picture = join(dir, 'picture.png');
  await promisify(execFile)(defaultFfmpegPath(), ['-loglevel', 'error', '-f', 'lavfi', '-i', 'testsrc2=s=1920x1080', '-frames:v', '1', picture]);
  const reference: ReferenceMedia = { url: 'https://cdn.example.com/picture.png', kind: 'image', path: picture };
  const provider = createLocalProvider({ threads: 1, preset: 'veryfast' });

  console.log(`local provider: ${DURATION} s renders, threads 1, preset veryfast, ${availableParallelism()} CPUs usable (${cpus()[0]?.model ?? 'unknown'})`);
  const rows: string[][] = [['mode', 'resolution', 'wall s', '× real time', 'CPU s', 'MiB']];
  const ratios720p: number[] = [];
  for (const mode of MODES) {
    for (const resolution of RESOLUTIONS) {
      const outputPath = join(dir, `${mode}-${resolution}`, 'output.mp4');
      const cpuBefore = childrenCpuSeconds();
      const started = performance.now();
      const result = await provider.generate({
        taskId: `bench-${mode}-${resolution}`,
        model: 'vidgen-2.0',
        prompt: 'A lighthouse on a cliff at dusk, waves below, gulls circling',
        duration: DURATION,
        aspectRatio: '16:9',
        resolution,
        mode,
        references: mode === 'first_frame' ? [reference] : [],
        outputPath,
        signal: new AbortController().signal,
      });
      const wall = (performance.now() - started) / 1000;
      if (!result.ok) throw new Error(`${mode} ${resolution}: ${result.error.message}`);
      const cpuAfter = childrenCpuSeconds();
      const cpu = cpuBefore === undefined || cpuAfter === undefined ? '–' : (cpuAfter - cpuBefore).toFixed(2);
      if (resolution === '720p') ratios720p.push(wall / DURATION);
      rows.push([mode, resolution, wall.toFixed(2), (wall / DURATION).toFixed(2), cpu, (statSync(outputPath).size / 2 ** 20).toFixed(1)]);
    }
  }

  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  for (const row of rows) console.log(row.map((cell, column) => cell.padEnd(widths[column]!)).join('  '));
  const worst = Math.max(...ratios720p);
  console.log(`target: 720p ≤ ${TARGET_RATIO_720P}× real time on one core — worst 720p ${worst.toFixed(2)}× → ${worst <= TARGET_RATIO_720P ? 'met' : 'MISSED'}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
