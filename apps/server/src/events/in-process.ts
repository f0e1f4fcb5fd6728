/**
 * TaskEvents within one process: enough while API and workers share a process. The listeners of a task in a Map
 * by its id, not an EventEmitter's event names: on PostgreSQL every status move of every task is published in every
 * process, mostly to no listener, and an EventEmitter looked each id up as a property name, interning it first.
 *
 * A cancel is told as well to a listener that subscribes up to `recentCancelMs` after it (TaskEvents.subscribe): a
 * worker whose claim started the task subscribes once the claim has answered, and a cancel committed in the claim's
 * batch, or announced by another process, may be published first.
 */
import type { TaskEvents } from '../interfaces.js';

type Listener = (status: string) => void;

export function createInProcessTaskEvents(options: { recentCancelMs?: number; now?: () => number } = {}): TaskEvents {
  const now = options.now ?? Date.now;
  const recentCancelMs = options.recentCancelMs ?? 30_000;
  const byTask = new Map<string, Listener[]>();
  /** Tasks cancelled in the last recentCancelMs, by id, in the order heard (a Map keeps it): pruned from the oldest. */
  const recentCancels = new Map<string, number>();
  return {
    publish(requestId, status) {
      if (status === 'cancelled') {
        const at = now();
        recentCancels.delete(requestId);
        recentCancels.set(requestId, at);
        for (const [id, heardAt] of recentCancels) {
          if (heardAt > at - recentCancelMs) break;
          recentCancels.delete(id);
        }
      }
      const listeners = byTask.get(requestId);
      if (!listeners) return;
      // A copy: a listener that unsubscribes (or subscribes another) while called does not change who is called now.
      for (const listener of [...listeners]) listener(status);
    },
    subscribe(requestId, listener) {
      const listeners = byTask.get(requestId);
      if (listeners) listeners.push(listener);
      else byTask.set(requestId, [listener]);
      let subscribed = true;
      const cancelledAt = recentCancels.get(requestId);
      if (cancelledAt !== undefined && cancelledAt > now() - recentCancelMs) listener('cancelled');
      return () => {
        if (!subscribed) return;
        subscribed = false;
        const current = byTask.get(requestId);
        const at = current ? current.lastIndexOf(listener) : -1;
        if (at < 0) return;
        if (current!.length === 1) byTask.delete(requestId);
        else current!.splice(at, 1);
      };
    },
  };
}
