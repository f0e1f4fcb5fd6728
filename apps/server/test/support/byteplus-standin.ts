/**
 * A stand-in for BytePlus ModelArk's content-generation task API (D14), on loopback with a port
 * from the OS. It speaks the protocol the `byteplus` provider uses — create, query one, list many,
 * cancel/delete, the `{error: {code, message, param, type}}` body, Bearer auth, `callback_url` — and
 * serves the finished video from a separate, unauthenticated path the way the upstream hands out
 * pre-signed storage URLs. One stand-in is one upstream account (a "channel"); start several for
 * failover tests.
 *
 * Each test scripts what the next created task does (`enqueue`); every request is recorded. A task
 * follows one of three plans:
 * - poll script (`polls`, the default): each observation (a single query, or one appearance in a
 *   list) shows the next step;
 * - time-based (`runMs`, optional `queuedMs`): its status follows the injected clock `now()`;
 * - held (`hold: true`): `running` until the test calls `finish()`.
 * `configure` turns the account into a failing, slow, full or ambiguous one.
 *
 * Where the real API's exact answer is unknown (the refusal to cancel a running task, a query of an
 * unknown id, the code of the concurrency refusal, the callback's body), the answer is our best
 * guess in the documented error shape.
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

export interface TaskError {
  code: string;
  message: string;
}

/**
 * What one observation shows: a status (with the task's error when failed), or a raw reply. In a
 * list, a reply step answered 404 leaves the task out of `items` (an unknown id is simply absent);
 * any other reply step is the answer to the whole list request.
 */
export type PollStep = { status: TaskStatus; error?: TaskError } | { reply: Reply };

export interface TaskScript {
  /** Answers to the create attempts, in order, before one is accepted. */
  create?: Reply[];
  /** What successive observations show; the last step repeats for ever. Default: succeeded at once. */
  polls?: PollStep[];
  /**
   * Time-based (when `polls` is absent): `queued` until `queuedMs` after creation, `running` until
   * `runMs` after creation, then `end` (default succeeded), by the stand-in's `now()`.
   */
  runMs?: number;
  /** With `runMs` or `hold`: how long the task shows `queued` first. Default: the configured `queuedMs`, else 0. */
  queuedMs?: number;
  /** What a time-based task becomes after `runMs`. Default `{ status: 'succeeded' }`. */
  end?: { status: TaskStatus; error?: TaskError };
  /** Held (when `polls` is absent): `running` (after `queuedMs`) until the test calls `finish()`. */
  hold?: boolean;
  /** How the video URL answers: the video (default), a raw reply, or the video cut off after n bytes. */
  download?: 'video' | Reply | { truncateAfter: number };
}

export interface RecordedRequest {
  method: string;
  /** Without the query string. */
  path: string;
  /** The query string, e.g. `query.getAll('filter.task_ids')` for the ids a list asked for. */
  query: URLSearchParams;
  authorization: string | undefined;
  /** Parsed JSON when the body was JSON, else the raw text ('' when empty). */
  body: unknown;
}

/** How the account behaves; set at start, changed with `configure`, restored by `reset`. */
export interface StandinConfig {
  /** The clock of time-based tasks and of `created_at`/`updated_at`. Default `Date.now`. */
  now: () => number;
  /** Creates are refused with 429 while this many tasks are `queued` or `running`. Default: no limit. */
  maxActive: number | undefined;
  /** Makes tasks without their own `polls`/`hold`/`runMs` time-based with this `runMs`. Default: none. */
  runMs: number | undefined;
  /** The `queuedMs` of time-based and held tasks that do not set their own. Default 0. */
  queuedMs: number | undefined;
  /** Answered to every create, which creates nothing and leaves the scripts queued (a failing account). */
  createReply: Reply | undefined;
  /** Real milliseconds before every API answer is sent (the video download is not delayed). Default 0. */
  latencyMs: number;
  /** Creates are accepted (the task exists and counts) but never answered: the ambiguous create. */
  createHangsAfterAccept: boolean;
  /** Whether tasks created with `callback_url` get their callbacks. Default true. */
  callbacks: boolean;
  /**
   * Requests whose URL (path and query) is longer answer 414 the way a fronting proxy does (HTML, no
   * error body). Default: no limit up to the server's 64 KiB of headers. The real limit is unknown;
   * 500 ids of about 25 characters make a list URL of about 21 KB.
   */
  maxUrlLength: number | undefined;
}

export interface BytePlusStandinOptions extends Partial<StandinConfig> {
  apiKey: string;
  video: Buffer;
}

/** One callback the stand-in sent (recorded when sent, whatever came of it). */
export interface SentCallback {
  url: string;
  id: string;
  status: TaskStatus;
}

/** A task the stand-in accepted. */
export interface CreatedTask {
  id: string;
  body: Record<string, unknown>;
  /** As last observed or changed (time-based tasks move on when queried, listed or `tick()`ed). */
  status: TaskStatus;
  /** Observations so far (queries, and appearances in lists). */
  polls: number;
  /** Its record was deleted (DELETE of a finished task). */
  deleted: boolean;
}

/** How `finish()` ends a task. Default `{ status: 'succeeded' }`. */
export interface FinishOutcome {
  status?: TaskStatus;
  error?: TaskError;
}

type Plan = 'polls' | 'timed' | 'held';

interface StandinTask {
  id: string;
  /** Creation order, for newest-first lists. */
  seq: number;
  body: Record<string, unknown>;
  script: TaskScript;
  plan: Plan;
  runMs: number;
  queuedMs: number;
  polls: number;
  status: TaskStatus;
  error: TaskError | null;
  createdAt: number;
  updatedAt: number;
  /** Ended by `finish()`: shows its status for good. */
  finished: boolean;
  deleted: boolean;
}

export interface BytePlusStandin {
  /** `http://127.0.0.1:<port>/api/v3`, the provider's `baseUrl`. */
  baseUrl: string;
  requests: RecordedRequest[];
  /** Every callback sent, in order (cleared by `reset`). */
  callbacks: SentCallback[];
  /** Scripts the next task to be created (first in, first used); unscripted tasks succeed at once. */
  enqueue(script: TaskScript): void;
  /** Changes how the account behaves from now on (only the keys given). */
  configure(changes: Partial<StandinConfig>): void;
  /** Forgets requests, scripts, tasks and callbacks between tests; the configuration returns to the start options. */
  reset(): void;
  /** The requests to a path under the API base, e.g. `requestsTo('POST', '/contents/generations/tasks')`. */
  requestsTo(method: string, pathPrefix: string): RecordedRequest[];
  /** Resolves once `count` such requests have arrived (for acting while a request is in flight). */
  received(method: string, pathPrefix: string, count?: number): Promise<void>;
  /** The `filter.task_ids` of each list request so far, in order. */
  listed(): string[][];
  /** Every task accepted so far, oldest first. */
  createdTasks(): CreatedTask[];
  /** Tasks (not deleted) in any of these statuses; all tasks when none given. */
  countTasks(...statuses: TaskStatus[]): number;
  /** Tasks `queued` or `running` now (time-based ones re-read the clock): what `maxActive` compares. */
  activeTasks(): number;
  /**
   * Ends a held task (or any task not yet finished) with `outcome` (default succeeded), or with no id
   * every held task not yet finished. Sends the callbacks. Answers the ids it ended; throws on an unknown id.
   */
  finish(id?: string, outcome?: FinishOutcome): string[];
  /** Moves every queued/running time-based task to its status at `now()`, sending callbacks, as the upstream would unasked. */
  tick(): void;
  /** Resolves once every callback sent so far has been answered or has failed. */
  callbacksSettled(): Promise<void>;
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
  /** Time-based: queued for `queuedMs`, running until `runMs` after creation, then succeeded. */
  runsFor: (runMs: number, queuedMs = 0): TaskScript => ({ runMs, queuedMs }),
  /** Running until the test calls `finish()`. */
  held: (): TaskScript => ({ hold: true }),
};

const API = '/api/v3';
const TASKS = `${API}/contents/generations/tasks`;
const ROLES: Record<string, string[]> = {
  image_url: ['first_frame', 'last_frame', 'reference_image'],
  video_url: ['reference_video'],
  audio_url: ['reference_audio'],
};
const STATUSES: readonly TaskStatus[] = ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'expired'];
const isActive = (status: TaskStatus) => status === 'queued' || status === 'running';
const DEFAULT_ERROR: TaskError = { code: 'InternalServiceError', message: 'The service encountered an unexpected internal error.' };
/** The documented page_num and page_size range. */
const PAGE_MAX = 500;
const CALLBACK_TIMEOUT_MS = 10_000;
const MAX_HEADER_BYTES = 64 * 1024;

export async function startBytePlusStandin(options: BytePlusStandinOptions): Promise<BytePlusStandin> {
  const { apiKey, video, ...startConfig } = options;
  const initialConfig = (): StandinConfig => ({
    now: Date.now,
    maxActive: undefined,
    runMs: undefined,
    queuedMs: undefined,
    createReply: undefined,
    latencyMs: 0,
    createHangsAfterAccept: false,
    callbacks: true,
    maxUrlLength: undefined,
    ...definedOnly(startConfig),
  });
  let config = initialConfig();
  const requests: RecordedRequest[] = [];
  const callbacks: SentCallback[] = [];
  /** Each waiter counts its matching requests as they arrive: O(waiters) per request. */
  let waiters: { method: string; prefix: string; left: number; resolve: () => void }[] = [];
  let queue: TaskScript[] = [];
  let tasks = new Map<string, StandinTask>();
  /** The tasks whose status is queued or running: what `maxActive` counts, without a scan of all tasks. */
  let active = new Set<StandinTask>();
  let seq = 0;
  /** Create attempts answered from the head script's `create` list so far. */
  let createFailuresUsed = 0;
  const delayed = new Set<NodeJS.Timeout>();
  const callbacksInFlight = new Set<Promise<void>>();
  const closing = new AbortController();

  // Node's default 16 KiB would refuse a list of 500 ids with a bare 431: raised so `maxUrlLength` decides.
  const server: Server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
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
      const url = req.url ?? '/';
      const queryAt = url.indexOf('?');
      const path = queryAt < 0 ? url : url.slice(0, queryAt);
      const query = new URLSearchParams(queryAt < 0 ? '' : url.slice(queryAt + 1));
      const method = req.method ?? '';
      requests.push({ method, path, query, authorization: req.headers.authorization, body });
      if (waiters.length > 0) {
        waiters = waiters.filter((w) => {
          if (w.method === method && path.startsWith(w.prefix)) w.left--;
          if (w.left > 0) return true;
          w.resolve();
          return false;
        });
      }
      route(req, res, path, query, body);
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

  /** An API answer: after `latencyMs` when set (the state change it reports has already happened). */
  function answer(res: ServerResponse, reply: Reply): void {
    if (config.latencyMs <= 0 || 'hang' in reply) return send(res, reply);
    const timer = setTimeout(() => {
      delayed.delete(timer);
      // The client may have given up meanwhile.
      if (res.destroyed || res.writableEnded || !res.socket || res.socket.destroyed) return;
      send(res, reply);
    }, config.latencyMs);
    delayed.add(timer);
  }

  function route(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams, body: unknown): void {
    if (path.startsWith('/media/')) return serveVideo(res, path.slice('/media/'.length).replace(/\.mp4$/, ''));
    if (config.maxUrlLength !== undefined && (req.url ?? '').length > config.maxUrlLength) {
      return answer(res, { status: 414, raw: '<html><head><title>414 Request-URI Too Large</title></head><body>414 Request-URI Too Large</body></html>', contentType: 'text/html' });
    }
    if (req.headers.authorization !== `Bearer ${apiKey}`) {
      return answer(res, errorReply(401, 'AuthenticationError', 'The API key or AK/SK in the request is missing or invalid.', 'Unauthorized'));
    }
    if (req.method === 'POST' && path === TASKS) return createTask(res, body);
    if (req.method === 'GET' && path === TASKS) return listTasks(res, query);
    const match = path.startsWith(`${TASKS}/`) ? decodeURIComponent(path.slice(TASKS.length + 1)) : undefined;
    if (match !== undefined && req.method === 'GET') return queryTask(res, match);
    if (match !== undefined && req.method === 'DELETE') return deleteTask(res, match);
    answer(res, errorReply(404, 'NotFound', `No route for ${req.method} ${path}.`, 'NotFound'));
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
      ['callback_url', (v: unknown) => v === undefined || typeof v === 'string'],
    ] as const) {
      if (!ok(b[field])) return errorReply(400, 'InvalidParameter', 'One or more parameters specified in the request are not valid.', 'BadRequest', field);
    }
    return undefined;
  }

  function createTask(res: ServerResponse, body: unknown): void {
    if (config.createReply) return answer(res, config.createReply);
    const script = queue[0] ?? {};
    if (createFailuresUsed < (script.create?.length ?? 0)) {
      const reply = script.create![createFailuresUsed++]!;
      // A refusal that is final (a 4xx) consumes the script; the provider will not come back for it.
      if ('status' in reply && reply.status < 500 && reply.status !== 429) {
        queue.shift();
        createFailuresUsed = 0;
      }
      return answer(res, reply);
    }
    const refusal = invalid(body);
    if (refusal) return answer(res, refusal);
    if (config.maxActive !== undefined && countActive() >= config.maxActive) {
      // No code is documented for the per-account limit on tasks in flight (the documentation speaks
      // of about 120 queued tasks and of 429 over a limit); the code is our guess.
      return answer(
        res,
        errorReply(
          429,
          'ServerOverloaded',
          `The account has reached its limit of ${config.maxActive} queued and running tasks (maxActive); try again when some have finished.`,
          'TooManyRequests',
        ),
      );
    }
    queue.shift();
    createFailuresUsed = 0;
    const task = accept(body as Record<string, unknown>, script);
    // The task exists and is counted, but the client never learns its id.
    if (config.createHangsAfterAccept) return;
    answer(res, { status: 200, json: { id: task.id } });
  }

  function accept(body: Record<string, unknown>, script: TaskScript): StandinTask {
    const now = config.now();
    let id: string;
    do id = `cgt-${new Date(now).toISOString().replace(/\D/g, '').slice(0, 14)}-${randomBytes(3).toString('hex')}`;
    while (tasks.has(id));
    const runMs = script.runMs ?? config.runMs;
    const plan: Plan = script.polls ? 'polls' : script.hold ? 'held' : runMs !== undefined ? 'timed' : 'polls';
    const task: StandinTask = {
      id,
      seq: ++seq,
      body,
      script,
      plan,
      runMs: runMs ?? 0,
      queuedMs: script.queuedMs ?? config.queuedMs ?? 0,
      polls: 0,
      status: 'queued',
      error: null,
      createdAt: now,
      updatedAt: now,
      finished: false,
      deleted: false,
    };
    if (plan !== 'polls') {
      const at = planned(task);
      task.status = at.status;
      task.error = at.status === 'failed' ? (at.error ?? DEFAULT_ERROR) : null;
    }
    tasks.set(id, task);
    if (isActive(task.status)) active.add(task);
    return task;
  }

  /** Where a time-based or held task stands at `now()`. */
  function planned(task: StandinTask): { status: TaskStatus; error?: TaskError } {
    const elapsed = config.now() - task.createdAt;
    if (elapsed < task.queuedMs) return { status: 'queued' };
    if (task.plan === 'held' || elapsed < task.runMs) return { status: 'running' };
    return task.script.end ?? { status: 'succeeded' };
  }

  /** Every status change goes through here: it keeps `active` and sends the callback. */
  function setStatus(task: StandinTask, status: TaskStatus, error?: TaskError): void {
    const changed = task.status !== status;
    task.status = status;
    task.error = status === 'failed' ? (error ?? DEFAULT_ERROR) : null;
    if (!changed) return;
    task.updatedAt = config.now();
    if (isActive(status) && !task.deleted) active.add(task);
    else active.delete(task);
    sendCallback(task);
  }

  /** Moves a time-based or held task to where the clock says; poll-scripted tasks move only when observed. */
  function refresh(task: StandinTask): void {
    if (task.plan === 'polls' || task.finished || !isActive(task.status)) return;
    const at = planned(task);
    setStatus(task, at.status, at.error);
  }

  function countActive(): number {
    for (const task of [...active]) refresh(task);
    return active.size;
  }

  /** The reply step the next observation would answer, if any (poll-scripted tasks only). */
  function nextReply(task: StandinTask): Reply | undefined {
    if (task.plan !== 'polls' || task.finished || task.status === 'cancelled') return undefined;
    const steps = task.script.polls ?? [{ status: 'succeeded' }];
    const step = steps[Math.min(task.polls, steps.length - 1)]!;
    return 'reply' in step ? step.reply : undefined;
  }

  /** One observation: a query, or one appearance in a list. Answers the reply step, if that is what it shows. */
  function observe(task: StandinTask): Reply | undefined {
    if (task.finished || task.status === 'cancelled') return undefined;
    if (task.plan !== 'polls') {
      task.polls++;
      refresh(task);
      return undefined;
    }
    const steps = task.script.polls ?? [{ status: 'succeeded' }];
    const step = steps[Math.min(task.polls, steps.length - 1)]!;
    task.polls++;
    if ('reply' in step) return step.reply;
    setStatus(task, step.status, step.error);
    return undefined;
  }

  function queryTask(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    if (!task || task.deleted) return answer(res, notFound(id));
    const reply = observe(task);
    answer(res, reply ?? { status: 200, json: taskJson(task) });
  }

  /**
   * `GET /contents/generations/tasks?page_num=&page_size=&filter.task_ids=…`. The answer is
   * `{items: [task, …], total}`, each task as the single query shows it, newest first; `total` counts
   * the matches before paging. That shape is from Volcengine Ark's "query content generation task
   * list" documentation (same protocol; its example answers `{"items": [...], "total": n}`), not from a
   * BytePlus page we could read in full. Unknown or deleted ids are absent. Every task the list
   * looks at counts as one observation (with page_size at least the ids asked for, exactly the ones in
   * `items`). Work is O(ids asked for), or O(tasks) without an id filter.
   */
  function listTasks(res: ServerResponse, query: URLSearchParams): void {
    const pageSize = pageParam(query, 'page_size', undefined);
    if (pageSize === undefined) return answer(res, invalidParameter('page_size', `page_size must be an integer from 1 to ${PAGE_MAX}.`));
    const pageNum = pageParam(query, 'page_num', 1);
    if (pageNum === undefined) return answer(res, invalidParameter('page_num', `page_num must be an integer from 1 to ${PAGE_MAX}.`));
    const statusFilter = query.getAll('filter.status');
    if (statusFilter.length > 1 || (statusFilter[0] !== undefined && !STATUSES.includes(statusFilter[0] as TaskStatus))) {
      return answer(res, invalidParameter('filter.status', `filter.status must be one of ${STATUSES.join(', ')}.`));
    }
    const modelFilter = query.getAll('filter.model');
    if (modelFilter.length > 1) return answer(res, invalidParameter('filter.model', 'Only one filter.model is supported.'));

    let candidates: StandinTask[];
    if (query.has('filter.task_ids')) {
      candidates = [];
      for (const id of new Set(query.getAll('filter.task_ids'))) {
        const task = tasks.get(id);
        if (task && !task.deleted) candidates.push(task);
      }
    } else {
      candidates = [...tasks.values()].filter((t) => !t.deleted);
    }
    if (modelFilter[0] !== undefined) candidates = candidates.filter((t) => t.body.model === modelFilter[0]);
    candidates.sort((a, b) => b.seq - a.seq);

    // A reply step that is not a 404 fails the whole list; only the tasks that showed it move on.
    let failure: Reply | undefined;
    for (const task of candidates) {
      const reply = nextReply(task);
      if (!reply || is404(reply)) continue;
      task.polls++;
      failure ??= reply;
    }
    if (failure) return answer(res, failure);

    const shown = candidates.filter((task) => observe(task) === undefined);
    const matching = statusFilter[0] === undefined ? shown : shown.filter((t) => t.status === statusFilter[0]);
    const page = matching.slice((pageNum - 1) * pageSize, pageNum * pageSize);
    answer(res, { status: 200, json: { items: page.map(taskJson), total: matching.length } });
  }

  function pageParam(query: URLSearchParams, name: string, fallback: number | undefined): number | undefined {
    const values = query.getAll(name);
    if (values.length === 0) return fallback;
    if (values.length > 1 || !/^\d+$/.test(values[0]!)) return undefined;
    const n = Number(values[0]);
    return n >= 1 && n <= PAGE_MAX ? n : undefined;
  }

  function taskJson(task: StandinTask) {
    return {
      id: task.id,
      model: task.body.model,
      status: task.status,
      error: task.status === 'failed' ? (task.error ?? DEFAULT_ERROR) : null,
      ...(task.status === 'succeeded' ? { content: { video_url: `${origin()}/media/${task.id}.mp4` }, usage: { completion_tokens: 108900, total_tokens: 108900 } } : {}),
      created_at: Math.floor(task.createdAt / 1000),
      updated_at: Math.floor(task.updatedAt / 1000),
      ratio: task.body.ratio,
      duration: task.body.duration,
      resolution: task.body.resolution,
      framespersecond: 24,
      service_tier: task.body.service_tier ?? 'default',
      execution_expires_after: task.body.execution_expires_after ?? 172800,
    };
  }

  /**
   * POSTs the task, as the query shows it, to its `callback_url`: best effort, once, errors ignored.
   * The real body, signing and retries are undocumented; this is the natural guess.
   */
  function sendCallback(task: StandinTask): void {
    const url = task.body.callback_url;
    if (!config.callbacks || typeof url !== 'string' || !url) return;
    callbacks.push({ url, id: task.id, status: task.status });
    const sent: Promise<void> = fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(taskJson(task)),
      signal: AbortSignal.any([closing.signal, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
    })
      .then(async (response) => {
        await response.arrayBuffer();
      })
      .catch(() => {})
      .finally(() => callbacksInFlight.delete(sent));
    callbacksInFlight.add(sent);
  }

  function deleteTask(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    if (!task || task.deleted) return answer(res, notFound(id));
    refresh(task);
    if (task.status === 'queued') {
      setStatus(task, 'cancelled');
      return answer(res, { status: 200, json: {} });
    }
    if (task.status === 'running' || task.status === 'cancelled') {
      // Documented as "cannot be deleted"; the exact code of the refusal is our guess.
      return answer(res, errorReply(409, 'InvalidAction.TaskNotCancellable', `The task ${id} is ${task.status} and cannot be cancelled.`, 'Conflict'));
    }
    task.deleted = true;
    active.delete(task);
    answer(res, { status: 200, json: {} });
  }

  function serveVideo(res: ServerResponse, id: string): void {
    const task = tasks.get(id);
    const plan = task?.script.download ?? 'video';
    if (!task) return send(res, { status: 404, raw: '<Error><Code>NoSuchKey</Code></Error>', contentType: 'application/xml' });
    if (plan === 'video') {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(video.length) });
      res.end(video);
      return;
    }
    if ('truncateAfter' in plan) {
      res.writeHead(200, { 'content-type': 'video/mp4', 'content-length': String(video.length) });
      res.write(video.subarray(0, plan.truncateAfter), () => res.socket?.destroy());
      return;
    }
    send(res, plan);
  }

  function finish(id?: string, outcome: FinishOutcome = {}): string[] {
    let targets: StandinTask[];
    if (id === undefined) {
      targets = [...active].filter((t) => t.plan === 'held' && !t.finished);
    } else {
      const task = tasks.get(id);
      if (!task) throw new Error(`The BytePlus stand-in has no task ${id}.`);
      targets = [task];
    }
    const ended: string[] = [];
    for (const task of targets.sort((a, b) => a.seq - b.seq)) {
      refresh(task);
      if (task.deleted || task.finished || !isActive(task.status)) continue;
      task.finished = true;
      setStatus(task, outcome.status ?? 'succeeded', outcome.error);
      ended.push(task.id);
    }
    return ended;
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const requestsTo = (method: string, pathPrefix: string) =>
    requests.filter((r) => r.method === method && r.path.startsWith(`${API}${pathPrefix}`));
  const origin = () => `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    baseUrl: `${origin()}${API}`,
    requests,
    callbacks,
    enqueue: (script) => queue.push(script),
    configure(changes) {
      config = { ...config, ...changes };
      if (typeof config.now !== 'function') config.now = initialConfig().now;
      if (typeof config.latencyMs !== 'number') config.latencyMs = 0;
      config.createHangsAfterAccept = Boolean(config.createHangsAfterAccept);
      config.callbacks = config.callbacks !== false;
    },
    reset() {
      requests.length = 0;
      callbacks.length = 0;
      queue = [];
      tasks = new Map();
      active = new Set();
      createFailuresUsed = 0;
      waiters = [];
      config = initialConfig();
    },
    requestsTo,
    received: (method, pathPrefix, count = 1) =>
      new Promise((resolve) => {
        const left = count - requestsTo(method, pathPrefix).length;
        if (left <= 0) resolve();
        else waiters.push({ method, prefix: `${API}${pathPrefix}`, left, resolve });
      }),
    listed: () => requests.filter((r) => r.method === 'GET' && r.path === TASKS).map((r) => r.query.getAll('filter.task_ids')),
    createdTasks: () =>
      [...tasks.values()].map((t) => ({ id: t.id, body: t.body, status: t.status, polls: t.polls, deleted: t.deleted })),
    countTasks(...statuses) {
      let n = 0;
      for (const t of tasks.values()) if (!t.deleted && (statuses.length === 0 || statuses.includes(t.status))) n++;
      return n;
    },
    activeTasks: countActive,
    finish,
    tick() {
      for (const task of [...active]) refresh(task);
    },
    async callbacksSettled() {
      while (callbacksInFlight.size > 0) await Promise.all([...callbacksInFlight]);
    },
    close: () =>
      new Promise((resolve, reject) => {
        for (const timer of delayed) clearTimeout(timer);
        delayed.clear();
        closing.abort();
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

const notFound = (id: string) => errorReply(404, 'ResourceNotFound', `The specified task ${id} is not found.`, 'NotFound');
const invalidParameter = (param: string, detail: string) =>
  errorReply(400, 'InvalidParameter', `One or more parameters specified in the request are not valid: ${detail}`, 'BadRequest', param);
const is404 = (reply: Reply) => 'status' in reply && reply.status === 404;

/** The options given, without the keys given as undefined (so they do not hide the defaults). */
function definedOnly<T extends object>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A real one-second H.264 MP4 made with the bundled ffmpeg, for the stand-in to serve. */
export async function makeTestVideo(dir: string): Promise<string> {
  const ffmpeg = (createRequire(import.meta.url)('@ffmpeg-installer/ffmpeg') as { path: string }).path;
  const out = join(dir, 'standin.mp4');
  await promisify(execFile)(ffmpeg, ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=size=320x240:rate=24', '-t', '1', '-pix_fmt', 'yuv420p', '-y', out]);
  return out;
}
