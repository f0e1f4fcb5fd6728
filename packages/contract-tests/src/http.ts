/** Calls operations of the target by operationId, building the URL from the spec's path template. */
import { expect } from 'vitest';
import { conformanceProblems, envelopeProblems, type CapturedResponse } from './conformance.js';
import { operationById } from './spec.js';
import { target } from './target.js';

export interface CallOptions {
  path?: Record<string, string>;
  query?: Record<string, string | number>;
  headers?: Record<string, string>;
  /** Sent as JSON with `Content-Type: application/json`. */
  body?: unknown;
  /** Sent as is; give the Content-Type in `headers`. */
  rawBody?: string;
  /** The API key; `null` sends no Authorization header. Defaults to the target's key. */
  apiKey?: string | null;
  /** Against the mock: Prism's `Prefer` header choosing a documented response. */
  prefer?: string;
}

export interface Reply extends CapturedResponse {
  json: any;
}

/** operationIds this worker has called, to prove every operation is exercised. */
export const exercised = new Set<string>();

export async function send(method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Reply> {
  const res = await fetch(new URL(path, target.baseUrl), { method, headers: init.headers, body: init.body, redirect: 'manual' });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export async function call(operationId: string, options: CallOptions = {}): Promise<Reply> {
  const op = operationById(operationId);
  const path = op.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const value = options.path?.[name];
    if (value === undefined) throw new Error(`${operationId} needs path parameter ${name}`);
    return encodeURIComponent(value);
  });
  const query = new URLSearchParams(Object.entries(options.query ?? {}).map(([k, v]): [string, string] => [k, String(v)]));
  const headers: Record<string, string> = { ...options.headers };
  const apiKey = options.apiKey === undefined ? target.apiKey : options.apiKey;
  if (apiKey !== null) headers.Authorization ??= `Bearer ${apiKey}`;
  if (options.prefer) headers.Prefer = options.prefer;
  let body = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['Content-Type'] ??= 'application/json';
  }
  exercised.add(operationId);
  return send(op.method, `${path}${query.size ? `?${query}` : ''}`, { headers, body });
}

export function expectConforms(operationId: string, reply: Reply, status?: number): void {
  expect(conformanceProblems(operationId, reply), `${operationId} → ${reply.status}: ${reply.text.slice(0, 300)}`).toEqual([]);
  if (status !== undefined) expect(reply.status, reply.text.slice(0, 300)).toBe(status);
}

/** A documented error: the status, the code and the whole response conform. */
export function expectError(operationId: string, reply: Reply, status: number, code: string): void {
  expectConforms(operationId, reply, status);
  expect(reply.json?.error?.code).toBe(code);
}

/** An error no operation documents (unknown route, unsupported method): the envelope and the code. */
export function expectEnvelope(reply: Reply, status: number, code: string): void {
  expect(reply.status, reply.text.slice(0, 300)).toBe(status);
  expect(envelopeProblems(reply, code)).toEqual([]);
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);

/** Long-polls a task until it is terminal (the server's worker renders it), checking every answer. */
export async function untilTerminal(requestId: string): Promise<any> {
  for (let i = 0; i < 10; i++) {
    const reply = await call('getGeneration', { path: { requestId }, query: { wait: 30 } });
    expectConforms('getGeneration', reply, 200);
    if (TERMINAL.has(reply.json.status)) return reply.json;
  }
  throw new Error(`${requestId} did not finish`);
}
