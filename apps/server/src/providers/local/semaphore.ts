/**
 * At most `limit` renders at once; the rest wait in arrival order. A waiter whose
 * signal aborts leaves the line without ever holding a slot.
 */
export type Release = () => void;

export interface Semaphore {
  /** A release function once a slot is free; undefined if `signal` aborts first. */
  acquire(signal: AbortSignal): Promise<Release | undefined>;
  readonly running: number;
  readonly waiting: number;
}

export function createSemaphore(limit: number): Semaphore {
  if (!Number.isInteger(limit) || limit < 1) throw new Error(`concurrency must be a whole number ≥ 1, not ${limit}`);
  let running = 0;
  const queue: Array<(release: Release) => void> = [];

  const releaseOnce = (): Release => {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = queue.shift();
      // The slot passes straight to the next waiter, so `running` stays the same.
      if (next) next(releaseOnce());
      else running -= 1;
    };
  };

  return {
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
    acquire(signal) {
      if (signal.aborted) return Promise.resolve(undefined);
      if (running < limit) {
        running += 1;
        return Promise.resolve(releaseOnce());
      }
      return new Promise((resolve) => {
        const grant = (release: Release) => {
          signal.removeEventListener('abort', leave);
          resolve(release);
        };
        const leave = () => {
          const index = queue.indexOf(grant);
          if (index >= 0) queue.splice(index, 1);
          resolve(undefined);
        };
        queue.push(grant);
        signal.addEventListener('abort', leave, { once: true });
      });
    },
  };
}
