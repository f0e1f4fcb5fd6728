/**
 * Plans kept per connection for the statements every task sends in one-message transactions (a submission;
 * an ending's writes with its COMMIT). Sent as text, PostgreSQL parses and plans each of them every time:
 * with pg-boss's job INSERT among them, planning alone was 1.2 ms of its CPU a task (`pg_stat_statements`),
 * and the pipeline's floor runs at 0.67 × its speed when pgbench parses and plans every statement
 * (BENCHMARKS.md, fifth pass).
 *
 * A statement marked `kept` is PREPAREd once on a connection (a round trip of its own, the first time; under
 * a savepoint when a transaction is open, so that a refusal leaves it usable) and sent as `EXECUTE name(…)`
 * with its values as literals after that, still within the one message. PREPARE is not undone by a
 * rollback, and every PREPARE is awaited, so what is recorded as prepared on a connection is.
 *
 * Only statements whose result has named columns (no `*` at the top level) are marked: a migration that adds
 * a column changes the result of a prepared `SELECT *`, which PostgreSQL then refuses to run ('cached plan
 * must not change result type') until the connection goes, and migrations run while other processes are
 * serving. Adding columns, tables and functions, the only migrations there are, is otherwise harmless to a
 * kept plan: PostgreSQL plans it again after a change to what it reads. A statement PostgreSQL refuses to
 * prepare (a parameter whose type it cannot decide) is sent inlined, as every statement is without this.
 * Off (`VIDGEN_DATABASE_KEEP_PLANS=false`) for a connection pooler that does not keep a session's prepared
 * statements (PgBouncer in transaction mode before 1.21).
 */
import type pg from 'pg';

/** A statement and its values. */
export type Statement = [string, unknown[]];

/** Texts whose plans may be kept. */
const KEEPABLE = new Set<string>();
/** More distinct texts than the service has: a statement whose text varied per call would not grow this without end. */
const MAX_KEPT = 64;
/** PostgreSQL's class 42, "syntax error or access rule violation": the statement cannot be prepared, now or later. */
const UNPREPARABLE = /^42/;

/** Marks `text` as a statement whose plan may be kept (its result's columns named: no `*` at the top level). */
export function kept(text: string): string {
  KEEPABLE.add(text);
  return text;
}

/** The highest `$n` in `text`: the parameters its prepared form takes. */
const parameterCount = (text: string) => Math.max(0, ...[...text.matchAll(/\$(\d+)/g)].map((match) => Number(match[1])));

export class KeptPlans {
  /** Per text: its name, or null when PostgreSQL refused to prepare it. */
  private readonly names = new Map<string, { name: string; parameters: number } | null>();
  /** Per text sent on its own: the name node-postgres prepares it under. */
  private readonly named = new Map<string, string>();
  /** Per connection (the pg client, which a reconnect replaces): the names prepared on it. */
  private readonly prepared = new WeakMap<object, Set<string>>();

  constructor(
    private readonly enabled: boolean,
    private readonly literal: (value: unknown) => string,
  ) {}

  /**
   * Prepares on `client` each kept statement of `statements` it does not have yet, a round trip each.
   * `inTransaction`: a transaction is open on it, which a refused PREPARE must not leave aborted.
   */
  async prepare(client: Pick<pg.ClientBase, 'query'>, statements: Statement[], inTransaction: boolean): Promise<void> {
    if (!this.enabled) return;
    for (const [text] of statements) {
      if (!KEEPABLE.has(text)) continue;
      let plan = this.names.get(text);
      if (plan === null) continue;
      if (plan === undefined) {
        if (this.names.size >= MAX_KEPT) continue;
        plan = { name: `vidgen_kept_${this.names.size + 1}`, parameters: parameterCount(text) };
        this.names.set(text, plan);
      }
      let done = this.prepared.get(client);
      if (done?.has(plan.name)) continue;
      const prepare = `PREPARE ${plan.name} AS ${text}`;
      try {
        await client.query(inTransaction ? `SAVEPOINT vidgen_keep;\n${prepare};\nRELEASE SAVEPOINT vidgen_keep` : prepare);
      } catch (error) {
        if (!UNPREPARABLE.test(String((error as { code?: unknown }).code))) throw error;
        if (inTransaction) await client.query('ROLLBACK TO SAVEPOINT vidgen_keep;\nRELEASE SAVEPOINT vidgen_keep');
        this.names.set(text, null);
        continue;
      }
      if (!done) this.prepared.set(client, (done = new Set()));
      done.add(plan.name);
    }
  }

  /** The statements as one message's parts: EXECUTE of a plan kept on `client`, else the text with its values written in. */
  texts(client: object, statements: Statement[]): string[] {
    const done = this.prepared.get(client);
    return statements.map(([text, values]) => {
      const plan = this.names.get(text);
      if (plan && done?.has(plan.name)) {
        return plan.parameters === 0 ? `EXECUTE ${plan.name}` : `EXECUTE ${plan.name}(${values.slice(0, plan.parameters).map(this.literal).join(', ')})`;
      }
      return text.replace(/\$(\d+)/g, (_, n: string) => this.literal(values[Number(n) - 1]));
    });
  }

  /**
   * A statement sent on its own (the extended protocol) as node-postgres takes it: a kept one named, so that
   * node-postgres parses it once per connection and sends only its values after that (`vidgen_named_…`, a
   * namespace apart from the PREPAREd ones). Only statements PostgreSQL is known to prepare are marked kept:
   * a named one it refused would fail every time.
   */
  query(text: string, values: unknown[]): { name?: string; text: string; values: unknown[] } {
    if (!this.enabled || !KEEPABLE.has(text)) return { text, values };
    let name = this.named.get(text);
    if (name === undefined) {
      if (this.named.size >= MAX_KEPT) return { text, values };
      name = `vidgen_named_${this.named.size + 1}`;
      this.named.set(text, name);
    }
    return { name, text, values };
  }

  /** How many texts have a kept plan in messages, how many PostgreSQL refused to prepare, and how many are named on their own (for tests). */
  counts(): { kept: number; refused: number; named: number } {
    let refused = 0;
    for (const plan of this.names.values()) if (plan === null) refused++;
    return { kept: this.names.size - refused, refused, named: this.named.size };
  }
}
