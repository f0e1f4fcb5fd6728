/**
 * Whether an error from a store means "the database cannot be reached right
 * now" (a restart, a failover, a dropped connection, an exhausted pool, a
 * locked SQLite file) rather than a bug: the API answers those 503
 * `unavailable` with Retry-After, so clients retry, instead of 500.
 */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
/** SQLSTATE: connection exceptions (class 08), shutdowns and "cannot connect now" (57P01–57P03), too many connections (53300). */
const UNAVAILABLE_SQLSTATE = /^(08...|57P0[123]|53300)$/;
const PG_CLIENT_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error)/;

export function isStoreUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (NETWORK_CODES.has(code) || UNAVAILABLE_SQLSTATE.test(code)) return true;
    // better-sqlite3: another process held the write lock past the busy timeout.
    if (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_')) return true;
  }
  return PG_CLIENT_MESSAGES.test(error.message);
}
