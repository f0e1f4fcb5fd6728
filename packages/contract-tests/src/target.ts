/**
 * Where the suite points and with which credentials. The global setup starts
 * the Prism mock when no VIDGEN_BASE_URL is given and provides its address.
 *
 * - VIDGEN_BASE_URL: the service under test (e.g. http://127.0.0.1:8080).
 * - VIDGEN_API_KEY: a key with tasks:read and tasks:write on an account with credits.
 * - VIDGEN_CONTRACT_TARGET: `server` (default when VIDGEN_BASE_URL is set) or `mock`.
 *   Against the mock, answers are the spec's examples, so only their shape is
 *   checked, and errors the mock cannot produce by itself are asked for with
 *   Prism's `Prefer: code=…` header.
 * - VIDGEN_READ_ONLY_API_KEY: a key with only tasks:read (for 403).
 * - VIDGEN_NO_CREDITS_API_KEY: a key of an account with no credits (for 402).
 * - VIDGEN_OTHER_API_KEY: a key of a second account (tenant isolation, 404).
 * - VIDGEN_REVOKED_API_KEY: a revoked key (401).
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
}

declare module 'vitest' {
  export interface ProvidedContext {
    target: Target;
  }
}

export const target: Target = inject('target');
export const isMock = target.kind === 'mock';
