/** The D2 error envelope and the one exception type handlers throw to produce it. */
import type { components } from '@vidgen/types';
import { redactSecrets } from '../logging.js';

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

  /** The envelope; a key or webhook secret the caller sent (in a path, a field name, bad JSON) is never echoed. */
  toBody(): ErrorResponse {
    const details = this.details?.map((detail) => ({
      ...detail,
      ...(detail.field !== undefined ? { field: redactSecrets(detail.field) } : {}),
      message: redactSecrets(detail.message),
      ...(typeof detail.value === 'string' ? { value: redactSecrets(detail.value) } : {}),
    }));
    return { success: false, error: { code: this.code, message: redactSecrets(this.message), ...(details ? { details } : {}) } };
  }
}
