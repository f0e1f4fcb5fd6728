/**
 * The real vidgen server (apps/server, from its sources) for the browser tests, serving the console's build
 * at /console: one process per call, on a fresh temporary data dir, on a loopback port the OS
 * chooses, with the development account (its key read from the server's output, never logged)
 * and the offline `local` provider (ffmpeg) rendering every model.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
// The server tests' own helper: a fresh database on the local PostgreSQL, dropped after.
import { createTestDatabase } from '../../../../server/test/support/postgres';

const serverDir = resolve(import.meta.dirname, '../../../../server');
/**
 * The server's sources through tsx (as `pnpm start` runs them), not its dist/: the server's own test
 * run rebuilds dist/ (deleting it first) while turbo runs this package's tests beside it.
 */
const serverMain = resolve(serverDir, 'src/main.ts');
const TSX = ['--import', 'tsx'];
const consoleIndex = resolve(import.meta.dirname, '../../../dist/index.html');

const LISTENING = /^vidgen: listening on (http:\/\/127\.0\.0\.1:\d+)$/m;
/** The bootstrap prints the key alone on an indented line (apps/server/src/main.ts). */
const DEV_KEY = /^\s+(vg_(?:test|live)_[0-9A-Za-z]+)\s*$/m;

export interface RunningServer {
  /** The service's origin, e.g. http://127.0.0.1:41234. */
  url: string;
  /** `${url}/console/`. */
  consoleUrl: string;
  /** The development account's key (every scope, 100,000 credits). Never print it. */
  devKey: string;
  /** A request to the public API (`/api/open/v1${path}`) with a key (the development key by default). */
  api(path: string, init?: RequestInit, key?: string): Promise<Response>;
  /**
   * Starts a worker process (`--role worker`) on this server's data dir, for a server started
   * without one: a test can hold a task `queued` as long as it likes, then let it run.
   */
  startWorker(): Promise<void>;
  /** SIGTERM to the worker (if started) and the server, their exits awaited; the data dir removed. */
  stop(): Promise<void>;
}

export interface ServerOptions {
  /**
   * false: the process runs no worker (VIDGEN_WORKER=false), so a submitted task stays `queued`
   * until it is cancelled; deterministic, unlike a render that merely happens to be slow.
   */
  worker?: boolean;
  /**
   * 'postgres': a fresh database on the local PostgreSQL, and the process runs `--role api` when
   * `worker` is false, so that `startWorker()` can add a `--role worker` process beside it (the
   * split roles need PostgreSQL; its LISTEN/NOTIFY tells the api process of the worker's changes).
   */
  database?: 'sqlite' | 'postgres';
}

/** What the output may say, without a key in it (an error message quotes the output). */
const redact = (text: string) => text.replace(/vg_(?:test|live)_[0-9A-Za-z]+/g, 'vg_…(redacted)');

function missingBuilds(): string[] {
  const missing: string[] = [];
  if (!existsSync(consoleIndex)) missing.push(`${consoleIndex} (build it: cd apps/console && npx vite build)`);
  return missing;
}

/** The environment of the child: the parent's, without any VIDGEN_* of the caller's shell, and this harness's settings. */
function serverEnv(dataDir: string, options: ServerOptions): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VIDGEN_')));
  return {
    ...inherited,
    NODE_ENV: 'test',
    VIDGEN_DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    VIDGEN_LOG_LEVEL: 'warn',
    VIDGEN_DEV_BOOTSTRAP: 'true',
    // Every model renders offline with ffmpeg (the default, said explicitly: no upstream, no network).
    VIDGEN_PROVIDERS: JSON.stringify({ 'vidgen-2.0': 'local', 'vidgen-2.0-fast': 'local', 'vidgen-1.5-pro': 'local' }),
    VIDGEN_WORKER: options.worker === false ? 'false' : 'true',
    VIDGEN_LOCAL_CONCURRENCY: '1',
    // Limits stay on, well above a test's pace.
    VIDGEN_RATE_LIMIT_SUBMITS: '1000',
    VIDGEN_RATE_LIMIT_READS: '100000',
    VIDGEN_MAX_ACTIVE_TASKS: '1000',
    // A revoked key is refused from the next request on.
    VIDGEN_KEY_CACHE_SECONDS: '0',
    // stop() need not wait the production grace for a render the browser no longer watches.
    VIDGEN_SHUTDOWN_GRACE_SECONDS: '2',
  };
}

/** Resolves once the server listens, with its URL and the development key from its stdout. */
function started(child: ChildProcess): Promise<{ url: string; devKey: string }> {
  let stdout = '';
  let stderr = '';
  return new Promise((done, fail) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const listening = LISTENING.exec(stdout);
      if (!listening) return;
      const devKey = DEV_KEY.exec(stdout)?.[1];
      if (devKey) done({ url: listening[1]!, devKey });
      else fail(new Error(`the server listens but printed no development key (is VIDGEN_DEV_BOOTSTRAP off, or the data dir not empty?):\n${redact(stdout)}`));
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', (error) => fail(new Error(`the server could not be started: ${error.message}`)));
    child.once('exit', (code, signal) =>
      fail(new Error(`the server exited (${signal ?? code}) before listening:\n${redact(stdout)}\n${redact(stderr)}`)),
    );
  });
}

const WORKER_STARTED = /^vidgen: worker started$/m;

/** Resolves once a worker process says it has started. */
function workerStarted(child: ChildProcess): Promise<void> {
  let stdout = '';
  let stderr = '';
  return new Promise((done, fail) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (WORKER_STARTED.test(stdout)) done();
    });
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', (error) => fail(new Error(`the worker could not be started: ${error.message}`)));
    child.once('exit', (code, signal) => fail(new Error(`the worker exited (${signal ?? code}) before starting:\n${redact(stdout)}\n${redact(stderr)}`)));
  });
}

/** SIGTERM, and the exit awaited (SIGKILL after 30 s: a process that hangs past its drain is a failure, not a leftover). */
async function terminate(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  }
  running.delete(child);
}

const running = new Set<ChildProcess>();
// A test run that dies without its afterAll leaves no server behind.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

export async function startServer(options: ServerOptions = {}): Promise<RunningServer> {
  const database = options.database === 'postgres' ? await createTestDatabase() : undefined;
  const databaseEnv = database ? { VIDGEN_DATABASE_URL: database.url } : {};
  const role = database && options.worker === false ? ['--role', 'api'] : [];
  const missing = missingBuilds();
  if (missing.length) throw new Error(`the browser tests need the console's build; missing:\n  ${missing.join('\n  ')}`);

  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-console-e2e-'));
  // node itself (no wrapper), so SIGTERM reaches the server.
  const child = spawn(process.execPath, [...TSX, serverMain, ...role], { cwd: serverDir, env: { ...serverEnv(dataDir, options), ...databaseEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));

  let url: string;
  let devKey: string;
  try {
    ({ url, devKey } = await started(child));
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    running.delete(child);
    rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
    throw error;
  }
  // stdout holds the key: it is drained, never echoed. Warnings and errors go to the test's stderr.
  child.stdout!.resume();
  child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(redact(chunk.toString())));

  let stopping: Promise<void> | undefined;
  let worker: { child: ChildProcess; exited: Promise<void> } | undefined;
  return {
    url,
    consoleUrl: `${url}/console/`,
    devKey,
    api: (path, init = {}, key = devKey) =>
      fetch(`${url}/api/open/v1${path}`, {
        ...init,
        headers: { Authorization: `Bearer ${key}`, ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...init.headers },
      }),
    async startWorker() {
      if (worker) throw new Error('this server already has a worker process');
      if (!database) throw new Error('a worker process beside the server needs PostgreSQL: startServer({ database: "postgres", worker: false })');
      // Local storage in the shared data dir: the api process serves the files, at the URL the worker signs.
      const env = { ...serverEnv(dataDir, { worker: true }), ...databaseEnv, VIDGEN_DEV_BOOTSTRAP: 'false', VIDGEN_PUBLIC_BASE_URL: url };
      const child = spawn(process.execPath, [...TSX, serverMain, '--role', 'worker'], { cwd: serverDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      running.add(child);
      worker = { child, exited: new Promise<void>((done) => child.once('exit', () => done())) };
      await workerStarted(child);
      child.stdout!.resume();
      child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(redact(chunk.toString())));
    },
    stop() {
      stopping ??= (async () => {
        if (worker) await terminate(worker.child, worker.exited);
        await terminate(child, exited);
        rmSync(dataDir, { recursive: true, force: true });
        await database?.drop();
      })();
      return stopping;
    },
  };
}
