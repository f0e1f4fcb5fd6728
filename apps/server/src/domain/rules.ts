/**
 * The submission rules of D5 that JSON Schema cannot say, and readable
 * explanations for the ones it can (the schema decides; these say why).
 * Pure: no I/O.
 */
import { isIP } from 'node:net';
import { hostForRules, isLocalhostName, isLoopback, isPublicUnicast } from './address-policy.js';
import { MODEL_RULES, type GenerationMode, type MediaKind, type ModelId } from './catalog.js';

export interface RuleViolation {
  field: string;
  message: string;
}

const KIND_BY_EXTENSION: Readonly<Record<string, MediaKind>> = {
  jpg: 'image',
  jpeg: 'image',
  png: 'image',
  webp: 'image',
  gif: 'image',
  bmp: 'image',
  mp4: 'video',
  mov: 'video',
  m4v: 'video',
  mp3: 'audio',
  wav: 'audio',
};
const EXTENSIONS = Object.keys(KIND_BY_EXTENSION).map((e) => `.${e}`).join(' ');

export const METADATA_MAX_BYTES = 4096;
export const URL_MAX_LENGTH = 2048;

/**
 * The kind of a reference by its path's extension (case-insensitive, query ignored).
 * Read from the text, not through a URL parser: a URL the spec accepts has a kind even
 * when WHATWG parsing refuses its host (`https://08/a.png`), so the mode never depends
 * on the parser (such a URL fails later, when fetched, with media_unavailable).
 */
export function mediaKindOf(url: string): MediaKind | undefined {
  const path = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, '').replace(/[?#][^]*$/, '');
  const extension = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return extension ? KIND_BY_EXTENSION[extension] : undefined;
}

export function inferMode(kinds: readonly MediaKind[]): GenerationMode {
  if (kinds.length === 0) return 'text_to_video';
  const images = kinds.filter((k) => k === 'image').length;
  if (images === kinds.length && images === 1) return 'first_frame';
  if (images === kinds.length && images === 2) return 'first_last_frame';
  return 'multimodal_reference';
}

/** Why a reference or webhook URL breaks the URL rules, in words; undefined when it does not. */
export function explainUrl(url: string, { needsMediaKind }: { needsMediaKind: boolean }): string | undefined {
  if (url.length > URL_MAX_LENGTH) return `is longer than ${URL_MAX_LENGTH} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'is not a valid URL';
  }
  if (parsed.protocol !== 'https:') return 'must be an https:// URL';
  if (parsed.username || parsed.password) return 'must not contain a user name or password';
  if (needsMediaKind && !mediaKindOf(url)) return `must end in a known extension (${EXTENSIONS})`;
  return undefined;
}

/** "a video", "audio": a reference kind as a phrase. */
export const kindPhrase = (kind: MediaKind) => (kind === 'audio' ? 'audio' : kind === 'image' ? 'an image' : `a ${kind}`);

/** NUL, or a UTF-16 surrogate without its pair: not text, and not storable as such (PostgreSQL refuses both). */
const NOT_TEXT = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The JSON Pointer of the first key or string inside `value` that is not text, if any (iterative: metadata may nest). */
function firstNonText(value: unknown, pointer: string): string | undefined {
  for (const stack: [unknown, string][] = [[value, pointer]]; stack.length; ) {
    const [item, at] = stack.pop()!;
    if (typeof item === 'string') {
      if (NOT_TEXT.test(item)) return at;
    } else if (item && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        const childAt = `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
        if (NOT_TEXT.test(key)) return childAt;
        stack.push([child, childAt]);
      }
    }
  }
  return undefined;
}

/** Rules beyond the schema, for a body the schema has accepted. */
/**
 * Why a URL's host cannot be public, when that is plain from the URL itself (D5): a literal address
 * that is not public unicast, or `localhost`. Names are resolved only when fetched or delivered to
 * (and every address checked then), so a submission does not wait on DNS.
 */
export function explainHost(url: string, allowLoopback: boolean): string | undefined {
  let host: string;
  try {
    // Every spelling of one name or address judged alike: `LOCALHOST.`, `sub.localhost.`, `0x7f.1`, `[::ffff:127.0.0.1]`.
    host = hostForRules(new URL(url).hostname);
  } catch {
    return undefined;
  }
  if (isIP(host)) return isPublicUnicast(host) || (allowLoopback && isLoopback(host)) ? undefined : `has the address ${host}, which is not public`;
  if (isLocalhostName(host) && !allowLoopback) return `has the host ${host}, which is not public`;
  return undefined;
}

export function checkSubmissionRules(
  body: { model: ModelId; prompt?: string; mediaUrls?: string[]; metadata?: object; webhookUrl?: string },
  allowLoopback: { media: boolean; webhooks: boolean } = { media: false, webhooks: false },
): RuleViolation[] {
  const violations: RuleViolation[] = [];
  (body.mediaUrls ?? []).forEach((url, i) => {
    const problem = explainHost(url, allowLoopback.media);
    if (problem) violations.push({ field: `/mediaUrls/${i}`, message: problem });
  });
  const hookProblem = body.webhookUrl === undefined ? undefined : explainHost(body.webhookUrl, allowLoopback.webhooks);
  if (hookProblem) violations.push({ field: '/webhookUrl', message: hookProblem });
  for (const [field, value] of [
    ['/prompt', body.prompt],
    ['/metadata', body.metadata],
  ] as const) {
    const at = firstNonText(value, field);
    if (at) violations.push({ field: at, message: 'must be text: no NUL character (U+0000) and no unpaired surrogate' });
  }
  const kinds = (body.mediaUrls ?? []).map((url) => mediaKindOf(url));
  const allowed = MODEL_RULES[body.model].media.kinds;
  kinds.forEach((kind, i) => {
    if (kind && !allowed.includes(kind)) {
      violations.push({ field: `/mediaUrls/${i}`, message: `is ${kindPhrase(kind)}; ${body.model} accepts ${allowed.join(', ')} only` });
    }
  });
  if (kinds.includes('audio') && !kinds.some((k) => k === 'image' || k === 'video')) {
    violations.push({ field: '/mediaUrls', message: 'audio needs at least one image or video beside it' });
  }
  if (body.metadata !== undefined && Buffer.byteLength(JSON.stringify(body.metadata)) > METADATA_MAX_BYTES) {
    violations.push({ field: '/metadata', message: `must be at most ${METADATA_MAX_BYTES} bytes serialized` });
  }
  return violations;
}
