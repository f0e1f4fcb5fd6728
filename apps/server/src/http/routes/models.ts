/** The models, their rules and this deployment's prices. */
import type { Routes } from '../frame.js';
import type { SuccessBody } from '@vidgen/types';
import { describeModels } from '../../domain/catalog.js';
import { answer } from '../answer.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { authenticate, guarded } from '../middleware.js';
import { rateLimit } from '../rate-limit.js';
import { specOperation } from '../spec.js';

export function registerModelRoutes(app: Routes, deps: AppDeps): void {
  const op = specOperation('listModels');
  const body = { success: true, data: describeModels(deps.config.prices) } satisfies SuccessBody<'listModels'>;
  const limits = { rateLimiter: deps.rateLimiter, clock: deps.clock, rateLimits: deps.config.rateLimits };
  app.get(op.path, guarded([authenticate(deps, op.scopes ?? []), rateLimit(limits, 'read')], (c) => answer(c, body, 200)));
}
