/**
 * List cursors: opaque to clients, base64url JSON of the last item's position (time and id) and the
 * filters it was made for (one string, compared whole: a cursor followed with other filters is
 * refused). A cursor stays valid however many items are created meanwhile: it names a position, not
 * an offset. Tasks and webhook deliveries are listed with it.
 */
export interface CursorPosition {
  createdAt: Date;
  id: string;
  /** The list's filters as one string (the task list: its status), or null for none. */
  filter: string | null;
}

export function encodeCursor(position: CursorPosition): string {
  return Buffer.from(JSON.stringify({ t: position.createdAt.getTime(), i: position.id, s: position.filter })).toString('base64url');
}

/** The last instant a JavaScript Date holds (year 275760), within PostgreSQL's timestamptz. */
const MAX_DATE_MS = 8.64e15;

export function decodeCursor(cursor: string): CursorPosition | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    if (!value || typeof value !== 'object') return undefined;
    const { t, i, s } = value as Record<string, unknown>;
    if (!Number.isSafeInteger(t) || typeof i !== 'string' || i.length > 128) return undefined;
    // A time both JavaScript and the databases can hold: past it, PostgreSQL refused the query (a 500)
    // and SQLite, bound NaN as NULL, answered the first page again.
    if ((t as number) < 0 || (t as number) > MAX_DATE_MS) return undefined;
    if (s !== null && typeof s !== 'string') return undefined;
    return { createdAt: new Date(t as number), id: i, filter: s as string | null };
  } catch {
    return undefined;
  }
}
