/**
 * The first page's JavaScript, gzipped, stays within 150 KB: the entry script named by the built
 * index.html, every chunk it imports statically, and the Overview page's chunk (the page a
 * signed-in visit opens) with its own static imports — what a browser must fetch before the first
 * page is usable. Gzipped as the server sends them (level 9, http/console-assets.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

const dist = resolve(import.meta.dirname, '../../dist');
const BUDGET_BYTES = 150_000;

function staticImports(file: string): string[] {
  const code = readFileSync(resolve(dist, file), 'utf8');
  // Minified static imports: `import{a as b}from"./x.js"` and `import"./x.js"` (dynamic `import(` excluded).
  return [...code.matchAll(/\bimport\s*(?:[\w$*{},\s]+?\s*from\s*)?["'`](\.\/[^"'`]+\.js)["'`]/g)].map(([, path]) => `assets/${path!.slice(2)}`);
}

function closure(entries: string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [...entries];
  while (queue.length) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    queue.push(...staticImports(file));
  }
  return seen;
}

describe('the built console', () => {
  it.skipIf(!existsSync(resolve(dist, 'index.html')) && process.env.CI !== 'true')('loads its first page with at most 150 KB of gzipped JavaScript', () => {
    const html = readFileSync(resolve(dist, 'index.html'), 'utf8');
    const entry = html.match(/<script type="module"[^>]*src="\/console\/(assets\/[^"]+\.js)"/)?.[1];
    expect(entry, 'index.html names its entry script').toBeDefined();
    const overview = readFileSync(resolve(dist, entry!), 'utf8').match(/["'`]\.\/(OverviewPage-[^"'`]+\.js)["'`]/)?.[1];
    expect(overview, 'the entry imports the Overview chunk lazily').toBeDefined();
    const files = closure([entry!, `assets/${overview}`]);
    const sizes = [...files].map((file) => ({ file, gzip: gzipSync(readFileSync(resolve(dist, file)), { level: 9 }).byteLength }));
    const total = sizes.reduce((sum, { gzip }) => sum + gzip, 0);
    console.log(`first page JavaScript: ${(total / 1000).toFixed(1)} KB gzipped in ${files.size} files (${sizes.map((s) => `${s.file} ${(s.gzip / 1000).toFixed(1)} KB`).join(', ')})`);
    expect(total).toBeLessThanOrEqual(BUDGET_BYTES);
  });

  it.skipIf(!existsSync(resolve(dist, 'index.html')) && process.env.CI !== 'true')('has no inline script or style in its page (the CSP allows neither)', () => {
    const html = readFileSync(resolve(dist, 'index.html'), 'utf8');
    expect(html.match(/<script\b[^>]*>/g)!.every((tag) => / src="/.test(tag))).toBe(true);
    expect(html).not.toMatch(/<script\b[^>]*>[^<]+<\/script>/);
    expect(html).not.toMatch(/<style\b|\sstyle="/);
  });
});
