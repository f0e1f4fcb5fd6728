/**
 * The account's webhooks, managed by one of its keys (`webhooks:manage`): its deliveries and their
 * attempts, sending one again, and the signing secret (shown, rotated).
 */
import type { Routes } from '../frame.js';
import type { components, RequestBody, SuccessBody } from '@vidgen/types';
import { rotateWebhookSecret } from '../../accounts.js';
import { decodeCursor, encodeCursor } from '../../domain/cursor.js';
import type { DeliveryAttempt, DeliveryRecord, DeliveryStatus } from '../../store/store.js';
import { answer } from '../answer.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError, type ErrorDetail } from '../errors.js';
import { authenticate, guarded, optionalJsonBody, readOptionalJson } from '../middleware.js';
import { rateLimit } from '../rate-limit.js';
import { bodyValidator, bundleText, componentValidator, honoPath, paramsValidator, schemaDefault, specOperation, summarise } from '../spec.js';

type Delivery = components['schemas']['WebhookDelivery'];
type RotateRequest = RequestBody<'rotateWebhookSecret'>;

/** The answer holds a secret: no cache may keep it. */
const NO_STORE = { 'Cache-Control': 'no-store' };

const invalid = (details: ErrorDetail[]) => new ApiError('invalid_request', summarise(details), details);
/** One answer for an id of no delivery, of another account's delivery, and of any shape. */
const notFound = (id: string) => new ApiError('not_found', `no webhook delivery ${id}`);
const iso = (date: Date | null) => (date ? date.toISOString() : null);

/**
 * The spec's shape of a delivery id (`WebhookDelivery.id`): an id of another shape names no delivery
 * and is answered without asking the store (PostgreSQL refuses some bytes, e.g. NUL).
 */
const DELIVERY_ID = new RegExp(JSON.parse(bundleText).components.schemas.WebhookDelivery.properties.id.pattern as string);

export const toDeliveryResource = (delivery: DeliveryRecord): Delivery => ({
  id: delivery.id,
  requestId: delivery.taskId,
  url: delivery.url,
  eventType: delivery.eventType as Delivery['eventType'],
  status: delivery.status,
  attempts: delivery.attempts,
  lastAttemptAt: iso(delivery.lastAttemptAt),
  // Due only while pending.
  nextAttemptAt: delivery.status === 'pending' ? iso(delivery.nextAttemptAt) : null,
  createdAt: delivery.createdAt.toISOString(),
});

const toAttempt = (attempt: DeliveryAttempt): components['schemas']['WebhookAttempt'] => ({
  attemptedAt: attempt.attemptedAt.toISOString(),
  statusCode: attempt.statusCode,
  error: attempt.error,
  durationMs: attempt.durationMs,
});

/** The filters a list cursor is issued for, as the one string a cursor keeps (domain/cursor.ts). */
const filterOf = (status: DeliveryStatus | undefined, requestId: string | undefined) => JSON.stringify([status ?? null, requestId ?? null]);

export function registerWebhookRoutes(app: Routes, deps: AppDeps): void {
  const { store, clock, config } = deps;
  const limits = { rateLimiter: deps.rateLimiter, clock, rateLimits: config.rateLimits };
  const auth = (operationId: string) => [authenticate(deps, specOperation(operationId).scopes ?? []), rateLimit(limits, 'read')];
  const path = (operationId: string) => honoPath(specOperation(operationId).path);
  const validateListQuery = paramsValidator<{ limit?: number; cursor?: string; status?: DeliveryStatus; requestId?: string }>('listWebhookDeliveries', 'query');
  const validateRotateBody = bodyValidator<RotateRequest>('rotateWebhookSecret');
  const defaultOverlapHours = schemaDefault('RotateWebhookSecretRequest', 'overlapHours') as number;
  const isRequestId = componentValidator('RequestId');

  /** The delivery the path names, if it is the caller's account's; 404 otherwise, whatever the reason. */
  async function ownDelivery(accountId: string, id: string): Promise<DeliveryRecord> {
    const delivery = DELIVERY_ID.test(id) ? await store.getDelivery(id) : undefined;
    if (!delivery || delivery.accountId !== accountId) throw notFound(id);
    return delivery;
  }

  app.get(path('listWebhookDeliveries'), guarded([...auth('listWebhookDeliveries')], async (c) => {
    const query = validateListQuery(c.req.query());
    if (!query.ok) throw invalid(query.details);
    const { limit = 20, cursor, status, requestId } = query.value;
    const filter = filterOf(status, requestId);
    let after: { createdAt: Date; id: string } | undefined;
    if (cursor) {
      const position = decodeCursor(cursor);
      if (!position || !DELIVERY_ID.test(position.id)) throw invalid([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
      if (position.filter !== filter) {
        throw invalid([{ field: 'cursor', message: 'was issued for other filters; keep the same status and requestId while following a cursor' }]);
      }
      after = position;
    }
    const accountId = c.get('apiKey').accountId;
    // A requestId that is no RequestId names no task: nothing matches, and the store is not asked.
    const rows = requestId !== undefined && !isRequestId(requestId) ? [] : await store.listDeliveriesPage({ accountId, limit: limit + 1, status, taskId: requestId, after });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const nextCursor = rows.length > limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id, filter }) : null;
    return answer(c, { success: true, data: page.map(toDeliveryResource), nextCursor } satisfies SuccessBody<'listWebhookDeliveries'>, 200);
  }));

  app.get(path('getWebhookDelivery'), guarded([...auth('getWebhookDelivery')], async (c) => {
    const delivery = await ownDelivery(c.get('apiKey').accountId, c.req.param('deliveryId')!);
    const attempts = await store.listDeliveryAttempts(delivery.id);
    return answer(c, { success: true, ...toDeliveryResource(delivery), attemptHistory: attempts.map(toAttempt) } satisfies SuccessBody<'getWebhookDelivery'>, 200);
  }));

  // No body is read: one that is sent is ignored.
  app.post(path('redeliverWebhook'), guarded([...auth('redeliverWebhook')], async (c) => {
    const id = c.req.param('deliveryId')!;
    await ownDelivery(c.get('apiKey').accountId, id);
    const delivery = await store.redeliver({ deliveryId: id, now: clock.now() });
    if (!delivery) throw notFound(id);
    // Its job is available now: a worker in this process need not wait for its poll.
    deps.wakeWorkers?.('jobs');
    return answer(c, { success: true, delivery: toDeliveryResource(delivery) } satisfies SuccessBody<'redeliverWebhook'>, 202);
  }));

  app.get(path('getWebhookSecret'), guarded([...auth('getWebhookSecret')], async (c) => {
    const accountId = c.get('apiKey').accountId;
    const state = await store.webhookSecretState(accountId, clock.now());
    // The key's account exists (a key belongs to one): nothing to answer but a fault.
    if (!state) throw new Error(`no webhook secret for account ${accountId}`);
    const body = { success: true, secret: state.secret, previousSecretValidUntil: iso(state.previousSecretValidUntil) } satisfies SuccessBody<'getWebhookSecret'>;
    return answer(c, body, 200, NO_STORE);
  }));

  app.post(path('rotateWebhookSecret'), guarded([...auth('rotateWebhookSecret'), optionalJsonBody()], async (c) => {
    // No body, or an empty one: `{}`, the default overlap.
    const checked = validateRotateBody((await readOptionalJson(c)) ?? {});
    if (!checked.ok) throw invalid(checked.details);
    const accountId = c.get('apiKey').accountId;
    const overlapHours = checked.value.overlapHours ?? defaultOverlapHours;
    const rotated = await rotateWebhookSecret(store, { accountId, overlapHours, now: clock.now() });
    if (!rotated) throw new Error(`no account ${accountId} to rotate the webhook secret of`);
    const body = { success: true, secret: rotated.secret, previousSecretValidUntil: iso(rotated.previousSecretValidUntil) } satisfies SuccessBody<'rotateWebhookSecret'>;
    return answer(c, body, 200, NO_STORE);
  }));
}
