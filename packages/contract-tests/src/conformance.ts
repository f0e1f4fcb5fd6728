/**
 * Checks one HTTP response against what the spec documents for its operation:
 * the status is documented, every required header is present and every
 * documented header parses against its schema, and the body validates against
 * the schema of its media type.
 */
import { at, deref, operationById, pointer, schemaErrors, type JsonObject } from './spec.js';

export interface CapturedResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** Header values are strings on the wire; integer and boolean schemas are checked on the parsed value. */
function headerValue(raw: string, schema: JsonObject | undefined): unknown {
  const type = schema?.type;
  if ((type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?$/.test(raw)) return Number(raw);
  return raw;
}

function responsePointer(operationId: string, status: number): string | undefined {
  const op = operationById(operationId);
  const responses = at(`${op.pointer}/responses`) as JsonObject | undefined;
  if (!responses) return undefined;
  for (const key of [String(status), `${String(status)[0]}XX`, 'default']) {
    if (key in responses) return deref(responses[key], `${op.pointer}/responses/${key}`).ptr;
  }
  return undefined;
}

/** Every way this response departs from the spec; empty when it conforms. */
export function conformanceProblems(operationId: string, res: CapturedResponse): string[] {
  const respPtr = responsePointer(operationId, res.status);
  if (!respPtr) return [`status ${res.status} is not documented for ${operationId}`];
  const response = at(respPtr) as JsonObject;
  const problems: string[] = [];

  for (const name of Object.keys((response.headers ?? {}) as JsonObject)) {
    const { node, ptr } = deref(at(`${respPtr}${pointer('headers', name)}`), `${respPtr}${pointer('headers', name)}`);
    const header = node as JsonObject;
    const raw = res.headers.get(name);
    if (raw === null) {
      if (header.required === true) problems.push(`required header ${name} is missing`);
      continue;
    }
    const errors = schemaErrors(`${ptr}/schema`, headerValue(raw, header.schema as JsonObject));
    if (errors.length) problems.push(`header ${name}: ${JSON.stringify(raw)} ${errors.join('; ')}`);
  }

  const content = response.content as JsonObject | undefined;
  if (!content) {
    return problems;
  }
  const contentType = (res.headers.get('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (!(contentType in content)) {
    problems.push(`content-type ${JSON.stringify(contentType)} is not one of ${Object.keys(content).join(', ')}`);
    return problems;
  }
  const schemaPtr = `${respPtr}${pointer('content', contentType, 'schema')}`;
  let body: unknown = res.text;
  if (contentType === 'application/json') {
    try {
      body = JSON.parse(res.text);
    } catch {
      problems.push(`body is not JSON: ${res.text.slice(0, 200)}`);
      return problems;
    }
  }
  for (const error of schemaErrors(schemaPtr, body)) problems.push(`body ${error}`);
  return problems;
}

/** For answers no operation documents (unknown route, wrong method): the D2 error envelope. */
export function envelopeProblems(res: CapturedResponse, code: string): string[] {
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    return [`body is not JSON: ${res.text.slice(0, 200)}`];
  }
  const problems = schemaErrors(pointer('components', 'schemas', 'ErrorResponse'), body).map((e) => `body ${e}`);
  const actual = (body as { error?: { code?: string } }).error?.code;
  if (actual !== code) problems.push(`error.code is ${JSON.stringify(actual)}, expected ${JSON.stringify(code)}`);
  if (!res.headers.get('x-correlation-id')) problems.push('X-Correlation-Id is missing');
  return problems;
}
