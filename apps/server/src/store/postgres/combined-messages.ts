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
 * keeps that order across all of its callers: the writes to existing tasks' rows first (completions, attempts), then
 * the submissions by account, and the usage totals last, summed per row, on one shard for the whole message, every
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

export interface Combinable {
  /** The caller's transaction on its own. */
  alone: Statement[];
  /** Its statements in a combined message: those of `alone` without its usage totals, which are `usage`. */
  together: Statement[];
  usage: UsageDelta[];
  /**
   * Where it goes in a combined message: 0, writes to rows of existing tasks (the task's own rows only); 1, a
   * submission (rows of its own, then its account's balance), ordered by `account`.
   */
  rank: 0 | 1;
  account?: string;
}

export interface UsageStatements {
  hourly(key: { accountId: string; model: string; hourStart: Date }, counts: UsageDelta['counts'], shard: number): Statement;
  daily(key: { accountId: string; model: string; dayStart: Date }, counts: UsageDelta['counts'], shard: number): Statement;
}

/** The combined message's statements: callers in rank and account order, then the usage totals summed, hourly rows before daily ones. */
export function combinedStatements(callers: Combinable[], usage: UsageStatements, shard: number): Statement[] {
  const ordered = callers
    .map((caller, arrival) => ({ caller, arrival }))
    .sort((a, b) => a.caller.rank - b.caller.rank || compare(a.caller.account ?? '', b.caller.account ?? '') || a.arrival - b.arrival)
    .map(({ caller }) => caller);
  const hourly = new Map<string, { key: { accountId: string; model: string; hourStart: Date }; counts: UsageDelta['counts'] }>();
  const daily = new Map<string, { key: { accountId: string; model: string; dayStart: Date }; counts: UsageDelta['counts'] }>();
  for (const delta of ordered.flatMap((caller) => caller.usage)) {
    add(hourly, `${delta.accountId}\u0000${delta.model}\u0000${delta.hourStart.toISOString()}`, { accountId: delta.accountId, model: delta.model, hourStart: delta.hourStart }, delta.counts);
    add(daily, `${delta.accountId}\u0000${delta.model}\u0000${delta.dayStart.toISOString()}`, { accountId: delta.accountId, model: delta.model, dayStart: delta.dayStart }, delta.counts);
  }
  return [
    ...ordered.flatMap((caller) => caller.together),
    ...sortedValues(hourly).map(({ key, counts }) => usage.hourly(key, counts, shard)),
    ...sortedValues(daily).map(({ key, counts }) => usage.daily(key, counts, shard)),
  ];
}

function add<K>(sums: Map<string, { key: K; counts: UsageDelta['counts'] }>, id: string, key: K, counts: UsageDelta['counts']): void {
  const sum = sums.get(id);
  if (!sum) sums.set(id, { key, counts: [...counts] });
  else for (let i = 0; i < counts.length; i++) sum.counts[i]! += counts[i]!;
}

const sortedValues = <V>(sums: Map<string, V>): V[] => [...sums.entries()].sort(([a], [b]) => compare(a, b)).map(([, value]) => value);
/** Code-unit order, the same in every process (not the locale's). */
const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

interface Waiting {
  caller: Combinable;
  done: () => void;
  fail: (error: unknown) => void;
}

export class MessageCombiner {
  private readonly waiting: Waiting[] = [];
  private sending = 0;
  private scheduled = false;
  /** Messages sent and callers they carried (combined or alone), for tests and the benchmark. */
  readonly counts = { messages: 0, callers: 0, combined: 0, sentAgainAlone: 0 };

  constructor(
    private readonly options: {
      /** Sends statements as one message, one transaction. */
      send: (statements: Statement[]) => Promise<void>;
      usage: UsageStatements;
      /** Whether an error from `send` was PostgreSQL's answer (its transaction then rolled back), not a lost connection. */
      answered: (error: unknown) => boolean;
      /** Combined messages in flight at once (each on a connection of its own). */
      lanes: number;
      /** Callers in one message at most. */
      maxCallers: number;
      shard: () => number;
    },
  ) {}

  /** Resolves once the caller's statements have committed (with others, or alone); rejects with its own failure. */
  send(caller: Combinable): Promise<void> {
    return new Promise<void>((done, fail) => {
      this.waiting.push({ caller, done, fail });
      this.schedule();
    });
  }

  /** The callers of this event-loop turn go together, on a lane that is free. */
  private schedule(): void {
    if (this.scheduled || this.sending >= this.options.lanes || this.waiting.length === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      while (this.sending < this.options.lanes && this.waiting.length > 0) {
        this.sending++;
        void this.run(this.waiting.splice(0, this.options.maxCallers)).finally(() => {
          this.sending--;
          this.schedule();
        });
      }
    });
  }

  private async run(batch: Waiting[]): Promise<void> {
    this.counts.messages++;
    this.counts.callers += batch.length;
    if (batch.length === 1) return this.alone(batch[0]!);
    this.counts.combined += batch.length;
    try {
      await this.options.send(combinedStatements(batch.map(({ caller }) => caller), this.options.usage, this.options.shard()));
    } catch (error) {
      if (!this.options.answered(error)) {
        for (const { fail } of batch) fail(error);
        return;
      }
      // Nothing of the message stayed: each caller's transaction on its own, as if never combined.
      this.counts.sentAgainAlone += batch.length;
      await Promise.all(batch.map((waiting) => this.alone(waiting)));
      return;
    }
    for (const { done } of batch) done();
  }

  private async alone({ caller, done, fail }: Waiting): Promise<void> {
    try {
      await this.options.send(caller.alone);
      done();
    } catch (error) {
      fail(error);
    }
  }
}
