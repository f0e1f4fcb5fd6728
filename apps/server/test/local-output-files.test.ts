/**
 * Local output storage (files/storage.ts): where an attempt writes an output to keep it in place (placeFor), what put()
 * does with such a file and with one from elsewhere, and the keys it signs and serves.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createLocalOutputFiles, KEY } from '../src/files/storage.js';

const dir = mkdtempSync(join(tmpdir(), 'vidgen-local-outputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TASK = 'gen_01JABCDEFGHJKMNPQRSTVWXYZ0';
const OTHER = 'gen_01JABCDEFGHJKMNPQRSTVWXYZ1';
let n = 0;
const outputs = () => {
  const directory = join(dir, `outputs-${++n}`);
  return { directory, files: createLocalOutputFiles({ directory, publicBaseUrl: 'http://vidgen.test/', secret: Buffer.from('s') }) };
};

describe('local output files', () => {
  it("places a first attempt under the task's key and a later one under a key with its attempt", () => {
    const { directory, files } = outputs();
    expect(files.placeFor!(TASK, 1)).toBe(join(directory, `${TASK}.mp4`));
    expect(files.placeFor!(TASK, 2)).toBe(join(directory, `${TASK}-2.mp4`));
    expect(files.placeFor!(TASK, 17)).toBe(join(directory, `${TASK}-17.mp4`));
  });

  it('keeps a placed file where it lies: put answers its key and moves nothing', async () => {
    const { directory, files } = outputs();
    for (const attempt of [1, 3]) {
      const path = files.placeFor!(TASK, attempt);
      writeFileSync(path, `attempt ${attempt}`);
      const inode = statSync(path).ino;
      const key = await files.put(TASK, path);
      expect(key).toBe(attempt === 1 ? `${TASK}.mp4` : `${TASK}-3.mp4`);
      expect(statSync(join(directory, key)).ino).toBe(inode);
      expect(await files.locate(key)).toEqual({ path, size: `attempt ${attempt}`.length });
    }
    expect(readdirSync(directory).sort()).toEqual([`${TASK}-3.mp4`, `${TASK}.mp4`]);
  });

  it("moves a file from elsewhere, or one placed for another task, under the task's key", async () => {
    const { directory, files } = outputs();
    const work = join(dir, `work-${n}`);
    mkdirSync(work);
    writeFileSync(join(work, 'render.mp4'), 'rendered elsewhere');
    expect(await files.put(TASK, join(work, 'render.mp4'))).toBe(`${TASK}.mp4`);
    expect(existsSync(join(work, 'render.mp4'))).toBe(false);
    expect(readFileSync(join(directory, `${TASK}.mp4`), 'utf8')).toBe('rendered elsewhere');
    // Not the task's placed name: a source like any other.
    writeFileSync(files.placeFor!(OTHER, 2), 'placed for the other task');
    expect(await files.put(TASK, files.placeFor!(OTHER, 2))).toBe(`${TASK}.mp4`);
    expect(readdirSync(directory)).toEqual([`${TASK}.mp4`]);
  });

  it('knows the directory however it was named (a relative path)', async () => {
    const { directory } = outputs();
    const files = createLocalOutputFiles({ directory: relative(process.cwd(), directory), publicBaseUrl: 'http://vidgen.test', secret: Buffer.from('s') });
    const path = files.placeFor!(TASK, 2);
    expect(path).toBe(join(directory, `${TASK}-2.mp4`));
    writeFileSync(path, 'x');
    expect(await files.put(TASK, path)).toBe(`${TASK}-2.mp4`);
    expect(readdirSync(directory)).toEqual([`${TASK}-2.mp4`]);
  });

  it('signs and verifies an attempt key as any other, and takes no other name for a key', async () => {
    const { files } = outputs();
    const now = new Date('2026-11-29T00:00:00Z');
    const url = new URL(await files.urlFor(`${TASK}-2.mp4`, new Date(now.getTime() + 60_000)));
    expect(url.pathname).toBe(`/files/${TASK}-2.mp4`);
    expect(files.verify(`${TASK}-2.mp4`, url.searchParams.get('expires')!, url.searchParams.get('sig')!, now)).toBe(true);
    expect(files.verify(`${TASK}.mp4`, url.searchParams.get('expires')!, url.searchParams.get('sig')!, now)).toBe(false);
    expect([`${TASK}.mp4`, `${TASK}-2.mp4`, `${TASK}-999999.mp4`].filter((key) => KEY.test(key))).toHaveLength(3);
    for (const key of [`${TASK}-0.mp4`, `${TASK}-.mp4`, `${TASK}-2-3.mp4`, `${TASK}-1234567.mp4`, `${TASK}-02.mp4`, `${TASK}-2.mp4/..`, `../${TASK}-2.mp4`]) {
      expect(KEY.test(key), key).toBe(false);
      expect(await files.locate(key)).toBeUndefined();
    }
  });
});
