/**
 * Live status of a task: while it is queued or processing, long polls (`wait=30`) answer as soon
 * as its status changes, and the new state goes into every cache that shows it.
 */
import { isTerminal, VidgenError, type Task, type TaskStatus, type VidgenClient } from '@vidgen/client';
import { useQueryClient, type QueryClient } from '@tanstack/react-query';
import { useEffect } from 'react';
import { useClient } from '../../app/session';
import { invalidateAfterTaskEnd, publishTask } from './queries';

/** The longest long poll the service allows. */
export const LONG_POLL_SECONDS = 30;
/**
 * An unchanged answer that came back early (a proxy's timeout, a mock that does not wait) is
 * not asked again before this much time since the poll began, so polling never turns into a loop.
 */
const MIN_POLL_INTERVAL_MS = 2_000;
const MAX_ERROR_PAUSE_MS = 60_000;
/**
 * Browsers open at most six HTTP/1.1 connections to an origin, and each long poll holds one for
 * up to 30 s: a page full of running tasks would otherwise starve every other request (a
 * click on Cancel, the next page). Polls beyond this wait their turn, first come first served.
 */
const MAX_CONCURRENT_POLLS = 4;

export function useLiveTask(task: Task | undefined): void {
  const client = useClient();
  const queryClient = useQueryClient();
  const requestId = task?.requestId;
  const status = task?.status;

  // One run per status: it ends when it has written a new status into the cache, and the
  // component, rendered again with that status, starts the next run (or none once it has ended).
  useEffect(() => {
    if (!requestId || !status || isTerminal(status)) return;
    const controller = new AbortController();
    void follow({ client, queryClient, requestId, known: status, signal: controller.signal });
    return () => controller.abort();
  }, [client, queryClient, requestId, status]);
}

interface FollowOptions {
  client: VidgenClient;
  queryClient: QueryClient;
  requestId: string;
  known: TaskStatus;
  signal: AbortSignal;
}

async function follow({ client, queryClient, requestId, known, signal }: FollowOptions): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    const startedAt = Date.now();
    let task: Task;
    try {
      task = await withSlot(signal, () => client.get(requestId, { wait: LONG_POLL_SECONDS, signal }));
      failures = 0;
    } catch (error) {
      if (signal.aborted) return;
      // Gone, no longer allowed, key revoked: asking again will not help; the page's own query says why.
      if (error instanceof VidgenError && error.status >= 400 && error.status < 500 && error.status !== 429) return;
      failures += 1;
      await pause(Math.min(MAX_ERROR_PAUSE_MS, 1_000 * 2 ** failures), signal);
      continue;
    }
    // A mock answers any id with its one example: that is no news about this task.
    if (task.requestId === requestId && task.status !== known) {
      publishTask(queryClient, task);
      if (isTerminal(task.status)) invalidateAfterTaskEnd(queryClient, requestId);
      return;
    }
    await pause(MIN_POLL_INTERVAL_MS - (Date.now() - startedAt), signal);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

let pollsInFlight = 0;
const waiting: (() => void)[] = [];

async function withSlot<T>(signal: AbortSignal, run: () => Promise<T>): Promise<T> {
  await acquire(signal);
  // Freed on abort at once, not when the aborted request settles: a fetch that ignores its
  // signal must not keep the slot from every other task.
  let held = true;
  const free = () => {
    if (!held) return;
    held = false;
    signal.removeEventListener('abort', free);
    release();
  };
  signal.addEventListener('abort', free, { once: true });
  try {
    return await run();
  } finally {
    free();
  }
}

function acquire(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  if (pollsInFlight < MAX_CONCURRENT_POLLS) {
    pollsInFlight += 1;
    return Promise.resolve();
  }
  return new Promise((resolve, reject) => {
    const grant = () => {
      signal.removeEventListener('abort', leave);
      resolve();
    };
    const leave = () => {
      const at = waiting.indexOf(grant);
      if (at >= 0) waiting.splice(at, 1);
      reject(signal.reason);
    };
    waiting.push(grant);
    signal.addEventListener('abort', leave, { once: true });
  });
}

/** Hands the slot straight to the next in line, if any. */
function release(): void {
  const next = waiting.shift();
  if (next) next();
  else pollsInFlight -= 1;
}
