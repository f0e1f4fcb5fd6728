/**
 * Starts, for the whole suite, the real server on a fresh data dir (accounts and keys made by
 * its own CLI) and the Prism mock, each on a port the OS chooses.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { cli, serverDir, serverEnv, tsx } from './helpers.js';

const bundlePath = resolve(import.meta.dirname, '../../../spec/dist/openapi.json');

export interface Fixture {
  baseUrl: string;
  mockBaseUrl: string;
  dataDir: string;
  /** The main account: every operation. */
  apiKey: string;
  readOnlyApiKey: string;
  /** An account used only by the retry test, so its ledger holds that test's task alone. */
  retry: { accountId: string; apiKey: string };
  /** An account used only by the pagination test. */
  pages: { accountId: string; apiKey: string };
}

declare module 'vitest' {
  export interface ProvidedContext {
    fixture: Fixture;
  }
}

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

/** Resolves with the first match of `pattern` in the child's output (no polling, no sleeps). */
function waitForOutput(child: ChildProcess, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  let output = '';
  return new Promise((done, fail) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = pattern.exec(output);
      if (match) done(match);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => fail(new Error(`${what} exited with ${code} before listening:\n${output}`)));
  });
}

async function startMock(): Promise<{ baseUrl: string; prism: ChildProcess }> {
  const port = await freePort();
  const prismBin = resolve(import.meta.dirname, '../../../spec/node_modules/.bin/prism');
  const prism = spawn(prismBin, ['mock', bundlePath, '--host', '127.0.0.1', '--port', String(port), '--errors'], { stdio: ['ignore', 'pipe', 'pipe'] });
  await waitForOutput(prism, /Prism is listening/, 'Prism');
  prism.stdout!.resume();
  prism.stderr!.resume();
  return { baseUrl: `http://127.0.0.1:${port}`, prism };
}

async function startServer(): Promise<{ server: ChildProcess; fixture: Omit<Fixture, 'mockBaseUrl'> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-client-'));
  const account = async (name: string) => (await cli(dataDir, 'accounts', 'create', '--name', name, '--credits', '10000000')).id as string;
  const key = async (accountId: string, ...extra: string[]) => (await cli(dataDir, 'keys', 'create', '--account', accountId, ...extra)).key as string;

  const main = await account('client');
  const retryAccount = await account('client-retry');
  const pagesAccount = await account('client-pages');
  const fixture = {
    baseUrl: '',
    dataDir,
    apiKey: await key(main),
    readOnlyApiKey: await key(main, '--scopes', 'tasks:read'),
    retry: { accountId: retryAccount, apiKey: await key(retryAccount) },
    pages: { accountId: pagesAccount, apiKey: await key(pagesAccount) },
  };

  const server = spawn(tsx, ['src/main.ts'], { cwd: serverDir, env: serverEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe'] });
  fixture.baseUrl = (await waitForOutput(server, /listening on (http:\/\/\S+)/, 'the server'))[1]!;
  // Keep draining its output so a chatty server never blocks on a full pipe.
  server.stdout!.resume();
  server.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk));
  return { server, fixture };
}

export default async function setup(project: TestProject) {
  const [real, mock] = await Promise.all([startServer(), startMock()]);
  project.provide('fixture', { ...real.fixture, mockBaseUrl: mock.baseUrl });
  return () => {
    mock.prism.kill('SIGTERM');
    real.server.kill('SIGTERM');
    rmSync(real.fixture.dataDir, { recursive: true, force: true });
  };
}
