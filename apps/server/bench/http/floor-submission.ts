/**
 * A submission's body as the pipeline floors (pipeline-floor.ts, pg-pipeline-floor.ts) take it: read, validated against
 * the spec and the server's rules, or refused with the contract's code (the server's own envelope is its own work).
 */
import type { Context } from 'hono';
import type { RequestBody } from '@vidgen/types';
import { checkSubmissionRules } from '../../src/domain/rules.js';
import { readJson } from '../../src/http/middleware.js';
import { bodyValidator } from '../../src/http/spec.js';

type Submission = RequestBody<'submitGeneration'>;

/** Reads a request's submission; `refused` is the answer to send when it is not one. */
export function floorSubmissions(): (c: Context) => Promise<{ value: Submission; refused?: undefined } | { refused: Response }> {
  const validate = bodyValidator<Submission>('submitGeneration');
  const refuse = (c: Context) => ({ refused: c.json({ success: false, error: { code: 'invalid_request' } }, 400) });
  return async (c) => {
    let body: unknown;
    try {
      body = await readJson(c as never);
    } catch {
      return refuse(c);
    }
    const checked = validate(body);
    if (!checked.ok || checkSubmissionRules(checked.value, { media: false, webhooks: true }).length) return refuse(c);
    return { value: checked.value };
  };
}
