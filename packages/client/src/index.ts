/**
 * @vidgen/client: the vidgen video-generation API for applications (Node 20+ and browsers).
 * Methods, arguments and results are typed from the service's OpenAPI document.
 */
export {
  createClient,
  VidgenClient,
  type ClientOptions,
  type GetOptions,
  type ListAllOptions,
  type ListOptions,
  type RequestOptions,
  type SubmitAndWaitOptions,
  type SubmitOptions,
  type WaitOptions,
} from './client.js';
export { VidgenError, VidgenTaskError, VidgenTimeoutError, WebhookVerificationError, type ClientErrorCode } from './errors.js';
export type { RetryOptions } from './retry.js';
export { verifyWebhook, type VerifyWebhookOptions, type WebhookHeaders } from './webhooks.js';
export { isTerminal } from './types.js';
export type {
  CancelGenerationResponse,
  ErrorCode,
  ErrorDetail,
  ErrorResponse,
  Model,
  ModelId,
  ModelList,
  SubmitGenerationRequest,
  SubmitGenerationResponse,
  Task,
  TaskCancelled,
  TaskError,
  TaskFailed,
  TaskList,
  TaskListWithStatus,
  TaskStatus,
  TaskSucceeded,
  TaskWithStatus,
  VideoGenerationEvent,
} from './types.js';
export type { components, operations, paths, webhooks } from './openapi.js';
