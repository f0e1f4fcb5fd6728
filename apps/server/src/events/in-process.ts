/** TaskEvents within one process: enough while API and workers share a process. */
import { EventEmitter } from 'node:events';
import type { TaskEvents } from '../interfaces.js';

export function createInProcessTaskEvents(): TaskEvents {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  return {
    publish: (requestId, status) => emitter.emit(requestId, status),
    subscribe(requestId, listener) {
      emitter.on(requestId, listener);
      return () => emitter.off(requestId, listener);
    },
  };
}
