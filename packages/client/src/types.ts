/** Names for the spec's schemas that the client's methods take and return. */
import type { components } from './openapi.js';

type Schemas = components['schemas'];

export type Task = Schemas['Task'];
export type TaskStatus = Schemas['TaskStatus'];
export type TaskSucceeded = Schemas['TaskSucceeded'];
export type TaskFailed = Schemas['TaskFailed'];
export type TaskCancelled = Schemas['TaskCancelled'];
export type TaskError = Schemas['TaskError'];
export type TaskList = Schemas['TaskList'];

/**
 * The `Task` variants whose `status` is `S`, picked out of the spec's `Task` union:
 * `TaskWithStatus<'succeeded'>` is `TaskSucceeded` (its `output` is never `null`), and
 * `TaskWithStatus<TaskStatus>` is `Task`.
 */
export type TaskWithStatus<S extends TaskStatus> = Extract<Task, { status: S }>;

/** A page of `list({ status })`: `TaskList` whose `data` holds only tasks of status `S`. */
export type TaskListWithStatus<S extends TaskStatus> = [TaskStatus] extends [S]
  ? TaskList
  : Omit<TaskList, 'data'> & { data: TaskWithStatus<S>[] };
export type Model = Schemas['Model'];
export type ModelId = Schemas['ModelId'];
export type ModelList = Schemas['ModelList'];
export type SubmitGenerationResponse = Schemas['SubmitGenerationResponse'];
export type CancelGenerationResponse = Schemas['CancelGenerationResponse'];
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorDetail = Schemas['ErrorDetail'];
export type ErrorResponse = Schemas['ErrorResponse'];
export type VideoGenerationEvent = Schemas['VideoGenerationEvent'];

// The account holder's API: the account, its ledger and usage, its keys, its webhook deliveries.
export type AccountSummary = Schemas['AccountSummary'];
export type AccountLimits = Schemas['AccountLimits'];
export type LedgerEntry = Schemas['LedgerEntry'];
export type LedgerEntryKind = Schemas['LedgerEntryKind'];
export type LedgerEntryList = Schemas['LedgerEntryList'];
export type UsageReport = Schemas['UsageReport'];
export type UsageBucket = Schemas['UsageBucket'];
export type UsageGranularity = Schemas['UsageGranularity'];
export type UsageTaskCounts = Schemas['UsageTaskCounts'];
export type Scope = Schemas['Scope'];
export type ApiKey = Schemas['ApiKey'];
export type ApiKeyMode = Schemas['ApiKeyMode'];
export type ApiKeyList = Schemas['ApiKeyList'];
export type CreateApiKeyRequest = Schemas['CreateApiKeyRequest'];
export type CreatedApiKey = Schemas['CreatedApiKey'];
export type RevokeApiKeyResponse = Schemas['RevokeApiKeyResponse'];
export type WebhookDelivery = Schemas['WebhookDelivery'];
export type WebhookDeliveryStatus = Schemas['WebhookDeliveryStatus'];
export type WebhookDeliveryList = Schemas['WebhookDeliveryList'];
export type WebhookDeliveryDetail = Schemas['WebhookDeliveryDetail'];
export type WebhookAttempt = Schemas['WebhookAttempt'];
export type WebhookEventType = Schemas['WebhookEventType'];
export type RedeliverWebhookResponse = Schemas['RedeliverWebhookResponse'];
export type WebhookSecret = Schemas['WebhookSecret'];

/** `K` must name keys of `T`, so a renamed field in the spec fails the typecheck here. */
type WithOptional<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

/**
 * The submission body. openapi-typescript marks fields that have a `default` as present
 * (right for answers); in a request they may be omitted and the service applies the default
 * (`duration` 5, `resolution` `720p`, `aspectRatio` `16:9`).
 */
export type SubmitGenerationRequest = WithOptional<Schemas['SubmitGenerationRequest'], 'aspectRatio' | 'duration' | 'resolution'>;

/** The rotation body: `overlapHours` has a default (24), so a request may omit it. */
export type RotateWebhookSecretRequest = WithOptional<Schemas['RotateWebhookSecretRequest'], 'overlapHours'>;

const TERMINAL = Object.freeze(['succeeded', 'failed', 'cancelled'] as const satisfies readonly TaskStatus[]);

/** `succeeded`, `failed` and `cancelled` never change again. */
export function isTerminal(status: TaskStatus): status is (typeof TERMINAL)[number] {
  return (TERMINAL as readonly TaskStatus[]).includes(status);
}
