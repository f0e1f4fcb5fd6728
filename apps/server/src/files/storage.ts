/**
 * Output files (D13): each result is kept and served at a URL that expires.
 * Local disk here, served by this service at /files with its own signature;
 * an S3-compatible bucket (s3-storage.ts) for deployments of several machines.
 * output-files.ts picks one from configuration.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { copyFile, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

export interface OutputFiles {
  /** Moves a finished file into storage; returns its key. A file at a path placeFor gave is there already: only its key. */
  put(taskId: string, sourcePath: string): Promise<string>;
  /**
   * Storage on this machine's disk only: where an attempt's output is written to be kept where it lies, under a key of
   * its own (the first attempt's is the task's, `<task>.mp4`; a later one's `<task>-<attempt>.mp4`, so that a render
   * another claim left running cannot write over its retry's). The worker has a provider that renders in this process
   * write there, and put() then moves nothing: a rename a task fewer. Absent where outputs are kept elsewhere (a bucket).
   */
  placeFor?(taskId: string, attempt: number): string;
  /** A URL that serves the file until `expiresAt` (async: a bucket's presigner may look up credentials). */
  urlFor(key: string, expiresAt: Date): Promise<string>;
  /** Whether `expires`/`sig` from a /files URL are genuine and not past. */
  verify(key: string, expires: string | undefined, sig: string | undefined, now: Date): boolean;
  /** The file on local disk for the /files route, or undefined when it is gone or not kept here. */
  locate(key: string): Promise<{ path: string; size: number } | undefined>;
  remove(key: string): Promise<void>;
}

/** An output's key: its task's id, and the attempt after the first that wrote it in place (placeFor). */
export const KEY = /^gen_[0-9A-Za-z]{16,64}(-[1-9][0-9]{0,5})?\.mp4$/;

/**
 * The signing secret: configured, or made once and kept in the data dir so URLs survive restarts.
 * Processes starting together on a new data dir all end up with the one secret made first: each
 * writes a candidate whole under a name of its own and hard-links it into place, which fails
 * (EEXIST) for all but the first; then every one reads the file in place, never half written.
 */
export function loadSigningSecret(dataDir: string, configured: string | undefined): Buffer {
  if (configured) return Buffer.from(configured, 'utf8');
  const path = join(dataDir, 'file-url-secret');
  if (!existsSync(path)) {
    mkdirSync(dataDir, { recursive: true });
    const candidate = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
    try {
      writeFileSync(candidate, randomBytes(32).toString('base64'), { mode: 0o600, flag: 'wx' });
      linkSync(candidate, path);
    } catch (error) {
      // Another process's secret got there first: that one is used.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    } finally {
      rmSync(candidate, { force: true });
    }
  }
  return Buffer.from(readFileSync(path, 'utf8').trim(), 'base64');
}

/** `publicBaseUrl` may be a function: the port is known only once the server listens. */
export function createLocalOutputFiles(options: { directory: string; publicBaseUrl: string | (() => string); secret: Buffer }): OutputFiles {
  mkdirSync(options.directory, { recursive: true });
  const base = () => (typeof options.publicBaseUrl === 'function' ? options.publicBaseUrl() : options.publicBaseUrl).replace(/\/$/, '');
  const sign = (key: string, expires: string) => createHmac('sha256', options.secret).update(`${key}:${expires}`).digest('base64url');
  const directory = resolve(options.directory);
  const pathOf = (key: string) => join(directory, key);

  return {
    async put(taskId, sourcePath) {
      // Written where it is kept (placeFor).
      const name = basename(sourcePath);
      if (dirname(sourcePath) === directory && KEY.test(name) && (name === `${taskId}.mp4` || name.startsWith(`${taskId}-`))) return name;
      const key = `${taskId}.mp4`;
      try {
        await rename(sourcePath, pathOf(key));
      } catch (error) {
        // Across file systems a rename fails; copy instead.
        if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
        await copyFile(sourcePath, pathOf(key));
        await rm(sourcePath, { force: true });
      }
      return key;
    },
    placeFor(taskId, attempt) {
      return pathOf(attempt > 1 ? `${taskId}-${attempt}.mp4` : `${taskId}.mp4`);
    },
    async urlFor(key, expiresAt) {
      const expires = String(Math.floor(expiresAt.getTime() / 1000));
      return `${base()}/files/${key}?expires=${expires}&sig=${sign(key, expires)}`;
    },
    verify(key, expires, sig, now) {
      if (!KEY.test(key) || !expires || !sig || !/^\d{1,12}$/.test(expires)) return false;
      if (Number(expires) * 1000 <= now.getTime()) return false;
      const expected = Buffer.from(sign(key, expires));
      const given = Buffer.from(sig);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
    async locate(key) {
      if (!KEY.test(key)) return undefined;
      try {
        const info = await stat(pathOf(key));
        return info.isFile() ? { path: pathOf(key), size: info.size } : undefined;
      } catch {
        return undefined;
      }
    },
    async remove(key) {
      if (KEY.test(key)) await rm(pathOf(key), { force: true });
    },
  };
}
