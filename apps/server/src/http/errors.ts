/** The D2 error envelope and the one exception type handlers throw to produce it. */
import type { components } from '@vidgen/types';

export type ErrorCode = components['schemas']['ErrorCode'];
export type ErrorDetail = components['schemas']['ErrorDetail'];
export type ErrorResponse = components['schemas']['ErrorResponse'];

const STATUS_OF: Record<ErrorCode, number> = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  invalid_state: 409,
  idempotency_in_progress: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  idempotency_key_reused: 422,
  rate_limited: 429,
  too_many_active_tasks: 429,
  internal_error: 500,
  unavailable: 503,
};

export class ApiError extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.status = STATUS_OF[code];
  }

  toBody(): ErrorResponse {
    return { success: false, error: { code: this.code, message: this.message, ...(this.details ? { details: this.details } : {}) } };
  }
}
