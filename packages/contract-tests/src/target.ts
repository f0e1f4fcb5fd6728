/**
 * Where the suite points and with which credentials. The global setup starts
 * the Prism mock when no VIDGEN_BASE_URL is given and provides its address.
 *
 * - VIDGEN_BASE_URL: the service under test (e.g. http://127.0.0.1:8080).
 * - VIDGEN_API_KEY: a key with every scope (tasks:read, tasks:write, keys:manage,
 *   webhooks:manage) on an account with credits. The suite mints narrower keys of its
 *   account through createApiKey (for 403) and revokes only keys it minted.
 * - VIDGEN_CONTRACT_TARGET: `server` (default when VIDGEN_BASE_URL is set) or `mock`.
 *   Against the mock, answers are the spec's examples, so only their shape is
 *   checked, and errors the mock cannot produce by itself are asked for with
 *   Prism's `Prefer: code=…` header.
 * - VIDGEN_READ_ONLY_API_KEY: a key with only tasks:read (for 403).
 * - VIDGEN_NO_CREDITS_API_KEY: a key of an account with no credits (for 402).
 * - VIDGEN_OTHER_API_KEY: a key of a second account (tenant isolation, 404); with
 *   webhooks:manage as well, another account's webhook delivery is tried too.
 * - VIDGEN_REVOKED_API_KEY: a revoked key (401).
 * - VIDGEN_CONTRACT_WEBHOOK_URL: a webhookUrl the target accepts, for a task that ends and
 *   so makes a webhook delivery (the harness's server allows loopback and gets
 *   `https://127.0.0.1:<closed port>/…`: its attempts fail, the delivery exists).
 */
import { inject } from 'vitest';

export type TargetKind = 'server' | 'mock';

export interface Target {
  baseUrl: string;
  kind: TargetKind;
  apiKey: string;
  readOnlyApiKey: string | undefined;
  noCreditsApiKey: string | undefined;
  otherApiKey: string | undefined;
  revokedApiKey: string | undefined;
  webhookUrl: string | undefined;
}

declare module 'vitest' {
  export interface ProvidedContext {
    target: Target;
  }
}

export const target: Target = inject('target');
export const isMock = target.kind === 'mock';
