/** The account holder's view of the calling key's account: its summary, credit ledger and usage (tasks:read). */
import type { Routes } from '../frame.js';
import { toApiKeyResource } from '../../domain/key-view.js';
import type { QueryParams, Schemas, SuccessBody } from '@vidgen/types';
import { bucketMs, MAX_RANGE_MS, usageBuckets, usageRange, type Granularity } from '../../domain/usage.js';
import type { LedgerEntry } from '../../store/store.js';
import { answer } from '../answer.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError, type ErrorDetail } from '../errors.js';
import { authenticate, guarded } from '../middleware.js';
import { rateLimit } from '../rate-limit.js';
import { bundleText, componentValidator, honoPath, paramsValidator, specOperation, summarise } from '../spec.js';

const invalid = (details: ErrorDetail[], message = summarise(details)) => new ApiError('invalid_request', message, details);
const badCursor = () => invalid([{ field: 'cursor', message: 'is not a cursor this service issued' }]);

const DAY_MS = 24 * 3_600_000;
/** `from` when the query gives none: this long before `to` (the spec's default). */
const DEFAULT_USAGE_SPAN_MS = 30 * DAY_MS;
/** The range of instants an RFC 3339 date-time can name (four-digit years). */
const FIRST_MS = Date.parse('0000-01-01T00:00:00.000Z');
const LAST_MS = Date.parse('9999-12-31T23:59:59.999Z');
const LEDGER_KINDS: readonly LedgerEntry['kind'][] = ['grant', 'charge', 'refund'];

type Json = any;
let bundle: Json;
/** The default the spec gives a query parameter of an operation (read from the bundle once, not restated here). */
function queryDefault(operationId: string, name: string): unknown {
  bundle ??= JSON.parse(bundleText);
  const op = specOperation(operationId);
  const resolve = (node: Json): Json => (node?.$ref?.startsWith('#/') ? node.$ref.slice(2).split('/').reduce((n: Json, k: string) => n[k], bundle) : node);
  const params: Json[] = (bundle.paths[op.path][op.method.toLowerCase()].parameters ?? []).map(resolve);
  const param = params.find((p) => p.in === 'query' && p.name === name);
  if (!param) throw new Error(`${operationId} has no query parameter ${name}`);
  return param.schema?.default ?? resolve(param.schema)?.default;
}


function toLedgerEntryResource(entry: LedgerEntry): Schemas['LedgerEntry'] {
  return {
    id: `led_${entry.id}`,
    kind: entry.kind,
    amount: entry.amount,
    balanceAfter: entry.balanceAfter,
    requestId: entry.taskId,
    // The store notes why a task was refunded (`cancelled`, the failure's code); the API's note is the operator's, on a grant.
    note: entry.kind === 'grant' ? entry.note : null,
    createdAt: entry.createdAt.toISOString(),
  };
}

/**
 * Ledger cursors: base64url JSON of the last entry's id (`i`) and the filters the page was made for
 * (`k` kind, `r` requestId, present only when set — so an unfiltered one is `{"i":54}`, the spec's example).
 */
interface LedgerCursor {
  beforeId: number;
  kind: LedgerEntry['kind'] | null;
  requestId: string | null;
}

function encodeLedgerCursor(cursor: LedgerCursor): string {
  const value = { i: cursor.beforeId, ...(cursor.kind ? { k: cursor.kind } : {}), ...(cursor.requestId ? { r: cursor.requestId } : {}) };
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function decodeLedgerCursor(cursor: string): LedgerCursor | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
    const { i, k, r } = value as Record<string, unknown>;
    if (!Number.isSafeInteger(i) || (i as number) < 1) return undefined;
    if (k !== undefined && !LEDGER_KINDS.includes(k as LedgerEntry['kind'])) return undefined;
    if (r !== undefined && (typeof r !== 'string' || r.length < 1 || r.length > 128)) return undefined;
    return { beforeId: i as number, kind: (k as LedgerEntry['kind'] | undefined) ?? null, requestId: (r as string | undefined) ?? null };
  } catch {
    return undefined;
  }
}

/** A budget of `quota` requests per `windowMs`, per minute as the spec states it; null when there is none. */
function perMinute(quota: number | undefined, windowMs: number | undefined): number | null {
  if (!quota || quota <= 0 || !windowMs) return null;
  return Math.max(1, Math.round((quota * 60_000) / windowMs));
}

export function registerAccountRoutes(app: Routes, deps: AppDeps): void {
  const { store, clock, config } = deps;
  const limits = { rateLimiter: deps.rateLimiter, clock, rateLimits: config.rateLimits };
  /** The key and its scopes, then the read budget every account operation shares. */
  const auth = (operationId: string) => [authenticate(deps, specOperation(operationId).scopes ?? []), rateLimit(limits, 'read')];

  const validateLedgerQuery = paramsValidator<QueryParams<'listLedgerEntries'>>('listLedgerEntries', 'query');
  const validateUsageQuery = paramsValidator<QueryParams<'getUsage'>>('getUsage', 'query');
  const isRequestId = componentValidator('RequestId');
  const defaultLimit = queryDefault('listLedgerEntries', 'limit') as number;
  const defaultGranularity = queryDefault('getUsage', 'granularity') as Granularity;

  // The limits as enforced: a budget is counted only with a rate limiter (http/rate-limit.ts), a cap only when set.
  const enforced = deps.rateLimiter ? config.rateLimits : undefined;
  const accountLimits = {
    maxActiveTasks: config.maxActiveTasks && config.maxActiveTasks > 0 ? config.maxActiveTasks : null,
    rateLimits: {
      submitsPerMinute: perMinute(enforced?.submit, enforced?.windowMs),
      readsPerMinute: perMinute(enforced?.read, enforced?.windowMs),
    },
  } satisfies Schemas['AccountLimits'];

  app.get(honoPath(specOperation('getAccount').path), guarded([...auth('getAccount')], async (c) => {
    const key = c.get('apiKey');
    const summary = await store.accountSummary(key.accountId);
    // A key's account is never deleted (the key refers to it); a missing one is a broken store, a 500.
    if (!summary) throw new Error(`the account ${key.accountId} of key ${key.id} does not exist`);
    const body = {
      success: true,
      id: summary.account.id,
      name: summary.account.name,
      balance: summary.account.balance,
      creditsHeld: summary.creditsHeld,
      activeTasks: summary.activeTasks,
      limits: accountLimits,
      key: toApiKeyResource(key),
    } satisfies SuccessBody<'getAccount'>;
    return answer(c, body, 200);
  }));

  app.get(honoPath(specOperation('listLedgerEntries').path), guarded([...auth('listLedgerEntries')], async (c) => {
    const query = validateLedgerQuery(c.req.query());
    if (!query.ok) throw invalid(query.details);
    const { limit = defaultLimit, cursor, kind, requestId } = query.value;
    let beforeId: number | undefined;
    if (cursor !== undefined) {
      const position = decodeLedgerCursor(cursor);
      if (!position) throw badCursor();
      if (position.kind !== (kind ?? null) || position.requestId !== (requestId ?? null)) {
        throw invalid([{ field: 'cursor', message: 'was issued for other filters; keep the same kind and requestId while following a cursor' }]);
      }
      beforeId = position.beforeId;
    }
    const accountId = c.get('apiKey').accountId;
    // An id that is not a RequestId names no task: nothing matches, without asking the store (PostgreSQL refuses some bytes, e.g. NUL).
    const rows =
      requestId !== undefined && !isRequestId(requestId) ? [] : await store.listLedgerPage({ accountId, limit: limit + 1, beforeId, kind, taskId: requestId });
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const nextCursor = rows.length > limit && last ? encodeLedgerCursor({ beforeId: last.id, kind: kind ?? null, requestId: requestId ?? null }) : null;
    return answer(c, { success: true, data: page.map(toLedgerEntryResource), nextCursor } satisfies SuccessBody<'listLedgerEntries'>, 200);
  }));

  app.get(honoPath(specOperation('getUsage').path), guarded([...auth('getUsage')], async (c) => {
    const query = validateUsageQuery(c.req.query());
    if (!query.ok) throw invalid(query.details);
    const granularity = query.value.granularity ?? defaultGranularity;
    const groupBy = query.value.groupBy ?? null;
    const instant = (field: 'from' | 'to', text: string) => {
      // The format check passed. JavaScript has no leap second: 23:59:60 is taken as the instant after 23:59:59.
      let ms = Date.parse(text);
      if (Number.isNaN(ms)) ms = Date.parse(text.replace(/^(.{10}[Tt ]\d\d:\d\d:)60/, (_, head: string) => `${head}59`)) + 1000;
      if (Number.isNaN(ms)) throw invalid([{ field, message: 'must match format "date-time"' }], `${field} must be an RFC 3339 date-time`);
      return ms;
    };
    const to = query.value.to !== undefined ? instant('to', query.value.to) : clock.now().getTime();
    const from = query.value.from !== undefined ? instant('from', query.value.from) : to - DEFAULT_USAGE_SPAN_MS;
    // An empty range asked for is refused even when rounding out would make it a bucket.
    if (from >= to) throw invalid([{ field: 'from', message: 'must be before to' }], 'from must be before to');
    const range = usageRange(new Date(from), new Date(to), granularity);
    // The answer's bounds are RFC 3339 date-times: years 0000 to 9999.
    for (const [field, bound] of [['from', range.from], ['to', range.to]] as const) {
      const ms = bound.getTime();
      if (ms < FIRST_MS || ms > LAST_MS) {
        throw invalid([{ field, message: 'must lie within the years 0000 to 9999 once rounded to the granularity' }]);
      }
    }
    if (range.to.getTime() - range.from.getTime() > MAX_RANGE_MS[granularity]) {
      const days = MAX_RANGE_MS[granularity] / DAY_MS;
      throw invalid(
        [{ field: 'from', message: `must be at most ${days} days before to with granularity=${granularity}` }],
        `${granularity === 'hour' ? 'an hourly' : 'a daily'} range may span at most ${days} days`,
      );
    }
    // Summed per bucket by the database: 90 days of hours are 6,480 rows to add up, 270 to read.
    const hours = await store.usageTotals({ accountId: c.get('apiKey').accountId, ...range, bucketMs: bucketMs(granularity), byModel: groupBy === 'model' });
    const buckets = usageBuckets({ ...range, granularity, byModel: groupBy === 'model', hours });
    const body = {
      success: true,
      from: range.from.toISOString(),
      to: range.to.toISOString(),
      granularity,
      groupBy,
      data: buckets.map((bucket) => ({
        start: bucket.start.toISOString(),
        end: bucket.end.toISOString(),
        ...(bucket.model ? { model: bucket.model } : {}),
        tasks: { ...bucket.tasks },
        secondsDelivered: bucket.secondsDelivered,
        creditsCharged: bucket.creditsCharged,
        creditsRefunded: bucket.creditsRefunded,
        creditsNet: bucket.creditsNet,
      })),
    } satisfies SuccessBody<'getUsage'>;
    return answer(c, body, 200);
  }));
}
