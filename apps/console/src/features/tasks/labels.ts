/** How a task's enumerations read. Keyed by the spec's own types, so a new value fails the typecheck here. */
import type { components, LedgerEntryKind, TaskStatus } from '@vidgen/client';

type Schemas = components['schemas'];

export function isStatus(value: string | null): value is TaskStatus {
  return (STATUSES as readonly string[]).includes(value ?? '');
}

export const MODE_LABELS: Record<Schemas['GenerationMode'], string> = {
  text_to_video: 'Text to video',
  first_frame: 'First frame',
  first_last_frame: 'First and last frame',
  multimodal_reference: 'Multimodal reference',
};

export const LEDGER_LABELS: Record<LedgerEntryKind, string> = {
  grant: 'Credits granted',
  charge: 'Charged',
  refund: 'Refunded',
};

/** What reaching each status means, in the lifecycle's order (a Record, so none can be missing). */
export const STATUS_EVENT_LABELS: Record<TaskStatus, string> = {
  queued: 'Accepted and queued',
  processing: 'Processing started',
  succeeded: 'Succeeded',
  failed: 'Failed',
  cancelled: 'Cancelled',
};

/** Every status, in the lifecycle's order, for the status filter. */
export const STATUSES = Object.keys(STATUS_EVENT_LABELS) as TaskStatus[];

export function formatSeconds(seconds: number): string {
  return `${seconds} s`;
}
