/**
 * The web console (apps/console) at /console: its page for /console and any path under it that
 * is not one of its files, so links into the app work on reload. No key is needed to load it; the
 * app asks for one and calls the API from this same origin. Its Content-Security-Policy is in
 * security-headers.ts.
 */
import type { Context } from 'hono';
import type { Routes } from '../frame.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import type { ConsoleAsset } from '../console-assets.js';

/** Whether the request's Accept-Encoding takes gzip (and does not refuse it with q=0). */
function acceptsGzip(header: string | undefined): boolean {
  return (header ?? '').split(',').some((part) => {
    const [coding, ...params] = part.trim().toLowerCase().split(';');
    if (coding !== 'gzip' && coding !== '*') return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

function send(c: Context<AppEnv>, asset: ConsoleAsset, cacheControl: string): Response {
  const gzip = asset.gzip && acceptsGzip(c.req.header('Accept-Encoding')) ? asset.gzip : undefined;
  const body = gzip ?? asset.body;
  return c.body(body as Uint8Array<ArrayBuffer>, 200, {
    'Content-Type': asset.type,
    'Content-Length': String(body.byteLength),
    'Cache-Control': cacheControl,
    ...(asset.gzip ? { Vary: 'Accept-Encoding' } : {}),
    ...(gzip ? { 'Content-Encoding': 'gzip' } : {}),
  });
}

export function registerConsoleRoutes(app: Routes, deps: AppDeps): void {
  const handler = (c: Context<AppEnv>) => {
    const assets = deps.consoleAssets?.();
    if (!assets) throw new ApiError('unavailable', 'the console has not been built: run `pnpm build`', undefined, { 'Retry-After': '60' });
    const path = c.req.path === '/console' ? '' : c.req.path.slice('/console/'.length);
    const file = assets.files.get(path);
    if (file) return send(c, file, file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache');
    // A missing script or stylesheet is a 404, not the page: a stale tab asking for an old build's chunk must fail visibly.
    if (path.startsWith('assets/')) throw new ApiError('not_found', `no console file ${c.req.path}`);
    return send(c, assets.page, 'no-cache');
  };
  // HEAD is answered by these too (Hono runs GET's handler and drops the body).
  app.get('/console', handler);
  app.get('/console/*', handler);
}
