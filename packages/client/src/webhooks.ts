import { WebhookVerificationError } from './errors.js';
import type { VideoGenerationEvent } from './types.js';

/** Headers as `fetch`, Hono (`c.req.raw.headers`) or Node and Express (`req.headers`) give them. */
export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** How far `webhook-timestamp` may be from now, either way. Default 300 (Standard Webhooks). */
  toleranceSeconds?: number;
  /** The current time (tests); default the system clock. */
  now?: Date | number;
}

const encoder = new TextEncoder();

/**
 * Verifies a webhook per Standard Webhooks and returns its event; throws
 * `WebhookVerificationError` unless one `v1` signature matches one of the secrets
 * (several during a rotation) and the timestamp is within the tolerance.
 * Pass the body exactly as received (a string or bytes), not re-serialized JSON.
 * Uses Web Crypto, so it runs in Node 20+, browsers, Deno, Bun and edge runtimes.
 */
export async function verifyWebhook(
  rawBody: string | Uint8Array | ArrayBuffer,
  headers: WebhookHeaders,
  secret: string | readonly string[],
  options: VerifyWebhookOptions = {},
): Promise<VideoGenerationEvent> {
  const { toleranceSeconds = 300 } = options;
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatureHeader = header(headers, 'webhook-signature');
  if (!id) throw new WebhookVerificationError('missing webhook-id header');
  if (!timestamp) throw new WebhookVerificationError('missing webhook-timestamp header');
  if (!signatureHeader) throw new WebhookVerificationError('missing webhook-signature header');

  if (!/^\d{1,15}$/.test(timestamp)) throw new WebhookVerificationError('invalid webhook-timestamp header');
  const nowSeconds = Math.floor(Number(options.now ?? Date.now()) / 1000);
  const skew = nowSeconds - Number(timestamp);
  if (skew > toleranceSeconds) throw new WebhookVerificationError('message timestamp too old');
  if (skew < -toleranceSeconds) throw new WebhookVerificationError('message timestamp too new');

  const body = typeof rawBody === 'string' ? encoder.encode(rawBody) : rawBody instanceof Uint8Array ? rawBody : new Uint8Array(rawBody);
  const signed = concat(encoder.encode(`${id}.${timestamp}.`), body);
  const given = signatureHeader
    .split(' ')
    .map((entry) => entry.split(','))
    .filter(([version, value]) => version === 'v1' && value)
    .map(([, value]) => decodeBase64(value!))
    .filter((bytes): bytes is Uint8Array => bytes !== undefined);

  let verified = false;
  for (const candidate of typeof secret === 'string' ? [secret] : secret) {
    const expected = await hmacSha256(secretKey(candidate), signed);
    // Every signature is compared, so the time taken does not say which one matched.
    for (const signature of given) if (constantTimeEqual(signature, expected)) verified = true;
  }
  if (!verified) throw new WebhookVerificationError('no matching signature');

  try {
    return JSON.parse(new TextDecoder().decode(body)) as VideoGenerationEvent;
  } catch {
    throw new WebhookVerificationError('the signed body is not JSON');
  }
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function') {
    return (headers as Headers).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name);
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}

/** `whsec_<base64>` (or the bare base64) → the key bytes. */
function secretKey(secret: string): Uint8Array {
  const key = decodeBase64(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret);
  if (!key || key.length === 0) throw new TypeError('verifyWebhook: the secret is not a whsec_ base64 secret');
  return key;
}

async function hmacSha256(key: Uint8Array, data: Uint8Array): Promise<Uint8Array> {
  const subtle = globalThis.crypto.subtle;
  const cryptoKey = await subtle.importKey('raw', key as Uint8Array<ArrayBuffer>, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return new Uint8Array(await subtle.sign('HMAC', cryptoKey, data as Uint8Array<ArrayBuffer>));
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!;
  return difference === 0;
}

function decodeBase64(text: string): Uint8Array | undefined {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return undefined;
  try {
    return Uint8Array.from(atob(text), (char) => char.charCodeAt(0));
  } catch {
    return undefined;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}
