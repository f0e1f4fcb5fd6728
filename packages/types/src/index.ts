/**
 * Types of the vidgen API, generated from the bundled OpenAPI document by
 * openapi-typescript (`src/openapi.ts`, never edited by hand), plus helpers
 * that pick request and response bodies by operationId and status.
 */
import type { components, operations, paths, webhooks } from './openapi.js';

export type { components, operations, paths, webhooks };

export type Schemas = components['schemas'];
export type OperationId = keyof operations;

export type Task = Schemas['Task'];
export type TaskStatus = Schemas['TaskStatus'];
export type TaskErrorCode = Schemas['TaskErrorCode'];
export type ModelId = Schemas['ModelId'];
export type ErrorCode = Schemas['ErrorCode'];
export type ErrorResponse = Schemas['ErrorResponse'];
export type VideoGenerationEvent = Schemas['VideoGenerationEvent'];

type JsonContent<T> = T extends { content: { 'application/json': infer Body } } ? Body : never;

/** The JSON request body of an operation (`never` when it takes none). */
export type RequestBody<Op extends OperationId> = JsonContent<NonNullable<operations[Op]['requestBody']>>;

/** The HTTP statuses an operation documents. */
export type ResponseStatus<Op extends OperationId> = keyof operations[Op]['responses'];

/** The JSON body of one documented response of an operation. */
export type ResponseBody<Op extends OperationId, Status extends ResponseStatus<Op>> = JsonContent<
  operations[Op]['responses'][Status]
>;

/** The JSON body of an operation's 2xx answer. */
export type SuccessBody<Op extends OperationId> = ResponseBody<Op, Extract<ResponseStatus<Op>, 200 | 201 | 202 | 204>>;

/** The query parameters of an operation. */
export type QueryParams<Op extends OperationId> = NonNullable<operations[Op]['parameters']['query']>;
