import createFetchClient, { type Client as FetchClient } from 'openapi-fetch';
import { VidgenError, VidgenTaskError, VidgenTimeoutError, parseRetryAfter } from './errors.js';
import type { operations, paths } from './openapi.js';
import { retryPolicy, sleep, withRetries, type RetryOptions, type RetryPolicy } from './retry.js';
import { setLongTimeout } from './timers.js';
import type {
  CancelGenerationResponse,
  ModelList,
  SubmitGenerationRequest,
  SubmitGenerationResponse,
  Task,
  TaskListWithStatus,
  TaskStatus,
  TaskSucceeded,
  TaskWithStatus,
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

/** The longest long poll the service allows (`wait`, D11). */
const MAX_WAIT_SECONDS = 30;
const DEFAULT_TIMEOUT_MS = 30 * 60_000;
/** Used when a non-terminal answer carries no `Retry-After` (the service always sends one). */
const DEFAULT_POLL_HINT_SECONDS = 2;

const GENERATIONS = '/api/open/v1/video/generations';
const GENERATION = '/api/open/v1/video/generations/{requestId}';
const CANCEL = '/api/open/v1/video/generations/{requestId}/cancel';
const MODELS = '/api/open/v1/models';

type SubmitBody = operations['submitGeneration']['requestBody']['content']['application/json'];

interface Answer<T> {
  data: T;
  response: Response;
}

/** The vidgen API. Make one with `createClient`. */
export class VidgenClient {
  /** The underlying openapi-fetch client, typed by the spec's `paths`, with the key already set. */
  readonly raw: FetchClient<paths>;
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
      { retryable: true, signal: options.signal },
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
      retryable: true,
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
    const { data } = await this.#call<TaskListWithStatus<S>>(() => this.raw.GET(GENERATIONS, { params: { query }, signal }), { retryable: true, signal });
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
    const { data } = await this.#call<ModelList>(() => this.raw.GET(MODELS, { signal: options.signal }), { retryable: true, signal: options.signal });
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
      { retryable: true, signal },
    );
    return { task: data, retryAfter: parseRetryAfter(response.headers.get('Retry-After')) };
  }

  /**
   * One operation with the retry policy; any answer but a 2xx becomes a `VidgenError`.
   * `T` is the spec's schema of the 2xx body: openapi-fetch's own inference flattens the
   * generated unions (e.g. `Task`) into a shape that is equivalent but not assignable.
   */
  #call<T>(
    send: () => Promise<{ data?: unknown; error?: unknown; response: Response }>,
    options: { retryable: boolean; signal: AbortSignal | undefined },
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
