/**
 * A submission as the pipeline floors (pipeline-floor.ts, pg-pipeline-floor.ts) take it: its key's account, its body read
 * and validated against the spec and the server's rules, or refused with the contract's code (the server's own envelope
 * is its own work).
 */
import type { Context } from 'hono';
import type { RequestBody } from '@vidgen/types';
import { checkSubmissionRules } from '../../src/domain/rules.js';
import { readJson } from '../../src/http/middleware.js';
import { bodyValidator } from '../../src/http/spec.js';

type Submission = RequestBody<'submitGeneration'>;

/**
 * Reads a request's key and submission: the key's account found by `accountOf` (at once, or after a read), then the body;
 * `refused` is the answer to send when either is not one.
 */
export function floorSubmissions(
  accountOf: (authorization: string | undefined) => string | undefined | Promise<string | undefined>,
): (c: Context) => Promise<{ account: string; value: Submission; refused?: undefined } | { refused: Response }> {
  const validate = bodyValidator<Submission>('submitGeneration');
  const refuse = (c: Context) => ({ refused: c.json({ success: false, error: { code: 'invalid_request' } }, 400) });
  return async (c) => {
    const found = accountOf(c.req.header('authorization'));
    const account = found instanceof Promise ? await found : found;
    if (!account) return { refused: c.json({ success: false, error: { code: 'unauthorized' } }, 401) };
    let body: unknown;
    try {
      body = await readJson(c as never);
    } catch {
      return refuse(c);
    }
    const checked = validate(body);
    if (!checked.ok || checkSubmissionRules(checked.value, { media: false, webhooks: true }).length) return refuse(c);
    return { account, value: checked.value };
  };
}
