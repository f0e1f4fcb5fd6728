/** Which store errors the API answers 503 unavailable (retry) instead of 500 internal_error. */
import { describe, expect, it } from 'vitest';
import { isStoreUnavailable } from '../src/store/unavailable.js';

const withCode = (code: string, message = 'x') => Object.assign(new Error(message), { code });

describe('isStoreUnavailable', () => {
  it.each([
    ['a refused connection', withCode('ECONNREFUSED')],
    ['a reset connection', withCode('ECONNRESET')],
    ['PostgreSQL shutting down (57P01, admin_shutdown)', withCode('57P01', 'terminating connection due to administrator command')],
    ['PostgreSQL starting up (57P03, cannot_connect_now)', withCode('57P03')],
    ['a connection exception (08006)', withCode('08006')],
    ['too many connections (53300)', withCode('53300')],
    ['SQLite locked past the busy timeout', withCode('SQLITE_BUSY', 'database is locked')],
    ['pg: Connection terminated unexpectedly', new Error('Connection terminated unexpectedly')],
    ['pg: pool timeout', new Error('timeout exceeded when trying to connect')],
  ])('counts %s', (_, error) => expect(isStoreUnavailable(error)).toBe(true));

  it.each([
    ['a unique violation (23505)', withCode('23505')],
    ['a syntax error (42601)', withCode('42601')],
    ['SQLite constraint', withCode('SQLITE_CONSTRAINT_UNIQUE')],
    ['a plain bug', new TypeError("Cannot read properties of undefined (reading 'id')")],
    ['a thrown string', 'Connection terminated'],
  ])('does not count %s', (_, error) => expect(isStoreUnavailable(error)).toBe(false));
});
