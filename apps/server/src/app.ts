/**
 * createApp(deps) builds the Hono app from one bag of dependencies and listens
 * on nothing; `main.ts` serves it, tests call `app.request()`.
 */
import { Hono, type Context } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { AppEnv } from './http/context.js';
import type { AppDeps } from './http/deps.js';
import { answer } from './http/answer.js';
import { ApiError } from './http/errors.js';
import { createMetrics } from './http/metrics.js';
import { RequestsInFlight } from './http/drain.js';
import { requestFrame, type Routes } from './http/frame.js';
import { createApiKeyCache } from './http/middleware.js';
import { registerAccountRoutes } from './http/routes/account.js';
import { registerConsoleRoutes } from './http/routes/console.js';
import { registerFileRoutes } from './http/routes/files.js';
import { registerGenerationRoutes } from './http/routes/generations.js';
import { registerKeyRoutes } from './http/routes/keys.js';
import { registerModelRoutes } from './http/routes/models.js';
import { registerServiceRoutes } from './http/routes/service.js';
import { registerUpstreamCallbackRoutes } from './http/routes/upstream-callbacks.js';
import { registerWebhookRoutes } from './http/routes/webhooks.js';
import { honoPath, specOperations } from './http/spec.js';
import { isStoreUnavailable } from './store/unavailable.js';
import { withSafeErrors } from './logging.js';

export type { AppDeps } from './http/deps.js';

export function createApp(deps: AppDeps): Hono<AppEnv> {
  const requests = deps.requests ?? new RequestsInFlight();
  // Every log line the app writes serializes errors without their stack (logging.ts).
  deps = {
    ...deps,
    logger: withSafeErrors(deps.logger),
    metrics: deps.metrics ?? createMetrics(deps.store, { processMetrics: false, requestsInFlight: requests }),
    apiKeyCache: createApiKeyCache(deps, deps.config.keyCacheMs ?? 0),
  };
  const app = new Hono<AppEnv>();

  const answerError = (err: Error, c: Context<AppEnv>): Response => {
    if (err instanceof ApiError) {
      return answer(c, err.toBody(), err.status, err.headers);
    }
    if (err instanceof HTTPException && err.status < 500) {
      const error = new ApiError('invalid_request', err.message || 'the request is invalid');
      return answer(c, error.toBody(), 400);
    }
    if (isStoreUnavailable(err)) {
      deps.logger.error({ err, correlationId: c.get('correlationId') }, 'store unavailable');
      const error = new ApiError('unavailable', `the store is unreachable; retry shortly (correlation id ${c.get('correlationId')})`);
      return answer(c, error.toBody(), 503, { 'Retry-After': '1' });
    }
    deps.logger.error({ err, correlationId: c.get('correlationId') }, 'unexpected error');
    const error = new ApiError('internal_error', `an unexpected error occurred; correlation id ${c.get('correlationId')}`);
    return answer(c, error.toBody(), 500);
  };
  // Every route inside the request frame (frame.ts), each the only handler of its path and method: Hono then calls it
  // without composing a chain.
  const frame = requestFrame({ ...deps, metrics: deps.metrics!, requests, answerError });
  const routes: Routes = {
    get: (path, handler) => void app.get(path, frame(path, handler)),
    post: (path, handler) => void app.post(path, frame(path, handler)),
  };

  registerServiceRoutes(routes, deps);
  registerConsoleRoutes(routes, deps);
  registerModelRoutes(routes, deps);
  registerGenerationRoutes(routes, deps);
  registerAccountRoutes(routes, deps);
  registerFileRoutes(routes, deps);
  registerUpstreamCallbackRoutes(routes, deps);
  registerKeyRoutes(routes, deps);
  registerWebhookRoutes(routes, deps);

  // A known path with a method the spec does not give it: 405 with Allow. Told apart when no route matched (not as a
  // route of its own for every method, which would give every request to a known path two handlers to compose).
  const methodsByPath = new Map<string, string[]>();
  for (const op of specOperations) {
    const path = honoPath(op.path);
    methodsByPath.set(path, [...(methodsByPath.get(path) ?? []), op.method]);
  }
  // Each known path's 405, framed once here; the frame labels it by the path's pattern, as the route's own answers are.
  const knownPaths = [...methodsByPath].map(([path, methods]) => {
    const allow = [...new Set([...methods, ...(methods.includes('GET') ? ['HEAD'] : [])])].join(', ');
    return {
      // A parameter is one segment, as Hono's router matches it.
      pattern: new RegExp(`^${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:[A-Za-z0-9_]+/g, '[^/]+')}$`),
      answer: frame(path, () => {
        throw new ApiError('method_not_allowed', `this path supports ${allow}`, undefined, { Allow: allow });
      }),
    };
  });
  const notFound = frame('unmatched', (c) => answer(c, new ApiError('not_found', `no route ${c.req.method} ${c.req.path}`).toBody(), 404));
  app.notFound((c) => (knownPaths.find(({ pattern }) => pattern.test(c.req.path))?.answer ?? notFound)(c));

  // An error outside any route's frame (the frame's own).
  app.onError(answerError);

  return app;
}
