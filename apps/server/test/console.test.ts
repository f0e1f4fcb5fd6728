/** The web console at /console: its page for every path under it, its files, its CSP, its absence. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';
import { consoleAssetsLoader, readConsoleAssets } from '../src/http/console-assets.js';
import { consoleContentSecurityPolicy, LOCKED_DOWN_CSP } from '../src/http/security-headers.js';
import { harness } from './support.js';

const PAGE = '<!doctype html><html lang="en"><head><script type="module" crossorigin src="/console/assets/index-abc123.js"></script></head><body><div id="root"></div></body></html>';
const SCRIPT = `export const app = ${JSON.stringify('x'.repeat(4096))};\n`;

const dirs: string[] = [];
afterAll(() => dirs.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

function build(files: Record<string, string> = { 'index.html': PAGE, 'assets/index-abc123.js': SCRIPT, 'favicon.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>' }): string {
  const dir = mkdtempSync(join(tmpdir(), 'vidgen-console-'));
  dirs.push(dir);
  for (const [name, body] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), body);
  }
  return dir;
}

function withConsole(dir = build(), origins: () => Promise<string[]> = async () => []) {
  return harness({ consoleAssets: consoleAssetsLoader(dir), consoleMediaOrigins: origins });
}

describe('the console at /console', () => {
  it.each(['/console', '/console/', '/console/tasks/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0', '/console/keys'])('answers its page for %s, never cached stale', async (path) => {
    const res = await withConsole().request('GET', path);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(await res.text()).toBe(PAGE);
  });

  it("sends a CSP that lets the page run only this origin's scripts and play videos from where output files are", async () => {
    const res = await withConsole(build(), async () => ['http://127.0.0.1:8080']).request('GET', '/console/');
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toBe(consoleContentSecurityPolicy(['http://127.0.0.1:8080']));
    const directives = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));
    expect(directives).toMatchObject({
      'default-src': "'none'",
      'script-src': "'self'",
      'style-src': "'self'",
      'connect-src': "'self'",
      'media-src': "'self' http://127.0.0.1:8080",
      'frame-ancestors': "'none'",
    });
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
    expect(res.headers.get('x-frame-options')).toBe('DENY');
  });

  it("keeps 'self' only for media when output files' origin cannot be told", async () => {
    const res = await withConsole(build(), async () => {
      throw new Error('no credentials for the presigner');
    }).request('GET', '/console/');
    expect(res.headers.get('content-security-policy')).toContain("media-src 'self';");
  });

  it('gives the console policy to /console alone: the API, the docs and unknown paths keep theirs', async () => {
    const h = withConsole();
    for (const path of ['/api/open/v1/models', '/healthz', '/consoles', '/console-x']) {
      const res = await h.request('GET', path);
      expect(res.headers.get('content-security-policy'), path).toBe(LOCKED_DOWN_CSP);
    }
  });

  it('serves its hashed files cacheable forever, gzipped for a browser that takes gzip', async () => {
    const h = withConsole();
    const plain = await h.request('GET', '/console/assets/index-abc123.js');
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(plain.headers.get('vary')).toBe('Accept-Encoding');
    expect(await plain.text()).toBe(SCRIPT);

    const gzipped = await h.request('GET', '/console/assets/index-abc123.js', { headers: { 'Accept-Encoding': 'gzip, deflate, br' } });
    expect(gzipped.headers.get('content-encoding')).toBe('gzip');
    const bytes = Buffer.from(await gzipped.arrayBuffer());
    expect(Number(gzipped.headers.get('content-length'))).toBe(bytes.byteLength);
    expect(bytes.byteLength).toBeLessThan(SCRIPT.length / 4);
    expect(gunzipSync(bytes).toString()).toBe(SCRIPT);

    const refused = await h.request('GET', '/console/assets/index-abc123.js', { headers: { 'Accept-Encoding': 'gzip;q=0, identity' } });
    expect(refused.headers.get('content-encoding')).toBeNull();
  });

  it('serves files outside assets/ as they are, revalidated', async () => {
    const res = await withConsole().request('GET', '/console/favicon.svg');
    expect(res.headers.get('content-type')).toBe('image/svg+xml');
    expect(res.headers.get('cache-control')).toBe('no-cache');
  });

  it("answers a missing script with 404 in the envelope, not the page (a stale tab asking for an old build's chunk)", async () => {
    const res = await withConsole().request('GET', '/console/assets/index-old999.js');
    expect(res.status).toBe(404);
    expect(((await res.json()) as any).error.code).toBe('not_found');
    expect(res.headers.get('content-security-policy')).toBe(LOCKED_DOWN_CSP);
  });

  it('answers HEAD with the headers and no body', async () => {
    const res = await withConsole().request('HEAD', '/console/');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-length')).toBe(String(PAGE.length));
    expect(await res.text()).toBe('');
  });

  it('refuses other methods on /console with 405 and Allow', async () => {
    const res = await withConsole().request('POST', '/console', { body: {} });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, HEAD');
  });

  it('answers 503 in the envelope while the console has not been built, and serves it once it is', async () => {
    const dir = build({});
    const h = harness({ consoleAssets: consoleAssetsLoader(dir) });
    const before = await h.request('GET', '/console/');
    expect(before.status).toBe(503);
    expect(((await before.json()) as any).error).toMatchObject({ code: 'unavailable', message: expect.stringContaining('pnpm build') });
    expect(before.headers.get('retry-after')).toBe('60');
    writeFileSync(join(dir, 'index.html'), PAGE);
    expect((await h.request('GET', '/console/')).status).toBe(200);
    expect((await harness().request('GET', '/console/')).status).toBe(503);
  });
});

describe('reading the console build', () => {
  it('reads nested files by their URL path and keeps the page apart', () => {
    const assets = readConsoleAssets(build())!;
    expect(assets.page.body.toString()).toBe(PAGE);
    expect([...assets.files.keys()].sort()).toEqual(['assets/index-abc123.js', 'favicon.svg']);
    expect(assets.files.get('assets/index-abc123.js')!.immutable).toBe(true);
    expect(assets.files.get('favicon.svg')!.immutable).toBe(false);
  });

  it('is absent for a missing folder or a build without its page', () => {
    expect(readConsoleAssets(join(tmpdir(), 'vidgen-no-such-dir'))).toBeUndefined();
    expect(readConsoleAssets(build({ 'assets/a.js': 'x' }))).toBeUndefined();
  });
});
