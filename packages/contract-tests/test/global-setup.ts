/**
 * Points the suite at VIDGEN_BASE_URL, or else starts the Prism mock on a port
 * the OS chooses and points the suite at it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { resolve } from 'node:path';
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

export default async function setup(project: TestProject) {
  const baseUrl = env('VIDGEN_BASE_URL');
  let prism: ChildProcess | undefined;
  let target: Target;
  if (baseUrl) {
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
    };
  }
  project.provide('target', target);
  return () => {
    prism?.kill('SIGTERM');
  };
}
