/**
 * List pages built from kept task answers (http/task-answers.ts, the store's listTaskPage), on both stores: after
 * any change to any task (its status, output, error, refund, webhook attempts, a redelivery), every page the API
 * answers is, byte for byte, the page built from the tasks as the store reads them now, with nothing kept: what
 * `JSON.stringify` of the whole page gave before answers were kept. Answers are checked against the spec too.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCursor } from '../src/domain/cursor.js';
import type { TaskState } from '../src/domain/states.js';
import { toTaskResource } from '../src/domain/task-view.js';
import { TaskAnswers } from '../src/http/task-answers.js';
import type { Store } from '../src/store/store.js';
import { SUBMIT, validSubmit, type Harness } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { checkedAnswer } from './support/spec-responses.js';

interface PageQuery {
  limit: number;
  status?: TaskState;
  cursor?: string;
}

/** The page from the tasks as the store reads them now, serialised whole, as the route built it before answers were kept. */
async function freshPage(store: Store, accountId: string, query: PageQuery, after?: { createdAt: Date; id: string }): Promise<string> {
  const rows = await store.listTasks({ accountId, status: query.status, limit: query.limit + 1, after });
  const page = rows.slice(0, query.limit);
  const last = page.at(-1);
  const nextCursor = rows.length > query.limit && last ? encodeCursor({ createdAt: last.createdAt, id: last.id, filter: query.status ?? null }) : null;
  return JSON.stringify({ success: true, data: page.map(toTaskResource), nextCursor });
}

const pathOf = (query: PageQuery) => {
  const params = new URLSearchParams({ limit: String(query.limit) });
  if (query.status) params.set('status', query.status);
  if (query.cursor) params.set('cursor', query.cursor);
  return `${SUBMIT}?${params}`;
};

describe.each(backendKinds)('list pages from kept task answers on $name', ({ skip, open }) => {
  let opened: OpenedBackend;
  beforeAll(async () => {
    if (!skip) opened = await open();
  });
  afterAll(async () => {
    await opened?.done();
  });

  async function setUp(): Promise<{ h: Harness<Store>; key: string; accountId: string }> {
    const h = backendHarness(await opened.fresh());
    const { key, accountId } = await h.account();
    return { h, key, accountId };
  }

  /** Every page of `query` (first page, then each cursor) through the API, each equal to the fresh page at that position. */
  async function expectPagesFresh(h: Harness<Store>, key: string, accountId: string, query: PageQuery): Promise<number> {
    let cursor: string | undefined;
    let after: { createdAt: Date; id: string } | undefined;
    let pages = 0;
    do {
      const res = await h.request('GET', pathOf({ ...query, cursor }), { key });
      const text = await res.clone().text();
      await checkedAnswer(res, 'listGenerations');
      expect(text).toBe(await freshPage(h.store, accountId, query, after));
      const body = JSON.parse(text) as { data: { requestId: string; createdAt: string }[]; nextCursor: string | null };
      cursor = body.nextCursor ?? undefined;
      const last = body.data.at(-1);
      after = last && { createdAt: new Date(last.createdAt), id: last.requestId };
      pages++;
    } while (cursor);
    return pages;
  }

  const submit = async (h: Harness<Store>, key: string, webhook: boolean) => {
    h.clock.advance(1);
    const body = validSubmit(webhook ? { webhookUrl: 'https://hooks.example.com/v', metadata: { n: 1, s: 'é' } } : {});
    const res = await h.request('POST', SUBMIT, { key, body });
    expect(res.status).toBe(202);
    return ((await res.json()) as { requestId: string }).requestId;
  };

  it.skipIf(skip)('answers every page as the tasks are now after each kind of change, none from a kept answer of an earlier version', async () => {
    const { h, key, accountId } = await setUp();
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await submit(h, key, i % 2 === 1));
    const queries: PageQuery[] = [{ limit: 20 }, { limit: 3 }, { limit: 1 }, { limit: 5, status: 'queued' }, { limit: 2, status: 'succeeded' }];
    const allPagesFresh = async () => {
      for (const query of queries) await expectPagesFresh(h, key, accountId, query);
    };
    await allPagesFresh();
    const at = () => (h.clock.advance(1), h.clock.now());
    const changes: [string, () => Promise<unknown>][] = [
      ['started', () => h.store.startTask({ id: ids[1]!, now: at() })],
      ['started again in the same millisecond', () => h.store.startTask({ id: ids[1]!, now: h.clock.now() })],
      ['completed in the millisecond it started', () => h.store.completeTask({ id: ids[1]!, now: h.clock.now(), outputKey: 'a.mp4', outputUrl: 'https://files.example.com/a', outputExpiresAt: at() })],
      ['failed (refunded)', async () => (await h.store.startTask({ id: ids[2]!, now: at() }), h.store.failTask({ id: ids[2]!, now: at(), code: 'provider_error', message: 'the provider failed' }))],
      ['cancelled through the API', () => h.request('POST', `${SUBMIT}/${ids[3]}/cancel`, { key })],
      ['a webhook attempt that failed', async () => {
        const delivery = (await h.store.getDeliveryForTask(ids[3]!))!;
        return h.store.recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: at(), statusCode: 500, error: null, durationMs: 3 }, status: 'pending', nextAttemptAt: at() });
      }],
      ['the webhook delivered', async () => {
        const delivery = (await h.store.getDeliveryForTask(ids[3]!))!;
        return h.store.recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: at(), statusCode: 200, error: null, durationMs: 3 }, status: 'delivered', nextAttemptAt: null });
      }],
      ['redelivered', async () => h.store.redeliver({ deliveryId: (await h.store.getDeliveryForTask(ids[3]!))!.id, now: at() })],
      ['the webhook of a completed task failed for good', async () => {
        await h.store.completeTask({ id: ids[1]!, now: at(), outputKey: 'a.mp4', outputUrl: 'https://files.example.com/a', outputExpiresAt: at() });
        const delivery = (await h.store.getDeliveryForTask(ids[1]!))!;
        return h.store.recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: 0, attempt: { attemptedAt: at(), statusCode: 410, error: null, durationMs: 3 }, status: 'failed', nextAttemptAt: null });
      }],
      ['a new task on top', () => submit(h, key, true)],
    ];
    for (const [, change] of changes) {
      await change();
      await allPagesFresh();
    }
  });

  it.skipIf(skip)('holds for any sequence of changes and pages (fast-check)', async () => {
    const { h, key, accountId } = await setUp();
    const ids: string[] = [];
    const at = () => (h.clock.advance(1), h.clock.now());
    const action = fc.oneof(
      fc.record({ kind: fc.constant('submit' as const), webhook: fc.boolean() }),
      fc.record({ kind: fc.constantFrom('start' as const, 'complete' as const, 'fail' as const, 'cancel' as const, 'attempt' as const, 'redeliver' as const), task: fc.nat(), sameMs: fc.boolean() }),
      fc.record({ kind: fc.constant('list' as const), limit: fc.integer({ min: 1, max: 6 }), status: fc.option(fc.constantFrom<TaskState>('queued', 'processing', 'succeeded', 'failed', 'cancelled'), { nil: undefined }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 5, maxLength: 25 }), async (actions) => {
        for (const a of actions) {
          if (a.kind === 'submit') {
            ids.push(await submit(h, key, a.webhook));
            continue;
          }
          if (a.kind === 'list') {
            await expectPagesFresh(h, key, accountId, { limit: a.limit, status: a.status });
            continue;
          }
          const id = ids[a.task % Math.max(ids.length, 1)];
          if (!id) continue;
          const now = a.sameMs ? h.clock.now() : at();
          const delivery = await h.store.getDeliveryForTask(id);
          switch (a.kind) {
            case 'start':
              await h.store.startTask({ id, now });
              break;
            case 'complete':
              await h.store.completeTask({ id, now, outputKey: `${id}.mp4`, outputUrl: `https://files.example.com/${id}`, outputExpiresAt: at() });
              break;
            case 'fail':
              await h.store.failTask({ id, now, code: 'provider_error', message: 'failed' });
              break;
            case 'cancel':
              await h.store.cancelTask({ accountId, id, now });
              break;
            case 'attempt':
              if (delivery?.status === 'pending') {
                await h.store.recordDeliveryAttempt({ deliveryId: delivery.id, redeliveries: delivery.redeliveries, attempt: { attemptedAt: now, statusCode: 500, error: null, durationMs: 1 }, status: a.sameMs ? 'pending' : 'delivered', nextAttemptAt: a.sameMs ? at() : null });
              }
              break;
            case 'redeliver':
              if (delivery && delivery.status !== 'pending') await h.store.redeliver({ deliveryId: delivery.id, now });
              break;
          }
        }
        await expectPagesFresh(h, key, accountId, { limit: 4 });
      }),
      { numRuns: 15, seed: 20261127 },
    );
  });
});

describe('TaskAnswers', () => {
  it('keeps at most its capacity in characters, dropping the answers kept longest ago; a key kept again is kept anew, not twice', () => {
    // Each key and answer here: 3 + 2 characters.
    const answers = new TaskAnswers(15);
    expect(answers.keep('a 1', 'A.')).toBe('A.');
    answers.keep('b 1', 'B.');
    answers.keep('c 1', 'C.');
    answers.keep('a 1', 'A2');
    expect(answers.size).toEqual({ answers: 3, characters: 15 });
    answers.keep('d 1', 'D.');
    expect(answers.size).toEqual({ answers: 3, characters: 15 });
    expect([answers.get('a 1'), answers.get('b 1'), answers.get('c 1'), answers.get('d 1')]).toEqual(['A2', undefined, 'C.', 'D.']);
    // A larger answer drops as many of the oldest as it needs.
    answers.keep('e 1', 'E......');
    expect([answers.get('a 1'), answers.get('c 1'), answers.get('d 1'), answers.get('e 1')]).toEqual([undefined, undefined, 'D.', 'E......']);
    expect(answers.size).toEqual({ answers: 2, characters: 15 });
    // One over the capacity alone is answered, not kept, and drops nothing.
    expect(answers.keep('f 1', 'F'.repeat(20))).toBe('F'.repeat(20));
    expect(answers.get('f 1')).toBeUndefined();
    expect(answers.size).toEqual({ answers: 2, characters: 15 });
  });
});
