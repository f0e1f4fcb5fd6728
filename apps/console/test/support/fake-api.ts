/**
 * A fake of the API for component tests: answers chosen per operation, defaulting to the spec's
 * own examples (the same ones the Prism mock serves), so fixtures are never written by hand.
 * Every request is recorded, so a test can check what the console sent.
 */
import bundle from '@vidgen/spec/openapi.json' with { type: 'json' };
import type { operations } from '@vidgen/client';

type OperationId = keyof operations;
type Spec = { paths: Record<string, Record<string, { operationId?: string; responses?: Record<string, any> }>>; components: any };
const spec = bundle as unknown as Spec;

export interface Recorded {
  operationId: OperationId;
  method: string;
  url: URL;
  headers: Headers;
  body: unknown;
}

export type Answer = { status?: number; body?: unknown; headers?: Record<string, string> };
export type Handler = (request: Recorded) => Answer | Promise<Answer>;

const ROUTES = Object.entries(spec.paths).flatMap(([path, item]) =>
  Object.entries(item)
    .filter(([, op]) => op.operationId)
    .map(([method, op]) => ({
      method: method.toUpperCase(),
      pattern: new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`),
      operationId: op.operationId as OperationId,
    })),
);

function resolveRef(node: any): any {
  while (node && typeof node === 'object' && '$ref' in node) {
    node = (node.$ref as string)
      .slice(2)
      .split('/')
      .reduce((at: any, part: string) => at[part.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
  }
  return node;
}

/** The status of an operation's success answer with a JSON body (200, 201 or 202). */
export function successStatus(operationId: OperationId): number {
  for (const item of Object.values(spec.paths)) {
    for (const op of Object.values(item)) {
      if (op.operationId !== operationId) continue;
      const code = Object.keys(op.responses ?? {}).find((c) => /^2\d\d$/.test(c) && resolveRef(op.responses![c])?.content?.['application/json']);
      if (code) return Number(code);
    }
  }
  throw new Error(`${operationId} has no JSON success answer in the spec`);
}

/** The spec's example of an operation's answer (its success answer unless a status is given): the named one, or its first. */
export function example<T = any>(operationId: OperationId, status: number = successStatus(operationId), name?: string): T {
  for (const item of Object.values(spec.paths)) {
    for (const op of Object.values(item)) {
      if (op.operationId !== operationId) continue;
      const response = resolveRef(op.responses?.[String(status)]);
      const media = response?.content?.['application/json'];
      if (!media) break;
      if (media.example !== undefined) return structuredClone(media.example);
      const examples = media.examples ?? {};
      const chosen = name ? examples[name] : Object.values(examples)[0];
      if (!chosen) throw new Error(`${operationId} ${status} has no example${name ? ` named ${name}` : ''}`);
      return structuredClone(resolveRef(chosen).value);
    }
  }
  throw new Error(`${operationId} has no JSON answer ${status} in the spec`);
}

export function fakeApi(handlers: Partial<Record<OperationId, Handler>> = {}) {
  const requests: Recorded[] = [];
  const fetch = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const route = ROUTES.find((r) => r.method === request.method && r.pattern.test(url.pathname));
    if (!route) return new Response('no such route in the spec', { status: 599 });
    const text = request.method === 'GET' ? '' : await request.text();
    const recorded: Recorded = { operationId: route.operationId, method: request.method, url, headers: request.headers, body: text ? JSON.parse(text) : undefined };
    requests.push(recorded);
    const handler = handlers[route.operationId];
    const answer: Answer = handler ? await handler(recorded) : { status: successStatus(route.operationId), body: example(route.operationId) };
    const status = answer.status ?? successStatus(route.operationId);
    return new Response(answer.body === undefined ? null : JSON.stringify(answer.body), {
      status,
      headers: { 'Content-Type': 'application/json', 'X-Correlation-Id': 'corr-test', ...answer.headers },
    });
  };
  return { fetch, requests, calls: (operationId: OperationId) => requests.filter((r) => r.operationId === operationId) };
}

/** An answer in the contract's error envelope. */
export function errorAnswer(status: number, code: string, message: string, details?: { field?: string; message: string; value?: string | number }[]): Answer {
  return { status, body: { success: false, error: { code, message, ...(details ? { details } : {}) } } };
}
