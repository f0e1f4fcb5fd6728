import type { TaskStatus } from '@vidgen/client';

/** A task's status as text (never colour alone), with the colour as a second cue. */
export function StatusBadge({ status }: { status: TaskStatus }) {
  return <span className={`badge badge-${status}`}>{status}</span>;
}
