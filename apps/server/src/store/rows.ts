/**
 * Rows to records, for both stores. They differ only in how a row carries
 * times (SQLite: milliseconds; PostgreSQL: Date) and JSON (SQLite: text;
 * PostgreSQL: parsed jsonb), which `read` says.
 */
import type { Scope } from '../domain/keys.js';
import type { AccountRecord, ApiKeyRecord, DeliveryRecord, LedgerEntry, TaskRecord } from './store.js';

export type Row = Record<string, any>;

export interface ColumnReader {
  date(value: unknown): Date | null;
  json(value: unknown): any;
}

export function rowMappers(read: ColumnReader) {
  const date = (value: unknown) => read.date(value);
  const required = (value: unknown) => read.date(value)!;
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

    toTask: (row: Row): TaskRecord => ({
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
      creditsRefunded: row.credits_refunded,
      outputUrl: row.output_url,
      outputExpiresAt: date(row.output_expires_at),
      outputKey: row.output_key,
      errorCode: row.error_code,
      errorMessage: row.error_message,
      createdAt: required(row.created_at),
      updatedAt: required(row.updated_at),
      completedAt: date(row.completed_at),
      deadlineAt: date(row.deadline_at),
      webhook: row.webhook_status ? { status: row.webhook_status, attempts: row.webhook_attempts, lastAttemptAt: date(row.webhook_last_attempt_at) } : null,
    }),

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

    toLedgerEntry: (row: Row): LedgerEntry => ({
      id: row.id,
      accountId: row.account_id,
      kind: row.kind,
      amount: row.amount,
      taskId: row.task_id,
      note: row.note,
      createdAt: required(row.created_at),
    }),
  };
}
