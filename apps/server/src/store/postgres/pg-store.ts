/**
 * The Store on PostgreSQL (`pg` with a pool): numbered migrations applied under
 * an advisory lock, every credit or status change one transaction guarded by a
 * conditional UPDATE (READ COMMITTED re-checks the condition on the locked
 * row), so concurrent API and worker processes can never charge or refund
 * twice. Jobs are enqueued through `PgJobs` in the same transactions.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { ACTIVE_STATES, CANCELLABLE_STATES, TASK_STATES, statesLeadingTo, type TaskState } from '../../domain/states.js';
import { newUlid } from '../../domain/ids.js';
import { webhookEventBody } from '../../webhooks/event.js';
import type {
  AccountRecord,
  ApiKeyRecord,
  StoredApiKey,
  CancelOutcome,
  CompleteOutcome,
  DeliveryAttempt,
  DeliveryRecord,
  DeliveryStatus,
  FailOutcome,
  LedgerEntry,
  StartOutcome,
  Store,
  SubmitOutcome,
  TaskPageQuery,
  TaskRecord,
} from '../store.js';
import { RollBack } from '../roll-back.js';
import { rowMappers, type Row } from '../rows.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Serialises migrations of processes starting at once (any constant shared by them). */
const MIGRATION_LOCK = 7_316_201;

export type Queryable = Pick<pg.PoolClient, 'query'>;

/** What the store needs of the job engine: enqueue inside the caller's transaction. */
export interface PgJobs {
  enqueue(client: Queryable, job: { kind: 'generate' | 'deliver'; taskId: string; provider: string; maxAttempts: number; runAt: Date }): Promise<void>;
  /** Drops a task's jobs in a lane that have not started yet. */
  cancelUnfinished(client: Queryable, job: { provider: string; taskId: string }): Promise<void>;
}

/** bigint (int8) columns as numbers: credits and ids stay far below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

const { toAccount, toApiKey, toTask, toDelivery, toLedgerEntry } = rowMappers({ date: (value) => (value as Date | null) ?? null, json: (value) => value });

/** A SQL list of states, from the lifecycle in domain/states.ts (the one place that knows it). */
const inList = (states: readonly TaskState[]) => `(${states.map((state) => `'${state}'`).join(', ')})`;

const SQL = {
  selectAccount: 'SELECT * FROM accounts WHERE id = $1',
  countActiveTasks: `SELECT count(*)::int AS n FROM tasks WHERE account_id = $1 AND status IN ${inList(ACTIVE_STATES)}`,
  addToBalance: 'UPDATE accounts SET balance = balance + $2 WHERE id = $1',
  // The conditional update is the whole guard against overdrafts: a concurrent charge waits for the row lock and re-checks.
  chargeBalance: 'UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance >= $2',
  insertLedgerEntry: 'INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
  selectApiKey: 'SELECT * FROM api_keys WHERE id = $1',
  selectTask: 'SELECT * FROM tasks_with_webhook WHERE account_id = $1 AND id = $2',
  selectTaskById: 'SELECT * FROM tasks_with_webhook WHERE id = $1',
  selectDelivery: 'SELECT * FROM webhook_deliveries WHERE id = $1',
  startTask: `UPDATE tasks SET status = 'processing', updated_at = $2 WHERE id = $1 AND status IN ${inList(ACTIVE_STATES)}`,
  completeTask: `UPDATE tasks SET status = 'succeeded', output_key = $3, output_url = $4, output_expires_at = $5, updated_at = $2, completed_at = $2
                 WHERE id = $1 AND status IN ${inList(statesLeadingTo('succeeded'))}`,
  failTask: `UPDATE tasks SET status = 'failed', error_code = $3, error_message = $4, credits_refunded = credits_charged, updated_at = $2, completed_at = $2
             WHERE id = $1 AND status IN ${inList(statesLeadingTo('failed'))}
             RETURNING id, account_id, credits_charged`,
  cancelTask: `UPDATE tasks SET status = 'cancelled', credits_refunded = credits_charged, updated_at = $3, completed_at = $3
               WHERE account_id = $1 AND id = $2 AND status IN ${inList(CANCELLABLE_STATES)}
               RETURNING id, account_id, credits_charged`,
  taskPage: (byStatus: boolean) => `
    SELECT * FROM tasks_with_webhook
    WHERE account_id = $1 ${byStatus ? 'AND status = $5' : ''}
      AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
    ORDER BY created_at DESC, id DESC
    LIMIT $4`,
} as const;

export class PgStore implements Store {
  readonly pool: pg.Pool;

  constructor(
    connectionString: string,
    private readonly jobs: PgJobs,
    private readonly options: { webhookJobAttempts: number; poolSize?: number } = { webhookJobAttempts: 20 },
  ) {
    this.pool = new pg.Pool({ connectionString, max: options.poolSize ?? 10, types: TYPES });
    // An idle client losing its connection must not crash the process; the next query reconnects.
    this.pool.on('error', () => {});
  }

  /** Runs `work` in one transaction on one client; rolls back on any error, or on `RollBack` with its answer. */
  async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    // A connection lost mid-transaction (a terminated backend, a failover) fails the query in flight,
    // and the client also emits 'error': unheard, that would end the process. The client is not reused.
    let lost: Error | undefined;
    const onLost = (error: Error) => (lost = error);
    client.on('error', onLost);
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      if (error instanceof RollBack) return error.outcome as T;
      throw error;
    } finally {
      client.off('error', onLost);
      client.release(lost);
    }
  }

  private async one(text: string, values: unknown[], client: Queryable = this.pool): Promise<Row | undefined> {
    return (await client.query(text, values)).rows[0];
  }

  private async all(text: string, values: unknown[], client: Queryable = this.pool): Promise<Row[]> {
    return (await client.query(text, values)).rows;
  }

  /** Applies every numbered migration not applied yet, each in its own transaction, one process at a time. */
  async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())');
      const applied = new Set((await client.query('SELECT version FROM schema_migrations')).rows.map((row) => row.version as number));
      const files = readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
      for (const file of files) {
        const version = Number(file.slice(0, 4));
        if (applied.has(version)) continue;
        await client.query(readFileSync(`${MIGRATIONS_DIR}${file}`, 'utf8'));
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [version, file]);
      }
    });
  }

  async ping(): Promise<void> {
    await this.pool.query('SELECT 1');
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }

  async createAccount(input: { id: string; name: string; webhookSecret: string; openingGrant: number; now: Date }): Promise<AccountRecord> {
    return this.transaction(async (client) => {
      await client.query('INSERT INTO accounts (id, name, balance, webhook_secret, created_at) VALUES ($1, $2, 0, $3, $4)', [
        input.id,
        input.name,
        input.webhookSecret,
        input.now,
      ]);
      if (input.openingGrant > 0) await this.grantIn(client, input.id, input.openingGrant, 'opening grant', input.now);
      return toAccount((await this.one(SQL.selectAccount, [input.id], client))!);
    });
  }

  async getAccount(id: string): Promise<AccountRecord | undefined> {
    const row = await this.one(SQL.selectAccount, [id]);
    return row && toAccount(row);
  }

  async listAccounts(): Promise<AccountRecord[]> {
    return (await this.all('SELECT * FROM accounts ORDER BY created_at, id', [])).map(toAccount);
  }

  async countAccounts(): Promise<number> {
    return Number((await this.one('SELECT count(*) AS n FROM accounts', []))!.n);
  }

  private async grantIn(client: Queryable, accountId: string, amount: number, note: string | null, now: Date): Promise<boolean> {
    if ((await client.query(SQL.addToBalance, [accountId, amount])).rowCount === 0) return false;
    await client.query(SQL.insertLedgerEntry, [accountId, 'grant', amount, null, note, now]);
    return true;
  }

  async grantCredits(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<AccountRecord | undefined> {
    return this.transaction(async (client) => {
      if (!(await this.grantIn(client, input.accountId, input.amount, input.note, input.now))) return undefined;
      return toAccount((await this.one(SQL.selectAccount, [input.accountId], client))!);
    });
  }

  async listLedger(accountId: string): Promise<LedgerEntry[]> {
    return (await this.all('SELECT * FROM ledger_entries WHERE account_id = $1 ORDER BY id', [accountId])).map(toLedgerEntry);
  }

  async auditBalance(accountId: string): Promise<{ balance: number; ledgerSum: number } | undefined> {
    const row = await this.one(
      'SELECT a.balance, (SELECT coalesce(sum(amount), 0)::bigint FROM ledger_entries l WHERE l.account_id = a.id) AS ledger_sum FROM accounts a WHERE a.id = $1',
      [accountId],
    );
    return row && { balance: row.balance, ledgerSum: row.ledger_sum };
  }

  async createApiKey(input: Omit<ApiKeyRecord, 'revokedAt'> & { hash: string }): Promise<ApiKeyRecord> {
    const row = await this.one(
      `INSERT INTO api_keys (id, account_id, hash, hint, mode, scopes, name, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING *`,
      [input.id, input.accountId, input.hash, input.hint, input.mode, input.scopes.join(' '), input.name, input.createdAt, input.expiresAt],
    );
    return toApiKey(row!);
  }

  async findApiKeyByHash(hash: string): Promise<StoredApiKey | undefined> {
    const row = await this.one('SELECT * FROM api_keys WHERE hash = $1', [hash]);
    return row && { ...toApiKey(row), hash: row.hash as string };
  }

  async listApiKeys(accountId: string): Promise<ApiKeyRecord[]> {
    return (await this.all('SELECT * FROM api_keys WHERE account_id = $1 ORDER BY created_at, id', [accountId])).map(toApiKey);
  }

  async revokeApiKey(input: { id: string; now: Date }): Promise<ApiKeyRecord | undefined> {
    const row = await this.one('UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 RETURNING *', [input.id, input.now]);
    return row && toApiKey(row);
  }

  async submitTask(input: Parameters<Store['submitTask']>[0]): Promise<SubmitOutcome> {
    const { task, idempotency, now } = input;
    return this.transaction(async (client): Promise<SubmitOutcome> => {
      if (idempotency) {
        await client.query('DELETE FROM idempotency_keys WHERE account_id = $1 AND key = $2 AND expires_at <= $3', [task.accountId, idempotency.key, now]);
        // Holding the key for this transaction: a concurrent submit with the same key waits
        // here for us to commit (then replays our answer) or roll back (then goes ahead).
        const claimed = await client.query(
          `INSERT INTO idempotency_keys (account_id, key, fingerprint, response_status, response_body, created_at, expires_at)
           VALUES ($1, $2, $3, 0, 'null', $4, $5) ON CONFLICT DO NOTHING`,
          [task.accountId, idempotency.key, idempotency.fingerprint, now, idempotency.expiresAt],
        );
        if (claimed.rowCount === 0) {
          const row = await this.one('SELECT * FROM idempotency_keys WHERE account_id = $1 AND key = $2', [task.accountId, idempotency.key], client);
          if (!row) return { kind: 'idempotency_in_progress' };
          if (row.fingerprint !== idempotency.fingerprint) return { kind: 'idempotency_key_reused' };
          return { kind: 'replayed', response: { status: row.response_status, body: row.response_body } };
        }
      }
      const charged = (await client.query(SQL.chargeBalance, [task.accountId, task.creditsCharged])).rowCount === 1;
      if (!charged) {
        // Nothing of this transaction may stay, the idempotency claim included.
        const available = (await this.one(SQL.selectAccount, [task.accountId], client))?.balance ?? 0;
        throw new RollBack<SubmitOutcome>({ kind: 'insufficient_credits', required: task.creditsCharged, available });
      }
      if (input.maxActiveTasks) {
        // The charge above locked the account's row: submissions of one account pass here one at a time.
        const active = await this.one(SQL.countActiveTasks, [task.accountId], client);
        if (active!.n >= input.maxActiveTasks) throw new RollBack<SubmitOutcome>({ kind: 'too_many_active_tasks', limit: input.maxActiveTasks });
      }
      await client.query(
        `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata,
                            webhook_url, credits_charged, deadline_at, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)`,
        [
          task.id,
          task.accountId,
          TASK_STATES.queued,
          task.model,
          task.prompt,
          task.duration,
          task.aspectRatio,
          task.resolution,
          task.mode,
          JSON.stringify(task.mediaUrls),
          task.metadata === null ? null : JSON.stringify(task.metadata),
          task.webhookUrl,
          task.creditsCharged,
          task.deadlineAt,
          now,
        ],
      );
      await client.query(SQL.insertLedgerEntry, [task.accountId, 'charge', -task.creditsCharged, task.id, null, now]);
      await this.jobs.enqueue(client, { kind: 'generate', taskId: task.id, provider: input.job.provider, maxAttempts: input.job.maxAttempts, runAt: now });
      const created = toTask((await this.one(SQL.selectTask, [task.accountId, task.id], client))!);
      const response = input.respond(created);
      if (idempotency) {
        await client.query('UPDATE idempotency_keys SET response_status = $3, response_body = $4 WHERE account_id = $1 AND key = $2', [
          task.accountId,
          idempotency.key,
          response.status,
          JSON.stringify(response.body),
        ]);
      }
      return { kind: 'created', task: created, response };
    });
  }

  async getTask(accountId: string, id: string): Promise<TaskRecord | undefined> {
    const row = await this.one(SQL.selectTask, [accountId, id]);
    return row && toTask(row);
  }

  async findTask(id: string): Promise<TaskRecord | undefined> {
    const row = await this.one(SQL.selectTaskById, [id]);
    return row && toTask(row);
  }

  async listTasks(query: TaskPageQuery): Promise<TaskRecord[]> {
    const values: unknown[] = [query.accountId, query.after?.createdAt ?? null, query.after?.id ?? null, query.limit];
    if (query.status) values.push(query.status);
    return (await this.all(SQL.taskPage(Boolean(query.status)), values)).map(toTask);
  }

  async cancelTask(input: { accountId: string; id: string; now: Date }): Promise<CancelOutcome> {
    return this.transaction(async (client): Promise<CancelOutcome> => {
      const cancelled = await this.one(SQL.cancelTask, [input.accountId, input.id, input.now], client);
      if (cancelled) {
        await this.refundIn(client, cancelled, 'cancelled', input.now);
        await this.enqueueWebhookIn(client, input.id, input.now);
        return { kind: 'cancelled', task: toTask((await this.one(SQL.selectTask, [input.accountId, input.id], client))!) };
      }
      const row = await this.one(SQL.selectTask, [input.accountId, input.id], client);
      if (!row) return { kind: 'not_found' };
      if (row.status === TASK_STATES.cancelled) return { kind: 'already_cancelled', task: toTask(row) };
      return { kind: 'invalid_state', status: row.status };
    });
  }

  /** The outbox: a terminal task with a webhookUrl gets its one event and delivery job, in the same transaction. */
  private async enqueueWebhookIn(client: Queryable, taskId: string, now: Date): Promise<void> {
    const row = (await this.one(SQL.selectTaskById, [taskId], client))!;
    if (!row.webhook_url) return;
    const { type, body } = webhookEventBody(toTask(row));
    const id = `msg_${newUlid(now.getTime())}`;
    await client.query(
      `INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at)
       VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7, $7)`,
      [id, taskId, row.account_id, row.webhook_url, type, body, now],
    );
    await this.jobs.enqueue(client, { kind: 'deliver', taskId, provider: 'webhooks', maxAttempts: this.options.webhookJobAttempts, runAt: now });
  }

  /** Gives a task's charge back; the unique ledger index makes a second refund impossible. */
  private async refundIn(client: Queryable, task: Row, note: string, now: Date): Promise<void> {
    await client.query(SQL.addToBalance, [task.account_id, task.credits_charged]);
    await client.query(SQL.insertLedgerEntry, [task.account_id, 'refund', task.credits_charged, task.id, note, now]);
  }

  async startTask(input: { id: string; now: Date }): Promise<StartOutcome> {
    return this.transaction(async (client): Promise<StartOutcome> => {
      if ((await client.query(SQL.startTask, [input.id, input.now])).rowCount === 0) {
        return { kind: 'not_startable', status: (await this.one(SQL.selectTaskById, [input.id], client))?.status };
      }
      return { kind: 'started', task: toTask((await this.one(SQL.selectTaskById, [input.id], client))!) };
    });
  }

  async completeTask(input: { id: string; now: Date; outputKey: string; outputUrl: string; outputExpiresAt: Date }): Promise<CompleteOutcome> {
    return this.transaction(async (client): Promise<CompleteOutcome> => {
      const changed = (await client.query(SQL.completeTask, [input.id, input.now, input.outputKey, input.outputUrl, input.outputExpiresAt])).rowCount === 1;
      if (changed) await this.enqueueWebhookIn(client, input.id, input.now);
      const row = await this.one(SQL.selectTaskById, [input.id], client);
      return changed && row ? { kind: 'succeeded', task: toTask(row) } : { kind: 'discarded', status: row?.status };
    });
  }

  async failTask(input: { id: string; now: Date; code: string; message: string }): Promise<FailOutcome> {
    return this.transaction(async (client): Promise<FailOutcome> => {
      const failed = await this.one(SQL.failTask, [input.id, input.now, input.code, input.message], client);
      if (!failed) return { kind: 'already_terminal', status: (await this.one(SQL.selectTaskById, [input.id], client))?.status };
      await this.refundIn(client, failed, input.code, input.now);
      await this.enqueueWebhookIn(client, input.id, input.now);
      return { kind: 'failed', task: toTask((await this.one(SQL.selectTaskById, [input.id], client))!) };
    });
  }

  async expireOverdueTasks(input: { now: Date; limit: number }): Promise<TaskRecord[]> {
    const overdue = await this.all(
      `SELECT id FROM tasks WHERE status IN ${inList(ACTIVE_STATES)} AND deadline_at <= $1 ORDER BY deadline_at LIMIT $2`,
      [input.now, input.limit],
    );
    const expired: TaskRecord[] = [];
    for (const { id } of overdue) {
      const outcome = await this.failTask({ id, now: input.now, code: 'timeout', message: 'no result within the deadline' });
      if (outcome.kind === 'failed') expired.push(outcome.task);
    }
    return expired;
  }

  async purgeExpiredIdempotencyKeys(input: { now: Date; limit: number }): Promise<number> {
    // SKIP LOCKED: a key a submission holds right now is left to it.
    const result = await this.pool.query(
      `DELETE FROM idempotency_keys WHERE (account_id, key) IN (
         SELECT account_id, key FROM idempotency_keys WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED)`,
      [input.now, input.limit],
    );
    return result.rowCount ?? 0;
  }

  async listExpiredOutputs(input: { now: Date; limit: number }): Promise<{ id: string; outputKey: string }[]> {
    const rows = await this.all(
      'SELECT id, output_key FROM tasks WHERE output_key IS NOT NULL AND output_expires_at <= $1 ORDER BY output_expires_at LIMIT $2',
      [input.now, input.limit],
    );
    return rows.map((row) => ({ id: row.id, outputKey: row.output_key }));
  }

  async clearOutputKey(id: string): Promise<void> {
    await this.pool.query('UPDATE tasks SET output_key = NULL WHERE id = $1', [id]);
  }

  async countTasksByStatus(): Promise<Record<TaskState, number>> {
    const counts = Object.fromEntries(Object.values(TASK_STATES).map((s) => [s, 0])) as Record<TaskState, number>;
    for (const row of await this.all('SELECT status, count(*)::int AS count FROM tasks GROUP BY status', [])) counts[row.status as TaskState] = row.count;
    return counts;
  }

  // --- Webhooks -------------------------------------------------------------

  async getDelivery(id: string): Promise<DeliveryRecord | undefined> {
    const row = await this.one(SQL.selectDelivery, [id]);
    return row && toDelivery(row);
  }

  async getDeliveryForTask(taskId: string): Promise<DeliveryRecord | undefined> {
    const row = await this.one('SELECT * FROM webhook_deliveries WHERE task_id = $1', [taskId]);
    return row && toDelivery(row);
  }

  async listDeliveries(accountId: string, limit: number): Promise<DeliveryRecord[]> {
    return (await this.all('SELECT * FROM webhook_deliveries WHERE account_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2', [accountId, limit])).map(
      toDelivery,
    );
  }

  async listDeliveryAttempts(deliveryId: string): Promise<DeliveryAttempt[]> {
    const rows = await this.all('SELECT * FROM webhook_attempts WHERE delivery_id = $1 ORDER BY id', [deliveryId]);
    return rows.map((r) => ({ attemptedAt: r.attempted_at, statusCode: r.status_code, error: r.error, durationMs: r.duration_ms }));
  }

  async recordDeliveryAttempt(input: { deliveryId: string; redeliveries: number; attempt: DeliveryAttempt; status: DeliveryStatus; nextAttemptAt: Date | null }): Promise<void> {
    const { attempt } = input;
    await this.transaction(async (client) => {
      await client.query('INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES ($1, $2, $3, $4, $5)', [
        input.deliveryId,
        attempt.attemptedAt,
        attempt.statusCode,
        attempt.error,
        Math.round(attempt.durationMs),
      ]);
      await client.query(
        `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $3, updated_at = $3,
                -- Settled by the attempt only if no redelivery came in since it read the delivery.
                status = CASE WHEN redeliveries = $5 THEN $2 ELSE status END,
                next_attempt_at = CASE WHEN redeliveries = $5 THEN $4 ELSE next_attempt_at END
         WHERE id = $1`,
        [input.deliveryId, input.status, attempt.attemptedAt, input.nextAttemptAt, input.redeliveries],
      );
    });
  }

  async redeliver(input: { deliveryId: string; now: Date }): Promise<DeliveryRecord | undefined> {
    return this.transaction(async (client) => {
      const row = await this.one(
        `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, updated_at = $2, redeliveries = redeliveries + 1 WHERE id = $1 RETURNING *`,
        [input.deliveryId, input.now],
        client,
      );
      if (!row) return undefined;
      // One chain of attempts per delivery: a scheduled retry, or a run under way, is replaced by this one, not doubled.
      await this.jobs.cancelUnfinished(client, { provider: 'webhooks', taskId: row.task_id });
      await this.jobs.enqueue(client, { kind: 'deliver', taskId: row.task_id, provider: 'webhooks', maxAttempts: this.options.webhookJobAttempts, runAt: input.now });
      return toDelivery(row);
    });
  }

  async webhookSecrets(accountId: string, now: Date): Promise<string[]> {
    const row = await this.one('SELECT webhook_secret, previous_webhook_secret, previous_webhook_secret_until FROM accounts WHERE id = $1', [accountId]);
    if (!row) return [];
    const previousValid = row.previous_webhook_secret && row.previous_webhook_secret_until > now;
    return previousValid ? [row.webhook_secret, row.previous_webhook_secret] : [row.webhook_secret];
  }

  async rotateWebhookSecret(input: { accountId: string; secret: string; previousValidUntil: Date }): Promise<boolean> {
    const result = await this.pool.query(
      'UPDATE accounts SET previous_webhook_secret = webhook_secret, previous_webhook_secret_until = $3, webhook_secret = $2 WHERE id = $1',
      [input.accountId, input.secret, input.previousValidUntil],
    );
    return result.rowCount === 1;
  }
}
