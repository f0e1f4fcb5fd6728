/**
 * Points the suite at VIDGEN_BASE_URL, or else starts the Prism mock on a port
 * the OS chooses and points the suite at it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { bundlePath } from '../src/spec.js';
import type { Target } from '../src/target.js';

const env = (name: string) => process.env[name] || undefined;

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

/** Starts Prism and resolves once it says it listens (no polling, no sleeps). */
async function startMock(): Promise<{ baseUrl: string; prism: ChildProcess }> {
  const port = await freePort();
  const prismBin = resolve(import.meta.dirname, '../../../spec/node_modules/.bin/prism');
  const prism = spawn(prismBin, ['mock', bundlePath, '--host', '127.0.0.1', '--port', String(port), '--errors'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((done, fail) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Prism is listening')) done();
    };
    prism.stdout!.on('data', onData);
    prism.stderr!.on('data', onData);
    prism.once('exit', (code) => fail(new Error(`Prism exited with ${code} before listening:\n${output}`)));
  });
  return { baseUrl: `http://127.0.0.1:${port}`, prism };
}

/** VIDGEN_CONTRACT_DATABASE=postgres: the server runs on a fresh PostgreSQL database, dropped afterwards. */
async function createPostgresDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const adminUrl = env('VIDGEN_TEST_POSTGRES_URL') || 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `vidgen_contract_${randomBytes(6).toString('hex')}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

const serverDir = resolve(import.meta.dirname, '../../../apps/server');
const tsx = resolve(serverDir, 'node_modules/.bin/tsx');

/** Starts the real server on a fresh data dir, with accounts and keys made by its own CLI. */
async function startServer(databaseUrl: string | undefined): Promise<{ target: Target; server: ChildProcess; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-contract-'));
  const serverEnv = {
    ...process.env,
    VIDGEN_DATA_DIR: dataDir,
    VIDGEN_DEV_BOOTSTRAP: 'false',
    // The suite submits faster than an application would: limits stay on (their headers are checked), set above its pace.
    VIDGEN_RATE_LIMIT_SUBMITS: '1000',
    VIDGEN_RATE_LIMIT_READS: '10000',
    VIDGEN_MAX_ACTIVE_TASKS: '1000',
    VIDGEN_LOG_LEVEL: 'warn',
    // Tasks with a loopback webhookUrl are accepted and delivered to, so the suite can make webhook deliveries.
    VIDGEN_WEBHOOK_ALLOW_LOOPBACK: 'true',
    PORT: '0',
    HOST: '127.0.0.1',
    ...(databaseUrl ? { VIDGEN_DATABASE_URL: databaseUrl } : {}),
  };
  const cli = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(tsx, ['src/cli/main.ts', ...args, '--json'], { cwd: serverDir, env: serverEnv });
    return JSON.parse(stdout);
  };
  const account = async (name: string, credits: number) => (await cli('accounts', 'create', '--name', name, '--credits', String(credits))).id as string;
  const key = async (accountId: string, ...extra: string[]) => (await cli('keys', 'create', '--account', accountId, ...extra)).key as string;

  // `keys create` gives the task scopes by default; the suite's keys manage keys and webhooks too.
  const allScopes = ['--scopes', 'tasks:read,tasks:write,keys:manage,webhooks:manage'];
  const main = await account('contract', 10_000_000);
  const revoked = await cli('keys', 'create', '--account', main);
  await cli('keys', 'revoke', revoked.id);
  const target: Target = {
    baseUrl: '',
    kind: 'server',
    apiKey: await key(main, ...allScopes),
    readOnlyApiKey: await key(main, '--scopes', 'tasks:read'),
    noCreditsApiKey: await key(await account('contract-no-credits', 0)),
    otherApiKey: await key(await account('contract-other', 1_000_000), ...allScopes),
    revokedApiKey: revoked.key,
    // Nothing listens there (the port was free a moment ago): every attempt fails, and the delivery is kept.
    webhookUrl: `https://127.0.0.1:${await freePort()}/contract-webhook`,
  };

  const server = spawn(tsx, ['src/main.ts'], { cwd: serverDir, env: serverEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  target.baseUrl = await new Promise<string>((done, fail) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /listening on (http:\/\/\S+)/.exec(output);
      if (listening) done(listening[1]!);
    };
    server.stdout!.on('data', onData);
    server.stderr!.on('data', onData);
    server.once('exit', (code) => fail(new Error(`the server exited with ${code} before listening:\n${output}`)));
  });
  // Keep draining its output so a chatty server never blocks on a full pipe.
  server.stdout!.resume();
  server.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  return { target, server, dataDir };
}

export default async function setup(project: TestProject) {
  const baseUrl = env('VIDGEN_BASE_URL');
  let prism: ChildProcess | undefined;
  let server: ChildProcess | undefined;
  let dataDir: string | undefined;
  let target: Target;
  let database: Awaited<ReturnType<typeof createPostgresDatabase>> | undefined;
  if (!baseUrl && env('VIDGEN_CONTRACT_TARGET') === 'server') {
    if (env('VIDGEN_CONTRACT_DATABASE') === 'postgres') database = await createPostgresDatabase();
    ({ target, server, dataDir } = await startServer(database?.url));
  } else if (baseUrl) {
    const apiKey = env('VIDGEN_API_KEY');
    if (!apiKey) throw new Error('VIDGEN_BASE_URL is set but VIDGEN_API_KEY is not');
    target = {
      baseUrl,
      kind: env('VIDGEN_CONTRACT_TARGET') === 'mock' ? 'mock' : 'server',
      apiKey,
      readOnlyApiKey: env('VIDGEN_READ_ONLY_API_KEY'),
      noCreditsApiKey: env('VIDGEN_NO_CREDITS_API_KEY'),
      otherApiKey: env('VIDGEN_OTHER_API_KEY'),
      revokedApiKey: env('VIDGEN_REVOKED_API_KEY'),
      webhookUrl: env('VIDGEN_CONTRACT_WEBHOOK_URL'),
    };
  } else {
    const mock = await startMock();
    prism = mock.prism;
    // Prism accepts any bearer token; the keys only need the right shape.
    target = {
      baseUrl: mock.baseUrl,
      kind: 'mock',
      apiKey: 'vg_test_mockmockmockmockmockmock0',
      readOnlyApiKey: 'vg_test_readonlyreadonlyreadonl0',
      noCreditsApiKey: 'vg_test_nocreditsnocreditsnocre0',
      otherApiKey: 'vg_test_otheraccountotheraccoun0',
      revokedApiKey: 'vg_test_revokedrevokedrevokedre0',
      // Prism calls no webhook.
      webhookUrl: 'https://hooks.example.com/vidgen',
    };
  }
  project.provide('target', target);
  return async () => {
    prism?.kill('SIGTERM');
    server?.kill('SIGTERM');
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    await database?.drop();
  };
}
