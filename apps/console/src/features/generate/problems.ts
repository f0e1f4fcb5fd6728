/**
 * What went wrong with a submission, sorted by where it is shown: at a field of the form, or in
 * the summary at its top. The service names each offending field with a JSON Pointer into the
 * body (`/duration`, `/mediaUrls/2`); the form turns that back into the input it came from.
 */
import { VidgenError } from '@vidgen/client';
import { describeError } from '../../ui/states';

/** A field of the form; `reference-<row id>` is one reference URL input. */
export type FieldKey = 'model' | 'duration' | 'resolution' | 'aspectRatio' | 'prompt' | 'references' | 'webhookUrl' | 'metadata' | `reference-${number}`;

export interface Problems {
  /** Changes with each failed attempt, so the summary takes focus again even for the same error. */
  attempt: number;
  message: string;
  fields: Partial<Record<FieldKey, string[]>>;
  /** Entries no field stands for: the whole body, named quantities such as `credits.required`. */
  unmapped: string[];
  correlationId?: string | undefined;
}

const TOP_LEVEL: readonly FieldKey[] = ['model', 'duration', 'resolution', 'aspectRatio', 'prompt', 'webhookUrl', 'metadata'];

/**
 * The field a JSON Pointer into the submitted body stands for. `rowIds[i]` is the reference row
 * that became `mediaUrls[i]` (empty rows are not sent, so indices and rows can differ).
 */
export function fieldOfPointer(pointer: string | undefined, rowIds: readonly number[]): FieldKey | undefined {
  if (!pointer?.startsWith('/')) return undefined;
  const [top, index, ...rest] = pointer.slice(1).split('/');
  if (top === 'mediaUrls') {
    if (index === undefined || rest.length > 0) return 'references';
    const row = /^\d+$/.test(index) ? rowIds[Number(index)] : undefined;
    return row === undefined ? 'references' : `reference-${row}`;
  }
  // Anything inside the metadata (`/metadata/orderId`) is about the metadata field.
  if (top === 'metadata') return 'metadata';
  return index === undefined && TOP_LEVEL.includes(top as FieldKey) ? (top as FieldKey) : undefined;
}

export function problemsFromError(error: unknown, rowIds: readonly number[], attempt: number): Problems {
  if (!(error instanceof VidgenError)) return { attempt, message: 'The task could not be submitted.', fields: {}, unmapped: [] };
  const problems: Problems = { attempt, message: describeError(error), fields: {}, unmapped: [], correlationId: error.correlationId };
  for (const detail of error.details ?? []) {
    const field = fieldOfPointer(detail.field, rowIds);
    if (field) (problems.fields[field] ??= []).push(detail.message);
    else problems.unmapped.push(describeDetail(detail));
  }
  return problems;
}

function describeDetail(detail: NonNullable<VidgenError['details']>[number]): string {
  const value = detail.value === undefined ? '' : ` (${detail.value})`;
  // '' points at the whole body; anything else (a pointer no field stands for, a header, a named
  // quantity such as credits.required) is shown by its name.
  const name = detail.field === '' ? 'The request' : detail.field;
  return `${name ? `${name}: ` : ''}${detail.message}${value}`;
}
