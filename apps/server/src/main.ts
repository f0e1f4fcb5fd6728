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
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      console.error(`vidgen: configuration error: ${error.message}`);
      process.exit(2);
    }
    throw error;
  }
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
  const app = createApp({
    store,
    clock,
    logger,
    events: createInProcessTaskEvents(),
    config,
    metrics: createMetrics(store),
    docsHtml: docsLoader(),
    isDraining: () => draining,
  });
  const server = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, (info) => {
    logger.info({ port: info.port, host: config.host, database: config.database.kind }, 'listening');
    process.stdout.write(`vidgen: listening on http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${info.port}\n`);
  });

  const shutdown = (signal: string) => {
    if (draining) return;
    draining = true;
    logger.info({ signal }, 'shutting down');
    server.close(async () => {
      await store.close();
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

await main();
