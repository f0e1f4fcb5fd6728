/**
 * The first start of several processes: everything a process creates at start
 * (the store's tables, pg-boss's schema and queues, the output-URL secret in the
 * data dir) is created under one lock or idempotently, so processes started
 * together on an empty PostgreSQL database and a new data dir all come up.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { loadSigningSecret } from '../src/files/storage.js';
import { JOB_LANES } from '../src/store/open.js';
import { freePort, SERVER_ROOT, startServerProcess, type ServerProcess } from './support/pipeline-processes.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

const dirs: string[] = [];
const tempDir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

describe.skipIf(!hasPostgres)('2 api and 2 worker processes started at once on an empty PostgreSQL database and a new data dir', () => {
  const children: ChildProcess[] = [];
  afterAll(() => children.forEach((child) => child.kill('SIGKILL')));

  it.each([1, 2, 3])('round %i (a new database and data dir): all four start and none exits', { timeout: 120_000 }, async () => {
    const database = await createTestDatabase();
    const dataDir = tempDir('vidgen-first-start-');
    try {
      // Workers with local storage must name the api that serves their outputs: api 1, on a port chosen now.
      const apiPort = await freePort();
      const base = {
        VIDGEN_DATABASE_URL: database.url,
        VIDGEN_DATA_DIR: dataDir,
        VIDGEN_LOG_LEVEL: 'warn',
        VIDGEN_DEV_BOOTSTRAP: 'false',
        HOST: '127.0.0.1',
        PORT: '0',
        VIDGEN_DATABASE_POOL_SIZE: '2',
      };
      const roles = [
        ['api', { ...base, PORT: String(apiPort) }],
        ['api', base],
        ['worker', { ...base, VIDGEN_PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}` }],
        ['worker', { ...base, VIDGEN_PUBLIC_BASE_URL: `http://127.0.0.1:${apiPort}` }],
      ] as const;
      const started = await Promise.allSettled(roles.map(([role, env]) => startServerProcess(role, env, { onSpawn: (child) => children.push(child) })));
      const failures = started.flatMap((result) => (result.status === 'rejected' ? [String((result.reason as Error).message).slice(0, 1_500)] : []));
      expect(failures).toEqual([]);
      const processes = started.map((result) => (result as PromiseFulfilledResult<ServerProcess>).value);

      // Still up a moment later (a worker's first claims, pg-boss's maintenance), and the APIs answer.
      await sleep(1_500);
      for (const [i, p] of processes.entries()) expect({ role: roles[i]![0], exitCode: p.child.exitCode, signal: p.child.signalCode, output: p.child.exitCode === null ? '' : p.output() }).toEqual({ role: roles[i]![0], exitCode: null, signal: null, output: '' });
      expect(processes[0]!.baseUrl).toBe(`http://127.0.0.1:${apiPort}`);
      for (const p of processes.slice(0, 2)) expect((await fetch(`${p.baseUrl}/readyz`)).status).toBe(200);

      // Each lane's queue exists once, and every process signs output URLs with the one secret made.
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const { rows } = await client.query(`SELECT name FROM pgboss.queue WHERE name LIKE 'vidgen-%' ORDER BY name`);
        // Every lane but the webhooks', whose deliveries' rows are its queue.
        expect(rows.map((row) => row.name)).toEqual(JOB_LANES.filter((lane) => lane !== 'webhooks').map((lane) => `vidgen-${lane}`).sort());
      } finally {
        await client.end();
      }
      expect(Buffer.from(readFileSync(join(dataDir, 'file-url-secret'), 'utf8'), 'base64')).toHaveLength(32);
      expect(readdirSync(dataDir).filter((name) => name.startsWith('file-url-secret'))).toEqual(['file-url-secret']);
    } finally {
      await Promise.all(
        children.splice(0).map((child) =>
          child.exitCode !== null || child.signalCode !== null ? undefined : new Promise((done) => (child.once('exit', done), child.kill('SIGKILL'))),
        ),
      );
      await database.drop();
    }
  });
});

/**
 * A child process that calls loadSigningSecret on `dirs` one after the other, each at its own
 * moment (`startAt + i × slotMs`) shared by every child, so that they race for each fresh dir.
 * It prints one line per dir: the secret (base64) or the error.
 */
const RACER = `
import { loadSigningSecret } from ${JSON.stringify(join(SERVER_ROOT, 'src/files/storage.ts'))};
const [dirsFile, startAt, slotMs] = process.argv.slice(2);
const dirs = JSON.parse((await import('node:fs')).readFileSync(dirsFile, 'utf8'));
const pause = new Int32Array(new SharedArrayBuffer(4));
const lines = [];
for (const [i, dir] of dirs.entries()) {
  const at = Number(startAt) + i * Number(slotMs);
  if (at - Date.now() > 2) Atomics.wait(pause, 0, 0, at - Date.now() - 2);
  while (Date.now() < at);
  try {
    lines.push(dir + ' ' + loadSigningSecret(dir, undefined).toString('base64'));
  } catch (error) {
    lines.push(dir + ' error ' + error.code + ' ' + error.message.replace(/\\n/g, ' '));
  }
}
process.stdout.write(lines.join('\\n') + '\\n');
`;

function race(script: string, dirsFile: string, startAt: number, slotMs: number): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script, dirsFile, String(startAt), String(slotMs)], { cwd: SERVER_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.once('exit', (code) => (code === 0 ? done(out) : fail(new Error(`racer exited ${code}: ${err}`))));
  });
}

describe('the output-URL secret made once in a new data dir', () => {
  it('is made by one of several processes starting together; every one reads that secret, whole, and none fails', { timeout: 90_000 }, async () => {
    const root = tempDir('vidgen-secret-race-');
    const DIRS = 300;
    const RACERS = 6;
    const SLOT_MS = 6;
    const dirs = Array.from({ length: DIRS }, (_, i) => join(root, `data-${i}`, 'nested'));
    const dirsFile = join(root, 'dirs.json');
    writeFileSync(dirsFile, JSON.stringify(dirs));
    const script = join(root, 'racer.mts');
    writeFileSync(script, RACER);
    // Every racer has loaded (tsx compiles storage.ts) well before the first slot.
    const startAt = Date.now() + 6_000;
    const outputs = await Promise.all(Array.from({ length: RACERS }, () => race(script, dirsFile, startAt, SLOT_MS)));

    const byDir = new Map<string, string[]>();
    for (const line of outputs.join('').trim().split('\n')) {
      const [dir, ...rest] = line.split(' ');
      byDir.set(dir!, [...(byDir.get(dir!) ?? []), rest.join(' ')]);
    }
    expect(byDir.size).toBe(DIRS);
    const problems: string[] = [];
    for (const dir of dirs) {
      const seen = byDir.get(dir)!;
      const kept = Buffer.from(readFileSync(join(dir, 'file-url-secret'), 'utf8'), 'base64');
      if (kept.length !== 32) problems.push(`${dir}: the kept secret is ${kept.length} bytes`);
      for (const answer of seen) {
        if (answer !== kept.toString('base64')) problems.push(`${dir}: a racer got ${JSON.stringify(answer)}, the file holds ${kept.toString('base64')}`);
      }
      // No temporary file is left beside it.
      const left = readdirSync(dir).filter((name) => name !== 'file-url-secret');
      if (left.length > 0) problems.push(`${dir}: left ${left.join(', ')}`);
    }
    expect(problems.slice(0, 10)).toEqual([]);
  });

  it('is kept across starts, and a configured secret wins', () => {
    const dir = tempDir('vidgen-secret-kept-');
    const first = loadSigningSecret(dir, undefined);
    expect(first).toHaveLength(32);
    expect(loadSigningSecret(dir, undefined)).toEqual(first);
    expect(loadSigningSecret(dir, 'configured').toString('utf8')).toBe('configured');
  });
});
