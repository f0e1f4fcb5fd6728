/**
 * The service as operators run it in production: the built JavaScript (`pnpm build`), a production
 * folder with runtime dependencies only (`pnpm deploy --prod`) copied out of the repository and run
 * with `node`, signals to the process or its whole process group, the server as PID 1 in a PID
 * namespace, and `pnpm start` for development forwarding signals the same way.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const exec = promisify(execFile);
const SERVER = resolve(import.meta.dirname, '..');
const REPO = resolve(SERVER, '../..');
const dir = mkdtempSync(join(tmpdir(), 'vidgen-production-'));
const children: ChildProcess[] = [];
/** A production folder made once for the file: `pnpm deploy --prod`, copied elsewhere. */
let folder: string;

beforeAll(async () => {
  // dist/ was built by the tests' global setup (test/global-setup.ts).
  const deployed = join(dir, 'deployed');
  await exec('corepack', ['pnpm', '--filter', '@vidgen/server', 'deploy', '--prod', '--legacy', deployed], { cwd: REPO, env: { ...process.env, COREPACK_ENABLE_DOWNLOAD_PROMPT: '0' } });
  folder = join(dir, 'app');
  cpSync(deployed, folder, { recursive: true, verbatimSymlinks: true });
  rmSync(deployed, { recursive: true, force: true });
}, 120_000);

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  baseUrl: string;
  output: () => string;
  exited: Promise<number | null>;
}

/** Starts a command (in a process group of its own) and resolves once the server in it listens. */
function start(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): Promise<Started> {
  const child = spawn(command, args, { cwd: options.cwd, env: { ...process.env, ...options.env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let output = '';
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  return new Promise((done, fail) => {
    const read = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) done({ child, baseUrl: match[1]!, output: () => output, exited });
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    void exited.then((code) => fail(new Error(`exited ${code} before listening: ${output}`)));
  });
}

const serverEnv = (dataDir: string): NodeJS.ProcessEnv => ({
  VIDGEN_DATA_DIR: dataDir,
  PORT: '0',
  HOST: '127.0.0.1',
  VIDGEN_LOG_LEVEL: 'info',
  NODE_ENV: '',
  VIDGEN_DATABASE_URL: '',
});

function api(server: { baseUrl: string }, key: string) {
  return async (method: string, path: string, body?: unknown): Promise<any> => {
    const res = await fetch(`${server.baseUrl}/api/open/v1/video/generations${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return res.json();
  };
}

async function reaches(call: ReturnType<typeof api>, id: string, wanted: string[]): Promise<any> {
  for (let i = 0; i < 30; i++) {
    const task = await call('GET', `/${id}?wait=10`);
    if (wanted.includes(task.status)) return task;
  }
  throw new Error(`${id} never reached ${wanted.join(' or ')}`);
}

const devKey = (output: string) => /(vg_test_[0-9A-Za-z]{38})/.exec(output)![1]!;
/** A local render of a few seconds on this machine. */
const RENDER = { model: 'vidgen-2.0-fast', prompt: 'a lighthouse at dusk, production test', duration: 15, resolution: '1080p' };

/** Resolves once the server has an ffmpeg child: a render is under way. */
async function rendering(serverPid: number): Promise<number> {
  for (let i = 0; i < 3000; i++) {
    const ffmpeg = childrenOf(serverPid).find((p) => p.command === 'ffmpeg');
    if (ffmpeg) return ffmpeg.pid;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('no render started');
}

/** The pids of the processes whose parent is `pid`, with their state (Z: a zombie nobody reaped). */
function childrenOf(pid: number): { pid: number; state: string; command: string }[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => {
      try {
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const [, command, state, ppid] = /^\d+ \((.*)\) (\S) (\d+)/.exec(stat)!;
        return Number(ppid) === pid ? [{ pid: Number(name), state: state!, command: command! }] : [];
      } catch {
        return [];
      }
    });
}

describe('the production folder', () => {
  it('holds the built server with runtime dependencies only', () => {
    expect(existsSync(join(folder, 'dist/main.js'))).toBe(true);
    expect(existsSync(join(folder, 'dist/store/sqlite/migrations/0001_initial.sql'))).toBe(true);
    expect(existsSync(join(folder, 'src'))).toBe(false);
    expect(existsSync(join(folder, 'node_modules/vitest'))).toBe(false);
    expect(existsSync(join(folder, 'node_modules/tsx'))).toBe(false);
  });

  it('renders a task from a copy outside the repository; SIGTERM to its process group mid-render drains, exits 0, and does not kill the render', async () => {
    const data = join(dir, 'data-group');
    const first = await start(process.execPath, ['dist/main.js'], { cwd: folder, env: serverEnv(data) });
    const key = devKey(first.output());
    const call = api(first, key);
    const { requestId } = await call('POST', '', RENDER);
    await rendering(first.child.pid!);
    // ffmpeg is running: the whole group gets the signal, as a terminal's Ctrl-C or a supervisor's stop would send it.
    process.kill(-first.child.pid!, 'SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).not.toMatch(/second signal|handed back/);

    const second = await start(process.execPath, ['dist/main.js'], { cwd: folder, env: serverEnv(data) });
    const task = await reaches(api(second, key), requestId, ['succeeded', 'failed']);
    expect(task).toMatchObject({ status: 'succeeded', creditsRefunded: 0 });
    process.kill(-second.child.pid!, 'SIGINT');
    expect(await second.exited).toBe(0);
  }, 120_000);

  it('hands a render back when the grace runs out, and the next start finishes it', async () => {
    const data = join(dir, 'data-handback');
    const env = { ...serverEnv(data), VIDGEN_SHUTDOWN_GRACE_SECONDS: '0' };
    const first = await start(process.execPath, ['dist/main.js'], { cwd: folder, env });
    const key = devKey(first.output());
    const { requestId } = await api(first, key)('POST', '', RENDER);
    await rendering(first.child.pid!);
    process.kill(-first.child.pid!, 'SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/job handed back/);
    const second = await start(process.execPath, ['dist/main.js'], { cwd: folder, env });
    expect(await reaches(api(second, key), requestId, ['succeeded', 'failed'])).toMatchObject({ status: 'succeeded' });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 120_000);

  it('prints clean JSON from its vidgen bin', async () => {
    const data = join(dir, 'data-cli');
    const { stdout } = await exec(process.execPath, ['dist/cli/main.js', 'accounts', 'create', '--name', 'acme', '--credits', '10', '--json'], { cwd: folder, env: { ...process.env, ...serverEnv(data) } });
    expect(JSON.parse(stdout)).toMatchObject({ name: 'acme', balance: 10 });
    const listed = await exec(process.execPath, ['dist/cli/main.js', 'accounts', 'list', '--json'], { cwd: folder, env: { ...process.env, ...serverEnv(data) } });
    expect(JSON.parse(listed.stdout)).toHaveLength(1);
  });
});

const canUnshare = process.getuid?.() === 0 && existsSync('/usr/bin/unshare');

describe.skipIf(!canUnshare && process.env.CI !== 'true')('as PID 1', () => {
  it('drains on SIGTERM, exits 0, and reaps the renders it started', async () => {
    const data = join(dir, 'data-pid1');
    const server = await start('unshare', ['--pid', '--fork', '--mount-proc', process.execPath, 'dist/main.js'], { cwd: folder, env: serverEnv(data) });
    // unshare forks: its child is the server, PID 1 inside the namespace.
    const [pid1] = childrenOf(server.child.pid!);
    expect(pid1?.command).toBe('node');
    const key = devKey(server.output());
    const call = api(server, key);
    const { requestId } = await call('POST', '', RENDER);
    expect(await reaches(call, requestId, ['succeeded', 'failed'])).toMatchObject({ status: 'succeeded' });
    // The render's ffmpeg has ended and was waited for: no zombie is left under PID 1.
    expect(childrenOf(pid1!.pid).filter((p) => p.state === 'Z')).toEqual([]);
    process.kill(pid1!.pid, 'SIGTERM');
    expect(await server.exited).toBe(0);
    expect(server.output()).toMatch(/"msg":"stopped"/);
  }, 120_000);
});

describe('pnpm start (development)', () => {
  it('drains and exits 0 when only pnpm gets SIGTERM, leaving no server behind, and once for a Ctrl-C to the group', async () => {
    const env = { ...serverEnv(join(dir, 'data-dev')), COREPACK_ENABLE_DOWNLOAD_PROMPT: '0' };
    const first = await start('corepack', ['pnpm', 'start'], { cwd: REPO, env });
    const server = childrenOf(first.child.pid!).find((p) => p.command === 'node');
    expect(server).toBeDefined();
    first.child.kill('SIGTERM');
    expect(await first.exited).not.toBeNull();
    // pnpm passed the signal on to the server (its direct child: `exec` in the script), which drained and exited.
    for (let i = 0; i < 200 && existsSync(`/proc/${server!.pid}`); i++) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(`/proc/${server!.pid}`)).toBe(false);
    expect(first.output()).toMatch(/"msg":"stopped"/);

    const second = await start('corepack', ['pnpm', 'start'], { cwd: REPO, env });
    process.kill(-second.child.pid!, 'SIGINT');
    await second.exited;
    expect(second.output()).toMatch(/"msg":"stopped"/);
    // The copy pnpm forwarded and the group's own came together: one drain, no hand-back.
    expect(second.output()).not.toMatch(/second signal/);
  }, 120_000);
});
