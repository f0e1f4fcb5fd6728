/** What the middleware learns about a request, for the handlers after it; the request's headers read cheaply. */
import type { IncomingMessage } from 'node:http';
import type { Context } from 'hono';
import type { ApiKeyRecord } from '../store/store.js';

export type AppEnv = {
  Variables: {
    correlationId: string;
    apiKey: ApiKeyRecord;
    /** Headers for every answer to the request (answer.ts). */
    answerHeaders: Record<string, string>;
  };
};

/**
 * The request's header `name` (lower case), as `c.req.header(name)` gives it. A request Node
 * served is read from Node's parsed headers: Hono's lookup validates the name and the value again
 * on every call, and a submission looks up six. Node's parser has already refused what that
 * validation refuses (a NUL, CR or LF in a value) and trimmed the value's surrounding whitespace;
 * a header Node keeps as a list (Set-Cookie) and a request made in-process (tests) go through Hono.
 */
export function requestHeader(c: Context<AppEnv>, name: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const value = incoming?.headers[name];
  return typeof value === 'string' ? value : incoming !== undefined && value === undefined ? undefined : c.req.header(name);
}
