/** Submit, query (with long poll), list and cancel generation tasks. */
import { createHash } from 'node:crypto';
import type { Routes } from '../frame.js';
import type { RequestBody, SuccessBody } from '@vidgen/types';
import { priceOf, type AspectRatio, type Resolution } from '../../domain/catalog.js';
import { decodeCursor, encodeCursor } from '../../domain/cursor.js';
import { newRequestId } from '../../domain/ids.js';
import { checkSubmissionRules, inferMode, mediaKindOf } from '../../domain/rules.js';
import { isTerminal, pollHintSeconds, type TaskState } from '../../domain/states.js';
import { pageKeyPosition, toTaskResource } from '../../domain/task-view.js';
import type { TaskRecord } from '../../store/store.js';
import { answer, answerJson } from '../answer.js';
import { requestHeader, type AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { onShutdown } from '../drain.js';
import { ApiError } from '../errors.js';
import { authenticate, guarded, jsonBody, readJson } from '../middleware.js';
import { rateLimit } from '../rate-limit.js';
import { TaskAnswers } from '../task-answers.js';
import { bodyValidator, componentValidator, honoPath, paramsValidator, schemaDefault, specOperation, summarise } from '../spec.js';

type SubmitRequest = RequestBody<'submitGeneration'>;

const BASE = '/api/open/v1/video/generations';
/** Characters of task answers a process keeps for list pages (task-answers.ts): at most ≈ 16 MB, ≈ 11,000 answers of a usual size. */
const TASK_ANSWERS_KEPT = 8_000_000;
const EMPTY_DATA = '"data":[]';

const invalid = (details: { field?: string; message: string }[]) => new ApiError('invalid_request', summarise(details), details);
const notFound = (id: string) => new ApiError('not_found', `no task ${id}`);

/** Key-order-independent JSON, so that `{a,b}` and `{b,a}` are the same body for idempotency. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export function registerGenerationRoutes(app: Routes, deps: AppDeps): void {
  const { store, clock, events, config } = deps;
  const limits = { rateLimiter: deps.rateLimiter, clock, rateLimits: config.rateLimits };
  /** The key and its scopes, then its budget: submissions have their own, everything else shares `read`. */
  const auth = (operationId: string) => [
    authenticate(deps, specOperation(operationId).scopes ?? []),
    rateLimit(limits, operationId === 'submitGeneration' ? 'submit' : 'read'),
  ];

  const answers = new TaskAnswers(TASK_ANSWERS_KEPT);
  const validateSubmitBody = bodyValidator<SubmitRequest>('submitGeneration');
  const validateSubmitHeaders = paramsValidator<{ 'Idempotency-Key'?: string }>('submitGeneration', 'header');
  const noHeaders = validateSubmitHeaders({});
  const validateGetQuery = paramsValidator<{ wait?: number }>('getGeneration', 'query');
  const validateListQuery = paramsValidator<{ limit?: number; cursor?: string; status?: TaskState }>('listGenerations', 'query');
  // An id that is not a RequestId names no task: answered without asking the store (PostgreSQL refuses some bytes, e.g. NUL).
  const isRequestId = componentValidator('RequestId');
  const defaults = {
    duration: schemaDefault('SubmitGenerationRequest', 'duration') as number,
    resolution: schemaDefault('SubmitGenerationRequest', 'resolution') as Resolution,
    aspectRatio: schemaDefault('SubmitGenerationRequest', 'aspectRatio') as AspectRatio,
  };

  app.post(honoPath(specOperation('submitGeneration').path), guarded([...auth('submitGeneration'), jsonBody()], async (c) => {
    // The header is optional: only one that came is checked against the spec.
    const given = requestHeader(c, 'idempotency-key');
    const headers = given === undefined ? noHeaders : validateSubmitHeaders({ 'idempotency-key': given });
    if (!headers.ok) throw invalid(headers.details);
    const body = await readJson(c);
    const checked = validateSubmitBody(body);
    if (!checked.ok) throw invalid(checked.details);
    const request = checked.value;
    const violations = checkSubmissionRules(request, { media: config.media?.allowLoopback ?? false, webhooks: config.webhooks?.allowLoopback ?? false });
    if (violations.length) throw invalid(violations);

    const now = clock.now();
    const accountId = c.get('apiKey').accountId;
    const mediaUrls = request.mediaUrls ?? [];
    const resolution = request.resolution ?? defaults.resolution;
    const duration = request.duration ?? defaults.duration;
    const idempotencyKey = headers.value['Idempotency-Key'];
    const outcome = await store.submitTask({
      task: {
        id: newRequestId(now),
        accountId,
        model: request.model,
        prompt: request.prompt,
        duration,
        aspectRatio: request.aspectRatio ?? defaults.aspectRatio,
        resolution,
        mode: inferMode(mediaUrls.map((url) => mediaKindOf(url)!)),
        mediaUrls,
        metadata: (request.metadata as Record<string, unknown> | undefined) ?? null,
        webhookUrl: request.webhookUrl ?? null,
        creditsCharged: priceOf(config.prices, request.model, resolution, duration),
        deadlineAt: new Date(now.getTime() + config.taskDeadlineMs),
      },
      job: { maxAttempts: config.jobMaxAttempts, provider: config.providers[request.model] },
      idempotency: idempotencyKey
        ? {
            key: idempotencyKey,
            fingerprint: createHash('sha256').update(canonicalJson(body)).digest('hex'),
            expiresAt: new Date(now.getTime() + config.idempotencyTtlMs),
          }
        : null,
      maxActiveTasks: config.maxActiveTasks || null,
      now,
      respond: (task) => ({
        status: 202,
        body: { success: true, requestId: task.id, status: 'queued', creditsCharged: task.creditsCharged } satisfies SuccessBody<'submitGeneration'>,
      }),
    });

    switch (outcome.kind) {
      case 'created':
      case 'replayed': {
        const accepted = outcome.response.body as SuccessBody<'submitGeneration'>;
        const location = `${BASE}/${accepted.requestId}`;
        if (outcome.kind === 'replayed') return answer(c, accepted, 202, { Location: location, 'Idempotent-Replayed': 'true' });
        deps.metrics?.creditsCharged(accepted.creditsCharged);
        deps.wakeWorkers?.('jobs');
        return answer(c, accepted, 202, { Location: location });
      }
      case 'insufficient_credits':
        throw new ApiError('insufficient_credits', `this task costs ${outcome.required} credits; the balance is ${outcome.available}`, [
          { field: 'credits.required', message: 'credits this task costs', value: outcome.required },
          { field: 'credits.available', message: 'credits on the account', value: outcome.available },
        ]);
      case 'too_many_active_tasks':
        throw new ApiError('too_many_active_tasks', `this account already has ${outcome.limit} queued or processing tasks, the most it may have at once`, undefined, {
          'Retry-After': '5',
        });
      case 'idempotency_key_reused':
        throw new ApiError('idempotency_key_reused', 'this Idempotency-Key was already used with a different request body');
      case 'idempotency_in_progress':
        throw new ApiError('idempotency_in_progress', 'a request with this Idempotency-Key is still in progress', undefined, { 'Retry-After': '1' });
    }
  }));

  /** Resolves with the task once its status differs from `from`, or after `seconds`. */
  async function waitForChange(accountId: string, id: string, from: TaskState, seconds: number): Promise<TaskRecord | undefined> {
    let release = () => {};
    const changed = new Promise<void>((resolve) => {
      const unsubscribe = events.subscribe(id, (status) => status !== from && resolve());
      const cancelTimer = clock.setTimeout(resolve, seconds * 1000);
      // A draining process answers its long polls now, with the task as it is.
      const cancelShutdown = onShutdown(deps.shutdown, resolve);
      release = () => (unsubscribe(), cancelTimer(), cancelShutdown());
    });
    try {
      // Read again after subscribing: a change between the first read and the subscription is not lost.
      const current = await store.getTask(accountId, id);
      if (!current || current.status !== from) return current;
      await changed;
      return await store.getTask(accountId, id);
    } finally {
      release();
    }
  }

  app.get(honoPath(specOperation('getGeneration').path), guarded(auth('getGeneration'), async (c) => {
    const query = validateGetQuery(c.req.query());
    if (!query.ok) throw invalid(query.details);
    const accountId = c.get('apiKey').accountId;
    const id = c.req.param('requestId')!;
    let task = isRequestId(id) ? await store.getTask(accountId, id) : undefined;
    if (!task) throw notFound(id);
    if (query.value.wait && !isTerminal(task.status)) task = (await waitForChange(accountId, id, task.status, query.value.wait)) ?? task;
    const hint = pollHintSeconds(task.status);
    return answer(c, toTaskResource(task) satisfies SuccessBody<'getGeneration'>, 200, hint === undefined ? undefined : { 'Retry-After': String(hint) });
  }));

  app.get(honoPath(specOperation('listGenerations').path), guarded(auth('listGenerations'), async (c) => {
    const query = validateListQuery(c.req.query());
    if (!query.ok) throw invalid(query.details);
    const { limit = 20, cursor, status } = query.value;
    let after: { createdAt: Date; id: string } | undefined;
    if (cursor) {
      const position = decodeCursor(cursor);
      if (!position || !isRequestId(position.id)) throw invalid([{ field: 'cursor', message: 'is not a cursor this service issued' }]);
      if (position.filter !== (status ?? null)) {
        throw invalid([{ field: 'cursor', message: 'was issued for another status filter; keep the same status while following a cursor' }]);
      }
      after = position;
    }
    const accountId = c.get('apiKey').accountId;
    // The answers kept for the keys the store reads come back with the entries (another request may replace them after).
    const entries = await store.listTaskPage({ accountId, status, limit: limit + 1, after }, (key) => answers.get(key));
    const data: string[] = [];
    for (const entry of entries) {
      const json = entry.task === undefined ? entry.known : answers.keep(entry.key, JSON.stringify(toTaskResource(entry.task)));
      // The entry after the page (there is a next one) is kept for that page, not answered.
      if (data.length < limit) data.push(json);
    }
    const last = entries.length > limit ? pageKeyPosition(entries[limit - 1]!.key) : undefined;
    const nextCursor = last ? encodeCursor({ createdAt: last.createdAt, id: last.id, filter: status ?? null }) : null;
    // The envelope as the spec has it, with the tasks' JSON where its empty `data` is: what JSON.stringify of the whole would give.
    const envelope = JSON.stringify({ success: true, data: [], nextCursor } satisfies SuccessBody<'listGenerations'>);
    const at = envelope.indexOf(EMPTY_DATA) + EMPTY_DATA.length - 1;
    return answerJson(c, `${envelope.slice(0, at)}${data.join(',')}${envelope.slice(at)}`, 200);
  }));

  app.post(honoPath(specOperation('cancelGeneration').path), guarded(auth('cancelGeneration'), async (c) => {
    const id = c.req.param('requestId')!;
    if (!isRequestId(id)) throw notFound(id);
    const outcome = await store.cancelTask({ accountId: c.get('apiKey').accountId, id, now: clock.now() });
    switch (outcome.kind) {
      case 'not_found':
        throw notFound(id);
      case 'invalid_state':
        throw new ApiError('invalid_state', `the task has already ${outcome.status} and cannot be cancelled`, [
          { field: 'status', message: 'only queued or processing tasks can be cancelled', value: outcome.status },
        ]);
      case 'cancelled':
        events.publish(id, outcome.task.status);
        deps.metrics?.creditsRefunded(outcome.task.creditsRefunded);
        // An upstream task of it is due for a check now (cancelled there, or its result to be discarded): the follower looks.
        deps.wakeWorkers?.();
        break;
      case 'already_cancelled':
        break;
    }
    return answer(c, { success: true, requestId: id, status: 'cancelled' } satisfies SuccessBody<'cancelGeneration'>, 200);
  }));

}
