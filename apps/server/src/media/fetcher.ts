/**
 * The reference-media fetcher: downloads a task's reference URL to a local file before a local
 * render, under D5's URL rules. Every way the media can fail comes back as `{ ok: false, reason }`,
 * which the pipeline turns into the task error `media_unavailable`; a reason names the URL and
 * is written for the person who submitted it. Only a local problem (the destination cannot be
 * written) throws, because that is not the media's fault.
 */
import { randomUUID } from 'node:crypto';
import { lookup as dnsLookup } from 'node:dns';
import { open, rename, rm, type FileHandle } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { request, type RequestOptions } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { pipeline } from 'node:stream/promises';
import { createSecureContext, rootCertificates, type ConnectionOptions } from 'node:tls';
import type { MediaKind } from '../domain/catalog.js';
import { explainUrl } from '../domain/rules.js';
import { hostForRules, isLoopback, isPublicUnicast } from '../domain/address-policy.js';
import { hasMagicOf, SNIFF_BYTES } from './magic.js';

export type FetchResult = { ok: true; bytes: number; contentType?: string } | { ok: false; reason: string };

export interface MediaFetcher {
  /** Downloads `url` to `destinationPath`; on failure no file is left at either the destination or a temp path. */
  fetch(url: string, kind: MediaKind, destinationPath: string, signal?: AbortSignal): Promise<FetchResult>;
}

export interface MediaFetcherOptions {
  /** Lets loopback addresses through (never other private ranges). Test-only: it exists for a local HTTPS fixture. */
  allowLoopback?: boolean;
  /** Per-kind byte caps, merged over DEFAULT_MAX_BYTES. */
  maxBytes?: Partial<Record<MediaKind, number>>;
  /** Per hop, from socket creation to a finished TLS handshake (covers the DNS lookup). */
  connectTimeoutMs?: number;
  /** The whole fetch: every hop and the body. */
  totalTimeoutMs?: number;
  maxRedirects?: number;
  /** An extra trusted CA (the test fixture's self-signed certificate); the public roots stay trusted. */
  ca?: string | Buffer;
  /** dns.lookup-compatible; injectable so tests decide what names resolve to without touching DNS. */
  lookup?: LookupFunction;
}

const MiB = 1024 * 1024;
export const DEFAULT_MAX_BYTES: Readonly<Record<MediaKind, number>> = { image: 20 * MiB, video: 200 * MiB, audio: 50 * MiB };
const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
const KIND_FILE: Record<MediaKind, string> = { image: 'an image file', video: 'a video file', audio: 'an audio file' };

/** A failure whose message is already fit for the task's error. */
class Refusal extends Error {}

const isAllowedAddress = (address: string, allowLoopback: boolean) => isPublicUnicast(address) || (allowLoopback && isLoopback(address));

/**
 * A socket `lookup` that hands back only public unicast addresses (plus loopback when
 * `allowLoopback`, test-only). It runs inside the socket's connect, and the socket can only use
 * the addresses handed back here, so every address is checked on the connection that uses it: a
 * DNS answer that changes between a check and the connection (rebinding) gains nothing. Any bad
 * address refuses the whole name. Shared by every outbound request to a user-supplied URL.
 */
export function guardedLookup(options: { allowLoopback: boolean; lookup?: LookupFunction }): LookupFunction {
  const { allowLoopback } = options;
  const lookup = options.lookup ?? (dnsLookup as LookupFunction);
  return (hostname, lookupOptions, callback) => {
    lookup(hostname, { ...lookupOptions, all: true }, (error, result) => {
      if (error) return callback(error, '');
      const addresses = typeof result === 'string' ? [{ address: result, family: isIP(result) }] : result;
      const bad = addresses.find((a) => !isAllowedAddress(a.address, allowLoopback));
      if (bad) return callback(new Refusal(`${hostname} resolves to ${bad.address}, which is not public`), '');
      const [first] = addresses;
      if (!first) return callback(new Refusal(`${hostname} has no address`), '');
      if (lookupOptions.all) callback(null, addresses);
      else callback(null, first.address, first.family);
    });
  };
}

/**
 * Why a URL's host may not be connected to when it is a literal IP address (`URL.hostname`
 * read as `hostForRules` reads it: brackets and trailing dots allowed); undefined for a name or
 * an allowed address. A literal address never goes through the lookup, so it is judged here.
 * WHATWG parsing has already turned 2130706433, 0177.0.0.1 and 0x7f.1 into 127.0.0.1. A name
 * (`localhost.` too) is judged by the addresses it resolves to, in the lookup.
 */
export function refuseLiteralAddress(hostname: string, allowLoopback: boolean): string | undefined {
  const host = hostForRules(hostname);
  if (isIP(host) && !isAllowedAddress(host, allowLoopback)) return `address ${host} is not public`;
  return undefined;
}

const formatSize = (bytes: number) => (bytes % MiB === 0 ? `${bytes / MiB} MiB` : `${bytes} bytes`);

export function createMediaFetcher(options: MediaFetcherOptions = {}): MediaFetcher {
  const { allowLoopback = false, connectTimeoutMs = 10_000, totalTimeoutMs = 120_000, maxRedirects = 3 } = options;
  const maxBytes = { ...DEFAULT_MAX_BYTES, ...options.maxBytes };
  // Node's `ca` replaces its trust store; keep the public roots so the extra CA only adds.
  // Built once: parsing the trust store for every request cost ~30 ms of CPU each (a profile of the pipeline bench).
  const secureContext = options.ca ? createSecureContext({ ca: [...rootCertificates, options.ca] }) : undefined;

  const checkedLookup = guardedLookup({ allowLoopback, lookup: options.lookup });

  /** Why a URL (the first or a redirect's) may not be fetched; undefined when it may. */
  const urlProblem = (href: string): string | undefined => {
    const problem = explainUrl(href, { needsMediaKind: false });
    if (problem) return problem;
    return refuseLiteralAddress(new URL(href).hostname, allowLoopback);
  };

  const get = (url: URL, signal: AbortSignal) =>
    new Promise<IncomingMessage>((resolve, reject) => {
      // agent: false — a fresh socket per hop, so no pooled connection skips the lookup check.
      const req = request(url, <RequestOptions & ConnectionOptions>{
        agent: false,
        secureContext,
        lookup: checkedLookup,
        signal,
        headers: { accept: '*/*', 'accept-encoding': 'identity' },
      });
      // `on`, not `once`: a socket error after the response still lands on req and must not go unhandled.
      req.once('response', resolve).on('error', reject);
      req.once('socket', (socket) => {
        const timer = setTimeout(() => req.destroy(new Refusal(`no connection within ${connectTimeoutMs} ms`)), connectTimeoutMs);
        socket.once('secureConnect', () => clearTimeout(timer));
        req.once('close', () => clearTimeout(timer));
      });
      req.end();
    });

  /** The final non-redirect response, each redirect re-checked as if it were the first URL. */
  const follow = async (url: string, signal: AbortSignal): Promise<IncomingMessage> => {
    let current = url;
    for (let redirects = 0; ; redirects++) {
      const response = await get(new URL(current), signal);
      const status = response.statusCode ?? 0;
      if (!REDIRECT_STATUSES.has(status)) return response;
      response.destroy();
      if (redirects === maxRedirects) throw new Refusal(`more than ${maxRedirects} redirects`);
      const location = response.headers.location;
      if (!location || !URL.canParse(location, current)) throw new Refusal(`HTTP ${status} redirect without a valid Location`);
      const next = new URL(location, current).href;
      const problem = urlProblem(next);
      if (problem) throw new Refusal(`redirect to ${next} refused: ${problem}`);
      current = next;
    }
  };

  const download = async (url: string, kind: MediaKind, file: FileHandle, signal: AbortSignal) => {
    const response = await follow(url, signal);
    const status = response.statusCode ?? 0;
    const cap = maxBytes[kind];
    const tooLarge = () => new Refusal(`is larger than the ${formatSize(cap)} allowed for ${kind}`);
    if (status < 200 || status > 299) {
      response.destroy();
      throw new Refusal(`server answered HTTP ${status}`);
    }
    if (Number(response.headers['content-length']) > cap) {
      response.destroy();
      throw tooLarge();
    }
    let bytes = 0;
    let head = Buffer.alloc(0);
    const sniff = () => {
      if (!hasMagicOf(kind, head)) throw new Refusal(`is not ${KIND_FILE[kind]}`);
    };
    await pipeline(
      response,
      async function* (body: AsyncIterable<Buffer>) {
        for await (const chunk of body) {
          bytes += chunk.length;
          if (bytes > cap) throw tooLarge();
          if (head.length < SNIFF_BYTES) {
            head = Buffer.concat([head, chunk]);
            if (head.length >= SNIFF_BYTES) sniff();
          }
          yield chunk;
        }
        if (head.length < SNIFF_BYTES) sniff();
      },
      file.createWriteStream(),
      { signal },
    );
    const contentType = response.headers['content-type'];
    return { ok: true as const, bytes, ...(contentType ? { contentType } : {}) };
  };

  return {
    async fetch(url, kind, destinationPath, signal) {
      const fail = (reason: string): FetchResult => ({ ok: false, reason: `${url}: ${reason}` });
      const problem = urlProblem(url);
      if (problem) return fail(problem);

      const deadline = AbortSignal.timeout(totalTimeoutMs);
      const abort = signal ? AbortSignal.any([signal, deadline]) : deadline;
      // Written beside the destination and renamed into place, so a reader never sees a partial
      // file. Opened before any network so a local problem throws instead of blaming the media.
      const temp = `${destinationPath}.${randomUUID()}.part`;
      const file = await open(temp, 'wx');
      try {
        const outcome: FetchResult = await download(url, kind, file, abort).catch((error: unknown) => {
          if (deadline.aborted) return fail(`timed out after ${totalTimeoutMs} ms`);
          if (signal?.aborted) return fail('cancelled');
          return fail(error instanceof Refusal ? error.message : `could not be fetched (${(error as Error).message})`);
        });
        await file.close();
        if (outcome.ok) await rename(temp, destinationPath);
        return outcome;
      } finally {
        await file.close();
        await rm(temp, { force: true });
      }
    },
  };
}
