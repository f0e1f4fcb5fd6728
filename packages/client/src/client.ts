import createFetchClient, { type Client as FetchClient } from 'openapi-fetch';
import { VidgenError, VidgenTaskError, VidgenTimeoutError, parseRetryAfter } from './errors.js';
import type { operations, paths } from './openapi.js';
import { retryPolicy, sleep, withRetries, type Retryable, type RetryOptions, type RetryPolicy } from './retry.js';
import { setLongTimeout } from './timers.js';
import type {
  AccountSummary,
  ApiKeyList,
  CancelGenerationResponse,
  CreateApiKeyRequest,
  CreatedApiKey,
  LedgerEntry,
  LedgerEntryList,
  ModelList,
  RedeliverWebhookResponse,
  RevokeApiKeyResponse,
  RotateWebhookSecretRequest,
  SubmitGenerationRequest,
  SubmitGenerationResponse,
  Task,
  TaskListWithStatus,
  TaskStatus,
  TaskSucceeded,
  TaskWithStatus,
  UsageReport,
  WebhookDelivery,
  WebhookDeliveryDetail,
  WebhookDeliveryList,
  WebhookSecret,
} from './types.js';

export interface ClientOptions {
  /** Where the service is, e.g. `https://api.example.com` (no `/api/open/v1`). */
  baseUrl: string;
  /** `vg_live_…` or `vg_test_…`. Sent as `Authorization: Bearer …`, never logged. */
  apiKey: string;
  /** A fetch to use instead of `globalThis.fetch` (tests, proxies, instrumentation). */
  fetch?: (request: Request) => Promise<Response>;
  /** Retries of network errors, 429 and 5xx; `false` turns them off. */
  retry?: RetryOptions | false;
}

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface SubmitOptions extends RequestOptions {
  /**
   * Makes the submission safe to repeat: the service answers a repeat with the first answer
   * and charges nothing. When omitted, the client makes one (a UUID) for this call, so its own
   * retries can never create or charge twice; pass your own to be safe across restarts.
   */
  idempotencyKey?: string;
}

export interface GetOptions extends RequestOptions {
  /** Long poll: answer as soon as the status changes, or after this many seconds (1..30). */
  wait?: number;
}

/**
 * `S` is the `status` asked for: `list` and `listAll` then return only tasks of that status,
 * typed as such (`status: 'succeeded'` gives tasks whose `output` is never `null`).
 */
export interface ListOptions<S extends TaskStatus = TaskStatus> extends RequestOptions {
  /** Only tasks in this state. */
  status?: S;
  /** 1..100, default 20. */
  limit?: number;
  /** `nextCursor` of the previous page. */
  cursor?: string;
}

export type ListAllOptions<S extends TaskStatus = TaskStatus> = Omit<ListOptions<S>, 'cursor'>;

export interface WaitOptions extends RequestOptions {
  /**
   * Milliseconds to wait in all before rejecting with `VidgenTimeoutError`. Default 30 minutes.
   * Any length works; `Infinity` waits until the task ends (or `signal` aborts).
   */
  timeout?: number;
  /** Called with the task each time its status is seen to change. */
  onUpdate?: (task: Task) => void;
}

export type SubmitAndWaitOptions = SubmitOptions & WaitOptions;

/** The query parameters of an operation, exactly as the spec defines them. */
type QueryOf<O extends keyof operations> = NonNullable<operations[O]['parameters']['query']>;

/** `ledger`: `kind`, `requestId`, `limit` (1..100, default 20) and `cursor` (`nextCursor` of the previous page). */
export type LedgerOptions = QueryOf<'listLedgerEntries'> & RequestOptions;
/** `ledgerAll`: the filters of `ledger`, and `limit` as the page size. */
export type LedgerAllOptions = Omit<LedgerOptions, 'cursor'>;

/**
 * `usage`: `from` (default `to` − 30 days) and `to` (exclusive, default now), as RFC 3339
 * strings with an offset or as `Date`s; `granularity` (`day` by default, or `hour`) and
 * `groupBy: 'model'`.
 */
export type UsageOptions = Omit<QueryOf<'getUsage'>, 'from' | 'to'> &
  RequestOptions & {
    from?: string | Date;
    to?: string | Date;
  };

/** `webhooks.deliveries`: `status`, `requestId`, `limit` (1..100, default 20) and `cursor`. */
export type DeliveriesOptions = QueryOf<'listWebhookDeliveries'> & RequestOptions;
/** `webhooks.deliveriesAll`: the filters of `deliveries`, and `limit` as the page size. */
export type DeliveriesAllOptions = Omit<DeliveriesOptions, 'cursor'>;

/** The account's API keys (`client.keys`); each needs a key with the `keys:manage` scope. */
export interface VidgenKeys {
  /** Every key of the account, newest first, revoked and expired ones included. Never a key itself. */
  list(options?: RequestOptions): Promise<ApiKeyList>;
  /**
   * Issues a key and answers it in full (`key`): the only time it is shown, so store it now.
   * Not retried after a network error or a `5xx` (only after a `429`): a repeat would issue a
   * second key. After such a failure, look for an unknown key with `list` and revoke it.
   */
  create(body?: CreateApiKeyRequest, options?: RequestOptions): Promise<CreatedApiKey>;
  /** Revokes a key of the account (not the calling key itself). Revoking a revoked key is fine. */
  revoke(keyId: string, options?: RequestOptions): Promise<RevokeApiKeyResponse>;
}

/** The account's webhook deliveries and signing secret (`client.webhooks`); each needs `webhooks:manage`. */
export interface VidgenWebhooks {
  /** One page of the account's deliveries, newest first. */
  deliveries(options?: DeliveriesOptions): Promise<WebhookDeliveryList>;
  /** Every delivery (of the filters), newest first, following `nextCursor` page by page. */
  deliveriesAll(options?: DeliveriesAllOptions): AsyncGenerator<WebhookDelivery, void, undefined>;
  /** One delivery with every attempt made so far (`attemptHistory`, oldest first). */
  delivery(deliveryId: string, options?: RequestOptions): Promise<WebhookDeliveryDetail>;
  /**
   * Sends a delivery again, from now (`202`: the attempt happens after the answer; follow it with
   * `delivery`). Retried like a read: a repeat only schedules the same delivery again, with the
   * same `webhook-id`, which receivers drop as a duplicate.
   */
  redeliver(deliveryId: string, options?: RequestOptions): Promise<RedeliverWebhookResponse>;
  /** The current signing secret (`whsec_…`) and, during a rotation, until when the previous one also signs. */
  secret(options?: RequestOptions): Promise<WebhookSecret>;
  /**
   * Makes a new signing secret; the one it replaces keeps signing for `overlapHours` (default 24,
   * `0` retires it at once). Not retried after a network error or a `5xx` (only after a `429`):
   * a second rotation would retire the secret your receivers still use at once. After such a
   * failure, `secret()` shows whether the rotation happened.
   */
  rotateSecret(body?: RotateWebhookSecretRequest, options?: RequestOptions): Promise<WebhookSecret>;
}

/** The longest long poll the service allows (`wait`, D11). */
const MAX_WAIT_SECONDS = 30;
const DEFAULT_TIMEOUT_MS = 30 * 60_000;
/** Used when a non-terminal answer carries no `Retry-After` (the service always sends one). */
const DEFAULT_POLL_HINT_SECONDS = 2;

const GENERATIONS = '/api/open/v1/video/generations';
const GENERATION = '/api/open/v1/video/generations/{requestId}';
const CANCEL = '/api/open/v1/video/generations/{requestId}/cancel';
const MODELS = '/api/open/v1/models';
const ACCOUNT = '/api/open/v1/account';
const LEDGER = '/api/open/v1/account/ledger';
const USAGE = '/api/open/v1/account/usage';
const KEYS = '/api/open/v1/account/keys';
const REVOKE_KEY = '/api/open/v1/account/keys/{keyId}/revoke';
const DELIVERIES = '/api/open/v1/account/webhooks/deliveries';
const DELIVERY = '/api/open/v1/account/webhooks/deliveries/{deliveryId}';
const REDELIVER = '/api/open/v1/account/webhooks/deliveries/{deliveryId}/redeliver';
const WEBHOOK_SECRET = '/api/open/v1/account/webhooks/secret';
const ROTATE_SECRET = '/api/open/v1/account/webhooks/secret/rotate';

type SubmitBody = operations['submitGeneration']['requestBody']['content']['application/json'];
type RotateBody = NonNullable<operations['rotateWebhookSecret']['requestBody']>['content']['application/json'];

interface Answer<T> {
  data: T;
  response: Response;
}

/** The vidgen API. Make one with `createClient`. */
export class VidgenClient {
  /** The underlying openapi-fetch client, typed by the spec's `paths`, with the key already set. */
  readonly raw: FetchClient<paths>;
  /** The account's API keys: `list`, `create`, `revoke` (scope `keys:manage`). */
  readonly keys: VidgenKeys;
  /** The account's webhook deliveries and signing secret (scope `webhooks:manage`). */
  readonly webhooks: VidgenWebhooks;
  readonly #retry: RetryPolicy;

  constructor(options: ClientOptions) {
    if (!options.baseUrl) throw new TypeError('createClient: baseUrl is required');
    if (!options.apiKey) throw new TypeError('createClient: apiKey is required');
    this.raw = createFetchClient<paths>({
      baseUrl: options.baseUrl,
      headers: { Authorization: `Bearer ${options.apiKey}` },
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.#retry = retryPolicy(options.retry);
    this.keys = {
      list: async (options = {}) => (await this.#call<ApiKeyList>(() => this.raw.GET(KEYS, { signal: options.signal }), { retryable: 'any', signal: options.signal })).data,
      // No Idempotency-Key exists for it: a repeat after a lost answer would issue a second key.
      create: async (body = {}, options = {}) =>
        (await this.#call<CreatedApiKey>(() => this.raw.POST(KEYS, { body, signal: options.signal }), { retryable: 'refused', signal: options.signal })).data,
      // Idempotent: revoking a revoked key answers 200 again with its original revokedAt.
      revoke: async (keyId, options = {}) =>
        (await this.#call<RevokeApiKeyResponse>(() => this.raw.POST(REVOKE_KEY, { params: { path: { keyId } }, signal: options.signal }), { retryable: 'any', signal: options.signal }))
          .data,
    };
    this.webhooks = {
      deliveries: async (options = {}) => {
        const { signal, ...query } = options;
        return (await this.#call<WebhookDeliveryList>(() => this.raw.GET(DELIVERIES, { params: { query: defined(query) }, signal }), { retryable: 'any', signal })).data;
      },
      deliveriesAll: (options = {}) => paginate((cursor) => this.webhooks.deliveries({ ...options, ...(cursor ? { cursor } : {}) })),
      delivery: async (deliveryId, options = {}) =>
        (await this.#call<WebhookDeliveryDetail>(() => this.raw.GET(DELIVERY, { params: { path: { deliveryId } }, signal: options.signal }), { retryable: 'any', signal: options.signal }))
          .data,
      // A repeat schedules the same delivery (same webhook-id) again: receivers drop duplicates by it.
      redeliver: async (deliveryId, options = {}) =>
        (
          await this.#call<RedeliverWebhookResponse>(() => this.raw.POST(REDELIVER, { params: { path: { deliveryId } }, signal: options.signal }), {
            retryable: 'any',
            signal: options.signal,
          })
        ).data,
      secret: async (options = {}) =>
        (await this.#call<WebhookSecret>(() => this.raw.GET(WEBHOOK_SECRET, { signal: options.signal }), { retryable: 'any', signal: options.signal })).data,
      // Not idempotent: a second rotation during the overlap retires, at once, the secret receivers still use.
      rotateSecret: async (body = {}, options = {}) =>
        (
          await this.#call<WebhookSecret>(
            // The generated request type marks the defaulted `overlapHours` as present; the service fills it in.
            () => this.raw.POST(ROTATE_SECRET, { body: body as RotateBody, signal: options.signal }),
            { retryable: 'refused', signal: options.signal },
          )
        ).data,
    };
  }

  /**
   * Submits a task: validated, charged and queued at once (`202`). Always sent with an
   * `Idempotency-Key` (yours or a fresh UUID), which is what makes retrying it safe.
   */
  async submit(body: SubmitGenerationRequest, options: SubmitOptions = {}): Promise<SubmitGenerationResponse> {
    const idempotencyKey = options.idempotencyKey ?? newIdempotencyKey();
    const { data } = await this.#call<SubmitGenerationResponse>(
      () =>
        this.raw.POST(GENERATIONS, {
          // The generated request type marks defaulted fields as present; the service fills them in.
          body: body as SubmitBody,
          params: { header: { 'Idempotency-Key': idempotencyKey } },
          signal: options.signal,
        }),
      { retryable: 'any', signal: options.signal },
    );
    return data;
  }

  /** The task; with `wait`, a long poll that answers as soon as its status changes. */
  async get(requestId: string, options: GetOptions = {}): Promise<Task> {
    return (await this.#get(requestId, options.wait, options.signal)).task;
  }

  /** Cancels a queued or processing task and refunds it. Cancelling a cancelled task is fine. */
  async cancel(requestId: string, options: RequestOptions = {}): Promise<CancelGenerationResponse> {
    const { data } = await this.#call<CancelGenerationResponse>(() => this.raw.POST(CANCEL, { params: { path: { requestId } }, signal: options.signal }), {
      // The service makes cancel idempotent, so a repeat after a lost answer is harmless.
      retryable: 'any',
      signal: options.signal,
    });
    return data;
  }

  /**
   * One page of the account's tasks, newest first. With `status`, only tasks in that state,
   * typed as such: `list({ status: 'succeeded' })` gives tasks whose `output` is set.
   */
  async list<S extends TaskStatus = TaskStatus>(options: ListOptions<S> = {}): Promise<TaskListWithStatus<S>> {
    const { status, limit, cursor, signal } = options;
    const query: NonNullable<operations['listGenerations']['parameters']['query']> = {};
    if (status !== undefined) query.status = status;
    if (limit !== undefined) query.limit = limit;
    if (cursor !== undefined) query.cursor = cursor;
    // The service answers a `status` filter with tasks in that state only (the spec's "Only tasks in this state").
    const { data } = await this.#call<TaskListWithStatus<S>>(() => this.raw.GET(GENERATIONS, { params: { query }, signal }), { retryable: 'any', signal });
    return data;
  }

  /**
   * Every task of the account, newest first, following `nextCursor` page by page. With
   * `status`, only tasks in that state, typed as such (as for `list`).
   */
  async *listAll<S extends TaskStatus = TaskStatus>(options: ListAllOptions<S> = {}): AsyncGenerator<TaskWithStatus<S>, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.list<S>({ ...options, ...(cursor ? { cursor } : {}) });
      // Both branches of TaskListWithStatus<S> hold TaskWithStatus<S>[]; tsc cannot see it for an open S.
      yield* page.data as TaskWithStatus<S>[];
      cursor = page.nextCursor ?? undefined;
    } while (cursor);
  }

  /** The models, their durations, aspect ratios, resolutions, media and prices. */
  async models(options: RequestOptions = {}): Promise<ModelList> {
    const { data } = await this.#call<ModelList>(() => this.raw.GET(MODELS, { signal: options.signal }), { retryable: 'any', signal: options.signal });
    return data;
  }

  /** The account of the calling key: balance, credits held by active tasks, limits, and the key itself. */
  async account(options: RequestOptions = {}): Promise<AccountSummary> {
    const { data } = await this.#call<AccountSummary>(() => this.raw.GET(ACCOUNT, { signal: options.signal }), { retryable: 'any', signal: options.signal });
    return data;
  }

  /**
   * One page of the account's credit ledger, newest first: every grant, charge and refund, each
   * with the balance right after it. Filter by `kind`, or by `requestId` for one task's entries.
   */
  async ledger(options: LedgerOptions = {}): Promise<LedgerEntryList> {
    const { signal, ...query } = options;
    const { data } = await this.#call<LedgerEntryList>(() => this.raw.GET(LEDGER, { params: { query: defined(query) }, signal }), { retryable: 'any', signal });
    return data;
  }

  /** Every ledger entry (of the filters), newest first, following `nextCursor` page by page. */
  ledgerAll(options: LedgerAllOptions = {}): AsyncGenerator<LedgerEntry, void, undefined> {
    return paginate((cursor) => this.ledger({ ...options, ...(cursor ? { cursor } : {}) }));
  }

  /**
   * Tasks, video seconds and credits over a range, in UTC buckets of a `day` (default) or an
   * `hour`, empty buckets included; with `groupBy: 'model'`, one entry per bucket per model.
   */
  async usage(options: UsageOptions = {}): Promise<UsageReport> {
    const { signal, from, to, ...rest } = options;
    const query: QueryOf<'getUsage'> = defined({ ...rest, from: timestamp(from), to: timestamp(to) });
    const { data } = await this.#call<UsageReport>(() => this.raw.GET(USAGE, { params: { query }, signal }), { retryable: 'any', signal });
    return data;
  }

  /**
   * Waits for the task to finish with long polls (`wait` ≤ 30 s and ≤ the time left).
   * Resolves with the succeeded task; rejects with `VidgenTaskError` when it fails or is
   * cancelled, `VidgenTimeoutError` after `timeout`, or the signal's reason when aborted.
   */
  waitForCompletion(requestId: string, options: WaitOptions = {}): Promise<TaskSucceeded> {
    return this.#waitFor(requestId, undefined, options);
  }

  /** `submit`, then `waitForCompletion` of the new task. */
  async submitAndWait(body: SubmitGenerationRequest, options: SubmitAndWaitOptions = {}): Promise<TaskSucceeded> {
    const { idempotencyKey, signal, ...wait } = options;
    const submitted = await this.submit(body, { ...(idempotencyKey ? { idempotencyKey } : {}), ...(signal ? { signal } : {}) });
    return this.#waitFor(submitted.requestId, submitted.status, { ...wait, ...(signal ? { signal } : {}) });
  }

  async #waitFor(requestId: string, knownStatus: TaskStatus | undefined, options: WaitOptions): Promise<TaskSucceeded> {
    const { timeout = DEFAULT_TIMEOUT_MS, onUpdate } = options;
    if (typeof timeout !== 'number' || Number.isNaN(timeout)) throw new TypeError(`waitForCompletion: timeout must be a number of milliseconds (or Infinity), not ${String(timeout)}`);
    const deadline = Date.now() + timeout;
    let last: Task | undefined;
    const timer = new AbortController();
    // Not setTimeout itself: it fires after 1 ms for anything over 2^31 - 1 ms (about 24.8 days)
    // or Infinity. This waits out long timeouts in chunks and sets no timer for Infinity.
    const clearDeadline = setLongTimeout(() => timer.abort(new VidgenTimeoutError(requestId, timeout, last)), timeout);
    const { signal, dispose } = anySignal([options.signal, timer.signal]);
    try {
      let previous = knownStatus;
      for (;;) {
        const remainingMs = deadline - Date.now();
        if (remainingMs <= 0) throw new VidgenTimeoutError(requestId, timeout, last);
        const wait = Math.min(MAX_WAIT_SECONDS, Math.floor(remainingMs / 1000));
        // Under a second left cannot hold a long poll; after one has been made, the rest of the
        // time is waited out rather than spent on a poll that the last answer makes pointless.
        if (wait < 1 && last) {
          await sleep(remainingMs, signal);
          continue;
        }
        const startedAt = Date.now();
        const { task, retryAfter } = await this.#get(requestId, wait >= 1 ? wait : undefined, signal);
        last = task;
        const changed = task.status !== previous;
        previous = task.status;
        if (changed) onUpdate?.(task);
        switch (task.status) {
          case 'succeeded':
            return task;
          case 'failed':
          case 'cancelled':
            throw new VidgenTaskError(task);
          case 'queued':
          case 'processing':
            break;
        }
        // A change is worth looking at again at once; an unchanged answer (a long poll that
        // ran out, or one that came back early) waits until the service's hint has passed
        // since the request started, so polls are never closer together than `Retry-After`.
        if (!changed) {
          const pauseMs = (retryAfter ?? DEFAULT_POLL_HINT_SECONDS) * 1000 - (Date.now() - startedAt);
          if (pauseMs > 0) await sleep(pauseMs, signal);
        }
      }
    } catch (error) {
      throw signal.aborted ? signal.reason : error;
    } finally {
      clearDeadline();
      dispose();
    }
  }

  async #get(requestId: string, wait: number | undefined, signal: AbortSignal | undefined): Promise<{ task: Task; retryAfter: number | undefined }> {
    const { data, response } = await this.#call<Task>(
      () => this.raw.GET(GENERATION, { params: { path: { requestId }, query: wait === undefined ? {} : { wait } }, signal }),
      { retryable: 'any', signal },
    );
    return { task: data, retryAfter: parseRetryAfter(response.headers.get('Retry-After')) };
  }

  /**
   * One operation with the retry policy (`retryable`: which failures may be retried, see
   * `Retryable`); any answer but a 2xx becomes a `VidgenError`.
   * `T` is the spec's schema of the 2xx body: openapi-fetch's own inference flattens the
   * generated unions (e.g. `Task`) into a shape that is equivalent but not assignable.
   */
  #call<T>(
    send: () => Promise<{ data?: unknown; error?: unknown; response: Response }>,
    options: { retryable: Retryable; signal: AbortSignal | undefined },
  ): Promise<Answer<T>> {
    return withRetries(
      async () => {
        let result: { data?: unknown; error?: unknown; response: Response };
        try {
          result = await send();
        } catch (cause) {
          if (options.signal?.aborted) throw options.signal.reason;
          throw new VidgenError({ status: 0, code: 'network_error', message: `no answer from the service: ${describe(cause)}`, cause });
        }
        const { data, error, response } = result;
        if (!response.ok) throw VidgenError.fromResponse(response, error);
        return { data: data as T, response };
      },
      { policy: this.#retry, retryable: options.retryable, signal: options.signal },
    );
  }
}

/** The vidgen client: every operation of the API, typed by the spec. */
export function createClient(options: ClientOptions): VidgenClient {
  return new VidgenClient(options);
}

/** Every item of every page, following `nextCursor` until a page has none. */
async function* paginate<T>(page: (cursor: string | undefined) => Promise<{ data: T[]; nextCursor: string | null }>): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  do {
    const answer = await page(cursor);
    yield* answer.data;
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
}

/** The query without its `undefined` members (openapi-fetch would send none of them either). */
function defined<Q extends object>(query: Q): Q {
  return Object.fromEntries(Object.entries(query).filter(([, value]) => value !== undefined)) as Q;
}

/** A `Date` as RFC 3339 (UTC); a string as it is. */
function timestamp(value: string | Date | undefined): string | undefined {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new TypeError('usage: from and to must be valid dates');
    return value.toISOString();
  }
  return value;
}

function newIdempotencyKey(): string {
  const crypto = globalThis.crypto;
  // randomUUID needs a secure context in browsers; getRandomValues does not.
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6]! & 0x0f) | 0x40;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A signal that aborts when any of `signals` does, with that one's reason. */
function anySignal(signals: (AbortSignal | undefined)[]): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const listeners: (() => void)[] = [];
  for (const source of signals) {
    if (!source) continue;
    if (source.aborted) {
      controller.abort(source.reason);
      break;
    }
    const onAbort = () => controller.abort(source.reason);
    source.addEventListener('abort', onAbort, { once: true });
    listeners.push(() => source.removeEventListener('abort', onAbort));
  }
  return { signal: controller.signal, dispose: () => listeners.forEach((remove) => remove()) };
}

function describe(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  const inner = cause.cause instanceof Error ? `: ${cause.cause.message}` : '';
  return `${cause.message}${inner}`;
}
