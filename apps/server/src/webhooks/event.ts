/** The event sent for a terminal task (D8), typed by the spec's webhook payload. */
import type { components } from '@vidgen/types';
import { toTaskResource } from '../domain/task-view.js';
import type { TaskRecord } from '../store/store.js';

type VideoGenerationEvent = components['schemas']['VideoGenerationEvent'];

/** The event's JSON body: the task as the query answers it, without its webhook summary. */
export function webhookEventBody(task: TaskRecord): { type: VideoGenerationEvent['type']; body: string } {
  const { webhook: _summary, ...data } = toTaskResource({ ...task, webhook: null });
  const type = `video.generation.${task.status}` as VideoGenerationEvent['type'];
  const event = { type, timestamp: (task.completedAt ?? task.updatedAt).toISOString(), data } as VideoGenerationEvent;
  return { type, body: JSON.stringify(event) };
}
