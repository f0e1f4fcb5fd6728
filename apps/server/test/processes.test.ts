/** The operator CLI and the service's first start, as separate processes on a temporary data dir. */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

const root = resolve(import.meta.dirname, '..');
const tsx = join(root, 'node_modules/.bin/tsx');
const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-processes-'));
const env = { ...process.env, VIDGEN_DATA_DIR: dataDir, VIDGEN_LOG_LEVEL: 'silent' };
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

async function vidgen(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return vidgenWith(env, ...args);
}

async function vidgenWith(env: NodeJS.ProcessEnv, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(tsx, ['src/cli/main.ts', ...args], { cwd: root, env });
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
    const server = spawn(tsx, ['src/main.ts'], { cwd: root, env: { ...env, VIDGEN_DATA_DIR: fresh, PORT: '0', HOST: '127.0.0.1' } });
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
