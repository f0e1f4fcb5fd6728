/**
 * Answers checked against the bundled spec, for suites that drive the server
 * over HTTP. The checks are the contract suite's own pure modules, imported by
 * path: the server cannot depend on @vidgen/contract-tests (that package
 * depends on the server), and a second copy of the checker would drift.
 */
import { conformanceProblems, envelopeProblems, type CapturedResponse } from '../../../../packages/contract-tests/src/conformance.js';
import { ajv, at, deref, document, operationById, parametersOf, type JsonObject } from '../../../../packages/contract-tests/src/spec.js';

export { ajv, at, deref, document, operationById, parametersOf, type CapturedResponse, type JsonObject };

/** The spec's ErrorCode enum. */
export const errorCodes = (at('/components/schemas/ErrorCode') as JsonObject).enum as string[];

/** Pointer of an operation's JSON request body schema. */
export const requestBodyPointer = (operationId: string) => `${operationById(operationId).pointer}/requestBody/content/application~1json/schema`;

/** Pointer of the schema of an operation's parameter, by the name the spec gives it. */
export function parameterSchemaPointer(operationId: string, name: string): string {
  const found = parametersOf(operationById(operationId)).find(({ param }) => param.name === name);
  if (!found) throw new Error(`${operationId} has no parameter ${name}`);
  return `${found.ptr}/schema`;
}

/** The scopes an operation's key must hold; `undefined` when it needs no key. */
export function requiredScopes(operationId: string): string[] | undefined {
  const security = (operationById(operationId).operation.security ?? document.security ?? []) as JsonObject[];
  const bearer = security.find((requirement) => 'bearerAuth' in requirement);
  return bearer ? (bearer.bearerAuth as string[]) : undefined;
}

/**
 * Every way an answer departs from the spec. An answer to an operation must
 * have a status the operation documents, with its headers and body; an answer
 * to no operation (an unknown route, a wrong method) must be the D2 envelope
 * with `code`. Every non-2xx carries a code of ErrorCode; nothing is a 5xx.
 * A HEAD answer has no body, so only its status and headers are checked.
 */
export function responseProblems(res: CapturedResponse, target: { operationId: string } | { code: string }, method = 'GET'): string[] {
  const problems: string[] = [];
  if (res.status >= 500) problems.push(`status ${res.status}: a server error`);
  if (!res.headers.get('x-correlation-id')) problems.push('X-Correlation-Id is missing');
  const head = method === 'HEAD';
  if ('code' in target) {
    if (!head) problems.push(...envelopeProblems(res, target.code));
    return problems;
  }
  problems.push(...conformanceProblems(target.operationId, res).filter((problem) => !(head && /^(body|content-type) /.test(problem))));
  if (res.status >= 400 && !head) {
    let body: { success?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
    try {
      body = JSON.parse(res.text);
    } catch {
      body = undefined;
    }
    if (body?.success !== false || typeof body.error?.message !== 'string' || !errorCodes.includes(String(body.error.code))) {
      problems.push(`not the error envelope: ${res.text.slice(0, 200)}`);
    }
  }
  return problems;
}

/** An answer read whole: status, headers and the parsed body (undefined when empty). */
export interface CheckedAnswer {
  status: number;
  headers: Headers;
  body: any;
}

/** Reads an answer and returns it once it is what the spec documents for the operation, or fails the test naming the problems. */
export async function checkedAnswer(response: Response | Promise<Response>, operationId: string, method = 'GET'): Promise<CheckedAnswer> {
  const res = await response;
  const text = await res.text();
  const problems = responseProblems({ status: res.status, headers: res.headers, text }, { operationId }, method);
  if (problems.length) throw new Error(`${operationId} answered ${res.status} unlike its spec: ${problems.join('; ')}\n${text.slice(0, 300)}`);
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}
