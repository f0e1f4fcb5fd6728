/**
 * The `byteplus` provider (D14): hands a task to BytePlus ModelArk's Seedance content-generation
 * task API, polls it to a terminal status and re-hosts the finished MP4 at `request.outputPath`
 * (the upstream URL expires after about a day, our outputs live for days, D13).
 *
 * Polling rather than the upstream's `callback_url`: a callback needs an address the upstream can
 * reach, which a development machine does not have, and polling survives a lost callback.
 */
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';
import type { ModelId } from '../../domain/catalog.js';
import type { GenerationRequest, GenerationResult, Provider, TaskErrorCode } from '../provider.js';
import {
  buildContent,
  type CreateTaskBody,
  isModerationCode,
  parseCreated,
  parseErrorBody,
  parseJson,
  parseTask,
  TASKS_PATH,
  type UpstreamError,
} from './protocol.js';

/** Waits `ms`, or less if `signal` aborts; never rejects (the caller checks the signal). */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

export interface BytePlusProviderOptions {
  /** E.g. `https://ark.ap-southeast.bytepluses.com/api/v3` (an API key works in one region only). */
  baseUrl: string;
  apiKey: string;
  /** Our model ids → upstream model or endpoint ids (e.g. `dreamina-seedance-2-0-260128`), from configuration. */
  modelIds: Record<ModelId, string>;
  /** The first wait before polling, in ms; doubles per poll. Default 2000. */
  pollIntervalMs?: number;
  /** The longest wait between polls, in ms. Default 15000. */
  maxPollIntervalMs?: number;
  /** Per API call (create, query, cancel), in ms. Default 30000. */
  requestTimeoutMs?: number;
  /** For the whole video download, in ms. Default 600000. */
  downloadTimeoutMs?: number;
  /** Create attempts in all when the upstream answers 429/5xx or cannot be reached. Default 3. */
  createAttempts?: number;
  /** Consecutive failed polls (429/5xx, unreachable, timed out) tolerated before giving up. Default 5. */
  maxPollFailures?: number;
  /** Injectable so that tests need no real waiting. Default: a real timer. */
  sleep?: Sleep;
  /** In [0, 1), for the jitter. Default Math.random. */
  random?: () => number;
  fetch?: typeof fetch;
}

export const abortableSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

/**
 * The wait before the n-th retry or poll (n from 0): doubling from `initialMs` up to `maxMs`, then
 * shortened by up to 20 % at random, so that many tasks started together do not poll in lockstep.
 * Never above `maxMs`, and with doubling each wait stays above the previous until the cap.
 */
export function backoffDelay(n: number, initialMs: number, maxMs: number, random: () => number): number {
  const base = Math.min(maxMs, initialMs * 2 ** n);
  return Math.round(base * (1 - 0.2 * random()));
}

type Failure = Extract<GenerationResult, { ok: false }>;
/** A step's outcome: its value, a failure to report, or "the caller's signal aborted". */
type Step<T> = { ok: true; value: T } | Failure | { ok: 'aborted' };

type HttpOutcome =
  | { kind: 'answer'; status: number; headers: Headers; text: string }
  | { kind: 'aborted' }
  | { kind: 'timeout' }
  | { kind: 'unreachable'; message: string };

const MAX_UPSTREAM_MESSAGE = 300;

export function createBytePlusProvider(options: BytePlusProviderOptions): Provider {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(baseUrl)) throw new Error('byteplus: baseUrl must be an http(s) URL');
  if (!options.apiKey) throw new Error('byteplus: apiKey is required');
  const apiKey = options.apiKey;
  const pollIntervalMs = options.pollIntervalMs ?? 2000;
  const maxPollIntervalMs = options.maxPollIntervalMs ?? 15_000;
  const requestTimeoutMs = options.requestTimeoutMs ?? 30_000;
  const downloadTimeoutMs = options.downloadTimeoutMs ?? 600_000;
  const createAttempts = Math.max(1, options.createAttempts ?? 3);
  const maxPollFailures = Math.max(1, options.maxPollFailures ?? 5);
  const sleep = options.sleep ?? abortableSleep;
  const random = options.random ?? Math.random;
  const fetchImpl = options.fetch ?? fetch;

  /** An upstream that echoes our request must not leak the key into a task's error. */
  const redact = (text: string) => text.split(apiKey).join('[redacted]');
  const fail = (code: TaskErrorCode, message: string): Failure => ({ ok: false, error: { code, message: redact(message) } });
  const delay = (n: number) => backoffDelay(n, pollIntervalMs, maxPollIntervalMs, random);

  const describe = (error: UpstreamError) => {
    // Redacted before it is shortened, so that a key cut in half cannot slip through.
    const message = redact(error.message);
    const short = message.length > MAX_UPSTREAM_MESSAGE ? `${message.slice(0, MAX_UPSTREAM_MESSAGE)}…` : message;
    return short ? `${error.code}: ${short}` : error.code;
  };
  const describeAnswer = (answer: { status: number; text: string }) => {
    const error = parseErrorBody(answer.text);
    return error ? `HTTP ${answer.status} ${describe(error)}` : `HTTP ${answer.status} without an error body`;
  };

  async function call(method: string, path: string, signal: AbortSignal, body?: unknown): Promise<HttpOutcome> {
    const timeout = AbortSignal.timeout(requestTimeoutMs);
    try {
      const response = await fetchImpl(`${baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          accept: 'application/json',
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.any([signal, timeout]),
        redirect: 'error',
      });
      const text = await response.text();
      return { kind: 'answer', status: response.status, headers: response.headers, text };
    } catch (error) {
      if (signal.aborted) return { kind: 'aborted' };
      if (timeout.aborted) return { kind: 'timeout' };
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      return { kind: 'unreachable', message: cause?.code ?? cause?.message ?? (error as Error).message };
    }
  }

  /** Creates the task, retrying what may pass (429, 5xx, unreachable); answers the upstream task id. */
  async function createTask(body: CreateTaskBody, signal: AbortSignal): Promise<Step<string>> {
    for (let attempt = 1; ; attempt++) {
      const outcome = await call('POST', TASKS_PATH, signal, body);
      let retryable: string;
      let retryAfterMs = 0;
      switch (outcome.kind) {
        case 'aborted':
          return { ok: 'aborted' };
        case 'timeout':
          // Not retried: the upstream may have accepted the task and a second one would be billed too.
          return fail('provider_error', `BytePlus did not answer the create request within ${requestTimeoutMs} ms`);
        case 'unreachable':
          retryable = `unreachable (${outcome.message})`;
          break;
        case 'answer': {
          if (outcome.status >= 200 && outcome.status < 300) {
            const json = parseJson(outcome.text);
            if (!json.ok) return fail('provider_error', 'BytePlus answered the create request with malformed JSON');
            const id = parseCreated(json.value);
            if (!id.ok) return fail('provider_error', `BytePlus answered the create request unexpectedly: ${id.message}`);
            return id;
          }
          if (outcome.status === 429 || outcome.status >= 500) {
            retryable = describeAnswer(outcome);
            retryAfterMs = retryAfterOf(outcome.headers);
            break;
          }
          const error = parseErrorBody(outcome.text);
          const code = error && isModerationCode(error.code) ? 'content_rejected' : 'provider_error';
          return fail(code, `BytePlus refused the task: ${describeAnswer(outcome)}`);
        }
      }
      if (attempt >= createAttempts) {
        return fail('provider_error', `BytePlus create failed after ${attempt} attempts: ${retryable}`);
      }
      await sleep(Math.min(maxPollIntervalMs, Math.max(delay(attempt - 1), retryAfterMs)), signal);
      if (signal.aborted) return { ok: 'aborted' };
    }
  }

  /** Polls until a terminal status; answers the video URL of a succeeded task. */
  async function pollUntilFinished(taskId: string, signal: AbortSignal): Promise<Step<string>> {
    const path = `${TASKS_PATH}/${encodeURIComponent(taskId)}`;
    let failures = 0;
    let lastFailure = '';
    for (let n = 0; ; n++) {
      await sleep(delay(n), signal);
      if (signal.aborted) return { ok: 'aborted' };
      const outcome = await call('GET', path, signal);
      if (outcome.kind === 'aborted') return { ok: 'aborted' };
      if (outcome.kind === 'answer' && outcome.status >= 200 && outcome.status < 300) {
        const json = parseJson(outcome.text);
        if (!json.ok) return fail('provider_error', `BytePlus answered a query of task ${taskId} with malformed JSON`);
        const parsed = parseTask(json.value);
        if (!parsed.ok) return fail('provider_error', `BytePlus answered a query of task ${taskId} unexpectedly: ${parsed.message}`);
        failures = 0;
        const task = parsed.value;
        switch (task.status) {
          case 'queued':
          case 'running':
            continue;
          case 'succeeded':
            return { ok: true, value: task.videoUrl! };
          case 'failed': {
            const error = task.error ?? { code: 'unknown', message: 'no error given' };
            const code = isModerationCode(error.code) ? 'content_rejected' : 'provider_error';
            return fail(code, `BytePlus task ${taskId} failed: ${describe(error)}`);
          }
          case 'expired':
            return fail('timeout', `BytePlus task ${taskId} expired before it finished`);
          case 'cancelled':
            return fail('provider_error', `BytePlus task ${taskId} was cancelled upstream`);
          default:
            throw new Error(`unhandled status ${task.status satisfies never}`);
        }
      }
      // A lost poll loses nothing (the task runs on upstream), so transient failures are tolerated.
      if (outcome.kind === 'timeout') lastFailure = `no answer within ${requestTimeoutMs} ms`;
      else if (outcome.kind === 'unreachable') lastFailure = `unreachable (${outcome.message})`;
      else if (outcome.status === 429 || outcome.status >= 500) lastFailure = describeAnswer(outcome);
      else return fail('provider_error', `BytePlus refused a query of task ${taskId}: ${describeAnswer(outcome)}`);
      failures++;
      if (failures >= maxPollFailures) {
        return fail('provider_error', `BytePlus queries of task ${taskId} failed ${failures} times in a row: ${lastFailure}`);
      }
    }
  }

  /**
   * Best effort: the upstream cancels only a `queued` task; a `running` one runs to completion and
   * its result is discarded (D7). Our own signal has aborted, so the call gets a fresh one.
   */
  async function cancelTask(taskId: string): Promise<void> {
    await call('DELETE', `${TASKS_PATH}/${encodeURIComponent(taskId)}`, new AbortController().signal);
  }

  /** Streams the video to a temporary file beside `outputPath`, then renames it into place. */
  async function download(url: string, outputPath: string, signal: AbortSignal): Promise<Step<void>> {
    const temporary = join(dirname(outputPath), `.${basename(outputPath)}.${randomUUID()}.part`);
    const timeout = AbortSignal.timeout(downloadTimeoutMs);
    // Whose fault a failure is: the upstream's (provider_error) or our disk's (internal_error). The
    // pipeline passes a network error on to the file stream as well, so the source says first.
    let fetched = false;
    let sourceFailed = false;
    try {
      await mkdir(dirname(outputPath), { recursive: true });
    } catch (error) {
      return fail('internal_error', `preparing the output directory failed: ${(error as Error).message}`);
    }
    try {
      // No Authorization header: the video URL is a pre-signed object-storage URL on another host.
      const response = await fetchImpl(url, { signal: AbortSignal.any([signal, timeout]) });
      if (!response.ok || !response.body) {
        await response.body?.cancel();
        return fail('provider_error', `downloading the BytePlus video failed: HTTP ${response.status}`);
      }
      fetched = true;
      const source = Readable.fromWeb(response.body as NodeReadableStream<Uint8Array>).on('error', () => (sourceFailed = true));
      const file = createWriteStream(temporary);
      await pipeline(source, file);
      if (file.bytesWritten === 0) {
        await rm(temporary, { force: true });
        return fail('provider_error', 'downloading the BytePlus video failed: the file is empty');
      }
      if (signal.aborted) {
        await rm(temporary, { force: true });
        return { ok: 'aborted' };
      }
      await rename(temporary, outputPath);
      return { ok: true, value: undefined };
    } catch (error) {
      await rm(temporary, { force: true });
      if (signal.aborted) return { ok: 'aborted' };
      if (timeout.aborted) return fail('provider_error', `downloading the BytePlus video took longer than ${downloadTimeoutMs} ms`);
      if (fetched && !sourceFailed) return fail('internal_error', `writing the video failed: ${(error as Error).message}`);
      const cause = (error as { cause?: { code?: string } }).cause?.code;
      return fail('provider_error', `downloading the BytePlus video failed: ${(error as Error).message}${cause ? ` (${cause})` : ''}`);
    }
  }

  return {
    name: 'byteplus',
    needsLocalMedia: false,
    async generate(request: GenerationRequest): Promise<GenerationResult> {
      const cancelled = fail('internal_error', 'cancelled');
      const { signal } = request;
      if (signal.aborted) return cancelled;
      const model = options.modelIds[request.model];
      if (!model) return fail('internal_error', `no BytePlus model is configured for ${request.model}`);
      const content = buildContent(request.mode, request.prompt, request.references);
      if (!content.ok) return fail('internal_error', `inconsistent task: ${content.message}`);

      const created = await createTask(
        {
          model,
          content: content.value,
          ratio: request.aspectRatio,
          duration: request.duration,
          resolution: request.resolution,
          watermark: false,
        },
        signal,
      );
      if (created.ok === 'aborted') return cancelled;
      if (!created.ok) return created;

      const finished = await pollUntilFinished(created.value, signal);
      if (finished.ok === 'aborted') {
        await cancelTask(created.value);
        return cancelled;
      }
      if (!finished.ok) return finished;

      const downloaded = await download(finished.value, request.outputPath, signal);
      if (downloaded.ok === 'aborted') return cancelled;
      if (!downloaded.ok) return downloaded;
      return { ok: true };
    },
  };
}

/** `Retry-After` in seconds (the HTTP-date form is not worth the parsing here), as ms; 0 if absent. */
function retryAfterOf(headers: Headers): number {
  const seconds = Number(headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 0;
}
