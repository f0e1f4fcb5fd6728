/**
 * Runs a child process (no shell) to its end, or stops it when a signal aborts:
 * SIGTERM first so ffmpeg can exit cleanly, SIGKILL if it is still there after
 * the grace period.
 */
import { spawn } from 'node:child_process';
import type { Clock } from '../../interfaces.js';

export type ProcessOutcome =
  | { kind: 'exited'; code: number | null; signal: NodeJS.Signals | null; stderrTail: string }
  | { kind: 'cancelled' }
  | { kind: 'failed_to_start'; reason: string };

export interface KillableProcessOptions {
  cwd: string;
  signal: AbortSignal;
  killGraceMs: number;
  clock: Pick<Clock, 'setTimeout'>;
  /** Called once the process exists, with its pid. */
  onSpawn?: (pid: number | undefined) => void;
}

/** Enough stderr for the last few error lines; ffmpeg at `-loglevel error` writes little. */
const STDERR_KEPT_CHARACTERS = 16_384;

export function runKillableProcess(command: string, args: readonly string[], options: KillableProcessOptions): Promise<ProcessOutcome> {
  const { signal } = options;
  if (signal.aborted) return Promise.resolve({ kind: 'cancelled' });

  return new Promise((resolve) => {
    // A process group of its own: a signal to the server's group (Ctrl-C, a supervisor stopping the group) must not
    // kill a render; only the server stops it, when it decides (cancel, deadline, the shutdown grace over).
    const child = spawn(command, args, { cwd: options.cwd, stdio: ['ignore', 'ignore', 'pipe'], shell: false, detached: true });
    let stderr = '';
    let settled = false;
    let cancelKillTimer = () => {};

    const stop = () => {
      child.kill('SIGTERM');
      cancelKillTimer = options.clock.setTimeout(() => child.kill('SIGKILL'), options.killGraceMs);
    };
    const settle = (outcome: ProcessOutcome) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', stop);
      cancelKillTimer();
      resolve(outcome);
    };

    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_KEPT_CHARACTERS);
    });
    child.once('spawn', () => options.onSpawn?.(child.pid));
    // Emitted when the binary cannot be started; 'close' may follow, settle() keeps the first.
    child.once('error', (error: NodeJS.ErrnoException) => settle({ kind: 'failed_to_start', reason: error.code ?? error.message }));
    child.once('close', (code, exitSignal) =>
      settle(signal.aborted ? { kind: 'cancelled' } : { kind: 'exited', code, signal: exitSignal, stderrTail: stderr }),
    );
    signal.addEventListener('abort', stop, { once: true });
  });
}
