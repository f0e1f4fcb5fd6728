/**
 * The remote provider port and its adapter for BytePlus ModelArk's (and Volcengine Ark's, the same
 * protocol) Seedance content-generation task API (D14): one client per channel (an upstream
 * account and region). A remote provider does not render: it creates a task elsewhere, which the
 * follower (upstream/follower.ts) then queries in batches, cancels, and whose video it downloads.
 *
 * Every call answers a result union and never throws for what the upstream or the network does.
 * The key is never part of a message: an upstream that echoes the request is redacted.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { TaskErrorCode } from '../provider.js';
import {
  type CreateTaskBody,
  isChannelProblem,
  isModerationCode,
  parseCreated,
  parseErrorBody,
  parseJson,
  parseList,
  parseTask,
  TASKS_PATH,
  type UpstreamError,
  type UpstreamTask,
} from './protocol.js';

export type CreateOutcome =
  | { kind: 'created'; upstreamId: string }
  /**
   * Refused, so nothing was created. `elsewhere`: the channel's problem (429, 5xx, quota, key), another
   * channel may take the task; otherwise the task's own (invalid, moderated), final.
   */
  | { kind: 'refused'; elsewhere: boolean; code: TaskErrorCode; message: string; retryAfterMs: number }
  /** The request never reached the upstream (connection refused, no route, name not found): nothing was created. */
  | { kind: 'unreached'; message: string }
  /** Sent, but its answer was lost (timed out, connection reset, unreadable 2xx): the upstream may have created it. */
  | { kind: 'unknown'; message: string };

export type ListOutcome = { ok: true; tasks: UpstreamTask[] } | { ok: false; message: string };
export type QueryOutcome = { ok: true; task: UpstreamTask } | { ok: false; notFound: boolean; message: string };
export type CancelUpstreamOutcome = { ok: true } | { ok: false; message: string };
export type DownloadOutcome = { ok: true } | { ok: false; code: TaskErrorCode; message: string; aborted?: boolean };

/** The remote provider port: what the submitter and the follower need of one channel. */
export interface RemoteProvider {
  create(body: CreateTaskBody, signal?: AbortSignal): Promise<CreateOutcome>;
  /** Many tasks in one request (`filter.task_ids`); ids the upstream does not know are absent. */
  list(upstreamIds: string[]): Promise<ListOutcome>;
  query(upstreamId: string): Promise<QueryOutcome>;
  /** DELETE: a queued task is cancelled; a running one is refused (it runs on, billed). */
  cancel(upstreamId: string): Promise<CancelUpstreamOutcome>;
  /** Streams the video to a temporary file beside `outputPath`, then renames it into place. */
  download(url: string, outputPath: string, signal: AbortSignal): Promise<DownloadOutcome>;
}

export interface UpstreamClientOptions {
  /** E.g. `https://ark.ap-southeast.bytepluses.com/api/v3` (an API key works in its own region only). */
  baseUrl: string;
  apiKey: string;
  /** Per API call (create, list, query, cancel), in ms. Default 30000. */
  requestTimeoutMs?: number;
  /** For one video download, in ms. Default 600000. */
  downloadTimeoutMs?: number;
  fetch?: typeof fetch;
}

type HttpOutcome =
  | { kind: 'answer'; status: number; headers: Headers; text: string }
  | { kind: 'aborted' }
  | { kind: 'timeout' }
  | { kind: 'unreachable'; code: string | undefined; message: string };

const MAX_UPSTREAM_MESSAGE = 300;
/** Errors of the connection itself, before any byte of the request could reach the upstream. */
const NOT_REACHED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT', 'ERR_INVALID_URL']);

export function createUpstreamClient(options: UpstreamClientOptions): RemoteProvider {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(baseUrl)) throw new Error('upstream: baseUrl must be an http(s) URL');
  if (!options.apiKey) throw new Error('upstream: apiKey is required');
  const apiKey = options.apiKey;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const downloadTimeoutMs = options.downloadTimeoutMs ?? 600_000;
  const fetchImpl = options.fetch ?? fetch;

  const redact = (text: string) => text.split(apiKey).join('[redacted]');
  const describe = (error: UpstreamError) => {
    // Redacted before it is shortened, so that a key cut in half cannot slip through.
    const message = redact(error.message);
    const short = message.length > MAX_UPSTREAM_MESSAGE ? `${message.slice(0, MAX_UPSTREAM_MESSAGE)}…` : message;
    return short ? `${error.code}: ${short}` : error.code;
  };
  // A failed task's error goes on to our task's error (taskErrorFor): an echoed key is redacted here.
  const redactTask = (task: UpstreamTask): UpstreamTask =>
    task.error ? { ...task, error: { ...task.error, message: redact(task.error.message) } } : task;
  const describeAnswer = (answer: { status: number; text: string }) => {
    const error = parseErrorBody(answer.text);
    return error ? `HTTP ${answer.status} ${describe(error)}` : `HTTP ${answer.status} without an error body`;
  };

  async function call(method: string, pathAndQuery: string, signal?: AbortSignal, body?: unknown): Promise<HttpOutcome> {
    const timeout = AbortSignal.timeout(requestTimeoutMs);
    try {
      const response = await fetchImpl(`${baseUrl}${pathAndQuery}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
        redirect: 'error',
      });
      const text = await response.text();
      return { kind: 'answer', status: response.status, headers: response.headers, text };
    } catch (error) {
      if (signal?.aborted) return { kind: 'aborted' };
      if (timeout.aborted) return { kind: 'timeout' };
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { kind: 'unreachable', code: cause?.code, message: redact(cause?.code ?? cause?.message ?? (error as Error).message) };
    }
  }

  const taskPath = (id: string) => `${TASKS_PATH}/${encodeURIComponent(id)}`;

  return {
    async create(body, signal) {
      const outcome = await call('POST', TASKS_PATH, signal, body);
      switch (outcome.kind) {
        case 'aborted':
          // Our own abort mid-request: as ambiguous as a timeout.
          return { kind: 'unknown', message: 'the create request was abandoned before its answer' };
        case 'timeout':
          return { kind: 'unknown', message: `no answer to the create request within ${requestTimeoutMs} ms` };
        case 'unreachable':
          return outcome.code && NOT_REACHED.has(outcome.code)
            ? { kind: 'unreached', message: `unreachable (${outcome.message})` }
            : { kind: 'unknown', message: `the connection failed during the create request (${outcome.message})` };
        case 'answer': {
          if (outcome.status >= 200 && outcome.status < 300) {
            const json = parseJson(outcome.text);
            const id = json.ok ? parseCreated(json.value) : json;
            // Accepted, but we cannot tell which task: it exists upstream and may run.
            if (!id.ok) return { kind: 'unknown', message: `the create answer could not be read: ${id.message}` };
            return { kind: 'created', upstreamId: id.value };
          }
          const error = parseErrorBody(outcome.text);
          const elsewhere = isChannelProblem(outcome.status, error?.code);
          const code: TaskErrorCode = !elsewhere && error && isModerationCode(error.code) ? 'content_rejected' : 'provider_error';
          return { kind: 'refused', elsewhere, code, message: `the upstream refused the task: ${describeAnswer(outcome)}`, retryAfterMs: retryAfterOf(outcome.headers) };
        }
      }
    },

    async list(upstreamIds) {
      // Without a filter the upstream would answer the account's newest tasks, none of them asked for.
      if (upstreamIds.length === 0) return { ok: true, tasks: [] };
      const query = new URLSearchParams({ page_num: '1', page_size: String(Math.max(1, upstreamIds.length)) });
      for (const id of upstreamIds) query.append('filter.task_ids', id);
      const outcome = await call('GET', `${TASKS_PATH}?${query}`);
      if (outcome.kind !== 'answer') return { ok: false, message: outcome.kind === 'timeout' ? `no answer within ${requestTimeoutMs} ms` : `unreachable (${'message' in outcome ? outcome.message : outcome.kind})` };
      if (outcome.status < 200 || outcome.status >= 300) return { ok: false, message: describeAnswer(outcome) };
      const json = parseJson(outcome.text);
      const tasks = json.ok ? parseList(json.value) : json;
      return tasks.ok ? { ok: true, tasks: tasks.value.map(redactTask) } : { ok: false, message: `the list answer could not be read: ${tasks.message}` };
    },

    async query(upstreamId) {
      const outcome = await call('GET', taskPath(upstreamId));
      if (outcome.kind !== 'answer') return { ok: false, notFound: false, message: outcome.kind === 'timeout' ? `no answer within ${requestTimeoutMs} ms` : 'unreachable' };
      if (outcome.status === 404) return { ok: false, notFound: true, message: describeAnswer(outcome) };
      if (outcome.status < 200 || outcome.status >= 300) return { ok: false, notFound: false, message: describeAnswer(outcome) };
      const json = parseJson(outcome.text);
      const task = json.ok ? parseTask(json.value) : json;
      return task.ok ? { ok: true, task: redactTask(task.value) } : { ok: false, notFound: false, message: `the task answer could not be read: ${task.message}` };
    },

    async cancel(upstreamId) {
      const outcome = await call('DELETE', taskPath(upstreamId));
      if (outcome.kind === 'answer' && outcome.status >= 200 && outcome.status < 300) return { ok: true };
      return { ok: false, message: outcome.kind === 'answer' ? describeAnswer(outcome) : outcome.kind };
    },

    async download(url, outputPath, signal) {
      const temporary = join(dirname(outputPath), `.${basename(outputPath)}.${randomUUID()}.part`);
      const timeout = AbortSignal.timeout(downloadTimeoutMs);
      // Whose fault a failure is: the upstream's (provider_error) or our disk's (internal_error). The
      // pipeline passes a network error on to the file stream as well, so the source says first.
      let fetched = false;
      let sourceFailed = false;
      try {
        await mkdir(dirname(outputPath), { recursive: true });
      } catch (error) {
        return { ok: false, code: 'internal_error', message: `preparing the output directory failed: ${(error as Error).message}` };
      }
      try {
        // No Authorization header: the video URL is a pre-signed object-storage URL on another host.
        const response = await fetchImpl(url, { signal: AbortSignal.any([signal, timeout]) });
        if (!response.ok || !response.body) {
          await response.body?.cancel();
          return { ok: false, code: 'provider_error', message: `downloading the upstream video failed: HTTP ${response.status}` };
        }
        fetched = true;
        const source = Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>).on('error', () => (sourceFailed = true));
        const file = createWriteStream(temporary);
        await pipeline(source, file);
        if (file.bytesWritten === 0) {
          await rm(temporary, { force: true });
          return { ok: false, code: 'provider_error', message: 'downloading the upstream video failed: the file is empty' };
        }
        await rename(temporary, outputPath);
        return { ok: true };
      } catch (error) {
        await rm(temporary, { force: true });
        if (signal.aborted) return { ok: false, code: 'internal_error', message: 'download stopped', aborted: true };
        if (timeout.aborted) return { ok: false, code: 'provider_error', message: `downloading the upstream video took longer than ${downloadTimeoutMs} ms` };
        if (fetched && !sourceFailed) return { ok: false, code: 'internal_error', message: `writing the video failed: ${(error as Error).message}` };
        const cause = (error as { cause?: { code?: string } }).cause?.code;
        return { ok: false, code: 'provider_error', message: `downloading the upstream video failed: ${(error as Error).message}${cause ? ` (${cause})` : ''}` };
      }
    },
  };
}

/** How an upstream ending maps to our task (D3 codes): expired → timeout, moderation → content_rejected, else provider_error. */
export function taskErrorFor(task: UpstreamTask, redact: (text: string) => string = (t) => t): { code: TaskErrorCode; message: string } {
  switch (task.status) {
    case 'expired':
      return { code: 'timeout', message: `the upstream task ${task.id} expired before it finished` };
    case 'cancelled':
      return { code: 'provider_error', message: `the upstream task ${task.id} was cancelled upstream` };
    case 'failed': {
      const error = task.error ?? { code: 'unknown', message: 'no error given' };
      const message = redact(error.message).slice(0, MAX_UPSTREAM_MESSAGE);
      return {
        code: isModerationCode(error.code) ? 'content_rejected' : 'provider_error',
        message: `the upstream task ${task.id} failed: ${message ? `${error.code}: ${message}` : error.code}`,
      };
    }
    default:
      return { code: 'provider_error', message: `the upstream task ${task.id} ended ${task.status}` };
  }
}

/** `Retry-After` in seconds (the HTTP-date form is not worth the parsing here), as ms; 0 if absent. */
function retryAfterOf(headers: Headers): number {
  const seconds = Number(headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}
