/**
 * The one-message transactions of concurrent callers (a submission; a render's completion; a webhook attempt with
 * its job's completion) sent to PostgreSQL together: one message, one transaction, one commit for all of them, as
 * SQLite's group commit does in one process. The commit is most of what such a transaction costs PostgreSQL: the
 * pipeline's floor with each phase's statements of 4 tasks under one commit ran 1.7 × the floor with a commit each
 * (BENCHMARKS.md, seventh pass). And a submission holds its account's balance row until its commit: combined, one
 * wait on the row serves the whole message.
 *
 * All or nothing: PostgreSQL runs a message's statements as one transaction and a failing one (a `vidgen_require`
 * check: short of credits, a task moved, a claim lost) rolls back all of it. A message PostgreSQL answered with an
 * error is then sent again as each caller's own transaction, as if never combined: the callers whose writes can be
 * done get them done, the one that failed fails alone. A message whose connection was lost is not: whether it
 * committed is unknown, so each caller gets the error, as it would have alone.
 *
 * Deadlock-free by order. Transactions on their own take rows in one order: a task's own rows (the task, its jobs, its
 * delivery), then an account's balance, then that account's usage totals, hourly before daily. A combined message
 * keeps that order across all of its callers: the writes to existing tasks' rows first (completions, attempts, by
 * task), then the submissions by account, and the usage totals last, summed per row, on one shard for the whole message, every
 * hourly row (in one sort order) before any daily one. Two messages, or a message and a transaction on its own, then
 * never wait for each other in a cycle. A caller's own statements are never reordered, only callers among
 * themselves, which is as if they had committed in another order: they were concurrent, so any order is theirs.
 */
import type { Statement } from './kept-plans.js';

/** What a caller adds to its account's usage totals, in the order of the usage tables' count columns. */
export interface UsageDelta {
  accountId: string;
  model: string;
  hourStart: Date;
  dayStart: Date;
  /** credits charged, credits refunded, succeeded, failed, cancelled, seconds delivered */
  counts: [number, number, number, number, number, number];
}

/** What PostgreSQL answered a statement: its rows (none for most writes). */
export interface Answer {
  rows: Record<string, unknown>[];
}

export interface Combinable {
  /** The caller's transaction on its own: `together`'s statements first, in their order, then the rest. */
  alone: Statement[];
  /** Its statements in a combined message: those of `alone` without its usage totals, which are `usage`, and without `once`. */
  together: Statement[];
  usage: UsageDelta[];
  /**
   * Statements of `alone` a combined message needs once however many of its callers carry them (the same text and
   * parameters): a lane's wake-up, `pg_notify`, which PostgreSQL delivers once per transaction for the same channel
   * and payload anyway. A submission's statements then lose one of four in a combined message.
   */
  once?: Statement[];
  /**
   * Where it goes in a combined message: 0, writes to rows of existing tasks (the task's own rows only), ordered by
   * `key`, the task's (or its delivery's) id; 1, a submission (rows of its own, then its account's balance), ordered
   * by `key`, its account's id.
   */
  rank: 0 | 1;
  key: string;
}

export interface UsageStatements {
  hourly(key: { accountId: string; model: string; hourStart: Date }, counts: UsageDelta['counts'], shard: number): Statement;
  daily(key: { accountId: string; model: string; dayStart: Date }, counts: UsageDelta['counts'], shard: number): Statement;
}

/**
 * The combined message's statements: callers in rank and key order, then their `once` statements each once (in the
 * order first carried), then the usage totals summed, hourly rows before daily ones.
 */
export function combinedStatements(callers: Combinable[], usage: UsageStatements, shard: number): Statement[] {
  return combinedMessage(callers, usage, shard).statements;
}

/** combinedStatements, and where each caller's own statements are in it (`at[i]`: the first of callers[i]'s). */
function combinedMessage(callers: Combinable[], usage: UsageStatements, shard: number): { statements: Statement[]; at: number[] } {
  const ordered = callers
    .map((caller, arrival) => ({ caller, arrival }))
    .sort((a, b) => a.caller.rank - b.caller.rank || compare(a.caller.key, b.caller.key) || a.arrival - b.arrival);
  const hourly = new Map<string, { key: { accountId: string; model: string; hourStart: Date }; counts: UsageDelta['counts'] }>();
  const daily = new Map<string, { key: { accountId: string; model: string; dayStart: Date }; counts: UsageDelta['counts'] }>();
  const statements: Statement[] = [];
  const at: number[] = new Array<number>(callers.length);
  const once = new Map<string, Statement>();
  for (const { caller, arrival } of ordered) {
    at[arrival] = statements.length;
    statements.push(...caller.together);
    for (const delta of caller.usage) {
      add(hourly, `${delta.accountId}\u0000${delta.model}\u0000${delta.hourStart.toISOString()}`, { accountId: delta.accountId, model: delta.model, hourStart: delta.hourStart }, delta.counts);
      add(daily, `${delta.accountId}\u0000${delta.model}\u0000${delta.dayStart.toISOString()}`, { accountId: delta.accountId, model: delta.model, dayStart: delta.dayStart }, delta.counts);
    }
    for (const statement of caller.once ?? []) {
      const id = JSON.stringify(statement);
      if (!once.has(id)) once.set(id, statement);
    }
  }
  statements.push(
    ...once.values(),
    ...sortedValues(hourly).map(({ key, counts }) => usage.hourly(key, counts, shard)),
    ...sortedValues(daily).map(({ key, counts }) => usage.daily(key, counts, shard)),
  );
  return { statements, at };
}

function add<K>(sums: Map<string, { key: K; counts: UsageDelta['counts'] }>, id: string, key: K, counts: UsageDelta['counts']): void {
  const sum = sums.get(id);
  if (!sum) sums.set(id, { key, counts: [...counts] });
  else for (let i = 0; i < counts.length; i++) sum.counts[i]! += counts[i]!;
}

const sortedValues = <V>(sums: Map<string, V>): V[] => [...sums.entries()].sort(([a], [b]) => compare(a, b)).map(([, value]) => value);
/** Code-unit order, the same in every process (not the locale's). */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A caller's outcome in a batch: its value, or its own error. */
export type Settled<O> = { ok: true; value: O } | { ok: false; error: unknown };

/**
 * Calls made in one event-loop turn, and those arriving while the previous batch is in flight, run as one batch
 * (`run`, with every waiting input, at most `maxCallers`); at most `lanes` batches in flight at once. `run` answers
 * each input's outcome in order, or a promise of it that settles after the batch has left its lane (work done per
 * caller afterwards, which must not hold the next batch back); if it throws, every caller of the batch gets that error.
 */
export class Coalescer<I, O> {
  private readonly waiting: { input: I; done: (value: O) => void; fail: (error: unknown) => void }[] = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly run: (inputs: I[]) => Promise<(Settled<O> | Promise<Settled<O>>)[]>,
    private readonly options: { lanes: number; maxCallers: number },
  ) {}

  call(input: I): Promise<O> {
    return new Promise<O>((done, fail) => {
      this.waiting.push({ input, done, fail });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.options.lanes || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.inFlight < this.options.lanes && this.waiting.length > 0) {
        this.inFlight++;
        const batch = this.waiting.splice(0, this.options.maxCallers);
        void this.settle(batch).finally(() => {
          this.inFlight--;
          this.schedule();
        });
      }
    });
  }

  private async settle(batch: Coalescer<I, O>['waiting']): Promise<void> {
    let outcomes: (Settled<O> | Promise<Settled<O>>)[];
    try {
      outcomes = await this.run(batch.map(({ input }) => input));
    } catch (error) {
      for (const { fail } of batch) fail(error);
      return;
    }
    batch.forEach(({ done, fail }, i) => {
      const apply = (outcome: Settled<O> | undefined) => {
        if (!outcome) fail(new Error('a batch answered fewer outcomes than it had callers'));
        else if (outcome.ok) done(outcome.value);
        else fail(outcome.error);
      };
      void Promise.resolve(outcomes[i]).then(apply, fail);
    });
  }
}

/** `work`'s outcome as a Settled. */
export const settled = <O>(work: Promise<O>): Promise<Settled<O>> => work.then((value) => ({ ok: true as const, value }), (error: unknown) => ({ ok: false as const, error }));

export class MessageCombiner {
  private readonly calls: Coalescer<Combinable, Answer[]>;
  /** Messages sent and callers they carried (combined or alone), for tests and the benchmark. */
  readonly counts = { messages: 0, callers: 0, combined: 0, sentAgainAlone: 0 };

  constructor(
    private readonly options: {
      /** Sends statements as one message, one transaction; answers each statement's rows, in order. */
      send: (statements: Statement[]) => Promise<Answer[]>;
      usage: UsageStatements;
      /** Whether an error from `send` was PostgreSQL's answer (its transaction then rolled back), not a lost connection. */
      answered: (error: unknown) => boolean;
      /** Combined messages in flight at once (each on a connection of its own). */
      lanes: number;
      /** Callers in one message at most. */
      maxCallers: number;
      shard: () => number;
    },
  ) {
    this.calls = new Coalescer((callers) => this.run(callers), options);
  }

  /**
   * Resolves once the caller's statements have committed (with others, or alone), with what PostgreSQL answered its
   * `together` statements (the first of `alone`'s when sent alone), in order; rejects with its own failure.
   */
  send(caller: Combinable): Promise<Answer[]> {
    return this.calls.call(caller);
  }

  private async run(callers: Combinable[]): Promise<(Settled<Answer[]> | Promise<Settled<Answer[]>>)[]> {
    this.counts.messages++;
    this.counts.callers += callers.length;
    const own = (caller: Combinable) => (answers: Answer[]) => answers.slice(0, caller.together.length);
    const alone = (caller: Combinable) => settled(this.options.send(caller.alone).then(own(caller)));
    if (callers.length === 1) return [await alone(callers[0]!)];
    this.counts.combined += callers.length;
    const { statements, at } = combinedMessage(callers, this.options.usage, this.options.shard());
    let answers: Answer[];
    try {
      answers = await this.options.send(statements);
    } catch (error) {
      // Whether it committed is unknown: each caller gets the error, as it would have alone (the Coalescer passes it on).
      if (!this.options.answered(error)) throw error;
      // Nothing of the message stayed: each caller's transaction on its own, as if never combined (outside the lane,
      // which the next message may have meanwhile).
      this.counts.sentAgainAlone += callers.length;
      return callers.map(alone);
    }
    return callers.map((caller, i) => ({ ok: true, value: answers.slice(at[i], at[i]! + caller.together.length) }));
  }
}
