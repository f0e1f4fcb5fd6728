/** Liveness, readiness, metrics, the spec and the reference page: no key needed. */
import type { Routes } from '../frame.js';
import type { SuccessBody } from '@vidgen/types';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { bundleText } from '../spec.js';

export function registerServiceRoutes(app: Routes, deps: AppDeps): void {
  app.get('/healthz', (c) => c.json({ status: 'ok' } satisfies SuccessBody<'getHealth'>, 200));

  app.get('/readyz', async (c) => {
    if (deps.shutdown?.aborted) throw new ApiError('unavailable', 'the service is shutting down; retry on another instance', undefined, { 'Retry-After': '1' });
    try {
      await deps.store.ping();
    } catch (error) {
      deps.logger.error({ err: error, correlationId: c.get('correlationId') }, 'store unreachable');
      throw new ApiError('unavailable', 'the store is unreachable', undefined, { 'Retry-After': '5' });
    }
    return c.json({ status: 'ok' } satisfies SuccessBody<'getReadiness'>, 200);
  });

  app.get('/metrics', async (c) => {
    const metrics = deps.metrics!;
    return c.body(await metrics.exposition(), 200, { 'Content-Type': metrics.registry.contentType });
  });

  app.get('/openapi.json', (c) => c.body(bundleText, 200, { 'Content-Type': 'application/json' }));

  app.get('/docs', (c) => {
    const html = deps.docsHtml?.();
    if (!html) throw new ApiError('unavailable', 'the reference has not been built: run `pnpm docs`', undefined, { 'Retry-After': '60' });
    return c.html(html, 200);
  });
}
