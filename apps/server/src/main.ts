/** The service's entry point: configuration, store, app, HTTP server, shutdown. */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { serve } from '@hono/node-server';
import pino from 'pino';
import { bootstrapDevelopmentAccount } from './accounts.js';
import { createApp } from './app.js';
import { ConfigError, loadConfig } from './config.js';
import { createInProcessTaskEvents } from './events/in-process.js';
import { createMetrics } from './http/metrics.js';
import { systemClock } from './interfaces.js';
import { createOutputFiles, createPipelineWorker } from './pipeline.js';
import { SqliteStore } from './store/sqlite/sqlite-store.js';
import { openStore } from './store/open.js';

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

async function main() {
  const config = loadConfig();
  const logger = pino({ level: config.logLevel, base: { service: 'vidgen' } });
  const store = openStore(config);
  const clock = systemClock;

  if (config.devBootstrap) {
    const created = await bootstrapDevelopmentAccount(store, config.devCredits, clock.now());
    if (created) {
      // Printed once, to the console only: the key is not logged or stored in plain text.
      process.stdout.write(
        `\nvidgen: created a development account (${created.accountId}) with ${config.devCredits} credits.\n` +
          `vidgen: its API key (shown once):\n\n    ${created.key}\n\n`,
      );
    }
  }

  let draining = false;
  let listeningUrl = `http://127.0.0.1:${config.port}`;
  const events = createInProcessTaskEvents();
  const files = createOutputFiles(config, () => listeningUrl);
  // The embedded queue lives in the SQLite store; other stores bring their own (multi-machine issue).
  const worker =
    config.worker && store instanceof SqliteStore
      ? createPipelineWorker({ config, store, events, clock, logger, files })
      : undefined;
  const app = createApp({
    store,
    clock,
    logger,
    events,
    config,
    metrics: createMetrics(store),
    docsHtml: docsLoader(),
    isDraining: () => draining,
    wakeWorkers: () => worker?.wake(),
    files,
  });
  const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
    listeningUrl = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${info.port}`;
    logger.info({ port: info.port, host: config.host, database: config.database.kind }, 'listening');
    process.stdout.write(`vidgen: listening on ${listeningUrl}\n`);
    worker?.start();
  });

  const shutdown = (signal: string) => {
    if (draining) return;
    draining = true;
    logger.info({ signal }, 'shutting down');
    server.close(async () => {
      await worker?.stop();
      await store.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

try {
  await main();
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  console.error(`vidgen: configuration error: ${error.message}`);
  process.exit(2);
}
