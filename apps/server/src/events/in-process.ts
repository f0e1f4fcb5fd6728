/**
 * TaskEvents within one process: enough while API and workers share a process. The listeners of a task in a Map
 * by its id, not an EventEmitter's event names: on PostgreSQL every status move of every task is published in every
 * process, mostly to no listener, and an EventEmitter looked each id up as a property name, interning it first.
 */
import type { TaskEvents } from '../interfaces.js';

type Listener = (status: string) => void;

export function createInProcessTaskEvents(): TaskEvents {
  const byTask = new Map<string, Listener[]>();
  return {
    publish(requestId, status) {
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
