/** The task lifecycle: the only place that knows which status may follow which. */
export const TASK_STATES = Object.freeze({
  queued: 'queued',
  processing: 'processing',
  succeeded: 'succeeded',
  failed: 'failed',
  cancelled: 'cancelled',
} as const);

export type TaskState = (typeof TASK_STATES)[keyof typeof TASK_STATES];

const TRANSITIONS: Readonly<Record<TaskState, readonly TaskState[]>> = Object.freeze({
  queued: ['processing', 'cancelled', 'failed'],
  processing: ['succeeded', 'failed', 'cancelled'],
  succeeded: [],
  failed: [],
  cancelled: [],
});

export const isTerminal = (state: TaskState): boolean => TRANSITIONS[state].length === 0;
export const isActive = (state: TaskState): boolean => !isTerminal(state);
export const canTransition = (from: TaskState, to: TaskState): boolean => TRANSITIONS[from].includes(to);
/** States from which a task may move to `to`. */
export const statesLeadingTo = (to: TaskState): TaskState[] => (Object.keys(TRANSITIONS) as TaskState[]).filter((s) => canTransition(s, to));
/** States from which a cancel moves the task to `cancelled`. */
export const CANCELLABLE_STATES: readonly TaskState[] = Object.freeze(statesLeadingTo('cancelled'));
/** Queued or processing: not yet terminal. */
export const ACTIVE_STATES: readonly TaskState[] = Object.freeze((Object.keys(TRANSITIONS) as TaskState[]).filter(isActive));
/** Whether a terminal state gives the credits back. */
export const isRefunded = (state: TaskState): boolean => state === 'failed' || state === 'cancelled';

export function assertExhaustive(value: never): never {
  throw new Error(`unhandled case: ${String(value)}`);
}

/** Seconds a client should wait before polling a task in this state again (D11 poll hint). */
export function pollHintSeconds(state: TaskState): number | undefined {
  switch (state) {
    case 'queued':
      return 2;
    case 'processing':
      return 5;
    case 'succeeded':
    case 'failed':
    case 'cancelled':
      return undefined;
    default:
      return assertExhaustive(state);
  }
}
