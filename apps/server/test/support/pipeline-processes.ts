/**
 * What the multi-process test, the pipeline benchmark and the soak share: server
 * processes (`dist/main.js --role …`, the built server) on the instant provider with webhooks to a
 * loopback HTTPS receiver, that receiver, and an account with a key made the
 * operators' way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { createAccount, issueApiKey } from '../../src/accounts.js';
import type { Store } from '../../src/store/store.js';
import { startHttpsFixture, type HttpsFixture } from './https-fixture.js';

/** apps/server: where `dist/main.js` is started from. */
export const SERVER_ROOT = resolve(import.meta.dirname, '../..');

/** Every model on the instant provider. */
export const INSTANT_PROVIDERS = '{"vidgen-2.0":"instant","vidgen-2.0-fast":"instant","vidgen-1.5-pro":"instant"}';

export type Role = 'api' | 'worker' | 'all';

/**
 * The environment of a pipeline process: a quiet server on a port from the OS,
 * every model on the instant provider, webhooks allowed to the loopback
 * receiver (trusting its CA), and no per-key limits (load from one key).
 * `publicBaseUrl`: where output files are served (VIDGEN_PUBLIC_BASE_URL), which a
 * `worker` with local storage must be told: an `api` process sharing the data dir.
 */
export function pipelineEnv(input: { databaseUrl: string; dataDir: string; receiverCaFile: string; publicBaseUrl?: string }): Record<string, string> {
  return {
    ...(input.publicBaseUrl ? { VIDGEN_PUBLIC_BASE_URL: input.publicBaseUrl } : {}),
    VIDGEN_DATABASE_URL: input.databaseUrl,
    VIDGEN_DATA_DIR: input.dataDir,
    VIDGEN_LOG_LEVEL: 'silent',
    VIDGEN_DEV_BOOTSTRAP: 'false',
    PORT: '0',
    HOST: '127.0.0.1',
    VIDGEN_PROVIDERS: INSTANT_PROVIDERS,
    VIDGEN_WEBHOOK_ALLOW_LOOPBACK: 'true',
    VIDGEN_WEBHOOK_CA_FILE: input.receiverCaFile,
    VIDGEN_RATE_LIMIT_SUBMITS: '0',
    VIDGEN_RATE_LIMIT_READS: '0',
    VIDGEN_MAX_ACTIVE_TASKS: '0',
  };
}

/**
 * A loopback TCP port free at the moment of asking, for an `api` process whose address
 * workers must know before it listens (their VIDGEN_PUBLIC_BASE_URL) and that keeps it
 * across restarts.
 */
export function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => done(port));
    });
  });
}

export interface ServerProcess {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>` of a process that serves HTTP; '' for a worker. */
  baseUrl: string;
  /** Everything it printed so far. */
  output(): string;
}

/**
 * Starts the built server, `node dist/main.js --role <role>`, as production runs it (one process, so
 * SIGKILL kills the server itself, not a wrapper), and resolves once it listens (or, for a worker,
 * has started); rejects if it exits first. The tests' global setup builds dist/; so do the benches'
 * scripts.
 */
export function startServerProcess(
  role: Role,
  env: Record<string, string>,
  options: { nodeArgs?: string[]; /** The built entry, relative to apps/server (a bench's baseline build): `dist/main.js` by default. */ main?: string; inheritStderr?: boolean; /** Called at once with the child, for cleaning up after a start that never finishes. */ onSpawn?: (child: ChildProcess) => void } = {},
): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), options.main ?? 'dist/main.js', '--role', role], {
    cwd: SERVER_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', options.inheritStderr ? 'inherit' : 'pipe'],
  });
  options.onSpawn?.(child);
  let output = '';
  const started = (baseUrl: string): ServerProcess => ({ child, baseUrl, output: () => output });
  return new Promise((done, fail) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /listening on (http:\/\/\S+)/.exec(output);
      if (listening) done(started(listening[1]!));
      if (role === 'worker' && /worker started/.test(output)) done(started(''));
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code, signal) => fail(new Error(`${role} exited ${code ?? signal}: ${output}`)));
  });
}

/** Sends SIGTERM (a graceful stop) and SIGKILL if the process is still there after `graceMs`. */
export async function stopServerProcess(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((done) => child.once('exit', done));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** One POST that reached the webhook receiver. */
export interface ReceivedWebhook {
  webhookId: string;
  requestId: string;
  /** `video.generation.<status>` */
  type: string;
  /** performance.now() when the body had arrived. */
  at: number;
  body: string;
  headers: IncomingMessage['headers'];
}

export interface WebhookReceiver extends HttpsFixture {
  /** Writes the receiver's CA certificate into `dir` for VIDGEN_WEBHOOK_CA_FILE; returns its path. */
  writeCa(dir: string): string;
}

/**
 * An HTTPS webhook receiver on loopback. `answer` sees each POST and returns
 * the status to answer with (204 unless told), possibly later (a slow receiver).
 */
export async function startWebhookReceiver(answer: (hook: ReceivedWebhook) => number | Promise<number> = () => 204): Promise<WebhookReceiver> {
  const fixture = await startHttpsFixture((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const at = performance.now();
      const event = JSON.parse(body) as { type: string; data: { requestId: string } };
      const hook: ReceivedWebhook = { webhookId: String(req.headers['webhook-id']), requestId: event.data.requestId, type: event.type, at, body, headers: req.headers };
      void Promise.resolve(answer(hook)).then((status) => {
        if (!res.destroyed) res.writeHead(status).end();
      });
    });
  });
  return Object.assign(fixture, {
    writeCa(dir: string) {
      const path = join(dir, 'receiver-ca.pem');
      writeFileSync(path, fixture.ca);
      return path;
    },
  });
}

/** An account with `credits` and a read/write test key. */
export async function createAccountWithKey(store: Store, name: string, credits: number): Promise<{ accountId: string; key: string }> {
  const now = new Date();
  const account = await createAccount(store, { name, credits, now });
  const { key } = await issueApiKey(store, { accountId: account.id, mode: 'test', scopes: ['tasks:read', 'tasks:write'], name: null, expiresAt: null, now });
  return { accountId: account.id, key };
}
