/**
 * The upstream's callbacks reach `POST /upstream/callbacks/{requestId}?token=…`. The token is an
 * HMAC of the task id under a key derived from the service's URL-signing secret: unguessable per task,
 * nothing to store, the same in every process. A callback only makes us query that task at once.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function upstreamCallbackToken(secret: string, taskId: string): string {
  return createHmac('sha256', secret).update(`upstream-callback:${taskId}`).digest('base64url');
}

export function isUpstreamCallbackToken(secret: string, taskId: string, token: string): boolean {
  const expected = Buffer.from(upstreamCallbackToken(secret, taskId));
  const given = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The callback URL for a task, under the public base URL the upstream can reach. */
export function upstreamCallbackUrl(publicBaseUrl: string, secret: string, taskId: string): string {
  const base = publicBaseUrl.replace(/\/+$/, '');
  return `${base}/upstream/callbacks/${encodeURIComponent(taskId)}?token=${upstreamCallbackToken(secret, taskId)}`;
}
