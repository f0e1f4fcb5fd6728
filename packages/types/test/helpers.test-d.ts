// Compile-time checks of the helper types: `pnpm typecheck` fails if they drift.
import type { RequestBody, ResponseBody, SuccessBody, Task, QueryParams } from '../src/index.js';

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assert = <T extends true>(): T => true as T;

assert<Equal<RequestBody<'submitGeneration'>['model'], 'vidgen-2.0' | 'vidgen-2.0-fast' | 'vidgen-1.5-pro'>>();
assert<Equal<SuccessBody<'submitGeneration'>['status'], 'queued'>>();
assert<Equal<ResponseBody<'getGeneration', 200>, Task>>();
assert<Equal<ResponseBody<'cancelGeneration', 409>['error']['code'], 'invalid_state'>>();
assert<Equal<QueryParams<'listGenerations'>['limit'], number | undefined>>();

// The task's shape narrows on status: output exists only when succeeded.
export function outputUrl(task: Task): string | null {
  return task.status === 'succeeded' ? task.output.url : null;
}
