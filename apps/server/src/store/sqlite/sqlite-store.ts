/**
 * The Store on embedded SQLite (better-sqlite3): WAL, numbered migrations,
 * prepared statements. better-sqlite3 is synchronous, so each transaction runs
 * to its end without another request interleaving; `BEGIN IMMEDIATE` also
 * serialises writers across processes sharing the file.
 */
import Database from 'better-sqlite3';
import { mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ACTIVE_STATES, CANCELLABLE_STATES, TASK_STATES, statesLeadingTo, type TaskState } from '../../domain/states.js';
import type { Job, JobQueue } from '../../queue/queue.js';
import { newUlid } from '../../domain/ids.js';
import { webhookEventBody } from '../../webhooks/event.js';
import { pageKeyId } from '../../domain/task-view.js';
import type {
  AccountRecord,
  ApiKeyRecord,
  StoredApiKey,
  CancelOutcome,
  DeliveryAttempt,
  DeliveryRecord,
  PendingDelivery,
  DeliveryStatus,
  CompleteOutcome,
  FailOutcome,
  StartOutcome,
  LedgerEntry,
  Store,
  SubmitOutcome,
  TaskPageEntry,
  TaskPageQuery,
  TaskRecord,
  ReserveUpstreamOutcome,
  UpstreamChannelRecord,
  UpstreamOutcome,
  UpstreamTaskRecord,
  UpstreamUsage,
  UpstreamUsageRow,
  UsageHour,
} from '../store.js';
import { SETTLES_NOTHING } from '../store.js';
import { RollBack } from '../roll-back.js';
import { GroupCommit } from './group-commit.js';
import { PendingUsage, type UsageColumn } from './pending-usage.js';
import { viewedRows } from './row-views.js';
import { newDeliveryRecord, newTaskRecord, rowMappers, type Row } from '../rows.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));


const ms = (date: Date | null | undefined) => (date ? date.getTime() : null);

/** A job's id names its claim too (`<row id>.<claim>`): only the claim that holds a job can finish it. */
const toJob = (row: Row): Job => ({ id: `${row.id}.${row.claims}`, taskId: row.task_id, kind: row.kind, provider: row.provider, attempts: row.attempts, maxAttempts: row.max_attempts });

const { toAccount, toApiKey, toTask, toDelivery, toLedgerEntry, toUpstreamTask, toUpstreamChannel, toUpstreamUsageRow, toUsageHour } = rowMappers({ date: (value) => (value === null || value === undefined ? null : new Date(value as number)), json: (value) => JSON.parse(value as string) });

export class SqliteStore implements Store, JobQueue {
  readonly db: Database.Database;
  private readonly sql: ReturnType<typeof prepareStatements>;
  /** Every method reads and writes through it: the writes of one turn of the event loop share one commit (group-commit.ts). */
  private readonly group: GroupCommit;
  /** Usage totals of the open batch, written as it commits. */
  private readonly usage: PendingUsage;

  /** Claims of a delivery job before it is given up (its retries are scheduled, not counted here). */
  private readonly webhookJobAttempts: number;

  /**
   * `webhookJobAttempts`: claims of a delivery job before it is given up (default 20). `cacheMb`: SQLite's page cache,
   * MiB (default 2, SQLite's own; config.ts's VIDGEN_SQLITE_CACHE_MB). `mmapMb`: the first MiB of the file read through
   * a memory map (default 0, off; VIDGEN_SQLITE_MMAP_MB).
   */
  constructor(path: string, options: { webhookJobAttempts?: number; cacheMb?: number; mmapMb?: number } = {}) {
    this.webhookJobAttempts = options.webhookJobAttempts ?? 20;
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
    this.db.pragma('busy_timeout = 5000');
    // Every write is a savepoint in the turn's transaction (group-commit.ts), and SQLite keeps the pages a savepoint
    // changes in a journal of its own to roll it back: in a temporary file, a write() per page, unless temporary
    // storage is memory. That journal only ever serves a rollback inside a live transaction (the WAL keeps commits
    // safe), so nothing durable is lost; a submission's statements took 60 µs with it on file, 24 µs in memory.
    this.db.pragma('temp_store = MEMORY');
    // The pages reads keep coming back to, kept in this process rather than left to the operating system's page cache,
    // which on some hosts gives up a page it has not seen used for a minute however much memory is free: there a read of
    // a large store goes to the disk. With 10,000 random tasks of 10⁶ read again and again, a task query answered 13-24 %
    // fewer requests a second than at 10³ with SQLite's 2 MiB and 64 MiB, 3 % with 128 MiB, the pages read fitting in it.
    // It grows as pages are read or written, up to this: memory an operator sizes to the store's busy pages (BENCHMARKS.md).
    this.db.pragma(`cache_size = ${-Math.round((options.cacheMb ?? 2) * 1024)}`);
    // Pages read through a memory map instead: the operating system's own page cache, shared and given back under memory
    // pressure, but kept while the mapping uses them. The host above dropped pages read with read() (its reclaim keeps a
    // page it finds referenced by a mapping, and not one only read): with the 10⁶-task store mapped, no read went to the
    // disk at all, and the GET's p99 at 10⁶ tasks came to 1.11 × the small store's, against 1.30-1.69 × with read()
    // (BENCHMARKS.md, twenty-ninth pass). The pages used count in the process's RSS (why it is off by default: a server
    // whose store had grown to 219,000 queued tasks held 259 MB, thirtieth pass); SQLite writes through the WAL as before,
    // and a read error of the disk under the map is a SIGBUS rather than an error answer.
    if (options.mmapMb) this.db.pragma(`mmap_size = ${options.mmapMb * 1024 * 1024}`);
    this.migrateNow();
    this.sql = prepareStatements(this.db);
    this.usage = new PendingUsage({ hourly: this.sql.addUsage, daily: this.sql.addUsageDaily });
    this.group = new GroupCommit(this.db, this.usage);
  }

  /** Applies every numbered migration not applied yet, each in its own transaction. */
  private migrateNow(): void {
    this.db.exec('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT');
    const applied = new Set(this.db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
    const files = readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
    for (const file of files) {
      const version = Number(file.slice(0, 4));
      if (applied.has(version)) continue;
      const script = readFileSync(`${MIGRATIONS_DIR}${file}`, 'utf8');
      this.db.transaction(() => {
        this.db.exec(script);
        this.db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(version, file, Date.now());
      }).immediate();
    }
  }

  migrate(): Promise<void> {
    return this.group.write(() => this.migrateNow());
  }

  ping(): Promise<void> {
    return this.group.read(() => void this.sql.ping.get());
  }

  async close(): Promise<void> {
    if (!this.db.open) return;
    this.group.flush();
    this.db.close();
  }

  createAccount(input: { id: string; name: string; webhookSecret: string; openingGrant: number; now: Date }): Promise<AccountRecord> {
    return this.group.write(() => {
      this.sql.insertAccount.run({ id: input.id, name: input.name, webhook_secret: input.webhookSecret, created_at: ms(input.now) });
      if (input.openingGrant > 0) this.grantNow(input.id, input.openingGrant, 'opening grant', input.now);
      return toAccount(this.sql.selectAccount.get(input.id) as Row);
    });
  }

  getAccount(id: string): Promise<AccountRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectAccount.get(id) as Row | undefined;
      return row && toAccount(row);
    });
  }

  listAccounts(): Promise<AccountRecord[]> {
    return this.group.read(() => (this.sql.selectAccounts.all() as Row[]).map(toAccount));
  }

  countAccounts(): Promise<number> {
    return this.group.read(() => this.sql.countAccounts.pluck().get() as number);
  }

  private grantNow(accountId: string, amount: number, note: string | null, now: Date): boolean {
    if (this.sql.addToBalance.run({ id: accountId, amount }).changes === 0) return false;
    this.insertLedgerEntry(accountId, 'grant', amount, null, note, now);
    return true;
  }

  grantCredits(input: { accountId: string; amount: number; note: string | null; now: Date }): Promise<AccountRecord | undefined> {
    return this.group.write(() => {
      if (!this.grantNow(input.accountId, input.amount, input.note, input.now)) return undefined;
      return toAccount(this.sql.selectAccount.get(input.accountId) as Row);
    });
  }

  listLedger(accountId: string): Promise<LedgerEntry[]> {
    return this.group.read(() => (this.sql.selectLedger.all(accountId) as Row[]).map(toLedgerEntry));
  }

  listLedgerPage(query: { accountId: string; limit: number; beforeId?: number; kind?: LedgerEntry['kind']; taskId?: string }): Promise<LedgerEntry[]> {
    return this.group.read(() =>
      (
        this.sql.selectLedgerPage.all({
          account_id: query.accountId,
          before_id: query.beforeId ?? null,
          kind: query.kind ?? null,
          task_id: query.taskId ?? null,
          limit: query.limit,
        }) as Row[]
      ).map(toLedgerEntry),
    );
  }

  accountSummary(accountId: string): Promise<{ account: AccountRecord; creditsHeld: number; activeTasks: number } | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectAccount.get(accountId) as Row | undefined;
      if (!row) return undefined;
      const held = this.sql.selectCreditsHeld.get(accountId) as Row;
      return { account: toAccount(row), creditsHeld: held.held, activeTasks: held.active };
    });
  }

  usageHours(query: { accountId: string; from: Date; to: Date }): Promise<UsageHour[]> {
    return this.group.read(() => {
      // An open batch's totals first (usage rows are written as a batch commits; this read may be part of one).
      this.usage.writeNow();
      return (this.sql.selectUsageHours.all({ account_id: query.accountId, from: ms(query.from), to: ms(query.to) }) as Row[]).map(toUsageHour);
    });
  }

  usageTotals(query: { accountId: string; from: Date; to: Date; bucketMs: number; byModel: boolean }): Promise<UsageHour[]> {
    return this.group.read(() => {
      this.usage.writeNow();
      // Whole days come from the daily totals (a row per day and model), anything finer from the hourly ones.
      const statement = query.bucketMs % 86_400_000 === 0 ? this.sql.selectUsageTotalsByDay : this.sql.selectUsageTotals;
      const rows = statement.all({
        account_id: query.accountId,
        from: ms(query.from),
        to: ms(query.to),
        bucket_ms: query.bucketMs,
        by_model: query.byModel ? 1 : 0,
      }) as Row[];
      return rows.map(toUsageHour);
    });
  }

  auditBalance(accountId: string): Promise<{ balance: number; ledgerSum: number } | undefined> {
    return this.group.read(() => {
      const row = this.sql.auditBalance.get(accountId) as Row | undefined;
      return row && { balance: row.balance, ledgerSum: row.ledger_sum };
    });
  }

  createApiKey(input: Omit<ApiKeyRecord, 'revokedAt'> & { hash: string }): Promise<ApiKeyRecord> {
    return this.group.write(() => {
      this.sql.insertApiKey.run({
        id: input.id,
        account_id: input.accountId,
        hash: input.hash,
        hint: input.hint,
        mode: input.mode,
        scopes: input.scopes.join(' '),
        name: input.name,
        created_at: ms(input.createdAt),
        expires_at: ms(input.expiresAt),
      });
      return toApiKey(this.sql.selectApiKey.get(input.id) as Row);
    });
  }

  findApiKeyByHash(hash: string): Promise<StoredApiKey | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectApiKeyByHash.get(hash) as Row | undefined;
      return row && { ...toApiKey(row), hash: row.hash as string };
    });
  }

  listApiKeys(accountId: string): Promise<ApiKeyRecord[]> {
    return this.group.read(() => (this.sql.selectApiKeys.all(accountId) as Row[]).map(toApiKey));
  }

  revokeApiKey(input: { id: string; now: Date }): Promise<ApiKeyRecord | undefined> {
    return this.group.write(() => {
      this.sql.revokeApiKey.run({ id: input.id, revoked_at: ms(input.now) });
      const row = this.sql.selectApiKey.get(input.id) as Row | undefined;
      return row && toApiKey(row);
    });
  }

  submitTask(input: Parameters<Store['submitTask']>[0]): Promise<SubmitOutcome> {
    return this.group.write(() => this.submitTaskNow(input)).catch((error: unknown) => {
      if (error instanceof RollBack) return error.outcome as SubmitOutcome;
      throw error;
    });
  }

  private submitTaskNow(input: Parameters<Store['submitTask']>[0]): SubmitOutcome {
    const { task, idempotency, now } = input;
    if (idempotency) {
      this.sql.deleteExpiredIdempotencyKey.run({ account_id: task.accountId, key: idempotency.key, now: ms(now) });
      const claimed = this.sql.selectIdempotencyKey.get({ account_id: task.accountId, key: idempotency.key }) as Row | undefined;
      if (claimed) {
        if (claimed.state !== 'done') return { kind: 'idempotency_in_progress' };
        if (claimed.fingerprint !== idempotency.fingerprint) return { kind: 'idempotency_key_reused' };
        return { kind: 'replayed', response: { status: claimed.response_status, body: JSON.parse(claimed.response_body) } };
      }
    }
    if (this.sql.chargeBalance.run(task.creditsCharged, task.accountId, task.creditsCharged).changes !== 1) {
      const available = (this.sql.selectAccount.get(task.accountId) as Row | undefined)?.balance ?? 0;
      return { kind: 'insufficient_credits', required: task.creditsCharged, available };
    }
    // After the charge, as on PostgreSQL: short of credits is answered before the cap; over it, the charge is undone.
    if (input.maxActiveTasks && (this.sql.countActiveTasks.get(task.accountId) as number) >= input.maxActiveTasks) {
      throw new RollBack<SubmitOutcome>({ kind: 'too_many_active_tasks', limit: input.maxActiveTasks });
    }
    const mediaUrls = JSON.stringify(task.mediaUrls);
    const metadata = task.metadata === null ? null : JSON.stringify(task.metadata);
    const at = ms(now);
    // In insertTask's column order.
    this.sql.insertTask.run(task.id, task.accountId, TASK_STATES.queued, task.model, task.prompt, task.duration, task.aspectRatio, task.resolution, task.mode,
      mediaUrls, metadata, task.webhookUrl, task.creditsCharged, ms(task.deadlineAt), at, at);
    this.addUsageNow(task.accountId, task.model, now, { credits_charged: task.creditsCharged });
    this.sql.insertJob.run(task.id, input.job.provider, input.job.maxAttempts, at, at, at);
    this.insertLedgerEntry(task.accountId, 'charge', -task.creditsCharged, task.id, null, now);
    const created = newTaskRecord(task, now, { mediaUrls, metadata });
    const response = input.respond(created);
    if (idempotency) {
      this.sql.insertIdempotencyKey.run({
        account_id: task.accountId,
        key: idempotency.key,
        fingerprint: idempotency.fingerprint,
        response_status: response.status,
        response_body: JSON.stringify(response.body),
        created_at: ms(now),
        expires_at: ms(idempotency.expiresAt),
      });
    }
    return { kind: 'created', task: created, response };
  }

  getTask(accountId: string, id: string): Promise<TaskRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectTask.get(accountId, id) as Row | undefined;
      return row && toTask(row);
    });
  }

  findTask(id: string): Promise<TaskRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectTaskById.get(id) as Row | undefined;
      return row && toTask(row);
    });
  }

  listTasks(query: TaskPageQuery): Promise<TaskRecord[]> {
    return this.group.read(() => {
      const params = {
        account_id: query.accountId,
        status: query.status ?? null,
        after_created_at: query.after ? ms(query.after.createdAt) : null,
        after_id: query.after?.id ?? null,
        limit: query.limit,
      };
      const statement = query.status ? this.sql.selectTaskPageByStatus : this.sql.selectTaskPage;
      return (statement.all(params) as Row[]).map(toTask);
    });
  }

  listTaskPage<Known>(query: TaskPageQuery, known: (key: string) => Known | undefined): Promise<TaskPageEntry<Known>[]> {
    return this.group.read(() => {
      const after = query.after ? ms(query.after.createdAt) : null;
      const afterId = query.after?.id ?? null;
      const keys = (
        query.status
          ? this.sql.selectTaskPageKeysByStatus.all(query.accountId, query.status, after, after, after, afterId, query.limit)
          : this.sql.selectTaskPageKeys.all(query.accountId, after, after, after, afterId, query.limit)
      ) as string[];
      return keys.map((key): TaskPageEntry<Known> => {
        const kept = known(key);
        // The record in the same read transaction as the key: the one it describes.
        return kept === undefined ? { key, task: toTask(this.sql.selectTaskById.get(pageKeyId(key)) as Row) } : { key, known: kept };
      });
    });
  }

  cancelTask(input: { accountId: string; id: string; now: Date }): Promise<CancelOutcome> {
    return this.group.write(() => this.cancelTaskNow(input));
  }

  private cancelTaskNow(input: { accountId: string; id: string; now: Date }): CancelOutcome {
    const key = [input.accountId, input.id] as const;
    const row = this.sql.selectTask.get(...key) as Row | undefined;
    if (!row) return { kind: 'not_found' };
    const status = row.status as TaskState;
    if (status === TASK_STATES.cancelled) return { kind: 'already_cancelled', task: toTask(row) };
    if (!CANCELLABLE_STATES.includes(status)) return { kind: 'invalid_state', status };
    this.sql.cancelTask.run({ id: input.id, now: ms(input.now) });
    this.refundNow(row, 'cancelled', input.now);
    this.addUsageNow(row.account_id, row.model, input.now, { credits_refunded: row.credits_charged, cancelled: 1 });
    // Its upstream task, if any, is stopped (queued upstream) or its result discarded: the follower looks now.
    this.sql.upstreamDueNow.run({ task_id: input.id, now: ms(input.now) });
    // The answer shows the delivery enqueued with it.
    return { kind: 'cancelled', task: this.enqueueWebhookNow(toTask(this.sql.selectTask.get(...key) as Row), input.now).task };
  }

  /**
   * The outbox: a terminal task with a webhookUrl gets its one event and delivery job, in the same transaction. `task`:
   * the task as it now is, without a delivery, a record made for this answer (every caller's own): answered with the
   * delivery it has then, set on it rather than on a copy (a task's record is held until its webhook's attempt ends).
   * `hold`: the delivery job written already claimed by that worker, leased until `leaseUntil` (completeTask's
   * holdDelivery), and its claim answered.
   */
  private enqueueWebhookNow(
    task: TaskRecord,
    now: Date,
    hold?: { leaseUntil: Date; workerId: string },
  ): { task: TaskRecord; heldDelivery?: string; pendingDelivery?: PendingDelivery } {
    if (!task.webhookUrl) return { task };
    const { type, body } = webhookEventBody(task);
    const delivery = { id: `msg_${newUlid(now.getTime())}`, task_id: task.id, account_id: task.accountId, url: task.webhookUrl, event_type: type, body, now: ms(now) };
    const job = { task_id: task.id, max_attempts: this.webhookJobAttempts, now: ms(now) };
    task.webhook = { status: 'pending', attempts: 0, lastAttemptAt: null };
    if (!hold) {
      this.sql.insertDelivery.run(delivery);
      this.sql.insertDeliveryJob.run(job);
      return { task };
    }
    // The delivery as it was written, mapped as pendingDelivery maps it, with the secrets pendingDelivery would read: built
    // from what was written, not read back (its body a second copy of the event's, held by the task's attempt).
    this.sql.insertDelivery.run(delivery);
    const written = newDeliveryRecord(delivery.id, task, task.webhookUrl, type, body, now);
    const jobId = this.sql.insertHeldDeliveryJob.get({ ...job, worker: hold.workerId, lease_until: ms(hold.leaseUntil) }) as number;
    // Its first claim (toJob's "<id>.<claim>").
    return { task, heldDelivery: `${jobId}.1`, pendingDelivery: { delivery: written, secrets: this.secretsOf(task.accountId, now) } };
  }

  /** Adds to the account's running usage totals of `now`'s hour and day for the model (usage_hourly, usage_daily), as its batch commits. */
  private addUsageNow(accountId: string, model: string, now: Date, add: Partial<Record<UsageColumn, number>>): void {
    this.usage.add(accountId, model, now.getTime(), add);
  }

  /** Gives a task's charge back; the unique ledger index makes a second refund impossible. */
  private refundNow(task: Row, note: string, now: Date): void {
    this.sql.addToBalance.run({ id: task.account_id, amount: task.credits_charged });
    this.insertLedgerEntry(task.account_id, 'refund', task.credits_charged, task.id, note, now);
  }

  /** A ledger entry, written after the balance moved in the same transaction: it keeps the balance it left. */
  private insertLedgerEntry(accountId: string, kind: LedgerEntry['kind'], amount: number, taskId: string | null, note: string | null, now: Date): void {
    this.sql.insertLedgerEntry.run(accountId, kind, amount, taskId, note, ms(now), accountId);
  }

  startTask(input: { id: string; now: Date }): Promise<StartOutcome> {
    return this.group.write(() => this.startTaskNow(input.id, input.now));
  }

  /** The started task as its move returns it: an active task has no delivery yet, so its row is all tasks_with_webhook would show. */
  private startTaskNow(id: string, now: Date): StartOutcome {
    const started = this.sql.startTask.get({ id, now: ms(now) });
    if (started) return { kind: 'started', task: toTask(started) };
    return { kind: 'not_startable', status: (this.sql.selectTaskById.get(id) as Row | undefined)?.status };
  }

  completeTask(input: Parameters<Store['completeTask']>[0]): Promise<CompleteOutcome> {
    return this.group.write(() => this.completeTaskNow(input));
  }

  /**
   * With `started`, while the task is still as its start left it (processing, with the start's updated_at), the moved
   * task is known without reading it back: the completion is its writes only. Otherwise (changed since, or no `started`)
   * the task is moved if it can be and read.
   */
  private completeTaskNow(input: Parameters<Store['completeTask']>[0]): CompleteOutcome {
    const { started } = input;
    const output = { id: input.id, now: ms(input.now), output_key: input.outputKey, output_url: input.outputUrl, output_expires_at: ms(input.outputExpiresAt) };
    let moved: TaskRecord | undefined;
    if (started?.status === TASK_STATES.processing && this.sql.completeUnchanged.run({ ...output, started_at: ms(started.updatedAt) }).changes === 1) {
      moved = { ...started, status: 'succeeded', outputKey: input.outputKey, outputUrl: input.outputUrl, outputExpiresAt: input.outputExpiresAt, updatedAt: input.now, completedAt: input.now, webhook: null };
    } else if (this.sql.completeTask.run(output).changes === 1) {
      moved = toTask(this.sql.selectTaskById.get(input.id) as Row);
    }
    if (!moved) return { kind: 'discarded', status: (this.sql.selectTaskById.get(input.id) as Row | undefined)?.status };
    const { task, heldDelivery, pendingDelivery } = this.enqueueWebhookNow(moved, input.now, input.holdDelivery);
    if (input.job) this.sql.finishJob.run({ ...claimOf(input.job), state: 'done', error: null, now: ms(input.now) });
    this.addUsageNow(task.accountId, task.model, input.now, { succeeded: 1, seconds_delivered: task.duration });
    return heldDelivery ? { kind: 'succeeded', task, heldDelivery, pendingDelivery } : { kind: 'succeeded', task };
  }

  failTask(input: { id: string; now: Date; code: string; message: string }): Promise<FailOutcome> {
    return this.group.write(() => this.failTaskNow(input));
  }

  private failTaskNow(input: { id: string; now: Date; code: string; message: string }): FailOutcome {
    const changed = this.sql.failTask.run({ id: input.id, now: ms(input.now), code: input.code, message: input.message }).changes;
    const row = this.sql.selectTaskById.get(input.id) as Row | undefined;
    if (changed === 0 || !row) return { kind: 'already_terminal', status: row?.status };
    this.refundNow(row, input.code, input.now);
    this.addUsageNow(row.account_id, row.model, input.now, { credits_refunded: row.credits_charged, failed: 1 });
    const { task } = this.enqueueWebhookNow(toTask(row), input.now);
    this.sql.upstreamDueNow.run({ task_id: input.id, now: ms(input.now) });
    return { kind: 'failed', task };
  }

  async expireOverdueTasks(input: { now: Date; limit: number }): Promise<TaskRecord[]> {
    const overdue = await this.group.read(() => this.sql.selectOverdueTasks.pluck().all({ now: ms(input.now), limit: input.limit }) as string[]);
    const expired: TaskRecord[] = [];
    for (const id of overdue) {
      const outcome = await this.failTask({ id, now: input.now, code: 'timeout', message: 'no result within the deadline' });
      if (outcome.kind === 'failed') expired.push(outcome.task);
    }
    return expired;
  }

  purgeExpiredIdempotencyKeys(input: { now: Date; limit: number }): Promise<number> {
    return this.group.write(() => this.sql.purgeExpiredIdempotencyKeys.run({ now: ms(input.now), limit: input.limit }).changes);
  }

  listExpiredOutputs(input: { now: Date; limit: number }): Promise<{ id: string; outputKey: string }[]> {
    return this.group.read(() => (this.sql.selectExpiredOutputs.all({ now: ms(input.now), limit: input.limit }) as Row[]).map((r) => ({ id: r.id, outputKey: r.output_key })));
  }

  clearOutputKey(id: string): Promise<void> {
    return this.group.write(() => void this.sql.clearOutputKey.run(id));
  }

  // --- Webhooks -------------------------------------------------------------

  getDelivery(id: string): Promise<DeliveryRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectDelivery.get(id) as Row | undefined;
      return row && toDelivery(row);
    });
  }

  getDeliveryForTask(taskId: string): Promise<DeliveryRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectDeliveryForTask.get(taskId) as Row | undefined;
      return row && toDelivery(row);
    });
  }

  listDeliveries(accountId: string, limit: number): Promise<DeliveryRecord[]> {
    return this.group.read(() => (this.sql.selectDeliveries.all({ account_id: accountId, limit }) as Row[]).map(toDelivery));
  }

  listDeliveriesPage(query: { accountId: string; limit: number; status?: DeliveryStatus; taskId?: string; after?: { createdAt: Date; id: string } }): Promise<DeliveryRecord[]> {
    return this.group.read(() =>
      (
        this.sql.selectDeliveriesPage.all({
          account_id: query.accountId,
          status: query.status ?? null,
          task_id: query.taskId ?? null,
          after_created_at: query.after ? ms(query.after.createdAt) : null,
          after_id: query.after?.id ?? null,
          limit: query.limit,
        }) as Row[]
      ).map(toDelivery),
    );
  }

  webhookSecretState(accountId: string, now: Date): Promise<{ secret: string; previousSecretValidUntil: Date | null } | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectWebhookSecrets.get(accountId) as Row | undefined;
      if (!row) return undefined;
      const until = row.previous_webhook_secret && row.previous_webhook_secret_until > now.getTime() ? new Date(row.previous_webhook_secret_until) : null;
      return { secret: row.webhook_secret, previousSecretValidUntil: until };
    });
  }

  listDeliveryAttempts(deliveryId: string): Promise<DeliveryAttempt[]> {
    return this.group.read(() =>
      (this.sql.selectDeliveryAttempts.all(deliveryId) as Row[]).map((r) => ({
        attemptedAt: new Date(r.attempted_at),
        statusCode: r.status_code,
        error: r.error,
        durationMs: r.duration_ms,
      })),
    );
  }

  recordDeliveryAttempt(input: { deliveryId: string; redeliveries: number; attempt: DeliveryAttempt; status: DeliveryStatus; nextAttemptAt: Date | null; job?: { id: string; now: Date } }): Promise<boolean> {
    return this.group.write(() => {
      const { attempt } = input;
      // The claim's job completed in the same write; a claim that no longer holds it has the attempt counted, settling nothing.
      const held = !input.job || this.sql.finishJob.run({ ...claimOf(input.job.id), state: 'done', error: null, now: ms(input.job.now) }).changes === 1;
      this.sql.insertDeliveryAttempt.run({
        delivery_id: input.deliveryId,
        attempted_at: ms(attempt.attemptedAt),
        status_code: attempt.statusCode,
        error: attempt.error,
        duration_ms: attempt.durationMs,
      });
      this.sql.updateDelivery.run({
        id: input.deliveryId,
        redeliveries: held ? input.redeliveries : SETTLES_NOTHING,
        status: input.status,
        attempted_at: ms(attempt.attemptedAt),
        next_attempt_at: ms(input.nextAttemptAt),
      });
      return held;
    });
  }

  redeliver(input: { deliveryId: string; now: Date }): Promise<DeliveryRecord | undefined> {
    return this.group.write(() => {
      const row = this.sql.selectDelivery.get(input.deliveryId) as Row | undefined;
      if (!row) return undefined;
      this.sql.resetDelivery.run({ id: input.deliveryId, now: ms(input.now) });
      this.sql.resetDeliveryJob.run({ task_id: row.task_id, now: ms(input.now) });
      return toDelivery(this.sql.selectDelivery.get(input.deliveryId) as Row);
    });
  }

  webhookSecrets(accountId: string, now: Date): Promise<string[]> {
    return this.group.read(() => this.secretsOf(accountId, now));
  }

  private secretsOf(accountId: string, now: Date): string[] {
    const row = this.sql.selectWebhookSecrets.get(accountId) as Row | undefined;
    if (!row) return [];
    const previousValid = row.previous_webhook_secret && row.previous_webhook_secret_until > now.getTime();
    return previousValid ? [row.webhook_secret, row.previous_webhook_secret] : [row.webhook_secret];
  }

  pendingDelivery(taskId: string, now: Date): Promise<PendingDelivery | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectDeliveryForTask.get(taskId) as Row | undefined;
      if (!row || row.status !== 'pending') return undefined;
      return { delivery: toDelivery(row), secrets: this.secretsOf(row.account_id, now) };
    });
  }

  rotateWebhookSecret(input: { accountId: string; secret: string; previousValidUntil: Date }): Promise<boolean> {
    return this.group.write(() => this.sql.rotateWebhookSecret.run({ id: input.accountId, secret: input.secret, until: ms(input.previousValidUntil) }).changes === 1);
  }

  // --- Upstream tasks ---------------------------------------------------------

  reserveUpstream(input: { taskId: string; channels: { name: string; limit: number }[]; now: Date }): Promise<ReserveUpstreamOutcome> {
    return this.group.write((): ReserveUpstreamOutcome => {
      const existing = this.sql.selectUpstreamTask.get(input.taskId) as Row | undefined;
      if (existing) return { kind: 'exists', upstream: toUpstreamTask(existing) };
      const task = this.sql.selectTaskById.get(input.taskId) as Row | undefined;
      if (task?.status !== TASK_STATES.queued) return { kind: 'not_queued', status: task?.status };
      for (const channel of input.channels) {
        if ((this.sql.countUpstreamInFlight.get(channel.name) as number) >= channel.limit) continue;
        this.sql.insertUpstreamChannel.run(channel.name);
        this.sql.insertUpstreamTask.run({ task_id: input.taskId, channel: channel.name, now: ms(input.now) });
        return { kind: 'reserved', channel: channel.name, task: toTask(task) };
      }
      return { kind: 'full' };
    });
  }

  releaseUpstreamReservation(input: { taskId: string; channel: string; error: string; now: Date; countFailure: boolean; cooldownAfter: number; cooldownMs: number }): Promise<void> {
    return this.group.write(() => {
      this.sql.deleteUpstreamReservation.run({ task_id: input.taskId, channel: input.channel });
      if (!input.countFailure) return;
      this.sql.insertUpstreamChannel.run(input.channel);
      this.sql.recordChannelFailure.run({
        name: input.channel,
        error: input.error,
        now: ms(input.now),
        after: input.cooldownAfter,
        cooldown_until: input.now.getTime() + input.cooldownMs,
      });
    });
  }

  recordUpstreamCreated(input: { taskId: string; upstreamId: string; now: Date; nextCheckAt: Date }): Promise<{ task: TaskRecord | undefined; started: boolean }> {
    return this.group.write(() => {
      const row = this.sql.selectUpstreamTask.get(input.taskId) as Row | undefined;
      if (!row || row.state !== 'creating') throw new Error(`upstream task of ${input.taskId} is not being created`);
      const started = this.sql.startQueuedTask.run({ id: input.taskId, now: ms(input.now) }).changes === 1;
      // A task that ended while its create was on the wire: the follower cancels it upstream at once.
      const nextCheckAt = started ? input.nextCheckAt : input.now;
      this.sql.recordUpstreamCreated.run({ task_id: input.taskId, upstream_id: input.upstreamId, now: ms(input.now), next_check_at: ms(nextCheckAt) });
      this.sql.recordChannelCreate.run(row.channel);
      const task = this.sql.selectTaskById.get(input.taskId) as Row | undefined;
      return { task: task && toTask(task), started };
    });
  }

  endUpstream(input: Parameters<Store['endUpstream']>[0]): Promise<{ task: TaskRecord | undefined; changed: boolean; outcome: UpstreamOutcome }> {
    return this.group.write(() => {
      const row = this.sql.selectUpstreamTask.get(input.taskId) as Row | undefined;
      if (!row) throw new Error(`no upstream task for ${input.taskId}`);
      let outcome = input.outcome;
      let changed = false;
      if (input.complete) {
        changed = this.completeTaskNow({ id: input.taskId, now: input.now, ...input.complete }).kind === 'succeeded';
        if (!changed) outcome = 'discarded';
      } else if (input.fail) {
        changed = this.failTaskNow({ id: input.taskId, now: input.now, ...input.fail }).kind === 'failed';
      }
      if (row.state !== 'ended') {
        this.sql.endUpstreamTask.run({
          task_id: input.taskId,
          outcome,
          upstream_status: input.upstreamStatus ?? null,
          error: input.error ?? null,
          now: ms(input.now),
        });
        this.sql.countChannelOutcome.run({ name: row.channel, lost: outcome === 'lost' ? 1 : 0, discarded: outcome === 'discarded' ? 1 : 0 });
      }
      const task = this.sql.selectTaskById.get(input.taskId) as Row | undefined;
      return { task: task && toTask(task), changed, outcome };
    });
  }

  claimUpstreamWork(input: { kind: 'check' | 'download'; workerId: string; now: Date; leaseMs: number; limit: number }): Promise<UpstreamTaskRecord[]> {
    if (input.limit < 1) return Promise.resolve([]);
    return this.group.write(() => {
      const ids = this.sql.claimUpstreamWork.pluck().all({
        state: input.kind === 'check' ? 'following' : 'downloading',
        worker: input.workerId,
        now: ms(input.now),
        lease_until: input.now.getTime() + input.leaseMs,
        limit: input.limit,
      }) as string[];
      return ids.map((id) => toUpstreamTask(this.sql.selectUpstreamTask.get(id) as Row));
    });
  }

  extendUpstreamLease(input: { taskId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean> {
    return this.group.write(
      () => this.sql.extendUpstreamLease.run({ task_id: input.taskId, worker: input.workerId, lease_until: input.now.getTime() + input.leaseMs }).changes === 1,
    );
  }

  recordUpstreamChecks(input: { workerId: string; now: Date; checks: { taskId: string; upstreamStatus: string; nextCheckAt: Date; error?: string }[] }): Promise<void> {
    if (input.checks.length === 0) return Promise.resolve();
    return this.group.write(() => {
      for (const check of input.checks) {
        this.sql.recordUpstreamCheck.run({
          task_id: check.taskId,
          worker: input.workerId,
          upstream_status: check.upstreamStatus,
          next_check_at: ms(check.nextCheckAt),
          error: check.error ?? null,
          now: ms(input.now),
        });
      }
    });
  }

  markUpstreamSucceeded(input: { taskId: string; videoUrl: string; usage: UpstreamUsage | null; now: Date }): Promise<void> {
    return this.group.write(
      () =>
        void this.sql.markUpstreamSucceeded.run({
          task_id: input.taskId,
          video_url: input.videoUrl,
          completion_tokens: input.usage?.completionTokens ?? null,
          total_tokens: input.usage?.totalTokens ?? null,
          now: ms(input.now),
        }),
    );
  }

  retryUpstreamDownload(input: { taskId: string; now: Date; nextAt: Date; error: string }): Promise<void> {
    return this.group.write(() => void this.sql.retryUpstreamDownload.run({ task_id: input.taskId, next_at: ms(input.nextAt), error: input.error, now: ms(input.now) }));
  }

  requestUpstreamCheck(input: { taskId: string; now: Date }): Promise<boolean> {
    return this.group.write(() => this.sql.requestUpstreamCheck.run({ task_id: input.taskId, now: ms(input.now) }).changes === 1);
  }

  getUpstreamTask(taskId: string): Promise<UpstreamTaskRecord | undefined> {
    return this.group.read(() => {
      const row = this.sql.selectUpstreamTask.get(taskId) as Row | undefined;
      return row && toUpstreamTask(row);
    });
  }

  listUpstreamChannels(): Promise<UpstreamChannelRecord[]> {
    return this.group.read(() => (this.sql.selectUpstreamChannels.all() as Row[]).map(toUpstreamChannel));
  }

  upstreamUsageReport(input: { from: Date; to: Date }): Promise<UpstreamUsageRow[]> {
    return this.group.read(() =>
      (this.sql.upstreamUsageReport.all({ from: ms(input.from), to: ms(input.to) }) as Row[]).map(toUpstreamUsageRow),
    );
  }

  // --- JobQueue -------------------------------------------------------------

  /**
   * `start`: each claimed generation job's task started in the claim's own write, as Store.startTask would (Job.started),
   * as PostgreSQL's claim does: a write, its savepoint and its promise fewer a task. A task that cannot be started (it
   * was cancelled while queued) comes without `started`, and the worker finds that out from startTask as before.
   */
  claim(input: { workerId: string; now: Date; leaseMs: number; provider: string; limit: number; start?: boolean }): Promise<Job[]> {
    if (input.limit < 1) return Promise.resolve([]);
    return this.group.write(() => {
      const rows = this.sql.claimJobs.all({
        worker: input.workerId,
        now: ms(input.now),
        lease_until: input.now.getTime() + input.leaseMs,
        provider: input.provider,
        limit: input.limit,
      }) as Row[];
      // RETURNING gives no order: oldest first, as picked.
      const jobs = rows.sort((a, b) => a.run_at - b.run_at || a.id - b.id).map(toJob);
      if (!input.start) return jobs;
      return jobs.map((job) => {
        if (job.kind !== 'generate') return job;
        const started = this.startTaskNow(job.taskId, input.now);
        return started.kind === 'started' ? { ...job, started: started.task } : job;
      });
    });
  }

  extendLease(input: { jobId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean> {
    return this.group.write(
      () => this.sql.extendLease.run({ ...claimOf(input.jobId), worker: input.workerId, lease_until: input.now.getTime() + input.leaseMs }).changes === 1,
    );
  }

  complete(jobId: string, now: Date): Promise<void> {
    return this.group.write(() => void this.sql.finishJob.run({ ...claimOf(jobId), state: 'done', error: null, now: ms(now) }));
  }

  retry(input: { jobId: string; runAt: Date; error: string; now: Date }): Promise<void> {
    return this.group.write(() => void this.sql.retryJob.run({ ...claimOf(input.jobId), run_at: ms(input.runAt), error: input.error, now: ms(input.now) }));
  }

  release(input: { jobId: string; workerId: string; now: Date; runAt?: Date }): Promise<void> {
    return this.group.write(
      () => void this.sql.releaseJob.run({ ...claimOf(input.jobId), worker: input.workerId, now: ms(input.now), run_at: ms(input.runAt ?? input.now) }),
    );
  }

  bury(input: { jobId: string; error: string; now: Date }): Promise<void> {
    return this.group.write(() => void this.sql.finishJob.run({ ...claimOf(input.jobId), state: 'dead', error: input.error, now: ms(input.now) }));
  }

  countJobs(): Promise<Record<'available' | 'leased' | 'done' | 'dead', number>> {
    return this.group.read(() => {
      const counts = { available: 0, leased: 0, done: 0, dead: 0 };
      for (const row of this.sql.countJobs.all() as Row[]) counts[row.state as keyof typeof counts] = row.count;
      return counts;
    });
  }

  /**
   * The active tasks counted through their partial index (as many rows as are queued or processing), the ended ones
   * from the usage totals, which every ending adds to in its own transaction (one row an account, day and model): not a
   * read of every task ever submitted, which at 1,000,000 tasks held the event loop at every `/metrics` scrape.
   */
  countTasksByStatus(): Promise<Record<TaskState, number>> {
    return this.group.read(() => {
      // An open batch's totals first: this read may be part of that batch, whose task rows have moved already.
      this.usage.writeNow();
      const ended = this.sql.countEndedTasks.get() as Row;
      const counts: Record<TaskState, number> = { queued: 0, processing: 0, succeeded: ended.succeeded, failed: ended.failed, cancelled: ended.cancelled };
      for (const row of this.sql.countActiveByStatus.all() as Row[]) counts[row.status as TaskState] = row.count;
      return counts;
    });
  }
}

/** The row and the claim a job id names (toJob); a malformed id names no claim (NaN matches no row). */
function claimOf(jobId: string): { id: number; claim: number } {
  const dot = jobId.indexOf('.');
  return { id: Number(jobId.slice(0, dot)), claim: Number(jobId.slice(dot + 1)) };
}

/** A SQL list of states, from the lifecycle in domain/states.ts (the one place that knows it). */
const inList = (states: readonly TaskState[]) => `(${states.map((state) => `'${state}'`).join(', ')})`;

/** Usage totals summed per bucket of @bucket_ms from @from, out of the hourly or the daily table. */
const usageTotals = (table: 'usage_hourly' | 'usage_daily', column: 'hour_start' | 'day_start') =>
  `SELECT @from + ((${column} - @from) / @bucket_ms) * @bucket_ms AS hour_start, CASE WHEN @by_model THEN model ELSE '*' END AS model,
          sum(credits_charged) AS credits_charged, sum(credits_refunded) AS credits_refunded, sum(succeeded) AS succeeded,
          sum(failed) AS failed, sum(cancelled) AS cancelled, sum(seconds_delivered) AS seconds_delivered
   FROM ${table} WHERE account_id = @account_id AND ${column} >= @from AND ${column} < @to
   GROUP BY 1, 2 ORDER BY 1, 2`;

/** Every statement the store runs, prepared on `db` (the benchmark's floor runs some of them as the server does). */
export function prepareStatements(db: Database.Database) {
  const taskPage = (byStatus: boolean) => `
    SELECT * FROM tasks_with_webhook
    WHERE account_id = @account_id ${byStatus ? 'AND status = @status' : ''}
      AND (@after_created_at IS NULL OR created_at < @after_created_at
           OR (created_at = @after_created_at AND id < @after_id))
    ORDER BY created_at DESC, id DESC
    LIMIT +@limit`;
  // The same page, each task's page key only (domain/task-view.ts's taskPageKeyOf, the same text made here): one string a
  // row from a few of its columns instead of all of them, bound by position (account_id, [status,] after_created_at
  // three times, after_id, limit). A task with a delivery adds its status, attempts and last attempt ('-' for none).
  const taskPageKeys = (byStatus: boolean) => `
    SELECT t.id || ' ' || t.created_at || ' ' || t.status || ' ' || t.updated_at
           || ifnull(' ' || d.status || ' ' || d.attempts || ' ' || ifnull(d.last_attempt_at, '-'), '')
    FROM tasks t LEFT JOIN webhook_deliveries d ON d.task_id = t.id
    WHERE t.account_id = ? ${byStatus ? 'AND t.status = ?' : ''}
      AND (? IS NULL OR t.created_at < ? OR (t.created_at = ? AND t.id < ?))
    ORDER BY t.created_at DESC, t.id DESC
    LIMIT +?`;
  /** A task's move to succeeded with its output (completeTask, completeUnchanged), before its condition. */
  const succeed = `UPDATE tasks SET status = 'succeeded', output_key = @output_key, output_url = @output_url, output_expires_at = @output_expires_at,
                                    updated_at = @now, completed_at = @now`;
  return {
    ping: db.prepare('SELECT 1'),
    insertAccount: db.prepare(
      'INSERT INTO accounts (id, name, balance, webhook_secret, created_at) VALUES (@id, @name, 0, @webhook_secret, @created_at)',
    ),
    selectAccount: db.prepare('SELECT * FROM accounts WHERE id = ?'),
    selectAccounts: db.prepare('SELECT * FROM accounts ORDER BY created_at, id'),
    countAccounts: db.prepare('SELECT count(*) FROM accounts'),
    addToBalance: db.prepare('UPDATE accounts SET balance = balance + @amount WHERE id = @id'),
    // The conditional update is the whole guard against overdrafts under concurrency. (amount, id, amount)
    // This statement and the three other writes of every submission (insertTask, insertJob, insertLedgerEntry) bind
    // their values by position, which cost a submission about 5 µs less than by name (BENCHMARKS.md, eleventh pass).
    chargeBalance: db.prepare('UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance >= ?'),
    // (account_id, kind, amount, task_id, note, created_at, account_id): the balance it left, read in the same transaction.
    insertLedgerEntry: db.prepare(
      `INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after)
       VALUES (?, ?, ?, ?, ?, ?, (SELECT balance FROM accounts WHERE id = ?))`,
    ),
    selectLedgerPage: db.prepare(
      `SELECT * FROM ledger_entries
       WHERE account_id = @account_id AND (@before_id IS NULL OR id < @before_id)
         AND (@kind IS NULL OR kind = @kind) AND (@task_id IS NULL OR task_id = @task_id)
       ORDER BY id DESC LIMIT +@limit`,
    ),
    selectCreditsHeld: db.prepare(
      `SELECT coalesce(sum(credits_charged), 0) AS held, count(*) AS active FROM tasks WHERE account_id = ? AND status IN ${inList(ACTIVE_STATES)}`,
    ),
    addUsage: db.prepare(
      `INSERT INTO usage_hourly (account_id, hour_start, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered)
       VALUES (@account_id, @hour_start, @model, @credits_charged, @credits_refunded, @succeeded, @failed, @cancelled, @seconds_delivered)
       ON CONFLICT (account_id, hour_start, model) DO UPDATE SET
         credits_charged = credits_charged + excluded.credits_charged, credits_refunded = credits_refunded + excluded.credits_refunded,
         succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed, cancelled = cancelled + excluded.cancelled,
         seconds_delivered = seconds_delivered + excluded.seconds_delivered`,
    ),
    selectUsageTotals: db.prepare(usageTotals('usage_hourly', 'hour_start')),
    selectUsageTotalsByDay: db.prepare(usageTotals('usage_daily', 'day_start')),
    addUsageDaily: db.prepare(
      `INSERT INTO usage_daily (account_id, day_start, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered)
       VALUES (@account_id, @day_start, @model, @credits_charged, @credits_refunded, @succeeded, @failed, @cancelled, @seconds_delivered)
       ON CONFLICT (account_id, day_start, model) DO UPDATE SET
         credits_charged = credits_charged + excluded.credits_charged, credits_refunded = credits_refunded + excluded.credits_refunded,
         succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed, cancelled = cancelled + excluded.cancelled,
         seconds_delivered = seconds_delivered + excluded.seconds_delivered`,
    ),
    selectUsageHours: db.prepare(
      'SELECT * FROM usage_hourly WHERE account_id = @account_id AND hour_start >= @from AND hour_start < @to ORDER BY hour_start, model',
    ),
    selectDeliveriesPage: db.prepare(
      `SELECT * FROM webhook_deliveries
       WHERE account_id = @account_id AND (@status IS NULL OR status = @status) AND (@task_id IS NULL OR task_id = @task_id)
         AND (@after_created_at IS NULL OR created_at < @after_created_at OR (created_at = @after_created_at AND id < @after_id))
       ORDER BY created_at DESC, id DESC LIMIT +@limit`,
    ),
    selectLedger: db.prepare('SELECT * FROM ledger_entries WHERE account_id = ? ORDER BY id'),
    auditBalance: db.prepare(
      'SELECT a.balance, (SELECT coalesce(sum(amount), 0) FROM ledger_entries l WHERE l.account_id = a.id) AS ledger_sum FROM accounts a WHERE a.id = ?',
    ),
    insertApiKey: db.prepare(
      `INSERT INTO api_keys (id, account_id, hash, hint, mode, scopes, name, created_at, expires_at)
       VALUES (@id, @account_id, @hash, @hint, @mode, @scopes, @name, @created_at, @expires_at)`,
    ),
    selectApiKey: db.prepare('SELECT * FROM api_keys WHERE id = ?'),
    selectApiKeyByHash: db.prepare('SELECT * FROM api_keys WHERE hash = ?'),
    selectApiKeys: db.prepare('SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id'),
    revokeApiKey: db.prepare('UPDATE api_keys SET revoked_at = coalesce(revoked_at, @revoked_at) WHERE id = @id'),
    deleteExpiredIdempotencyKey: db.prepare('DELETE FROM idempotency_keys WHERE account_id = @account_id AND key = @key AND expires_at <= @now'),
    selectIdempotencyKey: db.prepare('SELECT * FROM idempotency_keys WHERE account_id = @account_id AND key = @key'),
    insertIdempotencyKey: db.prepare(
      `INSERT INTO idempotency_keys (account_id, key, fingerprint, state, response_status, response_body, created_at, expires_at)
       VALUES (@account_id, @key, @fingerprint, 'done', @response_status, @response_body, @created_at, @expires_at)`,
    ),
    insertTask: db.prepare(
      `INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata,
                          webhook_url, credits_charged, deadline_at, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    // (task_id, provider, max_attempts, run_at, created_at, updated_at)
    insertJob: db.prepare(
      `INSERT INTO jobs (task_id, kind, provider, state, max_attempts, run_at, created_at, updated_at)
       VALUES (?, 'generate', ?, 'available', ?, ?, ?, ?)`,
    ),
    startTask: viewedRows(
      db.prepare(
        // A processing task is started again when its worker died and its job was claimed anew.
        `UPDATE tasks SET status = 'processing', updated_at = @now WHERE id = @id AND status IN ${inList(ACTIVE_STATES)} RETURNING *`,
      ),
    ),
    completeTask: db.prepare(`${succeed} WHERE id = @id AND status IN ${inList(statesLeadingTo('succeeded'))}`),
    // completeTask's move of a task still as its start left it (@started_at: the start's updated_at).
    completeUnchanged: db.prepare(`${succeed} WHERE id = @id AND status = 'processing' AND updated_at = @started_at`),
    failTask: db.prepare(
      `UPDATE tasks SET status = 'failed', error_code = @code, error_message = @message, credits_refunded = credits_charged,
                        updated_at = @now, completed_at = @now
       WHERE id = @id AND status IN ${inList(statesLeadingTo('failed'))}`,
    ),
    selectOverdueTasks: db.prepare(
      `SELECT id FROM tasks WHERE status IN ${inList(ACTIVE_STATES)} AND deadline_at <= @now ORDER BY deadline_at LIMIT +@limit`,
    ),
    purgeExpiredIdempotencyKeys: db.prepare(
      `DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE expires_at <= @now ORDER BY expires_at LIMIT +@limit)`,
    ),
    selectExpiredOutputs: db.prepare(
      'SELECT id, output_key FROM tasks WHERE output_key IS NOT NULL AND output_expires_at <= @now ORDER BY output_expires_at LIMIT +@limit',
    ),
    clearOutputKey: db.prepare('UPDATE tasks SET output_key = NULL WHERE id = ?'),
    // One statement: picking and leasing cannot interleave with another claimer.
    claimJobs: db.prepare(
      `UPDATE jobs SET state = 'leased', leased_by = @worker, lease_until = @lease_until, attempts = attempts + 1, claims = claims + 1, updated_at = @now
       WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_claimable_by_provider
                   -- The first term is implied by the second, and lets SQLite use the partial index
                   -- jobs_claimable_by_provider: without it every claim scanned every job ever run.
                   -- INDEXED BY: with ANALYZE statistics (PRAGMA optimize) the planner chose to scan
                   -- every job instead, 5 ms a claim with 20,000 queued against 12 µs.
                   WHERE state IN ('available', 'leased')
                     AND ((state = 'available' AND run_at <= @now) OR (state = 'leased' AND lease_until <= @now))
                     AND provider = @provider
                   ORDER BY run_at, id LIMIT +@limit)
       RETURNING *`,
    ),
    // Each of these is done only by the claim holding the job (toJob): not by one whose lease ran out and
    // was claimed again, nor on a job reset by a redelivery.
    extendLease: db.prepare(`UPDATE jobs SET lease_until = @lease_until WHERE id = @id AND state = 'leased' AND claims = @claim AND leased_by = @worker`),
    finishJob: db.prepare(
      `UPDATE jobs SET state = @state, last_error = @error, lease_until = NULL, updated_at = @now WHERE id = @id AND state = 'leased' AND claims = @claim`,
    ),
    retryJob: db.prepare(
      `UPDATE jobs SET state = 'available', run_at = @run_at, last_error = @error, lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE id = @id AND state = 'leased' AND claims = @claim`,
    ),
    releaseJob: db.prepare(
      `UPDATE jobs SET state = 'available', run_at = @run_at, attempts = attempts - 1, lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE id = @id AND state = 'leased' AND claims = @claim AND leased_by = @worker`,
    ),
    countJobs: db.prepare('SELECT state, count(*) AS count FROM jobs GROUP BY state'),
    insertDelivery: db.prepare(
      `INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at)
       VALUES (@id, @task_id, @account_id, @url, @event_type, @body, 'pending', @now, @now, @now)`,
    ),
    insertDeliveryJob: db.prepare(
      `INSERT INTO jobs (task_id, kind, provider, state, max_attempts, run_at, created_at, updated_at)
       VALUES (@task_id, 'deliver', 'webhooks', 'available', @max_attempts, @now, @now, @now)`,
    ),
    // The same job written already claimed (its first claim) by the worker that completes its task (completeTask's holdDelivery).
    insertHeldDeliveryJob: db.prepare(
      `INSERT INTO jobs (task_id, kind, provider, state, attempts, claims, max_attempts, run_at, lease_until, leased_by, created_at, updated_at)
       VALUES (@task_id, 'deliver', 'webhooks', 'leased', 1, 1, @max_attempts, @now, @lease_until, @worker, @now, @now)
       RETURNING id`,
    ).pluck(),
    selectDelivery: db.prepare('SELECT * FROM webhook_deliveries WHERE id = ?'),
    selectDeliveryForTask: db.prepare('SELECT * FROM webhook_deliveries WHERE task_id = ?'),
    selectDeliveries: db.prepare('SELECT * FROM webhook_deliveries WHERE account_id = @account_id ORDER BY created_at DESC, id DESC LIMIT +@limit'),
    selectDeliveryAttempts: db.prepare('SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY id'),
    insertDeliveryAttempt: db.prepare(
      `INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms)
       VALUES (@delivery_id, @attempted_at, @status_code, @error, @duration_ms)`,
    ),
    updateDelivery: db.prepare(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = @attempted_at, updated_at = @attempted_at,
                                     -- Settled by the attempt only if no redelivery came in since it read the delivery.
                                     status = CASE WHEN redeliveries = @redeliveries THEN @status ELSE status END,
                                     next_attempt_at = CASE WHEN redeliveries = @redeliveries THEN @next_attempt_at ELSE next_attempt_at END
       WHERE id = @id`,
    ),
    resetDelivery: db.prepare(
      `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = @now, updated_at = @now, redeliveries = redeliveries + 1 WHERE id = @id`,
    ),
    resetDeliveryJob: db.prepare(
      `UPDATE jobs SET state = 'available', run_at = @now, attempts = 0, lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE task_id = @task_id AND kind = 'deliver'`,
    ),
    selectWebhookSecrets: db.prepare('SELECT webhook_secret, previous_webhook_secret, previous_webhook_secret_until FROM accounts WHERE id = ?'),
    rotateWebhookSecret: db.prepare(
      `UPDATE accounts SET previous_webhook_secret = webhook_secret, previous_webhook_secret_until = @until, webhook_secret = @secret WHERE id = @id`,
    ),
    // Task rows are read as arrays behind named getters (row-views.ts). (account_id, id) by position: every task query
    // reads it, and binding by name cost ≈ 0.3 µs of a read's ≈ 5 (BENCHMARKS.md, seventeenth pass).
    selectTask: viewedRows(db.prepare('SELECT * FROM tasks_with_webhook WHERE account_id = ? AND id = ?')),
    selectTaskById: viewedRows(db.prepare('SELECT * FROM tasks_with_webhook WHERE id = ?')),
    selectTaskPage: viewedRows(db.prepare(taskPage(false))),
    selectTaskPageByStatus: viewedRows(db.prepare(taskPage(true))),
    selectTaskPageKeys: db.prepare(taskPageKeys(false)).pluck(),
    selectTaskPageKeysByStatus: db.prepare(taskPageKeys(true)).pluck(),
    cancelTask: db.prepare(
      `UPDATE tasks SET status = 'cancelled', credits_refunded = credits_charged, updated_at = @now, completed_at = @now
       WHERE id = @id AND status IN ${inList(CANCELLABLE_STATES)}`,
    ),
    countActiveTasks: db.prepare(`SELECT count(*) FROM tasks WHERE account_id = ? AND status IN ${inList(ACTIVE_STATES)}`).pluck(),
    // Through tasks_active_by_deadline: its WHERE is this one's (sqlite-plans.test.ts).
    countActiveByStatus: db.prepare(`SELECT status, count(*) AS count FROM tasks WHERE status IN ${inList(ACTIVE_STATES)} GROUP BY status`),
    countEndedTasks: db.prepare('SELECT coalesce(sum(succeeded), 0) AS succeeded, coalesce(sum(failed), 0) AS failed, coalesce(sum(cancelled), 0) AS cancelled FROM usage_daily'),
    // --- Upstream tasks
    selectUpstreamTask: db.prepare('SELECT u.*, t.status AS task_status FROM upstream_tasks u JOIN tasks t ON t.id = u.task_id WHERE u.task_id = ?'),
    countUpstreamInFlight: db.prepare("SELECT count(*) FROM upstream_tasks WHERE channel = ? AND state IN ('creating', 'following')").pluck(),
    insertUpstreamChannel: db.prepare('INSERT INTO upstream_channels (name) VALUES (?) ON CONFLICT DO NOTHING'),
    insertUpstreamTask: db.prepare(
      `INSERT INTO upstream_tasks (task_id, channel, state, created_at, updated_at) VALUES (@task_id, @channel, 'creating', @now, @now)`,
    ),
    deleteUpstreamReservation: db.prepare(`DELETE FROM upstream_tasks WHERE task_id = @task_id AND channel = @channel AND state = 'creating'`),
    recordChannelFailure: db.prepare(
      `UPDATE upstream_channels SET consecutive_failures = consecutive_failures + 1, create_failures = create_failures + 1,
                                   last_error = @error, last_error_at = @now,
                                   cooldown_until = CASE WHEN consecutive_failures + 1 >= @after THEN @cooldown_until ELSE cooldown_until END
       WHERE name = @name`,
    ),
    recordChannelCreate: db.prepare('UPDATE upstream_channels SET creates = creates + 1, consecutive_failures = 0, cooldown_until = NULL WHERE name = ?'),
    startQueuedTask: db.prepare(`UPDATE tasks SET status = 'processing', updated_at = @now WHERE id = @id AND status = 'queued'`),
    recordUpstreamCreated: db.prepare(
      `UPDATE upstream_tasks SET state = 'following', upstream_id = @upstream_id, upstream_status = 'queued', next_check_at = @next_check_at, updated_at = @now
       WHERE task_id = @task_id AND state = 'creating'`,
    ),
    endUpstreamTask: db.prepare(
      `UPDATE upstream_tasks SET state = 'ended', outcome = @outcome, upstream_status = coalesce(@upstream_status, upstream_status),
                                last_error = coalesce(@error, last_error), next_check_at = NULL, lease_until = NULL, leased_by = NULL,
                                updated_at = @now, ended_at = @now
       WHERE task_id = @task_id`,
    ),
    countChannelOutcome: db.prepare(
      'UPDATE upstream_channels SET lost_creates = lost_creates + @lost, discarded_results = discarded_results + @discarded WHERE name = @name',
    ),
    upstreamDueNow: db.prepare(
      `UPDATE upstream_tasks SET next_check_at = @now WHERE task_id = @task_id AND state IN ('following', 'downloading') AND next_check_at > @now`,
    ),
    claimUpstreamWork: db.prepare(
      `UPDATE upstream_tasks SET lease_until = @lease_until, leased_by = @worker
       WHERE task_id IN (SELECT task_id FROM upstream_tasks INDEXED BY upstream_tasks_due
                         WHERE state IN ('following', 'downloading') AND state = @state AND next_check_at <= @now
                           AND (lease_until IS NULL OR lease_until <= @now)
                         ORDER BY next_check_at LIMIT +@limit)
       RETURNING task_id`,
    ),
    extendUpstreamLease: db.prepare('UPDATE upstream_tasks SET lease_until = @lease_until WHERE task_id = @task_id AND leased_by = @worker AND state != \'ended\''),
    recordUpstreamCheck: db.prepare(
      `UPDATE upstream_tasks SET upstream_status = @upstream_status, next_check_at = @next_check_at, last_error = coalesce(@error, last_error),
                                lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE task_id = @task_id AND state = 'following' AND leased_by = @worker`,
    ),
    markUpstreamSucceeded: db.prepare(
      `UPDATE upstream_tasks SET state = 'downloading', upstream_status = 'succeeded', video_url = @video_url, completion_tokens = @completion_tokens,
                                total_tokens = @total_tokens, next_check_at = @now, lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE task_id = @task_id AND state = 'following'`,
    ),
    retryUpstreamDownload: db.prepare(
      `UPDATE upstream_tasks SET download_attempts = download_attempts + 1, last_error = @error, next_check_at = @next_at,
                                lease_until = NULL, leased_by = NULL, updated_at = @now
       WHERE task_id = @task_id AND state = 'downloading'`,
    ),
    requestUpstreamCheck: db.prepare(`UPDATE upstream_tasks SET next_check_at = min(next_check_at, @now) WHERE task_id = @task_id AND state = 'following'`),
    selectUpstreamChannels: db.prepare(
      `SELECT c.*, (SELECT count(*) FROM upstream_tasks u WHERE u.channel = c.name AND u.state IN ('creating', 'following')) AS in_flight
       FROM upstream_channels c ORDER BY c.name`,
    ),
    upstreamUsageReport: db.prepare(
      `SELECT u.channel, t.model, count(*) AS tasks, sum(t.status = 'succeeded') AS succeeded,
              coalesce(sum(u.completion_tokens), 0) AS completion_tokens, coalesce(sum(u.total_tokens), 0) AS total_tokens,
              sum(t.credits_charged) AS credits_charged, sum(t.credits_refunded) AS credits_refunded
       FROM upstream_tasks u JOIN tasks t ON t.id = u.task_id
       WHERE t.created_at >= @from AND t.created_at < @to
       GROUP BY u.channel, t.model ORDER BY u.channel, t.model`,
    ),
  };
}
