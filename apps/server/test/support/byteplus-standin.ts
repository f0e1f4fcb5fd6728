/**
 * A stand-in for BytePlus ModelArk's content-generation task API (D14), on loopback with a port
 * from the OS. It speaks the protocol the `byteplus` provider uses — create, query, cancel/delete,
 * the `{error: {code, message, param, type}}` body, Bearer auth — and serves the finished video
 * from a separate, unauthenticated path the way the upstream hands out pre-signed storage URLs.
 *
 * Each test scripts what the next created task does (`enqueue`); every request is recorded.
 * Where the real API's exact answer is unknown (the refusal to cancel a running task, a query of an
 * unknown id), the answer is our best guess in the documented error shape.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';

/** A raw answer, for the failures a well-formed task cannot show. */
export type Reply =
  | { status: number; json: unknown; headers?: Record<string, string> }
  | { status: number; raw: string; contentType?: string }
  /** Never answers; the connection is dropped when the stand-in closes. */
  | { hang: true }
  /** Drops the connection without an answer. */
  | { reset: true };

export type TaskStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled' | 'expired';

/** What one query shows: a status (with the task's error when failed), or a raw reply. */
export type PollStep = { status: TaskStatus; error?: { code: string; message: string } } | { reply: Reply };

export interface TaskScript {
  /** Answers to the create attempts, in order, before one is accepted. */
  create?: Reply[];
  /** What successive queries show; the last step repeats for ever. Default: succeeded at once. */
  polls?: PollStep[];
  /** How the video URL answers: the video (default), a raw reply, or the video cut off after n bytes. */
  download?: 'video' | Reply | { truncateAfter: number };
}

export interface RecordedRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  /** Parsed JSON when the body was JSON, else the raw text ('' when empty). */
  body: unknown;
}

interface StandinTask {
  id: string;
  body: Record<string, unknown>;
  script: TaskScript;
  polls: number;
  status: TaskStatus;
  deleted: boolean;
}

export interface BytePlusStandin {
  /** `http://127.0.0.1:<port>/api/v3`, the provider's `baseUrl`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Scripts the next task to be created (first in, first used); unscripted tasks succeed at once. */
  enqueue(script: TaskScript): void;
  /** Forgets requests, scripts and tasks between tests. */
  reset(): void;
  /** The requests to a path under the API base, e.g. `requestsTo('POST', '/contents/generations/tasks')`. */
  requestsTo(method: string, pathPrefix: string): RecordedRequest[];
  /** Resolves once `count` such requests have arrived (for acting while a request is in flight). */
  received(method: string, pathPrefix: string, count?: number): Promise<void>;
  close(): Promise<void>;
}

export const errorReply = (status: number, code: string, message: string, type = 'BadRequest', param = ''): Reply => ({
  status,
  json: { error: { code, message: `${message} Request id: ${randomBytes(8).toString('hex')}`, param, type } },
});

/** Ready-made scripts for the behaviours the tests exercise. */
export const scripts = {
  succeedsAfter: (runningPolls: number): TaskScript => ({
    polls: [...Array.from({ length: runningPolls }, () => ({ status: 'running' as const })), { status: 'succeeded' }],
  }),
  failsWith: (code: string, message: string): TaskScript => ({
    polls: [{ status: 'running' }, { status: 'failed', error: { code, message } }],
  }),
  rejectedAtCreate: (code: string, message: string): TaskScript => ({ create: [errorReply(400, code, message)] }),
  expires: (): TaskScript => ({ polls: [{ status: 'queued' }, { status: 'expired' }] }),
  queuedForever: (): TaskScript => ({ polls: [{ status: 'queued' }] }),
  runsForever: (): TaskScript => ({ polls: [{ status: 'running' }] }),
};

const API = '/api/v3';
const TASKS = `${API}/contents/generations/tasks`;
const ROLES: Record<string, string[]> = {
  image_url: ['first_frame', 'last_frame', 'reference_image'],
  video_url: ['reference_video'],
  audio_url: ['reference_audio'],
};

export async function startBytePlusStandin(options: { apiKey: string; video: Buffer }): Promise<BytePlusStandin> {
  const requests: RecordedRequest[] = [];
  let waiters: { done: () => boolean; resolve: () => void }[] = [];
  let queue: TaskScript[] = [];
  let tasks = new Map<string, StandinTask>();
  /** Create attempts answered from the head script's `create` list so far. */
  let createFailuresUsed = 0;

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = text;
      try {
        if (text) body = JSON.parse(text);
      } catch {
        // Recorded raw: the provider under test sent something that is not JSON.
      }
      const path = (req.url ?? '/').split('?')[0]!;
      requests.push({ method: req.method ?? '', path, authorization: req.headers.authorization, body });
      waiters = waiters.filter((w) => (w.done() ? (w.resolve(), false) : true));
      route(req, res, path, body);
    });
  });

  function send(res: ServerResponse, reply: Reply): void {
    if ('hang' in reply) return;
    if ('reset' in reply) {
      res.socket?.destroy();
      return;
    }
    if ('json' in reply) {
      res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers });
      res.end(JSON.stringify(reply.json));
      return;
    }
    res.writeHead(reply.status, { 'content-type': reply.contentType ?? 'application/json' });
    res.end(reply.raw);
  }

  function route(req: IncomingMessage, res: ServerResponse, path: string, body: unknown): void {
    if (path.startsWith('/media/')) return serveVideo(res, path.slice('/media/'.length).replace(/\.mp4$/, ''));
    if (req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return send(res, errorReply(401, 'AuthenticationError', 'The API key or AK/SK in the request is missing or invalid.', 'Unauthorized'));
    }
    if (req.method === 'POST' && path === TASKS) return createTask(res, body);
    const match = path.startsWith(`${TASKS}/`) ? decodeURIComponent(path.slice(TASKS.length + 1)) : undefined;
    if (match !== undefined && req.method === 'GET') return queryTask(res, match);
    if (match !== undefined && req.method === 'DELETE') return deleteTask(res, match);
    send(res, errorReply(404, 'NotFound', `No route for ${req.method} ${path}.`, 'NotFound'));
  }

  function invalid(body: unknown): Reply | undefined {
    if (typeof body !== 'object' || body === null) return errorReply(400, 'InvalidParameter', 'The request body is not a JSON object.');
    const b = body as Record<string, unknown>;
    if (typeof b.model !== 'string' || !b.model) return errorReply(400, 'MissingParameter', 'The request failed because it is missing one or multiple required parameters.', 'BadRequest', 'model');
    if (!Array.isArray(b.content) || b.content.length === 0) return errorReply(400, 'MissingParameter', 'The request failed because it is missing one or multiple required parameters.', 'BadRequest', 'content');
    for (const item of b.content as Record<string, unknown>[]) {
      const type = item?.type;
      if (type === 'text' && typeof item.text === 'string') continue;
      const roles = typeof type === 'string' ? ROLES[type] : undefined;
      const media = roles ? (item[type as string] as { url?: unknown } | undefined) : undefined;
      if (!roles || typeof media?.url !== 'string' || !roles.includes(item.role as string)) {
        return errorReply(400, 'InvalidParameter', 'One or more parameters specified in the request are not valid.', 'BadRequest', 'content');
      }
    }
    for (const [field, ok] of [
      ['ratio', (v: unknown) => v === undefined || typeof v === 'string'],
      ['resolution', (v: unknown) => v === undefined || typeof v === 'string'],
      ['duration', (v: unknown) => v === undefined || Number.isInteger(v)],
    ] as const) {
      if (!ok(b[field])) return errorReply(400, 'InvalidParameter', 'One or more parameters specified in the request are not valid.', 'BadRequest', field);
    }
    return undefined;
  }

  function createTask(res: ServerResponse, body: unknown): void {
    const script = queue[0] ?? {};
    if (createFailuresUsed < (script.create?.length ?? 0)) {
      const reply = script.create![createFailuresUsed++]!;
      // A refusal that is final (a 4xx) consumes the script; the provider will not come back for it.
      if ('status' in reply && reply.status < 500 && reply.status !== 429) {
        queue.shift();
        createFailuresUsed = 0;
      }
      return send(res, reply);
    }
    const refusal = invalid(body);
    if (refusal) return send(res, refusal);
    queue.shift();
    createFailuresUsed = 0;
    const id = `cgt-${new Date().toISOString().replace(/\D/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`;
    tasks.set(id, { id, body: body as Record<string, unknown>, script, polls: 0, status: 'queued', deleted: false });
    send(res, { status: 200, json: { id } });
  }

  function queryTask(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    if (!task || task.deleted) return send(res, errorReply(404, 'ResourceNotFound', `The specified task ${id} is not found.`, 'NotFound'));
    if (task.status !== 'cancelled') {
      const steps = task.script.polls ?? [{ status: 'succeeded' }];
      const step = steps[Math.min(task.polls, steps.length - 1)]!;
      task.polls++;
      if ('reply' in step) return send(res, step.reply);
      task.status = step.status;
      return send(res, { status: 200, json: taskJson(task, step.error) });
    }
    send(res, { status: 200, json: taskJson(task) });
  }

  function taskJson(task: StandinTask, error?: { code: string; message: string }) {
    const seconds = Math.floor(Date.now() / 1000);
    return {
      id: task.id,
      model: task.body.model,
      status: task.status,
      error: task.status === 'failed' ? (error ?? { code: 'InternalServiceError', message: 'The service encountered an unexpected internal error.' }) : null,
      ...(task.status === 'succeeded' ? { content: { video_url: `${origin()}/media/${task.id}.mp4` }, usage: { completion_tokens: 108900, total_tokens: 108900 } } : {}),
      created_at: seconds,
      updated_at: seconds,
      ratio: task.body.ratio,
      duration: task.body.duration,
      resolution: task.body.resolution,
      framespersecond: 24,
    };
  }

  function deleteTask(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    if (!task || task.deleted) return send(res, errorReply(404, 'ResourceNotFound', `The specified task ${id} is not found.`, 'NotFound'));
    if (task.status === 'queued') {
      task.status = 'cancelled';
      return send(res, { status: 200, json: {} });
    }
    if (task.status === 'running' || task.status === 'cancelled') {
      // Documented as "cannot be deleted"; the exact code of the refusal is our guess.
      return send(res, errorReply(409, 'InvalidAction.TaskNotCancellable', `The task ${id} is ${task.status} and cannot be cancelled.`, 'Conflict'));
    }
    task.deleted = true;
    send(res, { status: 200, json: {} });
  }

  function serveVideo(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    const plan = task?.script.download ?? 'video';
    if (!task) return send(res, { status: 404, raw: '<Error><Code>NoSuchKey</Code></Error>', contentType: 'application/xml' });
    if (plan === 'video') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(options.video.length) });
      res.end(options.video);
      return;
    }
    if ('truncateAfter' in plan) {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(options.video.length) });
      res.write(options.video.subarray(0, plan.truncateAfter), () => res.socket?.destroy());
      return;
    }
    send(res, plan);
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const requestsTo = (method: string, pathPrefix: string) =>
    requests.filter((r) => r.method === method && r.path.startsWith(`${API}${pathPrefix}`));
  const origin = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl: `${origin()}${API}`,
    requests,
    enqueue: (script) => queue.push(script),
    reset() {
      requests.length = 0;
      queue = [];
      tasks = new Map();
      createFailuresUsed = 0;
      waiters = [];
    },
    requestsTo,
    received: (method, pathPrefix, count = 1) =>
      new Promise((resolve) => {
        const done = () => requestsTo(method, pathPrefix).length >= count;
        if (done()) resolve();
        else waiters.push({ done, resolve });
      }),
    close: () =>
      new Promise((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

/** A real one-second H.264 MP4 made with the bundled ffmpeg, for the stand-in to serve. */
export async function makeTestVideo(dir: string): Promise<string> {
  const ffmpeg = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
  const out = join(dir, 'standin.mp4');
  await promisify(execFile)(ffmpeg, ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=24', '-t', '1', '-pix_fmt', 'yuv420p', '-y', out]);
  return out;
}
