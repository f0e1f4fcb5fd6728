/**
 * TaskEvents across processes: every status change is announced by the
 * database itself (a trigger calls pg_notify at commit, migration 0001), and
 * each process LISTENs on one dedicated connection and hands the news to its
 * own listeners. A long poll on an API process is so woken by a worker
 * process's move, and a cancel on an API process reaches the worker rendering
 * the task. Local publishes are delivered at once as well; listeners see a
 * status at least once and must not mind seeing it twice.
 *
 * A process that answers no long polls (`--role worker`) hears only cancels (`statuses: 'cancels'`: the
 * trigger's second channel, migration 0010): every move of every task delivered to every process, and parsed
 * there, cost the split topology's PostgreSQL and workers CPU for nothing (BENCHMARKS.md, twelfth pass).
 */
import pg from 'pg';
import type { Logger } from 'pino';
import type { TaskEvents } from '../interfaces.js';
import { createInProcessTaskEvents } from './in-process.js';

export const TASK_STATUS_CHANNEL = 'vidgen_task_status';
/** A cancel's task id, announced besides its status move (migration 0010). */
export const TASK_CANCELLED_CHANNEL = 'vidgen_task_cancelled';

export interface ListeningTaskEvents extends TaskEvents {
  /** Resolves once the LISTEN is in place. */
  ready: Promise<void>;
  close(): Promise<void>;
}

export function createPostgresTaskEvents(options: {
  connectionString: string;
  logger: Logger;
  /**
   * Which status moves of other processes reach this one's listeners: `every` one (a process answering long polls), or
   * only `cancels` (a worker alone, stopping the render of a task cancelled elsewhere). Local publishes reach them all.
   */
  statuses: 'every' | 'cancels';
  /** Extra channels to listen on, with their handlers (e.g. job wake-ups). */
  channels?: Record<string, (payload: string) => void>;
  /** Delay before reconnecting after the connection drops. */
  reconnectMs?: number;
  /** How long a cancel is told to listeners that subscribe after it (TaskEvents.subscribe; default 30 s). */
  recentCancelMs?: number;
  /** Time for recentCancelMs (tests). */
  now?: () => number;
}): ListeningTaskEvents {
  const local = createInProcessTaskEvents({ recentCancelMs: options.recentCancelMs, now: options.now });
  // Its methods use no `this`: taken as they are.
  const { publish, subscribe } = local;
  const handlers: Record<string, (payload: string) => void> = { ...options.channels };
  if (options.statuses === 'every') {
    handlers[TASK_STATUS_CHANNEL] = (payload) => {
      const space = payload.indexOf(' ');
      if (space > 0) publish(payload.slice(0, space), payload.slice(space + 1));
    };
  } else handlers[TASK_CANCELLED_CHANNEL] = (payload) => payload && publish(payload, 'cancelled');
  let client: pg.Client | undefined;
  let closed = false;
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));

  async function connect(): Promise<void> {
    if (closed) return;
    // keepAlive: a half-open connection (a vanished peer) is noticed by TCP and reconnected.
    const next = new pg.Client({ connectionString: options.connectionString, keepAlive: true });
    let retired = false;
    const retire = () => {
      if (retired) return;
      retired = true;
      reconnect(next);
    };
    next.on('notification', (message) => handlers[message.channel]?.(message.payload ?? ''));
    next.on('error', (error) => {
      options.logger.warn({ err: error }, 'task events: connection lost, reconnecting');
      retire();
    });
    next.on('end', retire);
    try {
      await next.connect();
      for (const channel of Object.keys(handlers)) await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (closed) {
        await next.end().catch(() => {});
        return;
      }
      client = next;
      markReady();
    } catch (error) {
      options.logger.warn({ err: error }, 'task events: cannot listen yet');
      retire();
    }
  }

  function reconnect(dead: pg.Client): void {
    if (closed || (client && client !== dead)) {
      dead.removeAllListeners();
      dead.on('error', () => {});
      void dead.end().catch(() => {});
      return;
    }
    client = undefined;
    // Once retired, the old client's late events are ignored (an error must still have a handler).
    dead.removeAllListeners();
    dead.on('error', () => {});
    void dead.end().catch(() => {});
    // Changes made while disconnected are not replayed: long polls answer at their
    // timeout with the stored state, which is always read from the database.
    setTimeout(() => void connect(), options.reconnectMs ?? 1_000).unref();
  }

  void connect();

  return {
    ready,
    publish,
    subscribe,
    async close() {
      closed = true;
      const current = client;
      client = undefined;
      current?.removeAllListeners();
      await current?.end().catch(() => {});
    },
  };
}
