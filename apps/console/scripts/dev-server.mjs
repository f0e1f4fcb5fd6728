/**
 * The console's development server: Vite (with apps/console/vite.config.ts, so the console is at
 * /console/) standing in for the origin the real server gives the console, in one of two modes.
 *
 * - mock (no `api`): the Prism mock on the bundled spec (spec/dist/openapi.json), on a port the
 *   OS chooses, answers /api/open/v1, /openapi.json and /healthz with the spec's examples; this
 *   server answers /files/*.mp4 itself with a small real H.264 video (dev/sample.mp4), so the
 *   examples' `output.url` (http://localhost:8080/files/gen_….mp4?…, the real server's default
 *   address) plays when the console is on localhost:8080, the default here.
 * - real (`api` is a server's origin): /api, /files, /openapi.json and /healthz go to that server.
 *
 * The proxy changes nothing but the target: same path, query, method, headers (Host included)
 * and body. Used by scripts/dev.mjs and by the browser tests (test/e2e/mock.test.ts).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, statSync, createReadStream } from 'node:fs';
import { createServer as createNetServer } from 'node:net';
import { resolve } from 'node:path';

export const CONSOLE_DIR = resolve(import.meta.dirname, '..');
/** The workspace's spec package (its exports name only the bundle and the docs, so by path). */
export const SPEC_DIR = resolve(CONSOLE_DIR, '../../spec');
export const BUNDLE = resolve(SPEC_DIR, 'dist/openapi.json');
export const PRISM_BIN = resolve(SPEC_DIR, 'node_modules/.bin/prism');
/**
 * 640×360, 24 fps, 4 s, H.264 (main, yuv420p, +faststart), ~40 KB: a moving dusk gradient with
 * "vidgen" and a running clock. Made with the ffmpeg of @ffmpeg-installer/ffmpeg (apps/server's):
 *
 *   ffmpeg -f lavfi -i "color=c=black:s=640x360:r=24:d=4,format=rgb24,
 *     geq=r='clip(40+170*pow(Y/H\,1.4)+35*sin(2*PI*(X/W+T/4))\,0\,255)'
 *        :g='clip(25+95*Y/H+20*sin(2*PI*(Y/H-T/4))\,0\,255)'
 *        :b='clip(125-70*Y/H+40*cos(2*PI*(X/W*0.5+T/4))\,0\,255)',
 *     drawtext=fontfile=/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf:text='vidgen':fontsize=64
 *        :fontcolor=white@0.92:x=(w-text_w)/2:y=(h-text_h)/2-24,
 *     drawtext=fontfile=/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
 *        :text='sample video  %{eif\:t\:d}.%{eif\:mod(n\,24)*100/24\:d\:2} s':fontsize=24
 *        :fontcolor=white@0.85:x=(w-text_w)/2:y=(h/2)+36,
 *     drawbox=x='(w-40)*t/4':y=h-12:w=40:h=6:color=white@0.8:t=fill,format=yuv420p"
 *     -c:v libx264 -preset slow -crf 30 -pix_fmt yuv420p -profile:v main -movflags +faststart -an dev/sample.mp4
 *
 * (the filter graph on one line, without the line breaks and indentation shown here)
 */
export const SAMPLE_VIDEO = resolve(CONSOLE_DIR, 'dev/sample.mp4');

export const CLIENT_DIR = resolve(CONSOLE_DIR, '../../packages/client');

/**
 * What `pnpm dev` needs that a fresh checkout lacks (both are build outputs, not committed): the
 * spec's bundle (made again when openapi.yaml is newer, so Prism serves the examples as edited)
 * for the mock, and the client's dist/ (the console imports @vidgen/client). Says what it does.
 */
export async function ensureBuilt({ mock = true, log = (line) => console.log(line) } = {}) {
  const run = (file, args, cwd) =>
    new Promise((done, fail) =>
      execFile(file, args, { cwd }, (error, stdout, stderr) => (error ? fail(new Error(`${[file, ...args].join(' ')} failed:\n${stdout}${stderr}`)) : done())),
    );
  const source = resolve(SPEC_DIR, 'openapi.yaml');
  if (mock && (!existsSync(BUNDLE) || statSync(BUNDLE).mtimeMs < statSync(source).mtimeMs)) {
    log('  bundling the spec (spec/dist/openapi.json)…');
    await run(resolve(SPEC_DIR, 'node_modules/.bin/redocly'), ['bundle', 'openapi.yaml', '--output', 'dist/openapi.json', '--ext', 'json'], SPEC_DIR);
  }
  if (!existsSync(resolve(CLIENT_DIR, 'dist/index.js'))) {
    log('  building @vidgen/client (packages/client/dist)…');
    await run(process.execPath, ['scripts/build.mjs'], CLIENT_DIR);
  }
}

export const MOCK_DEFAULTS = { host: 'localhost', port: 8080 };
export const REAL_DEFAULTS = { host: '127.0.0.1', port: 5173 };

/** A port refused: the message is one line, for the person who ran `pnpm dev`. */
export class PortTakenError extends Error {
  constructor(host, port) {
    super(`port ${port} on ${host} is taken: stop what uses it (a vidgen server?) or choose another with VIDGEN_CONSOLE_PORT`);
    this.name = 'PortTakenError';
    this.code = 'EADDRINUSE';
  }
}

/** `localhost` is bound as 127.0.0.1: one address, whatever the resolver prefers. */
const bindAddress = (host) => (host === 'localhost' ? '127.0.0.1' : host);

function freePort() {
  return new Promise((done, fail) => {
    const server = createNetServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

/** Refuses early (before Prism starts) when the port is taken. Vite's strictPort still guards the race. */
function ensurePortFree(host, port) {
  if (port === 0) return Promise.resolve();
  return new Promise((done, fail) => {
    const probe = createNetServer();
    probe.once('error', (error) => fail(error.code === 'EADDRINUSE' || error.code === 'EACCES' ? new PortTakenError(host, port) : error));
    probe.listen(port, bindAddress(host), () => probe.close(() => done()));
  });
}

/** Starts Prism on the bundle and resolves once it says it listens (its own line; no polling). */
async function startPrism({ onUnexpectedExit }) {
  if (!existsSync(BUNDLE)) throw new Error(`no bundled spec at ${BUNDLE}: run \`corepack pnpm --filter @vidgen/spec bundle\` first`);
  if (!existsSync(PRISM_BIN)) throw new Error(`no Prism at ${PRISM_BIN}: run \`corepack pnpm install\` first`);
  const port = await freePort();
  const child = spawn(PRISM_BIN, ['mock', BUNDLE, '--host', '127.0.0.1', '--port', String(port), '--errors'], { stdio: ['ignore', 'pipe', 'pipe'] });
  // Its request log is not shown; the last lines are kept to explain an early exit.
  let output = '';
  const keep = (chunk) => {
    output = (output + chunk.toString()).slice(-8_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const killOnExit = () => child.kill('SIGTERM');
  process.on('exit', killOnExit);
  let stopping = false;
  const exited = new Promise((done) => child.once('exit', (code, signal) => done({ code, signal })));
  exited.then(({ code, signal }) => {
    process.off('exit', killOnExit);
    if (!stopping) onUnexpectedExit?.(new Error(`Prism exited (${signal ?? code}):\n${output.trim()}`));
  });
  try {
    await new Promise((done, fail) => {
      const onData = () => output.includes('Prism is listening') && done();
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('error', fail);
      exited.then(({ code, signal }) => fail(new Error(`Prism exited (${signal ?? code}) before listening:\n${output.trim()}`)));
    });
  } catch (error) {
    stopping = true;
    child.kill('SIGTERM');
    throw error;
  }
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      stopping = true;
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** A single `bytes=` range against the size (as the server's files route reads it): undefined = all, null = 416. */
export function parseRange(header, size) {
  const match = header && /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const [, from, to] = match;
  if (from === '') {
    const suffix = Number(to);
    if (suffix === 0) return null;
    if (size === 0) return undefined;
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  if (start >= size) return null;
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  return end < start ? undefined : { start, end };
}

/** GET/HEAD /files/<anything>.mp4 → dev/sample.mp4, with single ranges (206, Content-Range), as the real route answers. */
function sampleVideoMiddleware() {
  return (req, res, next) => {
    const path = (req.url ?? '').split('?')[0];
    if (!path.startsWith('/files/')) return next();
    const json = (status, code, message, extra = {}) => {
      res.writeHead(status, { 'Content-Type': 'application/json', ...extra });
      res.end(req.method === 'HEAD' ? undefined : JSON.stringify({ success: false, error: { code, message } }));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(405, 'method_not_allowed', 'GET or HEAD only', { Allow: 'GET, HEAD' });
    if (!/^\/files\/[^/]+\.mp4$/.test(path)) return json(404, 'not_found', `no file ${path.slice('/files/'.length)}`);
    const size = statSync(SAMPLE_VIDEO).size;
    const range = parseRange(req.headers.range, size);
    if (range === null) return json(416, 'range_not_satisfiable', `the file has ${size} bytes`, { 'Content-Range': `bytes */${size}` });
    const { start, end } = range ?? { start: 0, end: size - 1 };
    const headers = {
      'Content-Type': 'video/mp4',
      'Accept-Ranges': 'bytes',
      'Content-Length': String(end - start + 1),
      'Cache-Control': 'no-cache',
      'X-Content-Type-Options': 'nosniff',
    };
    if (range) headers['Content-Range'] = `bytes ${start}-${end}/${size}`;
    res.writeHead(range ? 206 : 200, headers);
    if (req.method === 'HEAD') return res.end();
    createReadStream(SAMPLE_VIDEO, { start, end }).pipe(res);
  };
}

/** `/` → `/console/`: the console is the only thing this server shows. */
function rootRedirectMiddleware() {
  return (req, res, next) => {
    if ((req.url === '/' || req.url === '/console') && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(302, { Location: '/console/' });
      return res.end();
    }
    next();
  };
}

/**
 * @param {{ api?: string, port?: number, host?: string, build?: boolean, watch?: boolean, logLevel?: 'info' | 'warn' | 'error' | 'silent', onUnexpectedExit?: (error: Error) => void }} [options]
 */
export async function startDevServer(options = {}) {
  const api = options.api ? new URL(options.api).origin : undefined;
  const mode = api ? 'real' : 'mock';
  const defaults = api ? REAL_DEFAULTS : MOCK_DEFAULTS;
  const host = options.host ?? defaults.host;
  const port = options.port ?? defaults.port;
  await ensurePortFree(host, port);
  if (options.build) await ensureBuilt({ mock: mode === 'mock' });

  const prism = api ? undefined : await startPrism({ onUnexpectedExit: options.onUnexpectedExit });
  const target = api ?? prism.url;
  // Nothing rewritten: not the path, not the Host header (changeOrigin off), not the body.
  const to = { target, changeOrigin: false, ws: false };
  const proxy = api
    ? { '/api': to, '/files': to, '/openapi.json': to, '/healthz': to }
    : { '/api/open/v1': to, '/openapi.json': to, '/healthz': to };

  let vite;
  try {
    const { createServer } = await import('vite');
    vite = await createServer({
      configFile: resolve(CONSOLE_DIR, 'vite.config.ts'),
      root: CONSOLE_DIR,
      mode: 'development',
      clearScreen: false,
      logLevel: options.logLevel ?? 'info',
      server: {
        host: bindAddress(host),
        port,
        strictPort: true,
        proxy,
        // Tests turn hot reload off: an edit elsewhere in the tree must not reload the page under test.
        ...(options.watch === false ? { watch: null, hmr: false } : {}),
        // Every page transformed ahead, so a first visit finds its dependencies already optimized.
        warmup: { clientFiles: ['./src/main.tsx', './src/features/**/*.tsx'] },
      },
      plugins: [
        {
          name: 'vidgen-console-dev',
          configureServer(server) {
            server.middlewares.use(rootRedirectMiddleware());
            if (!api) server.middlewares.use(sampleVideoMiddleware());
          },
        },
      ],
    });
    await vite.listen();
  } catch (error) {
    await vite?.close().catch(() => {});
    await prism?.close();
    if (error?.code === 'EADDRINUSE' || /already in use/i.test(String(error?.message))) throw new PortTakenError(host, port);
    throw error;
  }

  const address = vite.httpServer.address();
  const url = `http://${host}:${address.port}/console/`;
  let closing;
  return {
    url,
    mode,
    api: target,
    port: address.port,
    close() {
      closing ??= (async () => {
        await vite.close();
        await prism?.close();
      })();
      return closing;
    },
  };
}
