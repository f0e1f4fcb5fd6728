/** A stored task as the API shows it (query, list, webhook `data`), typed by the spec. */
import type { components } from '@vidgen/types';
import { assertExhaustive } from './states.js';
import type { TaskRecord } from '../store/store.js';

type Task = components['schemas']['Task'];
type TaskErrorCode = components['schemas']['TaskErrorCode'];

export function toTaskResource(task: TaskRecord): Task {
  const common = {
    success: true as const,
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
    ...(task.webhook
      ? { webhook: { status: task.webhook.status, attempts: task.webhook.attempts, lastAttemptAt: task.webhook.lastAttemptAt?.toISOString() ?? null } }
      : {}),
  };
  const completedAt = (task.completedAt ?? task.updatedAt).toISOString();
  switch (task.status) {
    case 'queued':
    case 'processing':
      return { ...common, status: task.status, output: null, error: null, completedAt: null } satisfies Task;
    case 'succeeded':
      return {
        ...common,
        status: 'succeeded',
        output: { type: 'video', url: task.outputUrl ?? '', expiresAt: (task.outputExpiresAt ?? task.updatedAt).toISOString() },
        error: null,
        completedAt,
      } satisfies Task;
    case 'failed':
      return {
        ...common,
        status: 'failed',
        output: null,
        error: { code: (task.errorCode ?? 'internal_error') as TaskErrorCode, message: task.errorMessage ?? 'the task failed' },
        completedAt,
      } satisfies Task;
    case 'cancelled':
      return { ...common, status: 'cancelled', output: null, error: null, completedAt } satisfies Task;
    default:
      return assertExhaustive(task.status);
  }
}
