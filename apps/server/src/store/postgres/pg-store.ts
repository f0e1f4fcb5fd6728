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
import { taskPageKeyOf } from '../../domain/task-view.js';
import { deliveryClaim, parseDeliveryClaim } from '../../queue/pg-delivery-lane.js';
import type {
  AccountRecord,
  ApiKeyRecord,
  StoredApiKey,
  CancelOutcome,
  CompleteOutcome,
  DeliveryAttempt,
  DeliveryRecord,
  PendingDelivery,
  DeliveryStatus,
  FailOutcome,
  LedgerEntry,
  StartOutcome,
  StoredResponse,
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
import { newDeliveryRecord, newTaskRecord, rowMappers, type Row } from '../rows.js';
import { kept, KeptPlans, type Statement } from './kept-plans.js';
import { literal } from './literals.js';
import { Coalescer, MessageCombiner, settled, type Answer, type Settled, type UsageDelta } from './combined-messages.js';

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url));
/** Serialises migrations of processes starting at once (any constant shared by them). */
const MIGRATION_LOCK = 7_316_201;
/**
 * The channel workers LISTEN on to wake (JOBS_CHANNEL in queue/pg-boss-queue.ts, which imports this
 * file's types): a check asked for by a callback wakes the follower of whichever process runs it.
 */
const JOBS_CHANNEL = 'vidgen_jobs';
/** The SQLSTATE of vidgen_require() (0007_usage_shards.sql): a check in a statement failed; the message says which. */
const REQUIRE_FAILED = 'VG001';
/** The check of vidgen_require() that failed `error`'s message (`insufficient_credits`, `claim_lost`, …), if that is what failed it. */
const failedCheck = (error: unknown) => ((error as { code?: unknown }).code === REQUIRE_FAILED ? (error as Error).message : undefined);

/**
 * Whether PostgreSQL answered the statement with an error (its transaction then rolled back, the connection still
 * usable): an error of its protocol (a SQLSTATE) that neither ends the session (FATAL, PANIC; 57P0x, 08xxx) nor came
 * instead of a connection (too many connections, say). Not a socket's (ECONNRESET, EPIPE…), after which a message may
 * have committed without its answer arriving.
 */
const answeredByPostgres = (error: unknown) =>
  error instanceof pg.DatabaseError && error.severity !== 'FATAL' && error.severity !== 'PANIC' && !/^(57P0|08)/.test(error.code ?? '');

/** Whether `error` leaves its connection unusable: anything but an answer of PostgreSQL's on a live session. */
const sessionEnded = (error: unknown) => !answeredByPostgres(error);

export type Queryable = Pick<pg.PoolClient, 'query'>;
export type { Statement };
/** A transaction under way (PgStore.transaction): whether its BEGIN and its COMMIT have been sent. */
interface Tx {
  committed: boolean;
  begun: boolean;
}

/**
 * What the store needs of the job engine. A task's generation job is written with the task itself (its row's job_
 * columns, migration 0011: insertTask) and ended by its move to a terminal status; only a previous release's job, in
 * pg-boss, has a statement of its own to complete it.
 */
export interface PgJobs {
  /**
   * The statement that completes a claim's run of its generation job, to be sent with the task's ending; none when the
   * ending itself ends it. (A webhook delivery's claim is ended by its attempt's record: recordClaimedAttempt.)
   */
  completeStatement(jobId: string): Statement | undefined;
}

/** bigint (int8) columns as numbers: credits and ids stay far below 2^53. */
const TYPES = {
  getTypeParser: ((oid: number, format?: string) =>
    oid === pg.types.builtins.INT8 ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
};

const mappers = rowMappers({ date: (value) => (value as Date | null) ?? null, json: (value) => value });
/** A tasks row (TASK_COLUMNS) as the store answers it. */
const toTask = mappers.toTask;
/** A started task's row (STARTED_COLUMNS) as the store answers it; the generation lane's claim answers its started tasks so. */
export const toStartedTask = mappers.toStartedTask;
const { toAccount, toApiKey, toDelivery, toLedgerEntry, toUpstreamTask, toUpstreamChannel, toUpstreamUsageRow, toUsageHour } = mappers;

/** The upsert of one usage shard row (`values`: its placeholders, in the columns' order), adding to the row there is. */
const usageUpsert = (table: 'usage_hourly_shards' | 'usage_daily_shards', bucket: 'hour_start' | 'day_start', values: string) =>
  `INSERT INTO ${table} (account_id, ${bucket}, model, shard, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered)
   VALUES ${values}
   ON CONFLICT (account_id, ${bucket}, model, shard) DO UPDATE SET
     credits_charged = ${table}.credits_charged + excluded.credits_charged, credits_refunded = ${table}.credits_refunded + excluded.credits_refunded,
     succeeded = ${table}.succeeded + excluded.succeeded, failed = ${table}.failed + excluded.failed,
     cancelled = ${table}.cancelled + excluded.cancelled, seconds_delivered = ${table}.seconds_delivered + excluded.seconds_delivered`;

/** The UTC hour and day `now` falls in: the keys of its usage totals. */
const usageBuckets = (now: Date) => ({
  hourStart: new Date(Math.floor(now.getTime() / 3_600_000) * 3_600_000),
  dayStart: new Date(Math.floor(now.getTime() / 86_400_000) * 86_400_000),
});

/** The secrets to sign an account's webhooks with at `now` (its row's webhook_secret columns): the previous one too during a rotation. */
function secretsOf(row: Row, now: Date): string[] {
  const previousValid = row.previous_webhook_secret && row.previous_webhook_secret_until > now;
  return previousValid ? [row.webhook_secret, row.previous_webhook_secret] : [row.webhook_secret];
}

/** A simple-protocol message's answers, one a statement (node-postgres answers a message of one statement with its result alone). */
const answersOf = (result: pg.QueryResult | pg.QueryResult[]): Answer[] => (Array.isArray(result) ? result : [result]);

/** A delivery written held (endingWrites' insertHeldDelivery `statement`): its claim (CompleteOutcome's heldDelivery), and the delivery as written. */
interface HeldDelivery {
  claim: string;
  statement: Statement;
  delivery: DeliveryRecord;
}

/**
 * CompleteOutcome's heldDelivery, and its pendingDelivery: the delivery with the secrets its statement answered among
 * `statements`' `answers`, valid at its writing, as pendingDelivery would read them in the same transaction (none when
 * it answered none).
 */
function heldOutcome(held: HeldDelivery | undefined, statements: Statement[], answers: Answer[]): { heldDelivery?: string; pendingDelivery?: PendingDelivery } {
  if (!held) return {};
  const secrets = answers[statements.indexOf(held.statement)]?.rows[0];
  return { heldDelivery: held.claim, ...(secrets ? { pendingDelivery: { delivery: held.delivery, secrets: secretsOf(secrets, held.delivery.createdAt) } } : {}) };
}

/** The usage totals' shard a transaction adds to (0007_usage_shards.sql). */
const USAGE_SHARDS = 16;
const usageShard = () => Math.floor(Math.random() * USAGE_SHARDS);

/** A SQL list of states, from the lifecycle in domain/states.ts (the one place that knows it). */
const inList = (states: readonly TaskState[]) => `(${states.map((state) => `'${state}'`).join(', ')})`;

/** The usage totals as one relation: the shards (0007_usage_shards.sql) and the rows from before them. */
const usageRows = (table: 'usage_hourly' | 'usage_daily', column: 'hour_start' | 'day_start') =>
  `(SELECT account_id, ${column}, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered FROM ${table}
    UNION ALL
    SELECT account_id, ${column}, model, credits_charged, credits_refunded, succeeded, failed, cancelled, seconds_delivered FROM ${table}_shards) AS usage`;

/** Usage totals summed per bucket of $4 ms from $2, out of the hourly or the daily totals. */
const usageTotalsFrom = (table: 'usage_hourly' | 'usage_daily', column: 'hour_start' | 'day_start') =>
  `SELECT $2::timestamptz + floor(extract(epoch FROM ${column} - $2::timestamptz) * 1000 / $4) * make_interval(secs => $4 / 1000.0) AS hour_start,
          CASE WHEN $5 THEN model ELSE '*' END AS model,
          sum(credits_charged) AS credits_charged, sum(credits_refunded) AS credits_refunded, sum(succeeded) AS succeeded,
          sum(failed) AS failed, sum(cancelled) AS cancelled, sum(seconds_delivered) AS seconds_delivered
   FROM ${usageRows(table, column)} WHERE account_id = $1 AND ${column} >= $2 AND ${column} < $3
   GROUP BY 1, 2 ORDER BY 1, 2`;

/**
 * What a start returns: the columns an active task can hold (toStartedTask says why the rest are not read back: every
 * column answered is a field node-postgres describes and parses for each result, and whose values it keeps for as long
 * as the job runs; BENCHMARKS.md, thirty-first pass).
 */
export const STARTED_COLUMNS = `id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata, webhook_url,
  credits_charged, created_at, updated_at, deadline_at`;
/**
 * A tasks row's columns, named (kept plans must not return `*`: kept-plans.ts): those of a start, and those its ending
 * writes. A column added to tasks that toTask reads goes in one of the two; the conformance suite compares what the
 * statements returning these answer with a read.
 */
const TASK_COLUMNS = `${STARTED_COLUMNS},
  credits_refunded, output_url, output_expires_at, output_key, error_code, error_message, completed_at`;
/** A webhook_deliveries row's columns (as `d`), named as TASK_COLUMNS are. */
const DELIVERY_COLUMNS = `d.id, d.task_id, d.account_id, d.url, d.event_type, d.body, d.status, d.attempts, d.last_attempt_at, d.next_attempt_at,
  d.created_at, d.updated_at, d.redeliveries`;

const END_UPSTREAM_TASK = kept(`UPDATE upstream_tasks SET state = 'ended', outcome = $3, upstream_status = coalesce($4, upstream_status),
                                             last_error = coalesce($5, last_error), next_check_at = NULL, lease_until = NULL, leased_by = NULL,
                                             updated_at = $2, ended_at = $2
                           WHERE task_id = $1 AND state <> 'ended'
                           RETURNING channel`);

// kept(): a statement every task sends, whose plan is kept per connection (kept-plans.ts); none returns `*`.
/** Pending deliveries with the account's signing secrets, those of the tasks `where` picks (`d`: the delivery). */
const pendingDeliveriesWhere = (where: string) => `SELECT ${DELIVERY_COLUMNS}, a.webhook_secret, a.previous_webhook_secret, a.previous_webhook_secret_until
  FROM webhook_deliveries d JOIN accounts a ON a.id = d.account_id WHERE ${where} AND d.status = 'pending'`;

const SQL = {
  selectAccount: 'SELECT * FROM accounts WHERE id = $1',
  addToBalance: 'UPDATE accounts SET balance = balance + $2 WHERE id = $1',
  // The conditional update is the whole guard against overdrafts: a concurrent charge waits for the row lock and re-checks.
  // The charge and its ledger entry (the balance it left) in one statement, failing its message when the balance is
  // short; the usage totals are statements of their own after it (addUsageHour, addUsageDay). Sent with its checks and
  // the COMMIT as one message (commitWith, atomically): the balance row, which every submission of the account locks,
  // is held for the rest of the message and the commit only, not for a round trip to the client in between.
  chargeWithLedger: kept(`
    WITH charged AS (UPDATE accounts SET balance = balance - $2 WHERE id = $1 AND balance >= $2 RETURNING balance),
    ledger AS (INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after)
               SELECT $1, 'charge', -$2::bigint, $3::text, NULL, $4::timestamptz, balance FROM charged)
    SELECT vidgen_require(EXISTS (SELECT FROM charged), 'insufficient_credits')`),
  // The task with its generation job waiting in lane $16, due at once (pg-generation-lane.ts), and the wake-up of the
  // workers of that lane at commit (wakeLane).
  insertTask: kept(`INSERT INTO tasks (id, account_id, status, model, prompt, duration, aspect_ratio, resolution, mode, media_urls, metadata,
                                 webhook_url, credits_charged, deadline_at, created_at, updated_at, job_lane, job_state, job_run_at, job_max_attempts)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, 'waiting', $15, $17)`),
  wakeLane: kept(`SELECT pg_notify('${JOBS_CHANNEL}', $1)`),
  storeIdempotentResponse: kept('UPDATE idempotency_keys SET response_status = $3, response_body = $4 WHERE account_id = $1 AND key = $2'),
  // After the charge, so with the account's row locked: the account's submissions pass here one at a time.
  // The count includes the task being submitted: at most the limit ($2) once it is in.
  requireActiveBelow: kept(`SELECT vidgen_require(count(*) <= $2, 'too_many_active_tasks') FROM tasks WHERE account_id = $1 AND status IN ${inList(ACTIVE_STATES)}`),
  // A refund and its ledger entry in one statement; the unique ledger index refuses a second refund (and so the balance change with it).
  refundWithLedger: kept(`WITH refunded AS (UPDATE accounts SET balance = balance + $2 WHERE id = $1 RETURNING balance)
                     INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after)
                     SELECT $1, 'refund', $2::bigint, $3::text, $4::text, $5::timestamptz, balance FROM refunded`),
  // Written after the balance moved, in the same transaction: the entry keeps the balance it left.
  insertLedgerEntry: `INSERT INTO ledger_entries (account_id, kind, amount, task_id, note, created_at, balance_after)
                      VALUES ($1, $2, $3, $4, $5, $6, (SELECT balance FROM accounts WHERE id = $1))`,
  ledgerPage: `SELECT * FROM ledger_entries
               WHERE account_id = $1 AND ($2::bigint IS NULL OR id < $2) AND ($3::text IS NULL OR kind = $3) AND ($4::text IS NULL OR task_id = $4)
               ORDER BY id DESC LIMIT $5`,
  creditsHeld: `SELECT coalesce(sum(credits_charged), 0)::bigint AS held, count(*)::int AS active FROM tasks WHERE account_id = $1 AND status IN ${inList(ACTIVE_STATES)}`,
  usageTotals: usageTotalsFrom('usage_hourly', 'hour_start'),
  usageTotalsByDay: usageTotalsFrom('usage_daily', 'day_start'),
  // Through tasks_active_by_deadline (its WHERE is this one's); the ended from the daily totals, shards and the unsharded table.
  countTasksByStatus: `WITH active AS (SELECT count(*) FILTER (WHERE status = 'queued')::int AS queued, count(*) FILTER (WHERE status = 'processing')::int AS processing
                                   FROM tasks WHERE status IN ${inList(ACTIVE_STATES)}),
                            ended AS (SELECT coalesce(sum(succeeded), 0)::int AS succeeded, coalesce(sum(failed), 0)::int AS failed, coalesce(sum(cancelled), 0)::int AS cancelled
                                  FROM (SELECT succeeded, failed, cancelled FROM usage_daily UNION ALL SELECT succeeded, failed, cancelled FROM usage_daily_shards) AS totals)
                       SELECT * FROM active, ended`,
  // The running totals, each in a shard of its hour or day: the hourly row always before the daily one, in every
  // transaction (two statements, not one with a WITH, whose parts PostgreSQL runs in an order of its own), as
  // combined messages take all their hourly rows before any daily one (combined-messages.ts).
  addUsageHour: kept(usageUpsert('usage_hourly_shards', 'hour_start', '($1, $2, $3, $10, $4, $5, $6, $7, $8, $9)')),
  addUsageDay: kept(usageUpsert('usage_daily_shards', 'day_start', '($1, $2, $3, $10, $4, $5, $6, $7, $8, $9)')),
  // The shards of each hour summed (sum() of bigint is numeric: cast back).
  usageHours: `SELECT account_id, hour_start, model, sum(credits_charged)::bigint AS credits_charged, sum(credits_refunded)::bigint AS credits_refunded,
                      sum(succeeded)::int AS succeeded, sum(failed)::int AS failed, sum(cancelled)::int AS cancelled,
                      sum(seconds_delivered)::bigint AS seconds_delivered
               FROM ${usageRows('usage_hourly', 'hour_start')} WHERE account_id = $1 AND hour_start >= $2 AND hour_start < $3
               GROUP BY account_id, hour_start, model ORDER BY hour_start, model`,
  deliveriesPage: `SELECT * FROM webhook_deliveries
                   WHERE account_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR task_id = $3)
                     AND ($4::timestamptz IS NULL OR (created_at, id) < ($4, $5))
                   ORDER BY created_at DESC, id DESC LIMIT $6`,
  selectApiKey: 'SELECT * FROM api_keys WHERE id = $1',
  selectTask: 'SELECT * FROM tasks_with_webhook WHERE account_id = $1 AND id = $2',
  selectTaskById: 'SELECT * FROM tasks_with_webhook WHERE id = $1',
  selectDelivery: 'SELECT * FROM webhook_deliveries WHERE id = $1',
  // The started task as tasks_with_webhook has it, in the same statement (one round trip, no transaction around it).
  startTask: kept(`UPDATE tasks SET status = 'processing', updated_at = $2 WHERE id = $1 AND status IN ${inList(ACTIVE_STATES)}
              RETURNING ${STARTED_COLUMNS}`),
  // startTask for many tasks at once, each with its own instant. The rows locked first, in id order (whatever the
  // plan's join order): two processes starting some of the same tasks then never wait on each other in a cycle.
  startTasks: `WITH locked AS (SELECT id AS locked_id FROM tasks WHERE id = ANY($1::text[]) AND status IN ${inList(ACTIVE_STATES)} ORDER BY id FOR NO KEY UPDATE)
               UPDATE tasks SET status = 'processing', updated_at = s.vidgen_started_at
               FROM unnest($1::text[], $2::timestamptz[]) AS s (vidgen_start_id, vidgen_started_at), locked
               WHERE tasks.id = s.vidgen_start_id AND tasks.id = locked.locked_id AND tasks.status IN ${inList(ACTIVE_STATES)}
               RETURNING ${STARTED_COLUMNS}`,
  completeTask: kept(`UPDATE tasks SET status = 'succeeded', output_key = $3, output_url = $4, output_expires_at = $5, updated_at = $2, completed_at = $2
                 WHERE id = $1 AND status IN ${inList(statesLeadingTo('succeeded'))}
                 RETURNING ${TASK_COLUMNS}`),
  // completeTask's move, failing its message unless the task is processing as it was when `$6` started it.
  completeUnchanged: kept(`WITH moved AS (
                             UPDATE tasks SET status = 'succeeded', output_key = $3, output_url = $4, output_expires_at = $5, updated_at = $2, completed_at = $2
                             WHERE id = $1 AND status = 'processing' AND updated_at = $6 RETURNING 1)
                           SELECT vidgen_require(count(*) = 1, 'task_moved') FROM moved`),
  failTask: kept(`UPDATE tasks SET status = 'failed', error_code = $3, error_message = $4, credits_refunded = credits_charged, updated_at = $2, completed_at = $2
             WHERE id = $1 AND status IN ${inList(statesLeadingTo('failed'))}
             RETURNING ${TASK_COLUMNS}`),
  cancelTask: kept(`UPDATE tasks SET status = 'cancelled', credits_refunded = credits_charged, updated_at = $3, completed_at = $3
               WHERE account_id = $1 AND id = $2 AND status IN ${inList(CANCELLABLE_STATES)}
               RETURNING ${TASK_COLUMNS}`),
  // A webhook attempt's delivery and the account's signing secrets, in one read.
  pendingDelivery: kept(pendingDeliveriesWhere('d.task_id = $1')),
  // pendingDelivery for many tasks at once (webhook runs claimed together).
  pendingDeliveries: kept(pendingDeliveriesWhere('d.task_id = ANY($1::text[])')),
  // One statement (the attempt and the delivery's counts), atomic on its own: one round trip.
  recordAttempt: kept(`WITH recorded AS (
                         INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) VALUES ($1, $3, $6, $7, $8))
                       UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $3, updated_at = $3, unrecorded_claims = 0,
                              -- Settled by the attempt only if no redelivery came in since it read the delivery.
                              status = CASE WHEN redeliveries = $5 THEN $2 ELSE status END,
                              next_attempt_at = CASE WHEN redeliveries = $5 THEN $4 ELSE next_attempt_at END
                       WHERE id = $1`),
  // The same by the claim that holds the delivery ($9: its lease_id), which it ends: one UPDATE of the row (with its body), where the
  // lease's end and the record were two; failing its message (vidgen_require's VG001, `claim_lost`) when the claim no longer holds it.
  recordClaimedAttempt: kept(`WITH updated AS (
                                UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $3, updated_at = $3, unrecorded_claims = 0, lease_until = NULL,
                                       status = CASE WHEN redeliveries = $5 THEN $2 ELSE status END,
                                       next_attempt_at = CASE WHEN redeliveries = $5 THEN $4 ELSE next_attempt_at END
                                WHERE id = $1 AND lease_id = $9 AND lease_until IS NOT NULL
                                RETURNING id),
                              recorded AS (
                                INSERT INTO webhook_attempts (delivery_id, attempted_at, status_code, error, duration_ms) SELECT id, $3, $6, $7, $8 FROM updated)
                              SELECT vidgen_require(count(*) = 1, 'claim_lost') FROM updated`),
  // --- Upstream tasks
  selectUpstreamTask: 'SELECT u.*, t.status AS task_status FROM upstream_tasks u JOIN tasks t ON t.id = u.task_id WHERE u.task_id = $1',
  // A reservation holds its task's row: a concurrent cancel (or a second reservation of the task) waits for it.
  lockTask: 'SELECT status FROM tasks WHERE id = $1 FOR NO KEY UPDATE',
  insertUpstreamChannel: 'INSERT INTO upstream_channels (name) VALUES ($1) ON CONFLICT DO NOTHING',
  insertUpstreamChannels: 'INSERT INTO upstream_channels (name) SELECT name FROM unnest($1::text[]) AS name ORDER BY name ON CONFLICT DO NOTHING',
  // Held until commit: reservations on a channel read its count and insert one at a time. in_flight is kept by
  // the triggers of migration 0008, in the transactions that move upstream_tasks rows. Locked in name order
  // (the sort runs below the locking), the one order every reservation takes them in.
  lockUpstreamChannels: 'SELECT name, in_flight FROM upstream_channels WHERE name = ANY($1::text[]) ORDER BY name FOR UPDATE',
  // ON CONFLICT: a reservation of the same task that got there first makes this one `exists`, not an error.
  insertUpstreamTask: `INSERT INTO upstream_tasks (task_id, channel, state, created_at, updated_at) VALUES ($1, $2, 'creating', $3, $3)
                       ON CONFLICT DO NOTHING`,
  deleteUpstreamReservation: "DELETE FROM upstream_tasks WHERE task_id = $1 AND channel = $2 AND state = 'creating'",
  recordChannelFailure: `UPDATE upstream_channels SET consecutive_failures = consecutive_failures + 1, create_failures = create_failures + 1,
                                                     last_error = $2, last_error_at = $3,
                                                     cooldown_until = CASE WHEN consecutive_failures + 1 >= $4 THEN $5 ELSE cooldown_until END
                         WHERE name = $1`,
  recordChannelCreate: kept('UPDATE upstream_channels SET creates = creates + 1, consecutive_failures = 0, cooldown_until = NULL WHERE name = $1'),
  startQueuedTask: `UPDATE tasks SET status = 'processing', updated_at = $2 WHERE id = $1 AND status = 'queued'`,
  recordUpstreamCreated: `UPDATE upstream_tasks SET state = 'following', upstream_id = $2, upstream_status = 'queued', next_check_at = $4, updated_at = $3
                          WHERE task_id = $1 AND state = 'creating'
                          RETURNING channel`,
  endUpstreamTask: END_UPSTREAM_TASK,
  // Conditional: of two transactions ending the row, only the one that ends it counts the outcome against the channel.
  endUpstreamCounted: kept(`WITH ended AS (${END_UPSTREAM_TASK})
                       UPDATE upstream_channels c SET lost_creates = lost_creates + $6, discarded_results = discarded_results + $7
                       FROM ended WHERE c.name = ended.channel`),
  // A task's upstream row made due now, and the workers of every process woken at commit ($3: the jobs channel) if it has one.
  upstreamDueNow: kept(`WITH due AS (UPDATE upstream_tasks SET next_check_at = $2 WHERE task_id = $1 AND state IN ('following', 'downloading') AND next_check_at > $2 RETURNING 1)
                   SELECT pg_notify($3, 'upstream') FROM due`),
  // The delivery is its own queue entry (PgDeliveryLane): written due at once, the workers of every process woken at commit ($8: the jobs channel).
  insertDelivery: kept(`WITH inserted AS (
                          INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at)
                          VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7, $7) RETURNING 1)
                        SELECT pg_notify($8, 'webhooks') FROM inserted`),
  // The same delivery written already claimed by the worker that completes its task (completeTask's holdDelivery), leased until $8: the
  // claim of lease_id 1; no wake-up, the holder attempts it. Answers the account's signing secrets as of the same transaction, which
  // pendingDelivery would read: the holder's first attempt needs no read of its own (the delivery itself it knows, as written).
  insertHeldDelivery: kept(`WITH inserted AS (
                              INSERT INTO webhook_deliveries (id, task_id, account_id, url, event_type, body, status, next_attempt_at, created_at, updated_at,
                                                              lease_id, lease_until, unrecorded_claims)
                              VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $7, $7, 1, $8, 1) RETURNING account_id)
                            SELECT a.webhook_secret, a.previous_webhook_secret, a.previous_webhook_secret_until FROM inserted JOIN accounts a ON a.id = inserted.account_id`),
  // A redelivery replaces the delivery's chain of attempts, scheduled or under way, not doubles it: a new lease_id, so the claim
  // of an attempt still out completes and schedules nothing; claimable at once, the workers woken at commit ($3: the jobs channel).
  redeliver: `WITH redelivered AS (
                UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, updated_at = $2, redeliveries = redeliveries + 1,
                                              lease_id = lease_id + 1, lease_until = NULL, unrecorded_claims = 0
                WHERE id = $1 RETURNING *)
              SELECT redelivered.*, pg_notify($3, 'webhooks') FROM redelivered`,
  // SKIP LOCKED: rows another worker is claiming right now are left to it; once it commits they are leased.
  claimUpstreamWork: `
    WITH claimed AS (
      UPDATE upstream_tasks SET lease_until = $4, leased_by = $2
      WHERE task_id IN (SELECT task_id FROM upstream_tasks
                        WHERE state IN ('following', 'downloading') AND state = $1 AND next_check_at <= $3
                          AND (lease_until IS NULL OR lease_until <= $3)
                        ORDER BY next_check_at LIMIT $5
                        FOR UPDATE SKIP LOCKED)
      RETURNING *)
    SELECT c.*, t.status AS task_status FROM claimed c JOIN tasks t ON t.id = c.task_id ORDER BY c.next_check_at, c.task_id`,
  extendUpstreamLease: "UPDATE upstream_tasks SET lease_until = $3 WHERE task_id = $1 AND leased_by = $2 AND state <> 'ended'",
  recordUpstreamCheck: `UPDATE upstream_tasks SET upstream_status = $3, next_check_at = $4, last_error = coalesce($5, last_error),
                                                 lease_until = NULL, leased_by = NULL, updated_at = $6
                        WHERE task_id = $1 AND state = 'following' AND leased_by = $2`,
  markUpstreamSucceeded: `UPDATE upstream_tasks SET state = 'downloading', upstream_status = 'succeeded', video_url = $2, completion_tokens = $3,
                                                   total_tokens = $4, next_check_at = $5, lease_until = NULL, leased_by = NULL, updated_at = $5
                          WHERE task_id = $1 AND state = 'following'`,
  retryUpstreamDownload: `UPDATE upstream_tasks SET download_attempts = download_attempts + 1, last_error = $4, next_check_at = $3,
                                                   lease_until = NULL, leased_by = NULL, updated_at = $2
                          WHERE task_id = $1 AND state = 'downloading'`,
  requestUpstreamCheck: `UPDATE upstream_tasks SET next_check_at = least(next_check_at, $2) WHERE task_id = $1 AND state = 'following'`,
  notify: 'SELECT pg_notify($1, $2)',
  // COLLATE "C": names in byte order, as SQLite sorts them.
  selectUpstreamChannels: 'SELECT * FROM upstream_channels ORDER BY name COLLATE "C"',
  // sum() of bigint is numeric: cast back to bigint, which is read as a number.
  upstreamUsageReport: `
    SELECT u.channel, t.model, count(*) AS tasks, count(*) FILTER (WHERE t.status = 'succeeded') AS succeeded,
           coalesce(sum(u.completion_tokens), 0)::bigint AS completion_tokens, coalesce(sum(u.total_tokens), 0)::bigint AS total_tokens,
           sum(t.credits_charged)::bigint AS credits_charged, sum(t.credits_refunded)::bigint AS credits_refunded
    FROM upstream_tasks u JOIN tasks t ON t.id = u.task_id
    WHERE t.created_at >= $1 AND t.created_at < $2
    GROUP BY u.channel, t.model ORDER BY u.channel COLLATE "C", t.model COLLATE "C"`,
  taskPage: (byStatus: boolean) => `
    SELECT * FROM tasks_with_webhook
    WHERE account_id = $1 ${byStatus ? 'AND status = $5' : ''}
      AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
    ORDER BY created_at DESC, id DESC
    LIMIT $4`,
} as const;

export class PgStore implements Store {
  readonly pool: pg.Pool;
  /** The hot one-message statements' plans, kept per connection. */
  readonly plans: KeptPlans;
  /** Concurrent one-message transactions sent together (see combined-messages.ts). */
  readonly combiner: MessageCombiner;
  /**
   * Concurrent starts as one statement (a worker starts the jobs of a claim together): one commit for all of them
   * where each was a transaction of its own. Each task's row as its own start would have answered it; a statement
   * PostgreSQL refuses (a deadlock broken between two processes' starts of the same tasks) is sent again per task.
   */
  private readonly starts = new Coalescer<{ id: string; now: Date }, Row | undefined>((inputs) => this.startEach(inputs), { lanes: 1, maxCallers: 64 });
  /** Concurrent reads of a pending delivery (webhook runs claimed together) as one statement. */
  private readonly pendingReads = new Coalescer<string, Row | undefined>((taskIds) => this.readPendingEach(taskIds), { lanes: 1, maxCallers: 64 });

  constructor(
    connectionString: string,
    private readonly jobs: PgJobs,
    private readonly options: { poolSize?: number; keepPlans?: boolean } = {},
  ) {
    const keepPlans = options.keepPlans ?? true;
    this.pool = new pg.Pool({
      connectionString,
      max: options.poolSize ?? 10,
      // A connection whose peer went away unannounced is found out (a start or a combined message waits on it otherwise).
      keepAlive: true,
      types: TYPES,
      // A kept plan is generic: PostgreSQL would otherwise plan each execution again whenever a generic plan looks
      // costlier than one made for the values, as on pg-boss's job table, partitioned by lane (pruned when it runs
      // instead). Only prepared statements are affected, and every one the store keeps reads or writes rows by key.
      ...(keepPlans ? { options: '-c plan_cache_mode=force_generic_plan' } : {}),
    });
    this.plans = new KeptPlans(keepPlans, literal);
    this.combiner = new MessageCombiner({
      send: (statements) => this.atomically(statements),
      usage: {
        hourly: (key, counts, shard) => [SQL.addUsageHour, [key.accountId, key.hourStart, key.model, ...counts, shard]],
        daily: (key, counts, shard) => [SQL.addUsageDay, [key.accountId, key.dayStart, key.model, ...counts, shard]],
      },
      answered: answeredByPostgres,
      // One message in flight while the next one gathers its callers: two or four measured no faster (BENCHMARKS.md,
      // seventh pass), and a process's messages then never wait on each other.
      lanes: 1,
      maxCallers: 64,
      shard: usageShard,
    });
    // An idle client losing its connection must not crash the process; the next query reconnects.
    this.pool.on('error', () => {});
  }

  /**
   * Runs `work` in one transaction on one client; rolls back on any error, or on `RollBack` with its answer.
   * `work` may send the COMMIT itself, as the last statement of its last message (see `commitWith`).
   * `beginWithFirst`: no BEGIN of its own; `work` sends it with its first statement (`first`), one round trip less.
   */
  async transaction<T>(work: (client: pg.PoolClient, tx: Tx) => Promise<T>, options: { beginWithFirst?: boolean } = {}): Promise<T> {
    const client = await this.pool.connect();
    // A connection lost mid-transaction (a terminated backend, a failover) fails the query in flight,
    // and the client also emits 'error': unheard, that would end the process. The client is not reused.
    let lost: Error | undefined;
    const onLost = (error: Error) => (lost = error);
    client.on('error', onLost);
    const tx: Tx = { committed: false, begun: !options.beginWithFirst };
    try {
      if (tx.begun) await client.query('BEGIN');
      const result = await work(client, tx);
      if (tx.begun && !tx.committed) await client.query('COMMIT');
      return result;
    } catch (error) {
      if (tx.begun) await client.query('ROLLBACK').catch(() => {});
      // No transaction of its own to roll back (a one-message one: `atomically`), so no ROLLBACK found out whether the
      // connection survived: an error PostgreSQL did not answer with a SQLSTATE, or one that ends the session, means it
      // did not, and it must not go back to the pool (the next transaction on it would never be answered).
      else if (!(error instanceof RollBack) && sessionEnded(error)) lost ??= error as Error;
      if (error instanceof RollBack) return error.outcome as T;
      throw error;
    } finally {
      client.off('error', onLost);
      client.release(lost);
    }
  }

  /**
   * Sends `statements` (text and values) and the COMMIT as one message, the values written into the text as
   * literals (the simple protocol takes no parameters): what the statements lock is held until the commit
   * without waiting for this process to answer in between. A statement failing (`vidgen_require`) ends
   * the message there; the caller's transaction() then rolls back.
   */
  private async commitWith(client: pg.PoolClient, tx: Tx, statements: Statement[]): Promise<Answer[]> {
    await this.plans.prepare(client, statements, tx.begun);
    const answers = answersOf(await client.query([...this.plans.texts(client, statements), 'COMMIT'].join(';\n')));
    tx.committed = true;
    return answers.slice(0, statements.length);
  }

  /** The transaction's first statement, with the BEGIN in the same message when transaction() left it to it (`beginWithFirst`). */
  private async first(client: pg.PoolClient, tx: Tx, [text, values]: Statement): Promise<pg.QueryResult> {
    if (tx.begun) return client.query(this.plans.query(text, values));
    // Begun from here on, also if the statement fails: transaction() then rolls back.
    tx.begun = true;
    await this.plans.prepare(client, [[text, values]], false);
    const [, result] = (await client.query(['BEGIN', ...this.plans.texts(client, [[text, values]])].join(';\n'))) as unknown as pg.QueryResult[];
    return result!;
  }

  /**
   * Sends `statements` as one message without BEGIN or COMMIT: PostgreSQL runs the statements of one simple-protocol
   * message as one transaction, all of them or none (a failing statement, `vidgen_require`'s included, rolls back
   * the ones before it). One round trip for a whole transaction whose statements need no answer from each other.
   */
  private atomically(statements: Statement[]): Promise<Answer[]> {
    // A client of its own (the kept plans are per connection), with no BEGIN or COMMIT around the message.
    return this.transaction(
      async (client) => {
        await this.plans.prepare(client, statements, false);
        return answersOf(await client.query(this.plans.texts(client, statements).join(';\n')));
      },
      { beginWithFirst: true },
    );
  }

  private async one(text: string, values: unknown[], client: Queryable = this.pool): Promise<Row | undefined> {
    return (await client.query(this.plans.query(text, values))).rows[0];
  }

  private async all(text: string, values: unknown[], client: Queryable = this.pool): Promise<Row[]> {
    return (await client.query(this.plans.query(text, values))).rows;
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

  async listLedgerPage(query: { accountId: string; limit: number; beforeId?: number; kind?: LedgerEntry['kind']; taskId?: string }): Promise<LedgerEntry[]> {
    const rows = await this.all(SQL.ledgerPage, [query.accountId, query.beforeId ?? null, query.kind ?? null, query.taskId ?? null, query.limit]);
    return rows.map(toLedgerEntry);
  }

  async accountSummary(accountId: string): Promise<{ account: AccountRecord; creditsHeld: number; activeTasks: number } | undefined> {
    const row = await this.one(SQL.selectAccount, [accountId]);
    if (!row) return undefined;
    const held = (await this.one(SQL.creditsHeld, [accountId]))!;
    return { account: toAccount(row), creditsHeld: held.held, activeTasks: held.active };
  }

  async usageHours(query: { accountId: string; from: Date; to: Date }): Promise<UsageHour[]> {
    return (await this.all(SQL.usageHours, [query.accountId, query.from, query.to])).map(toUsageHour);
  }

  async usageTotals(query: { accountId: string; from: Date; to: Date; bucketMs: number; byModel: boolean }): Promise<UsageHour[]> {
    // Whole days come from the daily totals (a row per day and model), anything finer from the hourly ones.
    const statement = query.bucketMs % 86_400_000 === 0 ? SQL.usageTotalsByDay : SQL.usageTotals;
    return (await this.all(statement, [query.accountId, query.from, query.to, query.bucketMs, query.byModel])).map(toUsageHour);
  }

  async listDeliveriesPage(query: { accountId: string; limit: number; status?: DeliveryStatus; taskId?: string; after?: { createdAt: Date; id: string } }): Promise<DeliveryRecord[]> {
    const rows = await this.all(SQL.deliveriesPage, [query.accountId, query.status ?? null, query.taskId ?? null, query.after?.createdAt ?? null, query.after?.id ?? null, query.limit]);
    return rows.map(toDelivery);
  }

  async webhookSecretState(accountId: string, now: Date): Promise<{ secret: string; previousSecretValidUntil: Date | null } | undefined> {
    const row = await this.one('SELECT webhook_secret, previous_webhook_secret, previous_webhook_secret_until FROM accounts WHERE id = $1', [accountId]);
    if (!row) return undefined;
    const until = row.previous_webhook_secret && row.previous_webhook_secret_until > now ? (row.previous_webhook_secret_until as Date) : null;
    return { secret: row.webhook_secret, previousSecretValidUntil: until };
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
    // The task as tasks_with_webhook answers it once committed (json columns as their text reads back), so that
    // the whole submission goes to the server as one message, nothing read back in between.
    const created = newTaskRecord(task, now);
    const { hourStart, dayStart } = usageBuckets(now);
    // Rows only this task has first; the rows every submission of the account shares (its balance, its usage
    // totals) last, so that they are locked only while the server runs the rest of the message and the commit.
    const ownRows = (response: StoredResponse): Statement[] => [
      [SQL.insertTask, [task.id, task.accountId, TASK_STATES.queued, task.model, task.prompt, task.duration, task.aspectRatio, task.resolution, task.mode,
        JSON.stringify(task.mediaUrls), task.metadata === null ? null : JSON.stringify(task.metadata), task.webhookUrl, task.creditsCharged, task.deadlineAt, now,
        input.job.provider, input.job.maxAttempts]],
      ...(idempotency ? [[SQL.storeIdempotentResponse, [task.accountId, idempotency.key, response.status, JSON.stringify(response.body)]] as Statement] : []),
    ];
    const activeCheck: Statement[] = input.maxActiveTasks ? [[SQL.requireActiveBelow, [task.accountId, input.maxActiveTasks]]] : [];
    const charge: Statement = [SQL.chargeWithLedger, [task.accountId, task.creditsCharged, task.id, now]];
    const wake: Statement = [SQL.wakeLane, [input.job.provider]];
    const usage: UsageDelta = { accountId: task.accountId, model: task.model, hourStart, dayStart, counts: [task.creditsCharged, 0, 0, 0, 0, 0] };
    let outcome: SubmitOutcome;
    try {
      if (!idempotency) {
        // Task, job, charge and checks: one round trip, one transaction.
        const response = input.respond(created);
        const together = [...ownRows(response), charge, ...activeCheck];
        // The lane's workers woken at commit: once per combined message (the same notice from each task of it).
        const once: Statement[] = [wake];
        await this.combiner.send({ alone: [...together, ...once, ...this.usageStatements(usage)], together, once, usage: [usage], rank: 1, key: task.accountId });
        return { kind: 'created', task: created, response };
      }
      outcome = await this.transaction(async (client, tx): Promise<SubmitOutcome> => {
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
        // Answered once the key is this transaction's.
        const response = input.respond(created);
        await this.commitWith(client, tx, [...ownRows(response), wake, charge, ...activeCheck, ...this.usageStatements(usage)]);
        return { kind: 'created', task: created, response };
      });
    } catch (error) {
      // Nothing of the submission stays (the task, its job, the idempotency claim): all of it was one transaction.
      const reason = failedCheck(error);
      if (reason === 'too_many_active_tasks') return { kind: 'too_many_active_tasks', limit: input.maxActiveTasks! };
      if (reason !== 'insufficient_credits') throw error;
      // The balance is read once the transaction has ended.
      return { kind: 'insufficient_credits', required: task.creditsCharged, available: (await this.one(SQL.selectAccount, [task.accountId]))?.balance ?? 0 };
    }
    return outcome;
  }

  async getTask(accountId: string, id: string): Promise<TaskRecord | undefined> {
    const row = await this.one(SQL.selectTask, [accountId, id]);
    return row && toTask(row);
  }

  async findTask(id: string, client: Queryable = this.pool): Promise<TaskRecord | undefined> {
    const row = await this.one(SQL.selectTaskById, [id], client);
    return row && toTask(row);
  }

  async listTasks(query: TaskPageQuery): Promise<TaskRecord[]> {
    const values: unknown[] = [query.accountId, query.after?.createdAt ?? null, query.after?.id ?? null, query.limit];
    if (query.status) values.push(query.status);
    return (await this.all(SQL.taskPage(Boolean(query.status)), values)).map(toTask);
  }

  /**
   * The whole page, as listTasks reads it, every entry with its record whatever `known` says: reading the keys
   * first and the records of the unknown ones after would be a second round trip, which costs PostgreSQL more than
   * the columns it would spare.
   */
  async listTaskPage<Known>(query: TaskPageQuery): Promise<TaskPageEntry<Known>[]> {
    return (await this.listTasks(query)).map((task) => ({ key: taskPageKeyOf(task), task }));
  }

  async cancelTask(input: { accountId: string; id: string; now: Date }): Promise<CancelOutcome> {
    return this.ending(async (client, tx): Promise<{ outcome: CancelOutcome; statements: Statement[] }> => {
      const cancelled = (await this.first(client, tx, [SQL.cancelTask, [input.accountId, input.id, input.now]])).rows[0] as Row | undefined;
      if (cancelled) {
        const { task, statements, usage } = this.endingWrites(toTask(cancelled), input.now, { refund: 'cancelled', usage: { creditsRefunded: cancelled.credits_charged, cancelled: 1 } });
        return { outcome: { kind: 'cancelled', task }, statements: [...statements, ...this.usageStatements(usage)] };
      }
      const row = await this.one(SQL.selectTask, [input.accountId, input.id], client);
      if (!row) return { outcome: { kind: 'not_found' }, statements: [] };
      if (row.status === TASK_STATES.cancelled) return { outcome: { kind: 'already_cancelled', task: toTask(row) }, statements: [] };
      return { outcome: { kind: 'invalid_state', status: row.status }, statements: [] };
    });
  }

  /**
   * What a task's ending writes once its row has moved (`moved`, the task as the statement that moved it returned it), as statements
   * for the caller to send with its COMMIT, and the task as tasks_with_webhook then has it:
   * - the outbox: with a webhookUrl, its one event, whose delivery row is its queue entry (a task has one delivery, written when it ends);
   * - refunded or cancelled: its upstream task, if any, made due now, the workers of every process woken at commit
   *   (the follower cancels it upstream or discards its result), and the charge given back (the unique ledger index
   *   makes a second refund impossible);
   * - the usage totals. The rows every task of the account shares (balance, usage totals) last.
   */
  private endingWrites(
    moved: TaskRecord,
    now: Date,
    ending: { refund?: string; usage: Partial<Omit<UsageHour, 'hourStart' | 'model'>>; holdDelivery?: { leaseUntil: Date } },
  ): { task: TaskRecord; statements: Statement[]; usage: UsageDelta; held?: HeldDelivery } {
    let task = moved;
    const statements: Statement[] = [];
    let held: HeldDelivery | undefined;
    if (task.webhookUrl) {
      const { type, body } = webhookEventBody(task);
      const id = `msg_${newUlid(now.getTime())}`;
      const row = [id, task.id, task.accountId, task.webhookUrl, type, body, now];
      if (ending.holdDelivery) {
        const statement: Statement = [SQL.insertHeldDelivery, [...row, ending.holdDelivery.leaseUntil]];
        statements.push(statement);
        held = { claim: deliveryClaim(id, 1), statement, delivery: newDeliveryRecord(id, task, task.webhookUrl, type, body, now) };
      } else statements.push([SQL.insertDelivery, [...row, JOBS_CHANNEL]]);
      task = { ...task, webhook: { status: 'pending', attempts: 0, lastAttemptAt: null } };
    }
    if (ending.refund !== undefined) {
      statements.push([SQL.upstreamDueNow, [task.id, now, JOBS_CHANNEL]], [SQL.refundWithLedger, [task.accountId, task.creditsCharged, task.id, ending.refund, now]]);
    }
    const { hourStart, dayStart } = usageBuckets(now);
    const { usage } = ending;
    const counts: UsageDelta['counts'] = [usage.creditsCharged ?? 0, usage.creditsRefunded ?? 0, usage.succeeded ?? 0, usage.failed ?? 0, usage.cancelled ?? 0, usage.secondsDelivered ?? 0];
    return { task, statements, usage: { accountId: task.accountId, model: task.model, hourStart, dayStart, counts }, ...(held ? { held } : {}) };
  }

  /** A transaction's usage totals on their own, its last statements (the rows every task of the account shares), hourly first. */
  private usageStatements({ accountId, model, hourStart, dayStart, counts }: UsageDelta): Statement[] {
    const shard = usageShard();
    return [
      [SQL.addUsageHour, [accountId, hourStart, model, ...counts, shard]],
      [SQL.addUsageDay, [accountId, dayStart, model, ...counts, shard]],
    ];
  }

  async startTask(input: { id: string; now: Date }): Promise<StartOutcome> {
    const started = await this.starts.call(input);
    if (started) return { kind: 'started', task: toStartedTask(started) };
    return { kind: 'not_startable', status: (await this.one(SQL.selectTaskById, [input.id]))?.status };
  }

  private startEach(inputs: { id: string; now: Date }[]): Promise<Settled<Row | undefined>[]> {
    return this.eachRow(inputs, {
      alone: (input) => this.one(SQL.startTask, [input.id, input.now]),
      together: () => this.all(SQL.startTasks, [inputs.map(({ id }) => id), inputs.map(({ now }) => now)]),
      key: { input: (input) => input.id, row: (row) => row.id as string },
    });
  }

  /**
   * A coalesced batch's rows (see `starts`, `pendingReads`): one statement for all of `inputs` (`together`), each input
   * answered the row with its key, or nothing; a batch of one, or a statement PostgreSQL refused, one statement each.
   */
  private async eachRow<I>(
    inputs: I[],
    statements: { alone: (input: I) => Promise<Row | undefined>; together: () => Promise<Row[]>; key: { input: (input: I) => string; row: (row: Row) => string } },
  ): Promise<Settled<Row | undefined>[]> {
    const alone = (input: I) => settled(statements.alone(input));
    if (inputs.length === 1) return [await alone(inputs[0]!)];
    let rows: Row[];
    try {
      rows = await statements.together();
    } catch (error) {
      if (!answeredByPostgres(error)) throw error;
      return Promise.all(inputs.map(alone));
    }
    const byKey = new Map(rows.map((row) => [statements.key.row(row), row]));
    return inputs.map((input) => ({ ok: true, value: byKey.get(statements.key.input(input)) }));
  }

  async completeTask(input: Parameters<Store['completeTask']>[0]): Promise<CompleteOutcome> {
    if (input.started?.status === 'processing') {
      const completed = await this.completeUnchanged(input, input.started);
      if (completed) return completed;
    }
    return this.ending((client, tx) => this.completeTaskIn(client, tx, input));
  }

  /**
   * The completion as one message when the task is still as its start left it (processing, with the start's updated_at):
   * the row its move would return is then known beforehand, and so is all its ending writes, where the ending otherwise
   * waits for the moved row before it can send them (two round trips). Undefined when the task has changed since
   * (cancelled, timed out, started again by another claim): the move fails the message and nothing of it stays.
   */
  private async completeUnchanged(
    input: Parameters<Store['completeTask']>[0],
    started: TaskRecord,
  ): Promise<CompleteOutcome | undefined> {
    const { now } = input;
    const moved: TaskRecord = { ...started, status: 'succeeded', outputKey: input.outputKey, outputUrl: input.outputUrl, outputExpiresAt: input.outputExpiresAt, updatedAt: now, completedAt: now, webhook: null };
    const { task, statements, usage, held } = this.endingWrites(moved, now, {
      usage: { succeeded: 1, secondsDelivered: moved.duration },
      holdDelivery: input.holdDelivery,
    });
    const jobDone = input.job && this.jobs.completeStatement(input.job);
    if (jobDone) statements.unshift(jobDone);
    statements.unshift([SQL.completeUnchanged, [input.id, now, input.outputKey, input.outputUrl, input.outputExpiresAt, started.updatedAt]]);
    let answers: Answer[];
    try {
      answers = await this.combiner.send({ alone: [...statements, ...this.usageStatements(usage)], together: statements, usage: [usage], rank: 0, key: input.id });
    } catch (error) {
      if (failedCheck(error) === 'task_moved') return undefined;
      throw error;
    }
    return { kind: 'succeeded', task, ...heldOutcome(held, statements, answers) };
  }

  /** An ending as a transaction of its own: the task's move with the BEGIN, then what the ending writes with the COMMIT. */
  private ending<T>(move: (client: pg.PoolClient, tx: Tx) => Promise<{ outcome: T; statements: Statement[]; answered?: (answers: Answer[]) => T }>): Promise<T> {
    return this.transaction(
      async (client, tx) => {
        const { outcome, statements, answered } = await move(client, tx);
        const answers = await this.commitWith(client, tx, statements);
        return answered ? answered(answers) : outcome;
      },
      { beginWithFirst: true },
    );
  }

  /** Completes the task (its row, then what its ending writes: `statements`, for the caller to send with its COMMIT). */
  private async completeTaskIn(
    client: pg.PoolClient,
    tx: Tx,
    input: Parameters<Store['completeTask']>[0],
  ): Promise<{ outcome: CompleteOutcome; statements: Statement[]; answered?: (answers: Answer[]) => CompleteOutcome }> {
    const completed = (await this.first(client, tx, [SQL.completeTask, [input.id, input.now, input.outputKey, input.outputUrl, input.outputExpiresAt]])).rows[0] as Row | undefined;
    if (!completed) return { outcome: { kind: 'discarded', status: (await this.one(SQL.selectTaskById, [input.id], client))?.status }, statements: [] };
    const { task, statements, usage, held } = this.endingWrites(toTask(completed), input.now, {
      usage: { succeeded: 1, secondsDelivered: completed.duration },
      holdDelivery: input.holdDelivery,
    });
    // The claim's job completed with the task: one round trip less, and no task succeeded with its job still running.
    const jobDone = input.job && this.jobs.completeStatement(input.job);
    if (jobDone) statements.unshift(jobDone);
    const all = [...statements, ...this.usageStatements(usage)];
    const outcome: CompleteOutcome = { kind: 'succeeded', task };
    return { outcome, statements: all, answered: (answers) => ({ ...outcome, ...heldOutcome(held, all, answers) }) };
  }

  async failTask(input: { id: string; now: Date; code: string; message: string }): Promise<FailOutcome> {
    return this.ending((client, tx) => this.failTaskIn(client, tx, input));
  }

  /** Fails the task, refunded (its row, then what its ending writes: `statements`, for the caller to send with its COMMIT). */
  private async failTaskIn(client: pg.PoolClient, tx: Tx, input: { id: string; now: Date; code: string; message: string }): Promise<{ outcome: FailOutcome; statements: Statement[] }> {
    const failed = (await this.first(client, tx, [SQL.failTask, [input.id, input.now, input.code, input.message]])).rows[0] as Row | undefined;
    if (!failed) return { outcome: { kind: 'already_terminal', status: (await this.one(SQL.selectTaskById, [input.id], client))?.status }, statements: [] };
    const { task, statements, usage } = this.endingWrites(toTask(failed), input.now, { refund: input.code, usage: { creditsRefunded: failed.credits_charged, failed: 1 } });
    return { outcome: { kind: 'failed', task }, statements: [...statements, ...this.usageStatements(usage)] };
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

  /**
   * The active tasks counted through their partial index, the ended ones from the usage totals (every ending adds to
   * them in its own transaction; the rows of a previous release's tables too), in one statement: not a scan of every
   * task ever submitted at every `/metrics` scrape.
   */
  async countTasksByStatus(): Promise<Record<TaskState, number>> {
    const [row] = await this.all(SQL.countTasksByStatus, []);
    return { queued: row!.queued, processing: row!.processing, succeeded: row!.succeeded, failed: row!.failed, cancelled: row!.cancelled };
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

  async recordDeliveryAttempt(input: { deliveryId: string; redeliveries: number; attempt: DeliveryAttempt; status: DeliveryStatus; nextAttemptAt: Date | null; job?: { id: string; now: Date } }): Promise<boolean> {
    const { attempt } = input;
    const values = (redeliveries: number) => [
      input.deliveryId,
      input.status,
      attempt.attemptedAt,
      input.nextAttemptAt,
      redeliveries,
      attempt.statusCode,
      attempt.error,
      Math.round(attempt.durationMs),
    ];
    if (input.job) {
      try {
        // The attempt's record ending the claim's lease, one statement (in a combined message with other tasks'): one round
        // trip and one UPDATE of the delivery, where a lease check, the record and the completion took three of each.
        const statements: Statement[] = [[SQL.recordClaimedAttempt, [...values(input.redeliveries), parseDeliveryClaim(input.job.id).leaseId]]];
        await this.combiner.send({ alone: statements, together: statements, usage: [], rank: 0, key: input.deliveryId });
        return true;
      } catch (error) {
        if (failedCheck(error) !== 'claim_lost') throw error;
      }
      // Not this claim's job any more: nothing of the message stayed; the attempt was sent, so it is counted, settling nothing.
      await this.one(SQL.recordAttempt, values(SETTLES_NOTHING));
      return false;
    }
    await this.one(SQL.recordAttempt, values(input.redeliveries));
    return true;
  }

  async redeliver(input: { deliveryId: string; now: Date }): Promise<DeliveryRecord | undefined> {
    const row = await this.one(SQL.redeliver, [input.deliveryId, input.now, JOBS_CHANNEL]);
    return row && toDelivery(row);
  }

  async webhookSecrets(accountId: string, now: Date): Promise<string[]> {
    const row = await this.one('SELECT webhook_secret, previous_webhook_secret, previous_webhook_secret_until FROM accounts WHERE id = $1', [accountId]);
    return row ? secretsOf(row, now) : [];
  }

  async pendingDelivery(taskId: string, now: Date): Promise<PendingDelivery | undefined> {
    const row = await this.pendingReads.call(taskId);
    return row && { delivery: toDelivery(row), secrets: secretsOf(row, now) };
  }

  private readPendingEach(taskIds: string[]): Promise<Settled<Row | undefined>[]> {
    return this.eachRow(taskIds, {
      alone: (taskId) => this.one(SQL.pendingDelivery, [taskId]),
      together: () => this.all(SQL.pendingDeliveries, [taskIds]),
      key: { input: (taskId) => taskId, row: (row) => row.task_id as string },
    });
  }

  async rotateWebhookSecret(input: { accountId: string; secret: string; previousValidUntil: Date }): Promise<boolean> {
    const result = await this.pool.query(
      'UPDATE accounts SET previous_webhook_secret = webhook_secret, previous_webhook_secret_until = $3, webhook_secret = $2 WHERE id = $1',
      [input.accountId, input.secret, input.previousValidUntil],
    );
    return result.rowCount === 1;
  }

  // --- Upstream tasks ---------------------------------------------------------

  async reserveUpstream(input: { taskId: string; channels: { name: string; limit: number }[]; now: Date }): Promise<ReserveUpstreamOutcome> {
    return this.transaction(async (client): Promise<ReserveUpstreamOutcome> => {
      // The task's row first (the order cancelTask and failTask take rows in): a reservation of the same task waits here for this one.
      const task = await this.one(SQL.lockTask, [input.taskId], client);
      const existing = await this.one(SQL.selectUpstreamTask, [input.taskId], client);
      if (existing) return { kind: 'exists', upstream: toUpstreamTask(existing) };
      if (task?.status !== TASK_STATES.queued) return { kind: 'not_queued', status: task?.status };
      // No row for a channel that can take nothing (as SQLite, which writes one only with a reservation).
      const offered = input.channels.filter((channel) => channel.limit >= 1);
      if (offered.length === 0) return { kind: 'full' };
      // Every offered channel's row locked at once, in name order, whatever the order they are offered in (the
      // submitter draws it per task): two reservations taking them one by one in opposite orders deadlocked.
      const names = offered.map((channel) => channel.name);
      let locked = await this.all(SQL.lockUpstreamChannels, [names], client);
      if (locked.length < names.length) {
        // A channel's first reservation writes its row (in name order too), then takes the locks again.
        await client.query(SQL.insertUpstreamChannels, [names]);
        locked = await this.all(SQL.lockUpstreamChannels, [names], client);
      }
      const inFlight = new Map(locked.map((row) => [row.name as string, row.in_flight as number]));
      for (const channel of offered) {
        // Read under the lock, so with every reservation committed before it.
        if (inFlight.get(channel.name)! >= channel.limit) continue;
        if ((await client.query(SQL.insertUpstreamTask, [input.taskId, channel.name, input.now])).rowCount === 0) {
          // Another transaction wrote the task's row meanwhile: never two creates for one task.
          return { kind: 'exists', upstream: toUpstreamTask((await this.one(SQL.selectUpstreamTask, [input.taskId], client))!) };
        }
        return { kind: 'reserved', channel: channel.name, task: toTask((await this.one(SQL.selectTaskById, [input.taskId], client))!) };
      }
      return { kind: 'full' };
    });
  }

  async releaseUpstreamReservation(input: { taskId: string; channel: string; error: string; now: Date; countFailure: boolean; cooldownAfter: number; cooldownMs: number }): Promise<void> {
    await this.transaction(async (client) => {
      await client.query(SQL.deleteUpstreamReservation, [input.taskId, input.channel]);
      if (!input.countFailure) return;
      await client.query(SQL.insertUpstreamChannel, [input.channel]);
      await client.query(SQL.recordChannelFailure, [input.channel, input.error, input.now, input.cooldownAfter, new Date(input.now.getTime() + input.cooldownMs)]);
    });
  }

  async recordUpstreamCreated(input: { taskId: string; upstreamId: string; now: Date; nextCheckAt: Date }): Promise<{ task: TaskRecord | undefined; started: boolean }> {
    return this.transaction(async (client, tx) => {
      const row = await this.one(SQL.selectUpstreamTask, [input.taskId], client);
      if (!row || row.state !== 'creating') throw new Error(`upstream task of ${input.taskId} is not being created`);
      const started = (await client.query(SQL.startQueuedTask, [input.taskId, input.now])).rowCount === 1;
      // A task that ended while its create was on the wire: the follower cancels it upstream at once.
      const nextCheckAt = started ? input.nextCheckAt : input.now;
      const created = await this.one(SQL.recordUpstreamCreated, [input.taskId, input.upstreamId, input.now, nextCheckAt], client);
      // Changed by another transaction since it was read: nothing of this one stays (the task is not started).
      if (!created) throw new Error(`upstream task of ${input.taskId} is not being created`);
      const task = await this.one(SQL.selectTaskById, [input.taskId], client);
      // The channel's row, which every reservation on it locks, is held only while the server runs the commit.
      await this.commitWith(client, tx, [[SQL.recordChannelCreate, [created.channel]]]);
      return { task: task && toTask(task), started };
    });
  }

  async endUpstream(input: Parameters<Store['endUpstream']>[0]): Promise<{ task: TaskRecord | undefined; changed: boolean; outcome: UpstreamOutcome }> {
    return this.transaction(
      async (client, tx) => {
        if (!(await this.first(client, tx, [SQL.selectUpstreamTask, [input.taskId]])).rows[0]) throw new Error(`no upstream task for ${input.taskId}`);
        let outcome = input.outcome;
        let ended: { changed: boolean; task?: TaskRecord; statements: Statement[] } = { changed: false, statements: [] };
        // The task's row before the upstream row, the order cancelTask and failTask take them in.
        if (input.complete) {
          const { outcome: completed, statements } = await this.completeTaskIn(client, tx, { id: input.taskId, now: input.now, ...input.complete });
          ended = completed.kind === 'succeeded' ? { changed: true, task: completed.task, statements } : ended;
          if (!ended.changed) outcome = 'discarded';
        } else if (input.fail) {
          const { outcome: failed, statements } = await this.failTaskIn(client, tx, { id: input.taskId, now: input.now, ...input.fail });
          if (failed.kind === 'failed') ended = { changed: true, task: failed.task, statements };
        }
        const task = ended.task ?? (await this.findTask(input.taskId, client));
        // Last, with the COMMIT in the same message: ending a task in flight moves its channel's count (the
        // triggers of migration 0008), and a lost or discarded one its counters; every reservation on the
        // channel locks that row, so it is held only while the server runs the commit. Conditional: of two
        // transactions ending the row, one counts the outcome against the channel.
        const counted = outcome === 'lost' || outcome === 'discarded';
        await this.commitWith(client, tx, [
          ...ended.statements,
          counted
            ? [SQL.endUpstreamCounted, [input.taskId, input.now, outcome, input.upstreamStatus ?? null, input.error ?? null, outcome === 'lost' ? 1 : 0, outcome === 'discarded' ? 1 : 0]]
            : [SQL.endUpstreamTask, [input.taskId, input.now, outcome, input.upstreamStatus ?? null, input.error ?? null]],
        ]);
        return { task, changed: ended.changed, outcome };
      },
      { beginWithFirst: true },
    );
  }

  async claimUpstreamWork(input: { kind: 'check' | 'download'; workerId: string; now: Date; leaseMs: number; limit: number }): Promise<UpstreamTaskRecord[]> {
    if (input.limit < 1) return [];
    const state = input.kind === 'check' ? 'following' : 'downloading';
    const rows = await this.all(SQL.claimUpstreamWork, [state, input.workerId, input.now, new Date(input.now.getTime() + input.leaseMs), input.limit]);
    return rows.map(toUpstreamTask);
  }

  async extendUpstreamLease(input: { taskId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean> {
    const result = await this.pool.query(SQL.extendUpstreamLease, [input.taskId, input.workerId, new Date(input.now.getTime() + input.leaseMs)]);
    return result.rowCount === 1;
  }

  async recordUpstreamChecks(input: { workerId: string; now: Date; checks: { taskId: string; upstreamStatus: string; nextCheckAt: Date; error?: string }[] }): Promise<void> {
    if (input.checks.length === 0) return;
    await this.transaction(async (client) => {
      for (const check of input.checks) {
        await client.query(SQL.recordUpstreamCheck, [check.taskId, input.workerId, check.upstreamStatus, check.nextCheckAt, check.error ?? null, input.now]);
      }
    });
  }

  async markUpstreamSucceeded(input: { taskId: string; videoUrl: string; usage: UpstreamUsage | null; now: Date }): Promise<void> {
    await this.pool.query(SQL.markUpstreamSucceeded, [input.taskId, input.videoUrl, input.usage?.completionTokens ?? null, input.usage?.totalTokens ?? null, input.now]);
  }

  async retryUpstreamDownload(input: { taskId: string; now: Date; nextAt: Date; error: string }): Promise<void> {
    await this.pool.query(SQL.retryUpstreamDownload, [input.taskId, input.now, input.nextAt, input.error]);
  }

  async requestUpstreamCheck(input: { taskId: string; now: Date }): Promise<boolean> {
    return this.transaction(async (client) => {
      const changed = (await client.query(SQL.requestUpstreamCheck, [input.taskId, input.now])).rowCount === 1;
      // At commit, every worker process listening wakes, whichever follows the task.
      if (changed) await client.query(SQL.notify, [JOBS_CHANNEL, 'upstream']);
      return changed;
    });
  }

  async getUpstreamTask(taskId: string): Promise<UpstreamTaskRecord | undefined> {
    const row = await this.one(SQL.selectUpstreamTask, [taskId]);
    return row && toUpstreamTask(row);
  }

  async listUpstreamChannels(): Promise<UpstreamChannelRecord[]> {
    return (await this.all(SQL.selectUpstreamChannels, [])).map(toUpstreamChannel);
  }

  async upstreamUsageReport(input: { from: Date; to: Date }): Promise<UpstreamUsageRow[]> {
    return (await this.all(SQL.upstreamUsageReport, [input.from, input.to])).map(toUpstreamUsageRow);
  }
}
