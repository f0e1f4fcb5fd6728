/**
 * Security headers on every answer, errors included. Most answers are JSON for
 * programs, so their policy forbids everything a browser could do with them;
 * the reference page (/docs) may run its own inline scripts, identified by
 * hash, the console (/console) runs its own scripts from this origin only, and
 * output files (/files) may be embedded by other sites' players.
 * No Strict-Transport-Security: TLS ends in front of this service, which is
 * where HSTS belongs (the service itself speaks plain HTTP on loopback in development).
 */
import { createHash } from 'node:crypto';
import type { Context } from 'hono';
import type { AppEnv } from './context.js';

const EVERY_ANSWER: Record<string, string> = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
};

/** JSON and errors: nothing may run, load, submit or frame them. */
export const LOCKED_DOWN_CSP = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** An output file opened directly: the browser's own player page must still load the video from here. */
export const FILE_CSP = "default-src 'none'; media-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/**
 * The reference page is one HTML file built by Redoc with its scripts inline:
 * those scripts (by SHA-256, so nothing injected would run), inline styles
 * (styled-components adds them at run time), images and fonts from the page
 * itself or data: URLs, fetches to this origin only. Refused, with the page
 * still whole (checked in Chromium): Redoc's logo on its CDN, its telemetry
 * POST to redocly.com, and a `Function()` probe for a search worker.
 */
export function docsContentSecurityPolicy(html: string): string {
  const hashes = [...html.matchAll(/<script\b[^>]*>([\s\S]*?)<\/script\s*>/gi)].map(
    ([, body]) => `'sha256-${createHash('sha256').update(body!, 'utf8').digest('base64')}'`,
  );
  return [
    "default-src 'none'",
    `script-src ${hashes.length ? hashes.join(' ') : "'none'"}`,
    "style-src 'unsafe-inline'",
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/**
 * The console is a built single-page app: scripts, styles and images from this origin only (no
 * inline script or style element, no eval), API calls to this origin only, and videos from here or
 * wherever output files are served (`mediaOrigins`: a public base URL or a bucket elsewhere).
 */
export function consoleContentSecurityPolicy(mediaOrigins: readonly string[] = []): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "font-src 'self'",
    `media-src 'self'${mediaOrigins.map((origin) => ` ${origin}`).join('')}`,
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** A JSON answer (answer.ts), by where it is: locked down, and under /api/ kept out of caches. */
const JSON_ANSWER = { ...EVERY_ANSWER, 'Content-Security-Policy': LOCKED_DOWN_CSP, 'Cross-Origin-Resource-Policy': 'same-origin' };
const JSON_ANSWER_BY_PLACE = {
  // Task answers hold signed output URLs: no shared cache may keep them.
  api: { ...JSON_ANSWER, 'Cache-Control': 'no-store' },
  files: { ...JSON_ANSWER, 'Cross-Origin-Resource-Policy': 'cross-origin' },
  other: JSON_ANSWER,
};

/**
 * The headers of every JSON answer (answer.ts) to a request for `path`: its Content-Type, its
 * correlation id and the security headers of the place. A new object each time: the request's
 * middleware adds to it, and `answer()` hands it to Node as it is.
 */
export function jsonAnswerHeaders(path: string, correlationId: string): Record<string, string> {
  const place = path.startsWith('/api/') ? JSON_ANSWER_BY_PLACE.api : path.startsWith('/files/') ? JSON_ANSWER_BY_PLACE.files : JSON_ANSWER_BY_PLACE.other;
  return { 'Content-Type': 'application/json', 'X-Correlation-Id': correlationId, ...place };
}

/**
 * For an answer not built by `answer()` (a file, the docs, the console, Hono's own): sets its
 * security headers after the route, by where it is and what it is.
 */
export function securingOtherAnswers(deps: {
  docsHtml?: () => string | undefined;
  consoleMediaOrigins?: () => Promise<string[]>;
}): (c: Context<AppEnv>, path: string) => void | Promise<void> {
  let docs: { html: string; csp: string } | undefined;
  let consolePolicy: string | undefined;
  const consolePolicyOnce = async () => {
    if (consolePolicy) return consolePolicy;
    const origins = await (deps.consoleMediaOrigins?.() ?? Promise.resolve([])).catch(() => []);
    return (consolePolicy = consoleContentSecurityPolicy(origins));
  };
  const docsPolicy = (html: string) => {
    if (docs?.html !== html) docs = { html, csp: docsContentSecurityPolicy(html) };
    return docs.csp;
  };
  const secure = (headers: Headers, path: string, policy: string) => {
    for (const [name, value] of Object.entries(EVERY_ANSWER)) headers.set(name, value);
    headers.set('Content-Security-Policy', policy);
    // Output files are meant to be played by other sites' pages (<video src>); everything else is this origin's.
    headers.set('Cross-Origin-Resource-Policy', path.startsWith('/files/') ? 'cross-origin' : 'same-origin');
    // Task answers hold signed output URLs: no shared cache may keep them.
    if (path.startsWith('/api/') && !headers.has('Cache-Control')) headers.set('Cache-Control', 'no-store');
  };
  return (c, path) => {
    const html = path === '/docs' && c.res.status === 200 ? deps.docsHtml?.() : undefined;
    if (html) return secure(c.res.headers, path, docsPolicy(html));
    if ((path === '/console' || path.startsWith('/console/')) && c.res.ok) {
      return consolePolicyOnce().then((policy) => secure(c.res.headers, path, policy));
    }
    secure(c.res.headers, path, path.startsWith('/files/') && c.res.ok ? FILE_CSP : LOCKED_DOWN_CSP);
  };
}
