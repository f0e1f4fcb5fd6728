/**
 * kill -9 of the server while it renders, then a restart on the same data dir:
 * every task ends terminal, and nothing is charged or refunded twice.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { startHttpsFixture } from './support/https-fixture.js';

const root = resolve(import.meta.dirname, '..');
const dataDir = mkdtempSync(join(tmpdir(), 'vidgen-crash-'));
const env = {
  ...process.env,
  VIDGEN_DATA_DIR: dataDir,
  VIDGEN_LOG_LEVEL: 'silent',
  PORT: '0',
  HOST: '127.0.0.1',
  VIDGEN_LOCAL_CONCURRENCY: '2',
  VIDGEN_JOB_LEASE_SECONDS: '2',
};
const servers: ChildProcess[] = [];
afterAll(() => {
  for (const server of servers) server.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

/** Starts the server and resolves with its address and what it printed. */
function start(extraEnv: Record<string, string> = {}): Promise<{ server: ChildProcess; baseUrl: string; output: () => string }> {
  // The built server, run by node itself: one process, so SIGKILL really kills the server.
  const server = spawn(process.execPath, ['dist/main.js'], { cwd: root, env: { ...env, ...extraEnv } });
  servers.push(server);
  let output = '';
  return new Promise((done, fail) => {
    server.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match) done({ server, baseUrl: match[1]!, output: () => output });
    });
    server.once('exit', (code) => fail(new Error(`exited ${code}: ${output}`)));
  });
}

it('finishes every task after a kill -9 mid-render, charging and refunding each once', async () => {
  const first = await start();
  const key = /(vg_test_[0-9A-Za-z]{38})/.exec(first.output())![1]!;
  const api = async (baseUrl: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return (await res.json()) as any;
  };

  const ids: string[] = [];
  for (let i = 0; i < 4; i++) {
    const submitted = await api(first.baseUrl, 'POST', '/api/open/v1/video/generations', { model: 'vidgen-2.0-fast', prompt: `crash test ${i}`, duration: 6, resolution: '720p' });
    ids.push(submitted.requestId);
  }
  // Kill as soon as the first task has been picked up: renders are running.
  await api(first.baseUrl, 'GET', `/api/open/v1/video/generations/${ids[0]}?wait=30`);
  const exited = new Promise((resolve) => first.server.once('exit', resolve));
  first.server.kill('SIGKILL');
  await exited;

  const second = await start();
  const finals = [];
  for (const id of ids) {
    let task = await api(second.baseUrl, 'GET', `/api/open/v1/video/generations/${id}`);
    for (let i = 0; i < 10 && !['succeeded', 'failed', 'cancelled'].includes(task.status); i++) {
      task = await api(second.baseUrl, 'GET', `/api/open/v1/video/generations/${id}?wait=30`);
    }
    finals.push(task);
  }
  expect(finals.map((t) => t.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);

  const { stdout: accounts } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', 'accounts', 'list', '--json'], { cwd: root, env });
  const accountId = JSON.parse(accounts)[0].id;
  const { stdout } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', 'ledger', '--account', accountId, '--json'], { cwd: root, env });
  const ledger = JSON.parse(stdout);
  expect(ledger.consistent).toBe(true);
  const charges = ledger.entries.filter((e: { kind: string }) => e.kind === 'charge').map((e: { taskId: string }) => e.taskId);
  expect(charges.sort()).toEqual([...ids].sort());
  expect(ledger.entries.filter((e: { kind: string }) => e.kind === 'refund')).toEqual([]);
}, 120_000);

/**
 * A task's webhook after a kill -9 and a restart: `refused`, its first attempt answered 503 and the process killed while
 * the retry waits; `open`, the process killed while its first attempt is still open (the delivery held by the worker
 * that completed the task, under its lease), which the restarted process claims once that lease has run out.
 */
async function webhookAfterCrash(firstAttempt: 'refused' | 'open'): Promise<void> {
  let healthy = false;
  const received: { id: string; status: number }[] = [];
  let delivered: () => void = () => {};
  const deliveredOnce = new Promise<void>((resolve) => (delivered = resolve));
  let firstArrived: () => void = () => {};
  const attempted = new Promise<void>((resolve) => (firstArrived = resolve));
  const receiver = await startHttpsFixture((req, res) => {
    req.resume();
    req.on('end', () => {
      const id = String(req.headers['webhook-id']);
      if (!healthy && firstAttempt === 'open') {
        // Never answered: the process is killed with the attempt open.
        received.push({ id, status: 0 });
        firstArrived();
        return;
      }
      const status = healthy ? 200 : 503;
      received.push({ id, status });
      res.writeHead(status).end();
      if (status === 200) delivered();
      else firstArrived();
    });
  });
  // A data dir of its own: the previous test's server must not pick up these jobs.
  const ownDir = mkdtempSync(join(tmpdir(), 'vidgen-crash-webhook-'));
  try {
    const caFile = join(ownDir, 'receiver-ca.pem');
    writeFileSync(caFile, receiver.ca);
    const webhookEnv = {
      VIDGEN_DATA_DIR: ownDir,
      VIDGEN_WEBHOOK_ALLOW_LOOPBACK: 'true',
      VIDGEN_WEBHOOK_CA_FILE: caFile,
      VIDGEN_WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s,1s,1s',
    };
    const cliEnv = { ...env, ...webhookEnv };
    const first = await start(webhookEnv);
    const { stdout: keys } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', 'accounts', 'list', '--json'], { cwd: root, env: cliEnv });
    const accountId = JSON.parse(keys)[0].id;
    const { stdout: issued } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', 'keys', 'create', '--account', accountId, '--json'], { cwd: root, env: cliEnv });
    const key = JSON.parse(issued).key;
    const res = await fetch(`${first.baseUrl}/api/open/v1/video/generations`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'webhook after a crash', duration: 4, resolution: '480p', webhookUrl: receiver.url('/hook') }),
    });
    expect(res.status).toBe(202);
    await attempted;
    const exited = new Promise((resolve) => first.server.once('exit', resolve));
    first.server.kill('SIGKILL');
    await exited;

    healthy = true;
    await start(webhookEnv);
    await deliveredOnce;
    expect(received.filter((r) => r.status === 200)).toHaveLength(1);
    expect(new Set(received.map((r) => r.id)).size).toBe(1);
    const { stdout } = await promisify(execFile)(process.execPath, ['dist/cli/main.js', 'webhooks', 'list', '--account', accountId, '--json'], { cwd: root, env: cliEnv });
    const [delivery] = JSON.parse(stdout);
    expect(delivery).toMatchObject({ id: received[0]!.id, status: 'delivered', eventType: 'video.generation.succeeded' });
  } finally {
    for (const server of servers) server.kill('SIGKILL');
    await receiver.close();
    rmSync(ownDir, { recursive: true, force: true });
  }
}

it('delivers a pending webhook after a kill -9 and a restart, with the same webhook-id', () => webhookAfterCrash('refused'), 120_000);

it('delivers a webhook whose attempt was open at a kill -9, once its lease has run out after a restart, with the same webhook-id', () => webhookAfterCrash('open'), 120_000);
