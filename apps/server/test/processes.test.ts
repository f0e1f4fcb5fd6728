/** The operator CLI and the service's first start, as separate processes on a temporary data dir. */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

const root = resolve(import.meta.dirname, '..');
const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-processes-'));
const env = { ...process.env, VIDGEN_DATA_DIR: dataDir, VIDGEN_LOG_LEVEL: 'silent' };
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function vidgen(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return vidgenWith(env, ...args);
}

async function vidgenWith(env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', ...args], { cwd: root, env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
const json = async (...args: string[]) => JSON.parse((await vidgen(...args, '--json')).stdout);

describe('the operator CLI', () => {
  it('creates accounts and keys, grants credits, revokes, and audits the ledger', async () => {
    const account = await json('accounts', 'create', '--name', 'acme', '--credits', '500');
    expect(account).toMatchObject({ name: 'acme', balance: 500 });
    const issued = await json('keys', 'create', '--account', account.id, '--scopes', 'tasks:read', '--mode', 'test', '--expires-in-days', '30');
    expect(issued.key).toMatch(/^vg_test_/);
    expect(issued.scopes).toEqual(['tasks:read']);
    const listed = await json('keys', 'list', '--account', account.id);
    expect(JSON.stringify(listed)).not.toContain(issued.key);
    expect(listed[0]).toMatchObject({ id: issued.id, revokedAt: null });
    expect((await json('keys', 'revoke', issued.id)).revokedAt).toBeTruthy();
    expect(await json('credits', 'grant', '--account', account.id, '--amount', '25', '--note', 'goodwill')).toMatchObject({ balance: 525 });
    const ledger = await json('ledger', '--account', account.id);
    expect(ledger).toMatchObject({ balance: 525, ledgerSum: 525, consistent: true });
    expect(ledger.entries.map((e: { kind: string; amount: number }) => [e.kind, e.amount])).toEqual([['grant', 500], ['grant', 25]]);
  });

  it('shows, rotates and lists webhook secrets and deliveries', async () => {
    const account = await json('accounts', 'create', '--name', 'hooks', '--credits', '0');
    const [secret] = (await json('webhooks', 'secret', 'show', '--account', account.id)).secrets;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
    const rotated = await json('webhooks', 'secret', 'rotate', '--account', account.id, '--overlap-hours', '2');
    expect(rotated.secret).not.toBe(secret);
    expect((await json('webhooks', 'secret', 'show', '--account', account.id)).secrets).toEqual([rotated.secret, secret]);
    expect(await json('webhooks', 'list', '--account', account.id)).toEqual([]);
    expect(await vidgen('webhooks', 'attempts', 'msg_missing')).toMatchObject({ code: 1 });
    expect(await vidgen('webhooks', 'redeliver', 'msg_missing')).toMatchObject({ code: 1 });
    expect(await vidgen('webhooks', 'secret', 'rotate', '--account', 'acc_missing')).toMatchObject({ code: 1 });
  });

  it('says what is wrong, with exit codes for scripts', async () => {
    expect(await vidgen('keys', 'create', '--account', 'acc_missing')).toMatchObject({ code: 1, stderr: expect.stringMatching(/no account acc_missing/) });
    expect(await vidgen('tasks', 'show', 'gen_missing')).toMatchObject({ code: 1 });
    expect(await vidgen('credits', 'grant', '--account', 'x', '--amount', '0')).toMatchObject({ code: 2, stderr: expect.stringMatching(/--amount must be a whole number/) });
    expect(await vidgen('keys', 'create', '--account', 'x', '--scopes', 'admin')).toMatchObject({ code: 2 });
    expect(await vidgen('fly')).toMatchObject({ code: 2, stderr: expect.stringMatching(/unknown command: fly/) });
    expect(await vidgen('--nope')).toMatchObject({ code: 2 });
  });
});

describe('the first start on an empty data dir', () => {
  it('creates a development account, prints its key once, and accepts a submission with it', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'vidgen-first-start-'));
    const server = spawn(process.execPath, ['dist/main.js'], { cwd: root, env: { ...env, VIDGEN_DATA_DIR: fresh, PORT: '0', HOST: '127.0.0.1' } });
    try {
      let output = '';
      const baseUrl = await new Promise<string>((done, fail) => {
        server.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          const match = /listening on (http:\/\/\S+)/.exec(output);
          if (match) done(match[1]!);
        });
        server.once('exit', (code) => fail(new Error(`exited ${code}: ${output}`)));
      });
      const key = /(vg_test_[0-9A-Za-z]{38})/.exec(output)?.[1];
      expect(key).toBeDefined();
      expect(output).toMatch(/created a development account/);
      const res = await fetch(`${baseUrl}/api/open/v1/video/generations`, {
        method: 'POST',
        headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ model: 'vidgen-2.0', prompt: 'A paper boat drifting down a rainy street' }),
      });
      expect(res.status).toBe(202);
      expect(res.headers.get('location')).toMatch(/^\/api\/open\/v1\/video\/generations\/gen_/);
    } finally {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});

describe('roles', () => {
  it('refuses the api and worker roles on SQLite, saying why (exit 2)', async () => {
    const result = await vidgen('serve', '--role', 'api');
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/the api role runs beside other processes and needs PostgreSQL/);
  });

  it.skipIf(!hasPostgres)('migrates a PostgreSQL database from the CLI, idempotently, and manages it like SQLite', async () => {
    const database = await createTestDatabase();
    try {
      const pgEnv = { ...env, VIDGEN_DATABASE_URL: database.url };
      expect((await vidgenWith(pgEnv, 'migrate')).stdout).toMatch(/migrations applied/);
      expect((await vidgenWith(pgEnv, 'migrate')).code).toBe(0);
      const account = JSON.parse((await vidgenWith(pgEnv, 'accounts', 'create', '--name', 'pg', '--credits', '500', '--json')).stdout);
      const ledger = JSON.parse((await vidgenWith(pgEnv, 'ledger', '--account', account.id, '--json')).stdout);
      expect(ledger).toMatchObject({ balance: 500 });
    } finally {
      await database.drop();
    }
  });
});

describe('the served process: graceful shutdown (SIGTERM) and timeouts', () => {
  /** A server on a fresh data dir with one model on the instant provider; resolves once it listens. */
  async function startServer(dir: string, extra: NodeJS.ProcessEnv) {
    // The built server, run by node itself, so that a signal (SIGKILL included) reaches the server, not a wrapper.
    const child = spawn(process.execPath, ['dist/main.js'], {
      cwd: root,
      env: { ...env, VIDGEN_DATA_DIR: dir, PORT: '0', HOST: '127.0.0.1', VIDGEN_PROVIDERS: '{"vidgen-2.0-fast":"instant"}', VIDGEN_INSTANT_CONCURRENCY: '1', ...extra },
    });
    const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
    let output = '';
    const baseUrl = await new Promise<string>((done, fail) => {
      child.stdout.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /listening on (http:\/\/\S+)/.exec(output);
        if (match) done(match[1]!);
      });
      void exited.then((code) => fail(new Error(`exited ${code}: ${output}`)));
    });
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`${baseUrl}/api/open/v1${path}`, { ...init, headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json', ...init.headers } });
    const key = /(vg_test_[0-9A-Za-z]{38})/.exec(output)?.[1] ?? extra.KEY;
    const accountId = /development account \((acc_\w+)\)/.exec(output)?.[1] ?? extra.ACCOUNT;
    return { child, exited, baseUrl, key: key!, accountId: accountId!, api };
  }
  type Server = Awaited<ReturnType<typeof startServer>>;

  const submit = async (server: Server) => {
    const res = await server.api('/video/generations', { method: 'POST', body: JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'a lighthouse at dusk', duration: 4, resolution: '480p' }) });
    expect(res.status).toBe(202);
    return ((await res.json()) as { requestId: string }).requestId;
  };
  const status = async (server: Server, id: string, wait?: number) =>
    ((await (await server.api(`/video/generations/${id}${wait ? `?wait=${wait}` : ''}`)).json()) as { status: string }).status;
  /** Long-polls until the task has `wanted` (each poll returns at its first change). */
  async function reaches(server: Server, id: string, wanted: string) {
    if ((await status(server, id)) === wanted) return;
    for (let i = 0; i < 20; i++) if ((await status(server, id, 5)) === wanted) return;
    throw new Error(`${id} never reached ${wanted}`);
  }
  const inFlight = async (server: Server) => Number(/^vidgen_http_requests_in_flight (\d+)/m.exec(await (await fetch(`${server.baseUrl}/metrics`)).text())?.[1]);
  const ledgerOf = async (dir: string, accountId: string) => JSON.parse((await vidgenWith({ ...env, VIDGEN_DATA_DIR: dir }, 'ledger', '--account', accountId, '--json')).stdout);

  /** A server on a fresh data dir for one test: killed and its dir removed afterwards, whatever happened. */
  async function withServer(name: string, extra: NodeJS.ProcessEnv, test: (server: Server, dir: string) => Promise<void>) {
    const dir = mkdtempSync(join(tmpdir(), `vidgen-${name}-`));
    let server: Server | undefined;
    try {
      server = await startServer(dir, extra);
      await test(server, dir);
    } finally {
      server?.child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }

  it('fails readiness, refuses new requests with 503, answers a waiting long poll at once, hands the running render back on a second signal and exits 0; a restart finishes every task, charged once', async () => {
    await withServer('drain', { VIDGEN_INSTANT_DELAY_MS: '600000', VIDGEN_SHUTDOWN_GRACE_SECONDS: '600' }, async (server, dir) => {
      const rendering = await submit(server);
      await reaches(server, rendering, 'processing');
      const waiting = await submit(server);
      expect(await status(server, waiting)).toBe('queued');

      const longPoll = server.api(`/video/generations/${waiting}?wait=30`);
      // The long poll is being answered: itself and this /metrics request.
      for (let i = 0; (await inFlight(server)) < 2; i++) if (i > 1000) throw new Error('the long poll never arrived');
      const started = Date.now();
      server.child.kill('SIGTERM');

      const polled = await longPoll;
      expect(polled.status).toBe(200);
      expect(((await polled.json()) as { status: string }).status).toBe('queued');
      expect(Date.now() - started).toBeLessThan(20_000);

      const ready = await fetch(`${server.baseUrl}/readyz`);
      expect(ready.status).toBe(503);
      expect((await fetch(`${server.baseUrl}/healthz`)).status).toBe(200);
      const refused = await server.api(`/video/generations/${rendering}`);
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('unavailable');

      // The render would take 10 minutes and the grace is as long: a second signal hands it back now. (Sent later than
      // 500 ms after the first: a copy within that is the first signal delivered twice, to a group and by a wrapper.)
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, started + 600 - Date.now())));
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);

      const restarted = await startServer(dir, { VIDGEN_INSTANT_DELAY_MS: '0', KEY: server.key, ACCOUNT: server.accountId });
      try {
        await reaches(restarted, rendering, 'succeeded');
        await reaches(restarted, waiting, 'succeeded');
      } finally {
        restarted.child.kill('SIGTERM');
        expect(await restarted.exited).toBe(0);
      }
      const ledger = await ledgerOf(dir, server.accountId);
      expect(ledger.consistent).toBe(true);
      const kinds = (id: string) => ledger.entries.filter((e: { taskId: string }) => e.taskId === id).map((e: { kind: string }) => e.kind);
      expect([kinds(rendering), kinds(waiting)]).toEqual([['charge'], ['charge']]);
    });
  }, 60_000);

  it('hands a render still running at the end of the grace back by itself, and exits 0', async () => {
    await withServer('grace', { VIDGEN_INSTANT_DELAY_MS: '600000', VIDGEN_SHUTDOWN_GRACE_SECONDS: '1' }, async (server, dir) => {
      const id = await submit(server);
      await reaches(server, id, 'processing');
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const restarted = await startServer(dir, { VIDGEN_INSTANT_DELAY_MS: '0', KEY: server.key, ACCOUNT: server.accountId });
      try {
        await reaches(restarted, id, 'succeeded');
      } finally {
        restarted.child.kill('SIGTERM');
        await restarted.exited;
      }
    });
  }, 60_000);

  it('serves with the configured request timeouts: a client dripping its headers gets 408 and loses the socket', async () => {
    await withServer('timeouts', { VIDGEN_HEADERS_TIMEOUT_MS: '300', VIDGEN_REQUEST_TIMEOUT_MS: '300' }, async (server) => {
      const { port } = new URL(server.baseUrl);
      const socket = connect(Number(port), '127.0.0.1');
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk.toString()));
      // Half a request line, then nothing: the server must not wait for the rest.
      socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
      await new Promise((resolve) => socket.once('close', resolve));
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
    });
  }, 60_000);

  it('lets a render that ends within the grace finish before exiting', async () => {
    await withServer('finish', { VIDGEN_INSTANT_DELAY_MS: '3000', VIDGEN_SHUTDOWN_GRACE_SECONDS: '60' }, async (server, dir) => {
      const id = await submit(server);
      await reaches(server, id, 'processing');
      server.child.kill('SIGTERM');
      expect(await server.exited).toBe(0);
      const shown = JSON.parse((await vidgenWith({ ...env, VIDGEN_DATA_DIR: dir }, 'tasks', 'show', id, '--json')).stdout);
      expect(shown.status).toBe('succeeded');
    });
  }, 60_000);
});
