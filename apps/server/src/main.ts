/** The service's entry point: configuration, store, app, HTTP server, shutdown. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { serve } from '@hono/node-server';
import pino from 'pino';
import { batchedLogDestination } from './log-destination.js';
import { bootstrapDevelopmentAccount } from './accounts.js';
import { createApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { consoleAssetsLoader } from './http/console-assets.js';
import { RequestsInFlight } from './http/drain.js';
import { createMetrics } from './http/metrics.js';
import { answerClientErrors, nodeServerOptions } from './http/node-server.js';
import { systemClock } from './interfaces.js';
import { withSafeErrors } from './logging.js';
import { loadSigningSecret } from './files/storage.js';
import { createOutputFiles, createPipelineWorker } from './pipeline.js';
import { wakeForNotice } from './queue/worker.js';
import { openBackend } from './store/open.js';

function docsLoader(): () => string | undefined {
  let cached: string | undefined;
  return () => {
    if (cached) return cached;
    try {
      cached = readFileSync(createRequire(import.meta.url).resolve('@vidgen/spec/docs/index.html'), 'utf8');
    } catch {
      return undefined;
    }
    return cached;
  };
}

/** A signal within this long of the first is the first delivered again (to a process group and by a wrapper), not a second one. */
const SAME_SIGNAL_WINDOW_MS = 500;

/** `--role api|worker|all` on the command line wins over VIDGEN_ROLE. */
function roleFromArgs(argv: string[], env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const { values } = parseArgs({ args: argv, options: { role: { type: 'string' } }, strict: false, allowPositionals: true });
  return typeof values.role === 'string' ? { ...env, VIDGEN_ROLE: values.role } : env;
}

export async function runService(argv: string[]): Promise<void> {
  const config = loadConfig(roleFromArgs(argv, process.env));
  const logger = withSafeErrors(pino({ level: config.logLevel, base: { service: 'vidgen', role: config.role } }, batchedLogDestination()));
  const clock = systemClock;
  const runsApi = config.role !== 'worker';
  const runsWorker = config.role === 'worker' || (config.role === 'all' && config.worker);
  const backend = await openBackend(config, { logger, listen: { api: runsApi, worker: runsWorker }, supervise: runsWorker });
  const { store, queue, events } = backend;

  if (config.devBootstrap && runsApi) {
    const created = await bootstrapDevelopmentAccount(store, config.devCredits, clock.now());
    if (created) {
      // Printed once, to the console only: the key is not logged or stored in plain text.
      process.stdout.write(
        `\nvidgen: created a development account (${created.accountId}) with ${config.devCredits} credits.\n` +
          `vidgen: its API key (shown once):\n\n    ${created.key}\n\n`,
      );
    }
  }

  const shutdown = new AbortController();
  let listeningUrl = `http://127.0.0.1:${config.port}`;
  const files = await createOutputFiles(config, () => listeningUrl);
  // The upstream is asked for callbacks only where it can reach us (VIDGEN_PUBLIC_BASE_URL); the token signing them is per task.
  const upstreamCallbackSecret = config.publicBaseUrl ? loadSigningSecret(config.dataDir, config.fileUrlSecret).toString('base64') : undefined;
  const worker = runsWorker
    ? createPipelineWorker({ config, store, queue, pollMs: backend.workerPollMs, events, clock, logger, files, callbackSecret: upstreamCallbackSecret })
    : undefined;
  // Jobs enqueued by other processes (PostgreSQL NOTIFY at their commit) wake this worker at once.
  // Only what the notice is for: a job's lane wakes the claims, `upstream` the follower (not a round of checks per job).
  if (worker) backend.onJobEnqueued((payload) => worker.wake(wakeForNotice(payload)));

  let server: ReturnType<typeof serve> | undefined;
  // Requests being answered (counted by the app's request frame), so that a drain knows when the last one is done.
  const requests = new RequestsInFlight();
  if (runsApi) {
    const app = createApp({
      store,
      clock,
      logger,
      events,
      config,
      metrics: createMetrics(store, { channels: config.upstream.channels.map((c) => ({ name: c.name, maxInFlight: c.maxInFlight })), requestsInFlight: requests }),
      requests,
      rateLimiter: backend.rateLimiter,
      docsHtml: docsLoader(),
      consoleAssets: consoleAssetsLoader(),
      // output.url's origin, as the files it serves are signed (another host, port or bucket than the console's own).
      consoleMediaOrigins: async () => [new URL(await files.urlFor('gen_0000000000000000.mp4', new Date(clock.now()))).origin],
      shutdown: shutdown.signal,
      wakeWorkers: (what) => worker?.wake(what),
      files,
      upstreamCallbackSecret,
    });
    server = serve({ fetch: app.fetch, port: config.port, hostname: config.host, ...nodeServerOptions(config.http) }, (info) => {
      listeningUrl = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${info.port}`;
      logger.info({ port: info.port, host: config.host, database: config.database.kind }, 'listening');
      process.stdout.write(`vidgen: listening on ${listeningUrl}\n`);
      worker?.start();
    });
    answerClientErrors(server, { logger, clock });
  } else {
    worker!.start();
    logger.info({ database: config.database.kind }, 'worker started');
    process.stdout.write('vidgen: worker started\n');
  }

  /**
   * SIGTERM (or SIGINT) drains: readiness fails and new requests get 503
   * (http/drain.ts), long polls answer now, the worker claims nothing more and
   * gives running renders VIDGEN_SHUTDOWN_GRACE_SECONDS before handing them
   * back to the queue; once both are done the listener closes and the process
   * exits 0. A second signal hands running renders back at once.
   */
  let firstSignalAt = 0;
  const drain = async (signal: string) => {
    if (shutdown.signal.aborted) {
      // One signal sent to a process group reaches the server both directly and through a wrapper that forwards
      // it (pnpm, a supervisor): the copies come within milliseconds. A deliberate second signal comes later.
      if (Date.now() - firstSignalAt < SAME_SIGNAL_WINDOW_MS) {
        logger.debug({ signal }, 'the same signal again (delivered twice): ignored');
        return;
      }
      logger.warn({ signal }, 'second signal: handing running renders back now');
      await worker?.stop({ graceMs: 0 });
      return;
    }
    firstSignalAt = Date.now();
    shutdown.abort();
    logger.info({ signal, graceMs: config.shutdownGraceMs }, 'draining for shutdown');
    await Promise.all([worker?.stop({ graceMs: config.shutdownGraceMs }), requests.idle()]);
    if (server) {
      const closed = new Promise<void>((resolve) => server!.close(() => resolve()));
      // Answers sent during the drain said Connection: close; idle keep-alive sockets go now.
      const http = server as import('node:http').Server;
      http.closeIdleConnections();
      // A client that keeps a connection busy past the grace loses it.
      setTimeout(() => http.closeAllConnections(), Math.max(1_000, config.shutdownGraceMs)).unref();
      await closed;
    }
    await backend.close();
    logger.info('stopped');
    process.exit(0);
  };
  const onSignal = (signal: string) =>
    void drain(signal).catch((error: unknown) => {
      logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    });
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

try {
  await runService(process.argv.slice(2));
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(`vidgen: configuration error: ${error.message}`);
  process.exit(2);
}
