/** The BytePlus stand-in itself: list polling, time-based and held tasks, account limits and faults, callbacks. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { type BytePlusStandin, errorReply, scripts, startBytePlusStandin } from './support/byteplus-standin.js';

const API_KEY = 'ark-test-standin-0123456789abcdef';
const MODEL = 'dreamina-seedance-2-0-260128';
const video = Buffer.from('not really an mp4, the stand-in does not look');

/** The injected clock of time-based tasks. */
let clock = 1_700_000_000_000;
let standin: BytePlusStandin;

beforeAll(async () => {
  standin = await startBytePlusStandin({ apiKey: API_KEY, video, now: () => clock });
});
afterAll(() => standin.close());
beforeEach(() => {
  standin.reset();
  clock = 1_700_000_000_000;
});

const tasksUrl = () => `${standin.baseUrl}/contents/generations/tasks`;
const auth = { authorization: `Bearer ${API_KEY}` };

async function call(method: string, url: string, body?: unknown, signal?: AbortSignal) {
  const response = await fetch(url, {
    method,
    headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
  });
  return { status: response.status, json: (await response.json()) as any };
}

const createBody = (extra: Record<string, unknown> = {}) => ({
  model: MODEL,
  content: [{ type: 'text', text: 'A paper boat on a rainy street' }],
  ratio: '16:9',
  duration: 5,
  resolution: '720p',
  ...extra,
});

async function create(extra: Record<string, unknown> = {}): Promise<string> {
  const { status, json } = await call('POST', tasksUrl(), createBody(extra));
  expect(status).toBe(200);
  return json.id as string;
}

const query = (id: string) => call('GET', `${tasksUrl()}/${id}`);

function list(ids: string[], params: Record<string, string> = { page_num: '1', page_size: '500' }) {
  const search = new URLSearchParams(params);
  for (const id of ids) search.append('filter.task_ids', id);
  return call('GET', `${tasksUrl()}?${search}`);
}

const statusesOf = (json: { items: { id: string; status: string }[] }) => Object.fromEntries(json.items.map((t) => [t.id, t.status]));

describe('list', () => {
  it('answers {items, total} for repeated filter.task_ids; unknown ids are absent; each appearance is one poll', async () => {
    standin.enqueue(scripts.succeedsAfter(1));
    standin.enqueue(scripts.succeedsAfter(2));
    const a = await create();
    const b = await create();

    const first = await list([a, b, 'cgt-unknown', a]);
    expect(first.status).toBe(200);
    expect(first.json.total).toBe(2);
    expect(first.json.items.map((t: { id: string }) => t.id)).toEqual([b, a]); // newest first
    expect(statusesOf(first.json)).toEqual({ [a]: 'running', [b]: 'running' });

    const second = await list([a, b]);
    expect(statusesOf(second.json)).toEqual({ [a]: 'succeeded', [b]: 'running' });
    const done = second.json.items.find((t: { id: string }) => t.id === a);
    expect(done).toMatchObject({ model: MODEL, error: null, usage: { completion_tokens: 108900, total_tokens: 108900 }, ratio: '16:9', duration: 5, resolution: '720p' });
    expect(done.content.video_url).toMatch(/\/media\/cgt-.*\.mp4$/);
    // The single query shows the same JSON, and counts as the next poll.
    expect((await query(b)).json.status).toBe('succeeded');
    expect((await query(a)).json).toEqual(done);

    const recorded = standin.requestsTo('GET', '/contents/generations/tasks').filter((r) => r.query.has('filter.task_ids'));
    expect(recorded[0]!.path).toBe('/api/v3/contents/generations/tasks');
    expect(standin.listed()).toEqual([[a, b, 'cgt-unknown', a], [a, b]]);
    expect(standin.createdTasks().map((t) => t.polls)).toEqual([3, 3]);
  });

  it('checks page_size and page_num, pages, and filters by status and model', async () => {
    for (const page_size of ['0', '501', 'x', '']) {
      const { status, json } = await list([], { page_num: '1', page_size });
      expect(status).toBe(400);
      expect(json.error).toMatchObject({ code: 'InvalidParameter', param: 'page_size' });
    }
    expect((await list([], { page_num: '1' })).status).toBe(400);
    expect((await list([], { page_num: '0', page_size: '10' })).json.error.param).toBe('page_num');
    expect((await list([], { page_size: '10', 'filter.status': 'done' })).json.error.param).toBe('filter.status');

    standin.enqueue(scripts.runsForever());
    const running = await create();
    const ok1 = await create();
    const ok2 = await create({ model: 'seedance-1-5-pro-251215' });
    const ids = [running, ok1, ok2];
    const page1 = await list(ids, { page_num: '1', page_size: '2' });
    expect(page1.json.total).toBe(3);
    expect(page1.json.items.map((t: { id: string }) => t.id)).toEqual([ok2, ok1]);
    const page2 = await list(ids, { page_num: '2', page_size: '2' });
    expect(page2.json.items.map((t: { id: string }) => t.id)).toEqual([running]);

    const succeeded = await list(ids, { page_num: '1', page_size: '10', 'filter.status': 'succeeded' });
    expect(succeeded.json.items.map((t: { id: string }) => t.id)).toEqual([ok2, ok1]);
    const byModel = await list([], { page_num: '1', page_size: '10', 'filter.model': MODEL });
    expect(byModel.json.items.map((t: { id: string }) => t.id)).toEqual([ok1, running]);
  });

  it('a reply step fails the whole list, except a 404, which leaves the task out', async () => {
    standin.enqueue({ polls: [{ reply: errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError') }, { status: 'succeeded' }] });
    standin.enqueue({ polls: [{ reply: errorReply(404, 'ResourceNotFound', 'The specified task is not found.', 'NotFound') }, { status: 'succeeded' }] });
    const flaky = await create();
    const gone = await create();
    const other = await create();

    expect((await list([flaky, gone, other])).status).toBe(500);
    const second = await list([flaky, gone, other]);
    expect(statusesOf(second.json)).toEqual({ [flaky]: 'succeeded', [other]: 'succeeded' });
    expect(second.json.total).toBe(2);
    expect(statusesOf((await list([flaky, gone, other])).json)).toEqual({ [flaky]: 'succeeded', [gone]: 'succeeded', [other]: 'succeeded' });
  });

  it('lists 1,000 tasks in batches of 500', async () => {
    standin.configure({ runMs: 60_000 });
    const ids = await Promise.all(Array.from({ length: 1000 }, () => create()));
    expect(new Set(ids).size).toBe(1000);
    clock += 60_000;
    for (let round = 0; round < 3; round++) {
      for (const batch of [ids.slice(0, 500), ids.slice(500)]) {
        const { status, json } = await list(batch);
        expect(status).toBe(200);
        expect(json.total).toBe(500);
        expect(json.items.every((t: { status: string }) => t.status === 'succeeded')).toBe(true);
      }
    }
    expect(standin.createdTasks().every((t) => t.polls === 3)).toBe(true);

    standin.configure({ maxUrlLength: 8192 });
    const tooLong = await fetch(`${tasksUrl()}?page_num=1&page_size=500&${ids.slice(0, 500).map((id) => `filter.task_ids=${id}`).join('&')}`, { headers: auth });
    expect(tooLong.status).toBe(414);
    await tooLong.arrayBuffer();
    expect((await list(ids.slice(0, 150))).json.total).toBe(150);
  });
});

describe('time-based and held tasks', () => {
  it('a time-based task is queued, then running, then succeeded by the injected clock', async () => {
    standin.configure({ runMs: 1000, queuedMs: 200 });
    const id = await create();
    expect((await query(id)).json.status).toBe('queued');
    clock += 199;
    expect((await query(id)).json.status).toBe('queued');
    clock += 1;
    expect((await query(id)).json.status).toBe('running');
    clock += 800;
    const done = await query(id);
    expect(done.json).toMatchObject({ status: 'succeeded', created_at: Math.floor((clock - 1000) / 1000), updated_at: Math.floor(clock / 1000) });
    expect(statusesOf((await list([id])).json)).toEqual({ [id]: 'succeeded' });
  });

  it('a script can time a task on its own and end it failed; reset drops the configured timing', async () => {
    standin.enqueue({ runMs: 500, end: { status: 'failed', error: { code: 'OutputVideoSensitiveContentDetected', message: 'The output video may contain sensitive information.' } } });
    const id = await create();
    expect((await query(id)).json.status).toBe('running');
    clock += 500;
    expect((await query(id)).json).toMatchObject({ status: 'failed', error: { code: 'OutputVideoSensitiveContentDetected' } });

    standin.configure({ runMs: 10_000 });
    standin.reset();
    expect((await query(await create())).json.status).toBe('succeeded');
  });

  it('a held task runs until finish(id), finish() ends every held one, and an outcome can be failed', async () => {
    standin.enqueue(scripts.held());
    standin.enqueue(scripts.held());
    standin.enqueue({ hold: true });
    const [a, b, c] = [await create(), await create(), await create()];
    clock += 3_600_000;
    expect(statusesOf((await list([a, b, c])).json)).toEqual({ [a]: 'running', [b]: 'running', [c]: 'running' });
    expect((await call('DELETE', `${tasksUrl()}/${a}`)).status).toBe(409);

    expect(standin.finish(a)).toEqual([a]);
    expect(statusesOf((await list([a, b, c])).json)).toEqual({ [a]: 'succeeded', [b]: 'running', [c]: 'running' });
    expect(standin.finish(c, { status: 'failed', error: { code: 'InternalServiceError', message: 'boom' } })).toEqual([c]);
    expect(standin.finish()).toEqual([b]);
    expect(standin.finish()).toEqual([]);
    const after = await list([a, b, c]);
    expect(statusesOf(after.json)).toEqual({ [a]: 'succeeded', [b]: 'succeeded', [c]: 'failed' });
    expect(after.json.items.find((t: { id: string }) => t.id === c).error).toEqual({ code: 'InternalServiceError', message: 'boom' });
    expect(() => standin.finish('cgt-nope')).toThrow(/no task/);
    expect(standin.countTasks('succeeded')).toBe(2);
    expect(standin.countTasks()).toBe(3);
  });
});

describe('account limits and faults', () => {
  it('maxActive refuses a create with 429 while that many tasks are queued or running', async () => {
    standin.configure({ maxActive: 2 });
    const a = await create();
    standin.enqueue(scripts.held());
    await create(); // the next script is for this one; `a` was unscripted
    standin.enqueue(scripts.held());
    const refused = await call('POST', tasksUrl(), createBody());
    expect(refused.status).toBe(429);
    expect(refused.json.error).toMatchObject({ code: 'ServerOverloaded', type: 'TooManyRequests' });
    expect(refused.json.error.message).toContain('limit of 2');
    expect(standin.activeTasks()).toBe(2);

    await query(a); // unscripted: succeeds when first queried, freeing a place
    const held = await create(); // the held script waited for an accepted create
    expect((await query(held)).json.status).toBe('running');
    expect((await call('POST', tasksUrl(), createBody())).status).toBe(429);
    standin.finish();
    standin.configure({ maxActive: undefined });
    expect(standin.createdTasks()).toHaveLength(3);
    await create();
    expect(standin.createdTasks()).toHaveLength(4);
  });

  it('maxActive counts time-based tasks by the clock', async () => {
    standin.configure({ maxActive: 1, runMs: 1000 });
    await create();
    expect((await call('POST', tasksUrl(), createBody())).status).toBe(429);
    clock += 1000;
    await create();
  });

  it('createReply answers every create and creates nothing', async () => {
    standin.configure({ createReply: errorReply(500, 'InternalServiceError', 'The service encountered an unexpected internal error.', 'InternalServerError') });
    standin.enqueue(scripts.held());
    for (let i = 0; i < 3; i++) expect((await call('POST', tasksUrl(), createBody())).status).toBe(500);
    expect(standin.createdTasks()).toEqual([]);
    standin.configure({ createReply: undefined });
    const id = await create();
    expect((await query(id)).json.status).toBe('running'); // the held script was kept for it
  });

  it('createHangsAfterAccept accepts the task but never answers', async () => {
    standin.configure({ createHangsAfterAccept: true });
    await expect(call('POST', tasksUrl(), createBody(), AbortSignal.timeout(200))).rejects.toThrow(/timeout|aborted/i);
    const created = standin.createdTasks();
    expect(created).toHaveLength(1);
    expect(created[0]).toMatchObject({ status: 'queued', body: createBody() });
    expect(standin.activeTasks()).toBe(1);
  });

  it('latencyMs delays every API answer but not the work behind it', async () => {
    standin.configure({ latencyMs: 60_000 });
    await expect(call('POST', tasksUrl(), createBody(), AbortSignal.timeout(200))).rejects.toThrow(/timeout|aborted/i);
    expect(standin.createdTasks()).toHaveLength(1);
    const id = standin.createdTasks()[0]!.id;
    standin.configure({ latencyMs: 50 });
    const started = performance.now();
    expect((await query(id)).json.status).toBe('succeeded');
    expect(performance.now() - started).toBeGreaterThanOrEqual(45);
    const media = await fetch(`${standin.baseUrl.replace('/api/v3', '')}/media/${id}.mp4`, { signal: AbortSignal.timeout(5000) });
    expect(Buffer.from(await media.arrayBuffer())).toEqual(video);
  });
});

describe('callbacks', () => {
  let receiver: Server;
  let received: { status: string; id: string; body: any }[] = [];
  let callbackUrl: string;

  beforeAll(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        received.push({ status: body.status, id: body.id, body });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    callbackUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  });
  afterAll(
    () =>
      new Promise<void>((resolve) => {
        receiver.closeAllConnections();
        receiver.close(() => resolve());
      }),
  );
  beforeEach(() => {
    received = [];
  });

  it('posts the task on every status change seen by a query, a list, finish() and a cancel', async () => {
    standin.enqueue(scripts.succeedsAfter(1));
    standin.enqueue(scripts.held());
    standin.enqueue(scripts.queuedForever());
    const polled = await create({ callback_url: callbackUrl });
    const held = await create({ callback_url: callbackUrl });
    const cancelled = await create({ callback_url: callbackUrl });
    const silent = await create(); // no callback_url

    await query(polled); // queued -> running
    await query(polled); // running -> succeeded
    await query(polled); // no change, no callback
    await list([held, cancelled, silent]); // held shows running from creation; queuedForever stays queued
    standin.finish(held);
    expect((await call('DELETE', `${tasksUrl()}/${cancelled}`)).status).toBe(200);
    await standin.callbacksSettled();

    const expected = [
      { url: callbackUrl, id: polled, status: 'running' },
      { url: callbackUrl, id: polled, status: 'succeeded' },
      { url: callbackUrl, id: held, status: 'succeeded' },
      { url: callbackUrl, id: cancelled, status: 'cancelled' },
    ];
    expect(standin.callbacks).toEqual(expected);
    expect(received.map(({ id, status }) => ({ id, status })).sort(byIdStatus)).toEqual(expected.map(({ id, status }) => ({ id, status })).sort(byIdStatus));
    const done = received.find((r) => r.id === polled && r.status === 'succeeded')!.body;
    expect(done).toEqual((await query(polled)).json);
  });

  it('time-based tasks call back when tick() re-reads the clock; callbacks can be turned off; failures are ignored', async () => {
    standin.configure({ runMs: 1000, queuedMs: 100 });
    const id = await create({ callback_url: callbackUrl });
    const unreachable = await create({ callback_url: 'http://127.0.0.1:1/nothing-listens' });
    clock += 100;
    standin.tick();
    await standin.callbacksSettled();
    expect(standin.callbacks.map((c) => [c.id, c.status])).toEqual([
      [id, 'running'],
      [unreachable, 'running'],
    ]);
    expect(received.map((r) => [r.id, r.status])).toEqual([[id, 'running']]);

    standin.configure({ callbacks: false });
    clock += 900;
    expect((await query(id)).json.status).toBe('succeeded');
    await standin.callbacksSettled();
    expect(standin.callbacks).toHaveLength(2);
    expect(received).toHaveLength(1);
  });
});

const byIdStatus = (a: { id: string; status: string }, b: { id: string; status: string }) =>
  `${a.id}/${a.status}`.localeCompare(`${b.id}/${b.status}`);
