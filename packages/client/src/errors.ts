import type { ErrorCode, ErrorDetail, Task, TaskCancelled, TaskError, TaskFailed } from './types.js';

/**
 * Codes the client itself gives an error that carries no envelope of the service's:
 * `network_error` (no answer: refused, reset, DNS; `status` 0) and `unexpected_response`
 * (an answer that is not the service's error envelope, e.g. from a proxy).
 * A newer service may also send codes this version's `ErrorCode` does not list yet.
 */
export type ClientErrorCode = 'network_error' | 'unexpected_response';

/** Any failed call to the service: an error envelope (D2), or no answer at all. */
export class VidgenError extends Error {
  override readonly name = 'VidgenError';
  /** HTTP status; 0 when no answer arrived. */
  readonly status: number;
  readonly code: ErrorCode | ClientErrorCode;
  readonly details: ErrorDetail[] | undefined;
  /** The `X-Correlation-Id` of the answer: quote it when asking for support. */
  readonly correlationId: string | undefined;
  /** Seconds the service asked to wait before trying again (`Retry-After`), when it did. */
  readonly retryAfter: number | undefined;

  constructor(init: {
    status: number;
    code: ErrorCode | ClientErrorCode;
    message: string;
    details?: ErrorDetail[] | undefined;
    correlationId?: string | undefined;
    retryAfter?: number | undefined;
    cause?: unknown;
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.details = init.details;
    this.correlationId = init.correlationId;
    this.retryAfter = init.retryAfter;
  }

  /** Builds the error from an answer and its parsed body (the envelope, when it is one). */
  static fromResponse(response: Response, body: unknown): VidgenError {
    const correlationId = response.headers.get('X-Correlation-Id') ?? undefined;
    const retryAfter = parseRetryAfter(response.headers.get('Retry-After'));
    const envelope = isEnvelope(body) ? body.error : undefined;
    if (envelope) {
      return new VidgenError({ status: response.status, code: envelope.code, message: envelope.message, details: envelope.details, correlationId, retryAfter });
    }
    return new VidgenError({
      status: response.status,
      code: 'unexpected_response',
      message: `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''} without the service's error envelope`,
      correlationId,
      retryAfter,
    });
  }
}

function isEnvelope(body: unknown): body is { error: { code: ErrorCode; message: string; details?: ErrorDetail[] } } {
  if (typeof body !== 'object' || body === null || !('error' in body)) return false;
  const error = (body as { error: unknown }).error;
  return typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string' && typeof (error as { message?: unknown }).message === 'string';
}

/** `Retry-After` as seconds: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** A task that ended `failed` or `cancelled` while it was being waited for. */
export class VidgenTaskError extends Error {
  override readonly name = 'VidgenTaskError';
  readonly task: TaskFailed | TaskCancelled;
  /** The task's `error` (`null` for a cancelled task). */
  readonly error: TaskError | null;

  constructor(task: TaskFailed | TaskCancelled) {
    super(
      task.status === 'failed'
        ? `task ${task.requestId} failed: ${task.error.code}: ${task.error.message}`
        : `task ${task.requestId} was cancelled`,
    );
    this.task = task;
    this.error = task.error;
  }
}

/** `waitForCompletion` ran out of time; the task goes on, and `lastTask` is what was seen last. */
export class VidgenTimeoutError extends Error {
  override readonly name = 'VidgenTimeoutError';
  readonly requestId: string;
  readonly lastTask: Task | undefined;

  constructor(requestId: string, timeoutMs: number, lastTask: Task | undefined) {
    super(`task ${requestId} did not finish within ${timeoutMs} ms${lastTask ? ` (last status: ${lastTask.status})` : ''}`);
    this.requestId = requestId;
    this.lastTask = lastTask;
  }
}

/** A webhook request that is not provably from the service (signature, timestamp, headers, body). */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}
