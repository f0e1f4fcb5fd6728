/**
 * One webhook delivery attempt (D8): a signed POST to the account's URL under D5's URL rules.
 * Every way an attempt can end comes back as a `SendResult`; deciding whether and when to try
 * again (the schedule, jitter, giving up) is the caller's job. Only a bug (e.g. a malformed
 * secret) throws. No error message ever carries a secret.
 */
import type { ClientRequest, IncomingMessage } from 'node:http';
import { Agent, request, type RequestOptions } from 'node:https';
import type { LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createSecureContext, rootCertificates, type ConnectionOptions } from 'node:tls';
import { explainUrl } from '../domain/rules.js';
import { systemClock, type Clock } from '../interfaces.js';
import { guardedLookup, refuseLiteralAddress } from '../media/fetcher.js';
import { webhookHeaders } from './signing.js';

export type SendResult =
  | { outcome: 'delivered'; status: number; durationMs: number }
  /** 410 Gone: the receiver asks for no more attempts. */
  | { outcome: 'gone'; status: number; durationMs: number }
  | { outcome: 'retry'; status?: number; error?: string; retryAfterMs?: number; durationMs: number };

export interface SendInput {
  url: string;
  /** `webhook-id`: the delivery's id, the same on every attempt. */
  id: string;
  /** The exact JSON text to send and sign. */
  body: string;
  /** The account's `whsec_…` secrets (two while one is rotated out). */
  secrets: readonly string[];
  signal?: AbortSignal;
}

export interface WebhookSender {
  send(input: SendInput): Promise<SendResult>;
}

export interface WebhookSenderOptions {
  /** The whole attempt: lookup, connect, TLS, request and answer. D8: success is a 2xx within 15 s. */
  timeoutMs?: number;
  /** Lets loopback addresses through (never other private ranges). Test-only: it exists for a local HTTPS fixture. */
  allowLoopback?: boolean;
  /** An extra trusted CA (the test fixture's self-signed certificate); the public roots stay trusted. */
  ca?: string | Buffer;
  /** dns.lookup-compatible; injectable so tests decide what names resolve to without touching DNS. */
  lookup?: LookupFunction;
  /** Source of `webhook-timestamp`. */
  clock?: Pick<Clock, 'now'>;
  /** How long a connection to a receiver is kept unused for the next attempt (IDLE_CONNECTION_MS). */
  idleConnectionMs?: number;
}

/** Receivers' answers are read up to this much and thrown away; nobody needs more of them. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * How long a connection to a receiver stays open unused, waiting for the next
 * attempt; less when the receiver's `Keep-Alive: timeout=…` says so (Node takes
 * a second off its hint), so that we close before it does.
 */
export const IDLE_CONNECTION_MS = 4_000;

export function createWebhookSender(options: WebhookSenderOptions = {}): WebhookSender {
  const { timeoutMs = 15_000, allowLoopback = false, clock = systemClock, idleConnectionMs = IDLE_CONNECTION_MS } = options;
  // Node's `ca` replaces its trust store; keep the public roots so the extra CA only adds.
  // Built once: parsing the trust store for every request cost ~30 ms of CPU each (a profile of the pipeline bench).
  const secureContext = options.ca ? createSecureContext({ ca: [...rootCertificates, options.ca] }) : undefined;
  const lookup = guardedLookup({ allowLoopback, lookup: options.lookup });
  // Connections are kept and reused per receiver (host, port and TLS name): one TLS handshake per
  // receiver instead of one per attempt, which was a fifth of the pipeline's CPU. Every new
  // connection resolves the name through the address guard; a reused one leads to an address that
  // was checked when it was opened (a name re-pointed since then reaches it only on a new one).
  // `timeout` closes an unused kept connection; one in use is timed by the attempt's deadline only.
  const agent = new Agent({ keepAlive: true, timeout: idleConnectionMs, scheduling: 'lifo' });

  /**
   * POSTs and settles with the answer's head. `attempt` ends it early: its `end` destroys the request in flight with the
   * reason (the deadline, the caller's abort), so the promise rejects and the caller reads why from `attempt.ended`.
   */
  const post = (url: URL, headers: Record<string, string>, body: Buffer, attempt: Attempt, fresh = false) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      // https.request never follows redirects, which is what D8 wants.
      const req = request(url, <RequestOptions & ConnectionOptions>{
        method: 'POST',
        agent: fresh ? false : agent,
        secureContext,
        lookup,
        headers,
      });
      attempt.req = req;
      let answered = false;
      req.once('response', (response) => ((answered = true), resolve(response)));
      // `on`, not `once`: a socket error after the response still lands on req and must not go unhandled.
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (answered) return;
        // A kept connection the receiver closed as we reused it, without answering: once more, on a connection of its own
        // (the receiver may have read it: a repeat, with the same webhook-id, which at-least-once delivery allows).
        if (req.reusedSocket && error.code === 'ECONNRESET' && attempt.ended === undefined) {
          resolve(post(url, headers, body, attempt, true));
        } else reject(error);
      });
      req.end(body);
    });

  return {
    async send({ url, id, body, secrets, signal }) {
      const started = performance.now();
      const elapsed = () => Math.round(performance.now() - started);
      const refused = (error: string): SendResult => ({ outcome: 'retry', error, durationMs: elapsed() });

      const problem = explainUrl(url, { needsMediaKind: false });
      if (problem) return refused(problem);
      const target = new URL(url);
      const literal = refuseLiteralAddress(target.hostname, allowLoopback);
      if (literal) return refused(literal);

      const timestamp = Math.floor(clock.now().getTime() / 1000);
      const payload = Buffer.from(body, 'utf8');
      const headers = { ...webhookHeaders({ id, timestamp, body, secrets }), 'content-length': String(payload.length), 'accept-encoding': 'identity' };
      // After the headers: a malformed secret is a bug, thrown whether or not the caller has given up.
      if (signal?.aborted) return refused('cancelled');
      // The attempt's deadline and the caller's abort end the request in flight: a timer and a listener, not an
      // AbortSignal.timeout combined with the caller's and handed to the request (which made two signals, a weak
      // reference and a listener on the request for every attempt: ≈ 1.5 % of the pipeline's main thread, BENCHMARKS.md).
      const attempt: Attempt = { ended: undefined, req: undefined };
      const end = (why: 'timeout' | 'cancelled') => {
        if (attempt.ended !== undefined) return;
        attempt.ended = why;
        attempt.req?.destroy(new Error(why === 'timeout' ? `timed out after ${timeoutMs} ms` : 'cancelled'));
      };
      const deadline = setTimeout(end, timeoutMs, 'timeout');
      deadline.unref();
      const onAbort = () => end('cancelled');
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        let response: IncomingMessage;
        try {
          response = await post(target, headers, payload, attempt);
        } catch (error) {
          if (attempt.ended === 'timeout') return refused(`timed out after ${timeoutMs} ms`);
          if (attempt.ended === 'cancelled') return refused('cancelled');
          return refused((error as Error).message);
        }
        const status = response.statusCode ?? 0;
        const retryAfter = response.headers['retry-after'];
        await discardBody(response);
        const durationMs = elapsed();

        if (status >= 200 && status <= 299) return { outcome: 'delivered', status, durationMs };
        if (status === 410) return { outcome: 'gone', status, durationMs };
        const retryAfterMs = status === 429 || status === 503 ? parseRetryAfter(retryAfter, clock.now()) : undefined;
        return { outcome: 'retry', status, ...(retryAfterMs === undefined ? {} : { retryAfterMs }), durationMs };
      } finally {
        clearTimeout(deadline);
        signal?.removeEventListener('abort', onAbort);
      }
    },
  };
}

/** One attempt in flight: its request (the second, when a reused connection was closed under the first), and why it ended early. */
interface Attempt {
  ended: 'timeout' | 'cancelled' | undefined;
  req: ClientRequest | undefined;
}

/** Reads the answer up to MAX_RESPONSE_BYTES, then lets the socket go; never rejects. */
function discardBody(response: IncomingMessage): Promise<void> {
  return new Promise((resolve) => {
    let bytes = 0;
    response.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      if (bytes > MAX_RESPONSE_BYTES) response.destroy();
    });
    response.once('end', resolve).once('close', resolve).on('error', () => resolve());
  });
}

/** `Retry-After` as milliseconds from now: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | undefined {
  const text = value?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}
