/** A stored task as the API shows it (query, list, webhook `data`), typed by the spec. */
import type { components } from '@vidgen/types';
import { assertExhaustive } from './states.js';
import type { TaskRecord } from '../store/store.js';

type Task = components['schemas']['Task'];
type TaskErrorCode = components['schemas']['TaskErrorCode'];

/** What a task's status decides: the status itself, its output, its error and when it completed. */
type Outcome = Pick<Task, 'status' | 'output' | 'error' | 'completedAt'>;

function outcomeOf(task: TaskRecord): Outcome {
  const completedAt = (task.completedAt ?? task.updatedAt).toISOString();
  switch (task.status) {
    case 'queued':
    case 'processing':
      return { status: task.status, output: null, error: null, completedAt: null };
    case 'succeeded':
      return {
        status: 'succeeded',
        output: { type: 'video', url: task.outputUrl ?? '', expiresAt: (task.outputExpiresAt ?? task.updatedAt).toISOString() },
        error: null,
        completedAt,
      };
    case 'failed':
      return {
        status: 'failed',
        output: null,
        error: { code: (task.errorCode ?? 'internal_error') as TaskErrorCode, message: task.errorMessage ?? 'the task failed' },
        completedAt,
      };
    case 'cancelled':
      return { status: 'cancelled', output: null, error: null, completedAt };
    default:
      return assertExhaustive(task.status);
  }
}

/**
 * Built in place, field by field in the order the answers have always had:
 * spreading a common part into an object per status cost twice as much, and
 * this runs for every query, every entry of a list page and every webhook.
 */
export function toTaskResource(task: TaskRecord): Task {
  const resource: Partial<Task> & Record<string, unknown> = {
    success: true,
    requestId: task.id,
    model: task.model,
    prompt: task.prompt,
    duration: task.duration,
    aspectRatio: task.aspectRatio,
    resolution: task.resolution,
    mode: task.mode,
    mediaUrls: task.mediaUrls,
    metadata: task.metadata,
    creditsCharged: task.creditsCharged,
    creditsRefunded: task.creditsRefunded,
    createdAt: task.createdAt.toISOString(),
    updatedAt: task.updatedAt.toISOString(),
  };
  if (task.webhook) {
    resource.webhook = { status: task.webhook.status, attempts: task.webhook.attempts, lastAttemptAt: task.webhook.lastAttemptAt?.toISOString() ?? null };
  }
  const outcome = outcomeOf(task);
  resource.status = outcome.status;
  resource.output = outcome.output;
  resource.error = outcome.error;
  resource.completedAt = outcome.completedAt;
  return resource as Task;
}
