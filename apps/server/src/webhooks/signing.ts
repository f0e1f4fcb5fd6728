/**
 * Standard Webhooks signing (D8), pure apart from `newWebhookSecret`'s randomness. A receiver
 * verifies with any Standard Webhooks library: `webhook-signature` carries one `v1,<base64>`
 * entry per secret, so during a secret rotation either the old or the new secret verifies.
 */
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 24;

export interface WebhookMessage {
  /** `webhook-id`: the same on every attempt of one delivery, so receivers can deduplicate. */
  id: string;
  /** `webhook-timestamp`, in seconds since the epoch. */
  timestamp: number;
  /** The exact body sent; the signature covers these characters, not a re-serialization. */
  body: string;
  /** `whsec_<base64>` secrets; several while one is rotated out. */
  secrets: readonly string[];
}

export interface WebhookHeaders {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
  'content-type': 'application/json';
  'user-agent': 'vidgen-webhooks/1';
}

/** The `webhook-signature` header value: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` per secret. */
export function signWebhook({ id, timestamp, body, secrets }: WebhookMessage): string {
  // A malformed secret or none at all is a bug in the caller, not a delivery failure.
  // The messages never quote a secret.
  if (secrets.length === 0) throw new Error('signWebhook needs at least one secret');
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new Error('webhook timestamp must be whole seconds');
  const signed = `${id}.${timestamp}.${body}`;
  return secrets
    .map((secret, i) => {
      if (!secret.startsWith(SECRET_PREFIX)) throw new Error(`webhook secret #${i + 1} does not start with ${SECRET_PREFIX}`);
      const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
      if (key.length === 0) throw new Error(`webhook secret #${i + 1} has no key after ${SECRET_PREFIX}`);
      return `v1,${createHmac('sha256', key).update(signed, 'utf8').digest('base64')}`;
    })
    .join(' ');
}

/** Every header a delivery carries besides the transport's own (content-length, host). */
export function webhookHeaders(message: WebhookMessage): WebhookHeaders {
  return {
    'webhook-id': message.id,
    'webhook-timestamp': String(message.timestamp),
    'webhook-signature': signWebhook(message),
    'content-type': 'application/json',
    'user-agent': 'vidgen-webhooks/1',
  };
}

/** A fresh per-account signing secret: `whsec_` + base64 of 24 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}
