/**
 * List cursors: opaque to clients, base64url JSON of the last task's position
 * and the status filter it was made for. A cursor stays valid however many
 * tasks are created meanwhile, because it names a position, not an offset.
 */
import type { TaskState } from './states.js';

export interface CursorPosition {
  createdAt: Date;
  id: string;
  status: TaskState | null;
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify({ t: position.createdAt.getTime(), i: position.id, s: position.status })).toString('base64url');
}

export function decodeCursor(cursor: string): CursorPosition | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!value || typeof value !== 'object') return undefined;
    const { t, i, s } = value as Record<string, unknown>;
    if (!Number.isSafeInteger(t) || typeof i !== 'string' || i.length > 128) return undefined;
    if (s !== null && typeof s !== 'string') return undefined;
    return { createdAt: new Date(t as number), id: i, status: s as TaskState | null };
  } catch {
    return undefined;
  }
}
