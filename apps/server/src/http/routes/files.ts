/** Output files at signed, expiring URLs, with HEAD and single byte ranges (video players seek). */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { Routes } from '../frame.js';
import type { AppEnv } from '../context.js';
import type { AppDeps } from '../deps.js';
import { ApiError } from '../errors.js';

/** A single `bytes=` range resolved against the size; `undefined` = serve everything; `null` = unsatisfiable. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | undefined | null {
  const match = header && /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  const [, from, to] = match;
  if (from === '') {
    const suffix = Number(to);
    if (suffix === 0) return null;
    // The last bytes of an empty file: no range can say "none of them" (`bytes 0--1/0`), so the whole, empty file.
    if (size === 0) return undefined;
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(from);
  if (start >= size) return null;
  const end = to === '' ? size - 1 : Math.min(Number(to), size - 1);
  return end < start ? undefined : { start, end };
}

export function registerFileRoutes(app: Routes, deps: AppDeps): void {
  const files = deps.files;
  if (!files) return;
  app.get('/files/:fileName', async (c) => {
    const key = c.req.param('fileName')!;
    if (!files.verify(key, c.req.query('expires'), c.req.query('sig'), deps.clock.now())) {
      throw new ApiError('forbidden', 'this file link is invalid or has expired');
    }
    const file = await files.locate(key);
    if (!file) throw new ApiError('not_found', `no file ${key}`);
    const range = parseRange(c.req.header('range'), file.size);
    if (range === null) {
      throw new ApiError('range_not_satisfiable', `the file has ${file.size} bytes`, undefined, { 'Content-Range': `bytes */${file.size}` });
    }
    const { start, end } = range ?? { start: 0, end: file.size - 1 };
    const headers: Record<string, string> = {
      'Content-Type': 'video/mp4',
      'Accept-Ranges': 'bytes',
      'Content-Length': String(end - start + 1),
      'Cache-Control': 'private, max-age=3600',
      'X-Content-Type-Options': 'nosniff',
    };
    if (range) headers['Content-Range'] = `bytes ${start}-${end}/${file.size}`;
    const status = range ? 206 : 200;
    if (c.req.method === 'HEAD' || file.size === 0) return c.body(null, status, headers);
    return c.body(Readable.toWeb(createReadStream(file.path, { start, end })) as ReadableStream, status, headers);
  });
}
