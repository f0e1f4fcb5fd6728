/**
 * The upstream's status callbacks (upstream/callback-token.ts makes their URLs). A callback is a
 * hint, never a result: its body is not read, and a genuine one only makes the follower query that
 * task at once. No API key and no per-key budget: the per-task token is the credential.
 */
import type { Routes } from '../frame.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError } from '../errors.js';
import { bodySizeLimit, guarded } from '../middleware.js';
import { honoPath, paramsValidator, specOperation, summarise } from '../spec.js';
import { isUpstreamCallbackToken } from '../../upstream/callback-token.js';

// One answer for a wrong token, an unknown task and a deployment that asks for no callbacks.
const notFound = () => new ApiError('not_found', 'no callback for this task and token');

export function registerUpstreamCallbackRoutes(app: Routes, deps: AppDeps): void {
  const { store, clock, logger } = deps;
  const secret = deps.upstreamCallbackSecret;
  const validateQuery = paramsValidator<{ token: string }>('receiveUpstreamCallback', 'query');

  // Any Content-Type is taken and the body is never parsed; only its size is bounded.
  app.post(honoPath(specOperation('receiveUpstreamCallback').path), guarded([bodySizeLimit()], async (c) => {
    if (!secret) throw notFound();
    const query = validateQuery({ token: c.req.query('token') });
    if (!query.ok) throw new ApiError('invalid_request', summarise(query.details), query.details);
    const taskId = c.req.param('requestId')!;
    if (!isUpstreamCallbackToken(secret, taskId, query.value.token)) throw notFound();

    // The token was made by us for this id, so whatever the store says, there is nothing for the upstream to retry.
    const followed = await store.requestUpstreamCheck({ taskId, now: clock.now() });
    if (followed) deps.wakeWorkers?.('upstream');
    logger.debug({ correlationId: c.get('correlationId'), taskId, followed }, 'upstream callback');
    return c.body(null, 204);
  }));
}
