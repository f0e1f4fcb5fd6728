/**
 * The web console's build (`@vidgen/console`'s dist/), served at /console. Read once from disk
 * (a few hundred KB) and kept in memory; absent until the console has been built.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';

export interface ConsoleAsset {
  body: Uint8Array;
  /** The body gzipped once at load, for text files where it is smaller (scripts are most of the first page's bytes). */
  gzip: Uint8Array | undefined;
  type: string;
  /** Vite names these by their content's hash: cacheable forever. */
  immutable: boolean;
}

export interface ConsoleAssets {
  /** The app's page, answered for /console and every path under it that is not a file (the app routes in the browser). */
  page: ConsoleAsset;
  /** A file of the build by its path under /console/ (`assets/index-3f2a.js`). */
  files: ReadonlyMap<string, ConsoleAsset>;
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json',
  '.mp4': 'video/mp4',
};

export function readConsoleAssets(dir: string): ConsoleAssets | undefined {
  let names: string[];
  try {
    names = readdirSync(dir, { recursive: true, encoding: 'utf8' });
  } catch {
    return undefined;
  }
  const files = new Map<string, ConsoleAsset>();
  for (const name of names) {
    const path = join(dir, name);
    if (!statSync(path).isFile()) continue;
    const urlPath = relative(dir, path).split(sep).join('/');
    const body = readFileSync(path);
    const type = TYPES[extname(name)] ?? 'application/octet-stream';
    const gzip = /^text\/|svg|json/.test(type) ? gzipSync(body, { level: 9 }) : undefined;
    files.set(urlPath, {
      body,
      gzip: gzip && gzip.byteLength < body.byteLength ? gzip : undefined,
      type,
      immutable: urlPath.startsWith('assets/'),
    });
  }
  const page = files.get('index.html');
  if (!page) return undefined;
  files.delete('index.html');
  return { page, files };
}

/** Where the workspace's console build is (the server depends on `@vidgen/console`); undefined when it is not installed. */
export function consoleBuildDir(): string | undefined {
  try {
    return join(dirname(createRequire(import.meta.url).resolve('@vidgen/console/package.json')), 'dist');
  } catch {
    return undefined;
  }
}

/** Reads the build on first use, and again while it is missing (a build finishing after the start is picked up). */
export function consoleAssetsLoader(dir: string | undefined = consoleBuildDir()): () => ConsoleAssets | undefined {
  let assets: ConsoleAssets | undefined;
  return () => (assets ??= dir ? readConsoleAssets(dir) : undefined);
}
