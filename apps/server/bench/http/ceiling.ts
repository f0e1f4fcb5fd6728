/**
 * The ceiling of the HTTP benchmark: a bare Hono app on @hono/node-server, in
 * its own process like the server, answering every request (any method, any
 * path) with one fixed JSON body: the bytes in the file named by argv[2], which
 * the benchmark takes from the real server's answer for a succeeded task.
 * No middleware, no store, the body serialized once.
 */
import { readFileSync } from 'node:fs';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const body = readFileSync(process.argv[2]!, 'utf8');
const app = new Hono();
app.all('*', (c) => c.body(body, 200, { 'Content-Type': 'application/json' }));
serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`ceiling: listening on http://127.0.0.1:${info.port}\n`);
});
process.on('SIGTERM', () => process.exit(0));
