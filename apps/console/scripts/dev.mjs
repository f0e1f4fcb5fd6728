#!/usr/bin/env node
/**
 * `pnpm --filter @vidgen/console dev`: the console with hot reload.
 *
 *   (default)                                   on the Prism mock (the spec's examples), at http://localhost:8080/console/
 *   VIDGEN_CONSOLE_API=http://127.0.0.1:8080     against a running server, at http://127.0.0.1:5173/console/
 *   VIDGEN_CONSOLE_PORT=…  VIDGEN_CONSOLE_HOST=…  another port or address
 */
import { PortTakenError, startDevServer } from './dev-server.mjs';

const env = (name) => process.env[name]?.trim() || undefined;

function port() {
  const value = env('VIDGEN_CONSOLE_PORT');
  if (value === undefined) return undefined;
  const number = Number(value);
  if (!Number.isInteger(number) || number < 0 || number > 65535) {
    console.error(`vidgen console: VIDGEN_CONSOLE_PORT must be a port number (0–65535), not ${JSON.stringify(value)}`);
    process.exit(1);
  }
  return number;
}

function api() {
  const value = env('VIDGEN_CONSOLE_API');
  if (value === undefined) return undefined;
  try {
    const url = new URL(value);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
    return url.origin;
  } catch {
    console.error(`vidgen console: VIDGEN_CONSOLE_API must be a server's origin, e.g. http://127.0.0.1:8080, not ${JSON.stringify(value)}`);
    process.exit(1);
  }
}

let server;
try {
  server = await startDevServer({
    api: api(),
    build: true,
    port: port(),
    host: env('VIDGEN_CONSOLE_HOST'),
    onUnexpectedExit: (error) => {
      console.error(`vidgen console: the mock stopped. ${error.message}`);
      process.exit(1);
    },
  });
} catch (error) {
  console.error(`vidgen console: ${error instanceof PortTakenError ? error.message : error?.stack ?? error}`);
  process.exit(1);
}

console.log('');
if (server.mode === 'mock') {
  console.log(`  vidgen console on the mock: open ${server.url}`);
  console.log(`  the API is Prism at ${server.api}, answering the spec's examples; sign in with any key of the form vg_test_…`);
  console.log('  against a running server instead: VIDGEN_CONSOLE_API=http://127.0.0.1:8080 corepack pnpm --filter @vidgen/console dev');
} else {
  console.log(`  vidgen console against ${server.api}: open ${server.url}`);
  console.log(`  sign in with an API key of that server (the first start of a server prints one)`);
}
console.log('');

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await server.close().catch((error) => console.error(error));
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
process.on('SIGHUP', stop);
