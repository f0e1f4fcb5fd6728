/**
 * PostgreSQL's combined messages (src/store/postgres/combined-messages.ts): concurrent submissions, completions and
 * webhook attempts sent as one transaction, each caller's writes as if it had committed alone; concurrent starts as
 * one statement; a message one of whose
 * callers fails sent again as each caller's own; a lost connection's message not sent again; the order that keeps
 * two messages, or a message and a transaction on its own, from waiting on each other in a cycle. The order and the
 * fault handling also without a database (the combiner over a `send` of the test's).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { openBackend, type Backend } from '../src/store/open.js';
import { combinedStatements, MessageCombiner, type Answer, type Combinable, type UsageDelta } from '../src/store/postgres/combined-messages.js';
import type { PgStore } from '../src/store/postgres/pg-store.js';
import type { Statement } from '../src/store/postgres/kept-plans.js';
import type { NewTask, StartOutcome, StoredResponse, TaskRecord } from '../src/store/store.js';
import { storeFaults } from './support/faults.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';
import { newTask, silentLogger, until } from './support.js';

const now = new Date('2026-11-22T10:00:00.000Z');
const later = (ms: number) => new Date(now.getTime() + ms);

describe('the order of a combined message', () => {
  const usage = {
    hourly: (key: { accountId: string; model: string; hourStart: Date }, counts: UsageDelta['counts'], shard: number): Statement => [
      'hourly',
      [key.accountId, key.model, key.hourStart.toISOString(), ...counts, shard],
    ],
    daily: (key: { accountId: string; model: string; dayStart: Date }, counts: UsageDelta['counts'], shard: number): Statement => [
      'daily',
      [key.accountId, key.model, key.dayStart.toISOString(), ...counts, shard],
    ],
  };
  const delta = (accountId: string, model: string, hour: string, counts: UsageDelta['counts']): UsageDelta => ({
    accountId,
    model,
    hourStart: new Date(`2026-11-22T${hour}:00:00.000Z`),
    dayStart: new Date('2026-11-22T00:00:00.000Z'),
    counts,
  });
  const caller = (name: string, rank: 0 | 1, key: string, usage: UsageDelta[]): Combinable => ({
    alone: [[`${name} alone`, []]],
    together: [[`${name} a`, []], [`${name} b`, []]],
    usage,
    rank,
    key,
  });

  it("puts existing tasks' writes first, then submissions by account, each caller's statements in its order; the usage summed last, every hourly row before any daily one, on one shard", () => {
    const statements = combinedStatements(
      [
        caller('submit acc_b', 1, 'acc_b', [delta('acc_b', 'm1', '10', [5, 0, 0, 0, 0, 0])]),
        caller('complete', 0, 'gen_2', [delta('acc_b', 'm1', '10', [0, 0, 1, 0, 0, 4])]),
        caller('submit acc_a', 1, 'acc_a', [delta('acc_a', 'm2', '11', [3, 0, 0, 0, 0, 0])]),
        caller('attempt', 0, 'msg_1', []),
        caller('submit acc_a again', 1, 'acc_a', [delta('acc_a', 'm1', '10', [3, 0, 0, 0, 0, 0]), delta('acc_a', 'm2', '10', [1, 0, 0, 0, 0, 0])]),
      ],
      usage,
      7,
    );
    expect(statements).toEqual([
      ['complete a', []],
      ['complete b', []],
      ['attempt a', []],
      ['attempt b', []],
      ['submit acc_a a', []],
      ['submit acc_a b', []],
      ['submit acc_a again a', []],
      ['submit acc_a again b', []],
      ['submit acc_b a', []],
      ['submit acc_b b', []],
      ['hourly', ['acc_a', 'm1', '2026-11-22T10:00:00.000Z', 3, 0, 0, 0, 0, 0, 7]],
      ['hourly', ['acc_a', 'm2', '2026-11-22T10:00:00.000Z', 1, 0, 0, 0, 0, 0, 7]],
      ['hourly', ['acc_a', 'm2', '2026-11-22T11:00:00.000Z', 3, 0, 0, 0, 0, 0, 7]],
      ['hourly', ['acc_b', 'm1', '2026-11-22T10:00:00.000Z', 5, 0, 1, 0, 0, 4, 7]],
      ['daily', ['acc_a', 'm1', '2026-11-22T00:00:00.000Z', 3, 0, 0, 0, 0, 0, 7]],
      ['daily', ['acc_a', 'm2', '2026-11-22T00:00:00.000Z', 4, 0, 0, 0, 0, 0, 7]],
      ['daily', ['acc_b', 'm1', '2026-11-22T00:00:00.000Z', 5, 0, 1, 0, 0, 4, 7]],
    ]);
  });

  it("puts the callers' statements needed once after all of theirs, each once (the same text and parameters), before the usage", () => {
    const wake = (lane: string): Statement => ['wake', [lane]];
    const withOnce = (name: string, key: string, once: Statement[]): Combinable => ({ ...caller(name, 1, key, [delta(key, 'm1', '10', [1, 0, 0, 0, 0, 0])]), once });
    const statements = combinedStatements([withOnce('s1', 'acc_b', [wake('local')]), withOnce('s2', 'acc_a', [wake('instant')]), withOnce('s3', 'acc_a', [wake('local')])], usage, 0);
    expect(statements.map(([text, params]) => `${text}${params.length ? ` ${params.slice(0, 2).join(' ')}` : ''}`)).toEqual([
      's2 a', 's2 b', 's3 a', 's3 b', 's1 a', 's1 b',
      // In the order the ordered callers first carry them: acc_a's before acc_b's.
      'wake instant', 'wake local',
      'hourly acc_a m1', 'hourly acc_b m1', 'daily acc_a m1', 'daily acc_b m1',
    ]);
  });

  /** A combiner over `send`, of at most 64 callers a message, on shard 0; each statement answered a row of its text unless `send` answers. */
  const combinerOver = (send: (statements: Statement[]) => Promise<void | Answer[]>, options: { lanes: number; answered: (error: unknown) => boolean }) =>
    new MessageCombiner({
      send: async (statements) => (await send(statements)) ?? statements.map(([text]) => ({ rows: [{ text }] })),
      usage,
      maxCallers: 64,
      shard: () => 0,
      ...options,
    });
  /** A combiner over a send of the test's: records each message, fails those `failing` says to. */
  const combiner = (failing: (statements: Statement[]) => unknown) => {
    const sent: string[][] = [];
    const combine = combinerOver(
      async (statements) => {
        sent.push(statements.map(([text]) => text));
        const error = failing(statements);
        if (error) throw error;
      },
      { lanes: 2, answered: (error) => typeof (error as { code?: unknown }).code === 'string' },
    );
    return { combine, sent };
  };
  const answered = Object.assign(new Error('insufficient_credits'), { code: 'VG001' });

  it('sends the callers of one turn as one message, and one caller alone as its own', async () => {
    const { combine, sent } = combiner(() => undefined);
    await Promise.all([combine.send(caller('x', 0, 'x', [])), combine.send(caller('y', 0, 'y', []))]);
    await combine.send(caller('z', 0, 'z', []));
    expect(sent).toEqual([['x a', 'x b', 'y a', 'y b'], ['z alone']]);
    expect(combine.counts).toEqual({ messages: 2, callers: 3, combined: 2, sentAgainAlone: 0 });
  });

  it("answers each caller what PostgreSQL answered its own statements, combined, alone, or sent again alone", async () => {
    const texts = (answers: Answer[]) => answers.map(({ rows }) => rows[0]!.text);
    // Alone: its `together` statements' answers, the first of `alone`'s (a caller's own answers, not its usage totals').
    const aloneCaller: Combinable = { ...caller('z', 0, 'z', []), alone: [['z a', []], ['z b', []], ['hourly', []]] };
    const { combine } = combiner(() => undefined);
    expect(texts(await combine.send(aloneCaller))).toEqual(['z a', 'z b']);
    // Combined: each its own, whatever order the message put them in.
    const together = await Promise.all([combine.send(caller('y', 1, 'acc_b', [])), combine.send(caller('x', 0, 'x', [])), combine.send(caller('w', 1, 'acc_a', []))]);
    expect(together.map(texts)).toEqual([['y a', 'y b'], ['x a', 'x b'], ['w a', 'w b']]);
    // Sent again alone after a refusal: each its own again.
    const refusing = combiner((statements) => (statements.length > 1 && statements.some(([text]) => text.startsWith('v')) ? answered : undefined));
    const [v, u] = await Promise.allSettled([refusing.combine.send(caller('v', 0, 'v', [])), refusing.combine.send({ ...caller('u', 0, 'u', []), alone: [['u a', []], ['u b', []]] })]);
    expect(v).toMatchObject({ status: 'fulfilled' });
    expect(texts((u as PromiseFulfilledResult<Answer[]>).value)).toEqual(['u a', 'u b']);
  });

  it("sends a message PostgreSQL refused again as each caller's own: the one that fails fails alone, the others are done", async () => {
    const { combine, sent } = combiner((statements) => (statements.some(([text]) => text.startsWith('y')) ? answered : undefined));
    const outcomes = await Promise.allSettled(['x', 'y', 'w'].map((name) => combine.send(caller(name, 0, name, []))));
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBe(answered);
    // (Callers of existing tasks in the order of their keys.)
    expect(sent).toEqual([['w a', 'w b', 'x a', 'x b', 'y a', 'y b'], ['x alone'], ['y alone'], ['w alone']]);
    expect(combine.counts.sentAgainAlone).toBe(3);
  });

  it('does not send again a message whose connection was lost (it may have committed): each caller gets the error', async () => {
    const lost = new Error('Connection terminated unexpectedly');
    const { combine, sent } = combiner(() => lost);
    const outcomes = await Promise.allSettled(['x', 'y'].map((name) => combine.send(caller(name, 0, name, []))));
    expect(outcomes).toEqual([
      { status: 'rejected', reason: lost },
      { status: 'rejected', reason: lost },
    ]);
    expect(sent).toEqual([['x a', 'x b', 'y a', 'y b']]);
  });

  it("sends a refused message's callers again outside its lane: the next message does not wait for them", async () => {
    const heldAlone: (() => void)[] = [];
    const sent: string[][] = [];
    const combine = combinerOver(
      (statements) => {
        sent.push(statements.map(([text]) => text));
        if (statements.length > 1 && statements.some(([text]) => text.startsWith('x'))) return Promise.reject(answered);
        if (statements.length === 1) return new Promise<void>((done) => heldAlone.push(done));
        return Promise.resolve();
      },
      { lanes: 1, answered: () => true },
    );
    const refused = [combine.send(caller('x', 0, 'x', [])), combine.send(caller('y', 0, 'y', []))];
    await until(() => heldAlone.length === 2);
    // Both still waiting for their own transactions; the next callers go together meanwhile.
    await Promise.all([combine.send(caller('v', 0, 'v', [])), combine.send(caller('w', 0, 'w', []))]);
    expect(sent.at(-1)).toEqual(['v a', 'v b', 'w a', 'w b']);
    for (const done of heldAlone) done();
    await Promise.all(refused);
  });

  it('keeps at most its lanes in flight; callers arriving meanwhile go together in the next message', async () => {
    const held: (() => void)[] = [];
    const sent: string[][] = [];
    const combine = combinerOver(
      (statements) => {
        sent.push(statements.map(([text]) => text));
        return new Promise<void>((done) => held.push(done));
      },
      { lanes: 1, answered: () => true },
    );
    const first = combine.send(caller('x', 0, 'x', []));
    await new Promise((resolve) => setImmediate(resolve));
    const rest = [combine.send(caller('y', 0, 'y', [])), combine.send(caller('w', 0, 'w', []))];
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([['x alone']]);
    held.shift()!();
    await first;
    // (The lane is freed once the message's promise has settled, and the next one gathered in the turn after.)
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([['x alone'], ['w a', 'w b', 'y a', 'y b']]);
    held.shift()!();
    await Promise.all(rest);
  });
});

describe.skipIf(!hasPostgres)('combined messages on PostgreSQL', () => {
  let database: Awaited<ReturnType<typeof createTestDatabase>>;
  let first: Backend;
  let second: Backend;
  const respond = (task: { id: string; creditsCharged: number }): StoredResponse => ({ status: 202, body: { requestId: task.id } });
  const task = (accountId: string, price: number, at: Date, patch: Partial<NewTask> = {}): NewTask =>
    newTask(accountId, price, at, { webhookUrl: 'https://hooks.example.com/v', ...patch });
  const job = { maxAttempts: 3, provider: 'local' };
  const pg = (backend: Backend) => backend.store as PgStore;

  beforeAll(async () => {
    database = await createTestDatabase();
    // Two processes' stores on one database, as 2 api or 2 worker processes are.
    first = await openBackend({ database: { kind: 'postgres', url: database.url, poolSize: 10 }, jobLeaseMs: 60_000 }, { logger: silentLogger, listen: false, supervise: true });
    second = await openBackend({ database: { kind: 'postgres', url: database.url, poolSize: 10 }, jobLeaseMs: 60_000 }, { logger: silentLogger, listen: false, supervise: false });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await database?.drop();
  });
  beforeEach(async () => {
    await pg(first).pool.query(
      `TRUNCATE accounts, tasks, ledger_entries, webhook_deliveries, webhook_attempts, usage_hourly_shards, usage_daily_shards CASCADE;
       DELETE FROM pgboss.job WHERE name LIKE 'vidgen-%'`,
    );
    for (const id of ['acc_1', 'acc_2']) await first.store.createAccount({ id, name: id, webhookSecret: 'whsec_x', openingGrant: 1_000, now });
  });

  /** Submits each task at the instant its id was made for (`at`), all at once. */
  const submitAll = (backend: Backend, tasks: { task: NewTask; at: Date }[]) =>
    Promise.all(tasks.map(({ task: t, at }) => backend.store.submitTask({ job, task: t, idempotency: null, now: at, respond })));
  const at = (t: NewTask, when: Date) => ({ task: t, at: when });

  /** Completes `t` as its start (`started`) left it, with its output named after it. */
  const complete = (backend: Backend, t: TaskRecord, started: StartOutcome, extra: { job?: string; now?: Date } = {}) =>
    backend.store.completeTask({
      id: t.id,
      now: extra.now ?? later(20),
      outputKey: `${t.id}.mp4`,
      outputUrl: `https://files.example.com/${t.id}.mp4`,
      outputExpiresAt: later(86_400_000),
      ...(extra.job ? { job: extra.job } : {}),
      started: (started as { task: TaskRecord }).task,
    });

  it('writes concurrent submissions, completions and webhook attempts as one message each, every caller as if alone', async () => {
    const counts = { ...pg(first).combiner.counts };
    const submitted = await submitAll(first, Array.from({ length: 6 }, (_, i) => at(task('acc_1', 10, later(i)), later(i))));
    expect(submitted.map((outcome) => outcome.kind)).toEqual(Array(6).fill('created'));
    expect(pg(first).combiner.counts.messages - counts.messages).toBe(1);
    expect(pg(first).combiner.counts.combined - counts.combined).toBe(6);
    // Each charge its own ledger entry with the balance it left, in the order they were written.
    const charges = (await first.store.listLedger('acc_1')).filter((entry) => entry.kind === 'charge').sort((a, b) => a.id - b.id);
    expect(charges.map((entry) => entry.balanceAfter)).toEqual([990, 980, 970, 960, 950, 940]);
    expect(await first.store.auditBalance('acc_1')).toEqual({ balance: 940, ledgerSum: 940 });

    const tasks = submitted.map((outcome) => (outcome as { task: TaskRecord }).task);
    const started = await Promise.all(tasks.map((t) => first.store.startTask({ id: t.id, now: later(10) })));
    const jobs = await first.queue.claim({ workerId: 'w', now: new Date(), leaseMs: 60_000, provider: 'local', limit: 10 });
    expect(jobs).toHaveLength(6);
    const before = { ...pg(first).combiner.counts };
    const completed = await Promise.all(tasks.map((t, i) => complete(first, t, started[i]!, { job: jobs.find((j) => j.taskId === t.id)!.id })));
    expect(completed.map((outcome) => outcome.kind)).toEqual(Array(6).fill('succeeded'));
    expect(pg(first).combiner.counts.combined - before.combined).toBe(6);
    expect(pg(first).combiner.counts.sentAgainAlone).toBe(0);
    for (const [i, t] of tasks.entries()) expect(await first.store.getTask('acc_1', t.id)).toEqual((completed[i] as { task: TaskRecord }).task);
    expect(await first.queue.countJobs()).toMatchObject({ leased: 0 });

    const deliveries = await first.queue.claim({ workerId: 'w', now: new Date(), leaseMs: 60_000, provider: 'webhooks', limit: 10 });
    expect(deliveries).toHaveLength(6);
    const held = await Promise.all(
      deliveries.map(async (deliver, i) =>
        first.store.recordDeliveryAttempt({
          deliveryId: (await first.store.getDeliveryForTask(deliver.taskId))!.id,
          redeliveries: 0,
          attempt: { attemptedAt: later(30 + i), statusCode: 204, error: null, durationMs: 3 },
          status: 'delivered',
          nextAttemptAt: null,
          job: { id: deliver.id, now: later(30) },
        }),
      ),
    );
    expect(held).toEqual(Array(6).fill(true));
    for (const t of tasks) expect(await first.store.getDeliveryForTask(t.id)).toMatchObject({ status: 'delivered', attempts: 1 });
    expect(await first.queue.countJobs()).toMatchObject({ leased: 0, available: 0 });
    // The usage totals summed in each message's own statements: the same totals as six transactions would leave.
    expect(await first.store.usageHours({ accountId: 'acc_1', from: now, to: later(3_600_000) })).toEqual([
      { hourStart: now, model: 'vidgen-2.0', creditsCharged: 60, creditsRefunded: 0, succeeded: 6, failed: 0, cancelled: 0, secondsDelivered: 30 },
    ]);
  });

  it("wakes the lane's workers with one notice a combined message, however many of its submissions are for that lane", async () => {
    const sent = vi.spyOn(pg(first) as unknown as { atomically: (statements: Statement[]) => Promise<unknown> }, 'atomically');
    const listener = await pg(first).pool.connect();
    const heard: string[] = [];
    try {
      listener.on('notification', (message) => message.channel === 'vidgen_jobs' && heard.push(message.payload ?? ''));
      await listener.query('LISTEN vidgen_jobs');
      const submitted = await submitAll(first, Array.from({ length: 5 }, (_, i) => at(task(`acc_${1 + (i % 2)}`, 10, later(i)), later(i))));
      expect(submitted.map((outcome) => outcome.kind)).toEqual(Array(5).fill('created'));
      const messages = sent.mock.calls.map(([statements]) => statements.map(([text]) => text));
      expect(messages).toHaveLength(1);
      expect(messages[0]!.filter((text) => text.includes('INSERT INTO tasks'))).toHaveLength(5);
      expect(messages[0]!.filter((text) => text.includes("pg_notify('vidgen_jobs'"))).toHaveLength(1);
      await until(() => heard.length > 0);
      expect(heard).toEqual(['local']);
    } finally {
      sent.mockRestore();
      await listener.query('UNLISTEN *');
      listener.release();
    }
  });

  it('starts concurrent tasks with one statement, each answered as its own start would be', async () => {
    const submitted = await submitAll(first, Array.from({ length: 4 }, (_, i) => at(task('acc_1', 10, later(i)), later(i))));
    const tasks = submitted.map((outcome) => (outcome as { task: TaskRecord }).task);
    await first.store.cancelTask({ accountId: 'acc_1', id: tasks[1]!.id, now: later(5) });
    const all = vi.spyOn(pg(first) as unknown as { all: (text: string, values: unknown[]) => Promise<unknown> }, 'all');
    try {
      const outcomes = await Promise.all(tasks.map((t, i) => first.store.startTask({ id: t.id, now: later(10 + i) })));
      expect(all.mock.calls.filter(([text]) => text.includes('unnest'))).toHaveLength(1);
      expect(outcomes[1]).toEqual({ kind: 'not_startable', status: 'cancelled' });
      for (const i of [0, 2, 3]) {
        expect(outcomes[i]).toMatchObject({ kind: 'started', task: { status: 'processing', updatedAt: later(10 + i) } });
        expect((outcomes[i] as { task: TaskRecord }).task).toEqual(await first.store.getTask('acc_1', tasks[i]!.id));
      }
    } finally {
      all.mockRestore();
    }
  });

  it("reads concurrent tasks' pending deliveries with one statement, each as its own read answers it", async () => {
    const submitted = await submitAll(first, Array.from({ length: 4 }, (_, i) => at(task('acc_1', 10, later(i), i === 3 ? { webhookUrl: null } : {}), later(i))));
    const tasks = submitted.map((outcome) => (outcome as { task: TaskRecord }).task);
    // Pending deliveries for the first three (cancelled: their events written), none for the fourth (no webhook URL).
    for (const t of tasks) await first.store.cancelTask({ accountId: 'acc_1', id: t.id, now: later(5) });
    const alone = [];
    for (const t of tasks) alone.push(await first.store.pendingDelivery(t.id, later(6)));
    expect(alone.map((read) => read?.delivery.status)).toEqual(['pending', 'pending', 'pending', undefined]);
    const all = vi.spyOn(pg(first) as unknown as { all: (text: string, values: unknown[]) => Promise<unknown> }, 'all');
    try {
      const together = await Promise.all(tasks.map((t) => first.store.pendingDelivery(t.id, later(6))));
      expect(all.mock.calls.filter(([text]) => text.includes('ANY'))).toHaveLength(1);
      expect(together).toEqual(alone);
    } finally {
      all.mockRestore();
    }
  });

  it("sends a message one of whose callers fails again as each caller's own: short of credits, a task moved since its start", async () => {
    await pg(first).pool.query(`UPDATE accounts SET balance = 95 WHERE id = 'acc_1'`);
    const before = { ...pg(first).combiner.counts };
    const submitted = await submitAll(first, Array.from({ length: 4 }, (_, i) => at(task('acc_1', 30, later(i)), later(i))));
    expect(submitted.map((outcome) => outcome.kind).sort()).toEqual(['created', 'created', 'created', 'insufficient_credits']);
    expect(pg(first).combiner.counts.sentAgainAlone - before.sentAgainAlone).toBe(4);
    expect(await first.store.getAccount('acc_1')).toMatchObject({ balance: 5 });

    const tasks = submitted.filter((outcome) => outcome.kind === 'created').map((outcome) => (outcome as { task: TaskRecord }).task);
    const started = await Promise.all(tasks.map((t) => first.store.startTask({ id: t.id, now: later(10) })));
    await first.store.cancelTask({ accountId: 'acc_1', id: tasks[1]!.id, now: later(15) });
    const completed = await Promise.all(tasks.map((t, i) => complete(first, t, started[i]!)));
    expect(completed).toMatchObject([{ kind: 'succeeded' }, { kind: 'discarded', status: 'cancelled' }, { kind: 'succeeded' }]);
    expect(await first.store.getTask('acc_1', tasks[1]!.id)).toMatchObject({ status: 'cancelled', outputKey: null });
    expect(await first.store.getAccount('acc_1')).toMatchObject({ balance: 35 });
    expect(await first.store.usageHours({ accountId: 'acc_1', from: now, to: later(3_600_000) })).toEqual([
      { hourStart: now, model: 'vidgen-2.0', creditsCharged: 90, creditsRefunded: 30, succeeded: 2, failed: 0, cancelled: 1, secondsDelivered: 10 },
    ]);
  });

  it("answers each caller of a message whose connection was killed with the error, sends none of them again, and writes nothing", async () => {
    const faults = storeFaults(first);
    const before = { ...pg(first).combiner.counts };
    // Held at its first charge: a task with its job written, uncommitted; then its backend terminated.
    const held = await faults.holdAt('charge');
    try {
      const outcomes = Promise.allSettled(
        Array.from({ length: 3 }, (_, i) => first.store.submitTask({ job, task: task('acc_1', 10, later(i)), idempotency: null, now: later(i), respond })),
      );
      await held.reached();
      await held.terminate();
      const settled = await outcomes;
      expect(settled.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected', 'rejected']);
      expect(pg(first).combiner.counts.combined - before.combined).toBe(3);
      expect(pg(first).combiner.counts.sentAgainAlone).toBe(before.sentAgainAlone);
    } finally {
      await faults.clear();
    }
    expect(await first.store.listTasks({ accountId: 'acc_1', limit: 10 })).toEqual([]);
    expect(await first.store.auditBalance('acc_1')).toEqual({ balance: 1_000, ledgerSum: 1_000 });
    // The dead connection left the pool: the next submissions go through.
    const after = await submitAll(first, Array.from({ length: 3 }, (_, i) => at(task('acc_1', 10, later(10 + i)), later(10 + i))));
    expect(after.map((outcome) => outcome.kind)).toEqual(['created', 'created', 'created']);
  });

  it('lets two processes combine submissions and completions of two accounts and two models, hours apart, without a deadlock', async () => {
    const rounds = 24;
    const before = pg(first).combiner.counts.sentAgainAlone + pg(second).combiner.counts.sentAgainAlone;
    const models = ['vidgen-2.0', 'vidgen-2.0-fast'] as const;
    for (let round = 0; round < rounds; round++) {
      // Each process's message takes the accounts, models and hours in an order of its own making.
      const batch = (backend: Backend, flip: boolean) =>
        submitAll(
          backend,
          Array.from({ length: 8 }, (_, i) => {
            const when = later((i % 2 === (flip ? 0 : 1) ? 3_600_000 : 0) + round * 10 + i);
            return at(task(i % 4 < 2 !== flip ? 'acc_1' : 'acc_2', 1, when, { model: models[(i >> 1) % 2]! }), when);
          }),
        );
      const [a, b] = await Promise.all([batch(first, false), batch(second, true)]);
      const created = [...a, ...b].map((outcome) => (outcome as { task: TaskRecord }).task);
      expect(created).toHaveLength(16);
      const started = await Promise.all(created.map((t) => first.store.startTask({ id: t.id, now: later(round * 10) })));
      await Promise.all(created.map((t, i) => complete(i % 2 ? first : second, t, started[i]!, { now: t.createdAt })));
    }
    // Nothing waited in a cycle: PostgreSQL would have broken it by failing a message, which is then sent again alone.
    expect(pg(first).combiner.counts.sentAgainAlone + pg(second).combiner.counts.sentAgainAlone).toBe(before);
    expect(pg(first).combiner.counts.combined + pg(second).combiner.counts.combined).toBeGreaterThanOrEqual(rounds * 32);
    const charged = (await pg(first).pool.query(`SELECT account_id, sum(credits_charged)::int AS c, sum(succeeded)::int AS s FROM usage_daily_shards GROUP BY 1 ORDER BY 1`)).rows;
    expect(charged).toEqual([
      { account_id: 'acc_1', c: rounds * 8, s: rounds * 8 },
      { account_id: 'acc_2', c: rounds * 8, s: rounds * 8 },
    ]);
  });
});
