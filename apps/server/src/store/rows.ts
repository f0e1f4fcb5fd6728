/**
 * Rows to records, for both stores. They differ only in how a row carries
 * times (SQLite: milliseconds; PostgreSQL: Date) and JSON (SQLite: text;
 * PostgreSQL: parsed jsonb), which `read` says.
 */
import type { Scope } from '../domain/keys.js';
import type { AccountRecord, ApiKeyRecord, DeliveryRecord, LedgerEntry, NewTask, TaskRecord, UpstreamChannelRecord, UpstreamTaskRecord, UpstreamUsageRow, UsageHour } from './store.js';

export type Row = Record<string, any>;

/**
 * A delivery as its insert writes it (pending, due at once, no attempt yet), mapped as pendingDelivery maps it: what a
 * completion hands the worker that holds the delivery, from the values it wrote, without reading the row back (either
 * store; the store-conformance suite holds it to what pendingDelivery answers).
 */
export function newDeliveryRecord(id: string, task: Pick<TaskRecord, 'id' | 'accountId'>, url: string, eventType: string, body: string, now: Date): DeliveryRecord {
  return { id, taskId: task.id, accountId: task.accountId, url, eventType, body, status: 'pending', attempts: 0, lastAttemptAt: null, nextAttemptAt: now, createdAt: now, redeliveries: 0 };
}

export interface ColumnReader {
  date(value: unknown): Date | null;
  json(value: unknown): any;
}

/**
 * A submitted task as a read answers it once its submission committed (`tasks_with_webhook`, either store): queued,
 * nothing refunded, output or error yet, no delivery yet; the JSON values as their text reads back (JSON.parse of what
 * JSON.stringify wrote, as both stores store them), so nothing is read back in the submission's transaction. The
 * store-conformance suite holds it to what a read answers.
 */
export function newTaskRecord(task: NewTask, now: Date, stored = { mediaUrls: JSON.stringify(task.mediaUrls), metadata: task.metadata === null ? null : JSON.stringify(task.metadata) }): TaskRecord {
  return {
    id: task.id,
    accountId: task.accountId,
    status: 'queued',
    model: task.model,
    prompt: task.prompt,
    duration: task.duration,
    aspectRatio: task.aspectRatio,
    resolution: task.resolution,
    mode: task.mode,
    mediaUrls: JSON.parse(stored.mediaUrls),
    metadata: stored.metadata === null ? null : JSON.parse(stored.metadata),
    webhookUrl: task.webhookUrl,
    creditsCharged: task.creditsCharged,
    creditsRefunded: 0,
    outputUrl: null,
    outputExpiresAt: null,
    outputKey: null,
    errorCode: null,
    errorMessage: null,
    createdAt: new Date(now),
    updatedAt: new Date(now),
    completedAt: null,
    deadlineAt: task.deadlineAt && new Date(task.deadlineAt),
    webhook: null,
  };
}

export function rowMappers(read: ColumnReader) {
  const date = (value: unknown) => read.date(value);
  const required = (value: unknown) => read.date(value)!;
  /** A tasks row; `ending`: whether it holds the columns an ending writes (toStartedTask's row does not). */
  const task = (row: Row, ending: boolean): TaskRecord => ({
    id: row.id,
    accountId: row.account_id,
    status: row.status,
    model: row.model,
    prompt: row.prompt,
    duration: row.duration,
    aspectRatio: row.aspect_ratio,
    resolution: row.resolution,
    mode: row.mode,
    mediaUrls: read.json(row.media_urls),
    metadata: row.metadata === null ? null : read.json(row.metadata),
    webhookUrl: row.webhook_url,
    creditsCharged: row.credits_charged,
    creditsRefunded: ending ? row.credits_refunded : 0,
    outputUrl: ending ? row.output_url : null,
    outputExpiresAt: ending ? date(row.output_expires_at) : null,
    outputKey: ending ? row.output_key : null,
    errorCode: ending ? row.error_code : null,
    errorMessage: ending ? row.error_message : null,
    createdAt: required(row.created_at),
    updatedAt: required(row.updated_at),
    completedAt: ending ? date(row.completed_at) : null,
    deadlineAt: date(row.deadline_at),
    webhook: ending && row.webhook_status ? { status: row.webhook_status, attempts: row.webhook_attempts, lastAttemptAt: date(row.webhook_last_attempt_at) } : null,
  });
  return {
    toAccount: (row: Row): AccountRecord => ({ id: row.id, name: row.name, balance: row.balance, createdAt: required(row.created_at) }),

    toApiKey: (row: Row): ApiKeyRecord => ({
      id: row.id,
      accountId: row.account_id,
      hint: row.hint,
      mode: row.mode,
      scopes: row.scopes.split(' ').filter(Boolean) as Scope[],
      name: row.name,
      createdAt: required(row.created_at),
      expiresAt: date(row.expires_at),
      revokedAt: date(row.revoked_at),
    }),

    toTask: (row: Row): TaskRecord => task(row, true),

    /**
     * A started task's row (PostgreSQL's STARTED_COLUMNS): only the columns an active task can hold. A task starts only
     * while queued or processing, and its refund, output, error, completion and webhook delivery are written with its
     * ending, the move out of those states, so a started task has none of them; they are not read back.
     */
    toStartedTask: (row: Row): TaskRecord => task(row, false),

    toDelivery: (row: Row): DeliveryRecord => ({
      id: row.id,
      taskId: row.task_id,
      accountId: row.account_id,
      url: row.url,
      eventType: row.event_type,
      body: row.body,
      status: row.status,
      attempts: row.attempts,
      lastAttemptAt: date(row.last_attempt_at),
      nextAttemptAt: date(row.next_attempt_at),
      createdAt: required(row.created_at),
      redeliveries: row.redeliveries,
    }),

    /** An upstream_tasks row joined with its task's status (`task_status`). */
    toUpstreamTask: (row: Row): UpstreamTaskRecord => ({
      taskId: row.task_id,
      channel: row.channel,
      state: row.state,
      upstreamId: row.upstream_id,
      upstreamStatus: row.upstream_status,
      outcome: row.outcome,
      videoUrl: row.video_url,
      usage: row.completion_tokens === null && row.total_tokens === null ? null : { completionTokens: row.completion_tokens, totalTokens: row.total_tokens },
      nextCheckAt: date(row.next_check_at),
      downloadAttempts: row.download_attempts,
      lastError: row.last_error,
      createdAt: required(row.created_at),
      updatedAt: required(row.updated_at),
      endedAt: date(row.ended_at),
      taskStatus: row.task_status,
    }),

    toUpstreamChannel: (row: Row): UpstreamChannelRecord => ({
      name: row.name,
      inFlight: Number(row.in_flight ?? 0),
      consecutiveFailures: row.consecutive_failures,
      cooldownUntil: date(row.cooldown_until),
      lastError: row.last_error,
      lastErrorAt: date(row.last_error_at),
      creates: row.creates,
      createFailures: row.create_failures,
      lostCreates: row.lost_creates,
      discardedResults: row.discarded_results,
    }),

    toUpstreamUsageRow: (row: Row): UpstreamUsageRow => ({
      channel: row.channel,
      model: row.model,
      tasks: row.tasks,
      succeeded: row.succeeded,
      completionTokens: row.completion_tokens,
      totalTokens: row.total_tokens,
      creditsCharged: row.credits_charged,
      creditsRefunded: row.credits_refunded,
    }),

    toUsageHour: (row: Row): UsageHour => ({
      hourStart: required(row.hour_start),
      model: row.model,
      creditsCharged: Number(row.credits_charged),
      creditsRefunded: Number(row.credits_refunded),
      succeeded: Number(row.succeeded),
      failed: Number(row.failed),
      cancelled: Number(row.cancelled),
      secondsDelivered: Number(row.seconds_delivered),
    }),

    toLedgerEntry: (row: Row): LedgerEntry => ({
      id: row.id,
      accountId: row.account_id,
      kind: row.kind,
      amount: row.amount,
      balanceAfter: row.balance_after,
      taskId: row.task_id,
      note: row.note,
      createdAt: required(row.created_at),
    }),
  };
}
