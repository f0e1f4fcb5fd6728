/**
 * The child processes of the HTTP benchmark (the server, the ceiling, wrk, the
 * pipeline benchmark): started, watched for `listening on`, measured (RSS from
 * /proc) and always stopped, also when the benchmark fails or is interrupted
 * (a graceful stop is test/support's stopServerProcess).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';

/** apps/server: where `src/main.ts` and the CLI are started from. */
export const SERVER_ROOT = resolve(import.meta.dirname, '../..');

const running = new Set<ChildProcess>();
const detached = new WeakSet<ChildProcess>();

/** Kills what is still running; a detached child with its whole process group (its own children). */
function killAll(signal: NodeJS.Signals): void {
  for (const child of running) {
    if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) continue;
    try {
      if (detached.has(child)) process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      // Already gone.
    }
  }
}

const directories = new Set<string>();

/** Removes `dir` when the process exits, however it exits. */
export function removeOnExit(dir: string): string {
  directories.add(dir);
  return dir;
}

process.on('exit', () => {
  killAll('SIGKILL');
  for (const dir of directories) rmSync(dir, { recursive: true, force: true });
});
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.error(`\nbench: ${signal}, stopping the child processes`);
    killAll('SIGTERM');
    process.exit(130);
  });
}

export function track(child: ChildProcess, options: { group?: boolean } = {}): ChildProcess {
  running.add(child);
  if (options.group) detached.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

export interface NodeService {
  child: ChildProcess;
  pid: number;
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Everything it printed so far. */
  output(): string;
}

/**
 * Starts `node [nodeArgs] [--import tsx] <script> [args]` from apps/server (node
 * itself, not a tsx wrapper, so that the pid is the server's; tsx's loader for a `.ts` script only) and resolves
 * once it prints `listening on http://…`; rejects if it exits first.
 */
export function startNodeService(
  script: string,
  args: string[],
  env: Record<string, string>,
  nodeArgs: string[] = [],
  options: { stdoutFile?: string } = {},
): Promise<NodeService> {
  return startNodeProcess(script, args, env, nodeArgs, (output) => /listening on (http:\/\/\S+)/.exec(output)?.[1], 'listening', options);
}

/**
 * `node [nodeArgs] [--import tsx] <script> [args]` from apps/server (tsx for a `.ts` script); resolves once `ready` finds in its output
 * (stdout and stderr) the URL it serves ('' for none), rejects if it exits first, naming `awaited`.
 * `stdoutFile`: its standard output appended to that file, as an operator's `>> vidgen.log` would (what it appends read
 * every 20 ms until it is ready; `output()` then gives the file's last MiB), not to a pipe this process reads: the
 * server's log lines then cost it what they cost in service, a write every few milliseconds to a file
 * (log-destination.ts), and none of this process's CPU.
 */
export function startNodeProcess(
  script: string,
  args: string[],
  env: Record<string, string>,
  nodeArgs: string[],
  ready: (output: string) => string | undefined,
  awaited: string,
  options: { stdoutFile?: string } = {},
): Promise<NodeService> {
  const { stdoutFile } = options;
  const stdoutFd = stdoutFile === undefined ? undefined : openSync(stdoutFile, 'a');
  // What an earlier process wrote to the file is not this one's (its `listening on` least of all).
  const from = stdoutFd === undefined ? 0 : fstatSync(stdoutFd).size;
  const child = track(
    // TypeScript through tsx's loader; JavaScript (a build: dist/main.js, bench/http/compiled.ts's) as node runs it.
    spawn(process.execPath, [...nodeArgs, ...(script.endsWith('.ts') ? ['--import', 'tsx'] : []), script, ...args], {
      cwd: SERVER_ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', stdoutFd ?? 'pipe', 'pipe'],
    }),
  );
  if (stdoutFd !== undefined) closeSync(stdoutFd);
  let piped = '';
  // The file's last MiB at most: a server logging a line a request writes gigabytes in a full run.
  const output = () => {
    if (stdoutFile === undefined) return piped;
    const fd = openSync(stdoutFile, 'r');
    try {
      const size = fstatSync(fd).size;
      const start = Math.max(from, size - 1024 * 1024);
      const tail = Buffer.alloc(size - start);
      readSync(fd, tail, 0, tail.length, start);
      return tail.toString() + piped;
    } finally {
      closeSync(fd);
    }
  };
  return new Promise((done, fail) => {
    let poll: NodeJS.Timeout | undefined;
    let started = false;
    const check = () => {
      if (started) return;
      const url = ready(output());
      if (url === undefined) return;
      started = true;
      clearInterval(poll);
      done({ child, pid: child.pid!, url, output });
    };
    const collect = (chunk: Buffer) => {
      piped += chunk.toString();
      check();
    };
    child.stdout?.on('data', collect);
    child.stderr!.on('data', collect);
    if (stdoutFile !== undefined) poll = setInterval(check, 20);
    child.once('exit', (code, signal) => {
      clearInterval(poll);
      if (!started) fail(new Error(`${script} ${args.join(' ')} exited ${code ?? signal} before ${awaited}:\n${output()}`));
    });
  });
}

/** Every model on the instant provider (a prepared MP4 at once): the pipeline without a renderer. */
export const INSTANT_PROVIDERS = '{"vidgen-2.0":"instant","vidgen-2.0-fast":"instant","vidgen-1.5-pro":"instant"}';

/** A store's environment for a server with a port from the OS, every model on the instant provider, no limits, and a worker or not. */
export const instantServerEnv = (env: Record<string, string>, worker: boolean): Record<string, string> => ({
  ...env,
  NODE_ENV: 'production',
  VIDGEN_DEV_BOOTSTRAP: 'false',
  PORT: '0',
  HOST: '127.0.0.1',
  VIDGEN_PROVIDERS: INSTANT_PROVIDERS,
  VIDGEN_RATE_LIMIT_SUBMITS: '0',
  VIDGEN_RATE_LIMIT_READS: '0',
  VIDGEN_MAX_ACTIVE_TASKS: '0',
  VIDGEN_WORKER: String(worker),
});

/**
 * The server `script` on a store's environment (`instantServerEnv`).
 * `logFile`: its log lines (at the level `env` gives) appended there; without it, standard output is a pipe.
 */
export function startInstantServer(
  script: string,
  env: Record<string, string>,
  options: { worker: boolean; nodeArgs?: string[]; logFile?: string },
): Promise<NodeService> {
  return startNodeService(script, ['--role', 'all'], instantServerEnv(env, options.worker), options.nodeArgs, { stdoutFile: options.logFile });
}

/**
 * What a live process has had read for it from storage so far, in MB (`read_bytes` of /proc/<pid>/io: the reads that
 * went to the disk, not those the kernel's page cache answered).
 */
export function storageReadOf(pid: number): number {
  const io = readFileSync(`/proc/${pid}/io`, 'utf8');
  return Number(/^read_bytes:\s+(\d+)/m.exec(io)?.[1] ?? NaN) / 1024 / 1024;
}

/**
 * Resident set size of a live process in MB (VmRSS), its peak (VmHWM), and the part of it that is the process's own
 * memory (RssAnon: not file pages it maps, such as a store read through a memory map, which the kernel may take back).
 */
export function memoryOf(pid: number): { rssMb: number; peakMb: number; anonMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024, anonMb: kb('RssAnon') / 1024 };
}

const execFileAsync = promisify(execFile);

/** `vidgen <args> --json` with the store in `env`, the operators' way; its JSON answer. */
export async function runCli<T>(env: Record<string, string>, args: string[]): Promise<T> {
  const { stdout } = await execFileAsync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args, '--json'], {
    cwd: SERVER_ROOT,
    env: { ...process.env, ...env },
  });
  return JSON.parse(stdout) as T;
}

