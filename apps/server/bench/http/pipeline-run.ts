/**
 * The pipeline part of `pnpm bench`: bench/pipeline.ts in its own process
 * group (it starts server processes of its own, which go with it when it is
 * stopped), its output passed through, its table read back.
 */
import { spawn } from 'node:child_process';
import { SERVER_ROOT, track } from './children.js';

export interface PipelineFigures {
  store: string;
  /** tasks per second, first submit → last webhook received */
  tasksPerSecond: number;
  submitsPerSecond: number;
  /** submit sent → webhook received, paced (not saturated) */
  p50Ms: number;
  p99Ms: number;
  /** each round's tasks per second, as printed (`--rounds` > 1) */
  rounds?: string;
  /** the column names as pipeline.ts printed them, e.g. `p99 latency @20/s` */
  labels: string[];
}

/** The rows of the console.table pipeline.ts prints: `│ 0 │ 'SQLite' │ '198' │ … │`. */
export function parsePipelineTable(output: string): PipelineFigures[] {
  const cells = output
    .split('\n')
    .filter((line) => line.startsWith('│'))
    .map((line) =>
      line
        .split('│')
        .slice(1, -1)
        .map((cell) => cell.trim().replace(/^'(.*)'$/, '$1')),
    );
  const [head, ...rows] = cells;
  if (!head) return [];
  const column = (pattern: RegExp) => head.findIndex((name) => pattern.test(name));
  const at = { store: column(/^store$/), tasks: column(/^tasks\/s/), submits: column(/^submits\/s/), p50: column(/^p50/), p99: column(/^p99/) };
  if (Object.values(at).some((index) => index < 0)) return [];
  const rounds = column(/^tasks\/s by round$/);
  return rows.map((row) => ({
    store: row[at.store]!,
    ...(rounds >= 0 ? { rounds: row[rounds]! } : {}),
    tasksPerSecond: parseFloat(row[at.tasks]!),
    submitsPerSecond: parseFloat(row[at.submits]!),
    p50Ms: parseFloat(row[at.p50]!),
    p99Ms: parseFloat(row[at.p99]!),
    labels: head,
  }));
}

/** Runs bench/pipeline.ts with `args`; resolves with its rows (SQLite, and PostgreSQL when reachable). */
export function runPipelineBench(args: string[], cpuProfileDir: string | undefined): Promise<{ rows: PipelineFigures[]; output: string }> {
  const child = track(
    spawn(process.execPath, ['--import', 'tsx', 'bench/pipeline.ts', ...args], {
      cwd: SERVER_ROOT,
      env: { ...process.env, ...(cpuProfileDir ? { VIDGEN_BENCH_CPU_PROF: cpuProfileDir } : {}) },
      stdio: ['ignore', 'pipe', 'inherit'],
      detached: true,
    }),
    { group: true },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    process.stdout.write(chunk);
  });
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('exit', (code) => {
      if (code !== 0) return fail(new Error(`bench/pipeline.ts exited ${code}`));
      done({ rows: parsePipelineTable(output), output });
    });
  });
}
