/**
 * Output files in an S3-compatible bucket, against a real S3-protocol server
 * (s3rver) on loopback: uploads, presigned URLs fetched with plain fetch,
 * expiry, ranges, deletion, failures, configuration and the worker's path.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { createOutputFiles } from '../src/files/output-files.js';
import { createS3OutputFiles, type S3OutputFilesOptions } from '../src/files/s3-storage.js';
import type { OutputFiles } from '../src/files/storage.js';
import type { GenerationResult, Provider } from '../src/providers/provider.js';
import { startS3Fixture, type S3Fixture } from './support/s3-fixture.js';
import { harness, SUBMIT, until, validSubmit, testWorker } from './support.js';

const HOUR = 3600_000;
const TASK_ID = 'gen_01JDXS3STORAGETEST000000A';
const realClock = { now: () => new Date() };

let s3: S3Fixture;
let dir: string;
beforeAll(async () => {
  s3 = await startS3Fixture();
  dir = mkdtempSync(join(tmpdir(), 'vidgen-s3-test-'));
});
afterAll(async () => {
  await s3.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  vi.unstubAllEnvs();
});

function bucketFiles(overrides: Partial<S3OutputFilesOptions> = {}): OutputFiles {
  return createS3OutputFiles({
    bucket: s3.bucket,
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: s3.credentials,
    clock: realClock,
    ...overrides,
  });
}

/** A finished render: an MP4 header and random bytes, in a file of its own. */
function finishedFile(size = 64 * 1024): { path: string; bytes: Buffer } {
  const bytes = Buffer.concat([Buffer.from('\x00\x00\x00\x18ftypmp42', 'latin1'), randomBytes(size - 12)]);
  const path = join(dir, `render-${randomBytes(6).toString('hex')}.mp4`);
  writeFileSync(path, bytes);
  return { path, bytes };
}

const inAnHour = () => new Date(Date.now() + HOUR);

/** A port nothing listens on: taken from the OS, then let go. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('S3 output files', () => {
  it('uploads a finished file under the prefix and serves its bytes at a presigned URL', async () => {
    const files = bucketFiles({ prefix: '/renders/' });
    const { path, bytes } = finishedFile();
    const key = await files.put(TASK_ID, path);
    expect(key).toBe(`${TASK_ID}.mp4`);
    expect(existsSync(path)).toBe(false);

    const url = await files.urlFor(key, inAnHour());
    expect(url.startsWith(`${s3.endpoint}/${s3.bucket}/renders/${TASK_ID}.mp4?`)).toBe(true);
    expect(new URL(url).searchParams.get('X-Amz-Expires')).toMatch(/^(3599|3600)$/);
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('video/mp4');
    expect(Buffer.from(await res.arrayBuffer())).toEqual(bytes);
  });

  it('uploads a file larger than one part whole (multipart)', async () => {
    const files = bucketFiles();
    const { path, bytes } = finishedFile(11 * 1024 * 1024);
    const key = await files.put('gen_01JDXS3STORAGETESTLARGE0', path);
    const res = await fetch(await files.urlFor(key, inAnHour()));
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('answers a Range request on the presigned URL with those bytes', async () => {
    const files = bucketFiles();
    const { path, bytes } = finishedFile();
    const url = await files.urlFor(await files.put(TASK_ID, path), inAnHour());
    const res = await fetch(url, { headers: { Range: 'bytes=4-11' } });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes 4-11/${bytes.length}`);
    expect(Buffer.from(await res.arrayBuffer()).toString('latin1')).toBe('ftypmp42');
  });

  it('refuses a presigned URL once it has expired', async () => {
    // Signed two hours ago by the clock, valid for one hour: past now, without waiting.
    const twoHoursAgo = new Date(Date.now() - 2 * HOUR);
    const files = bucketFiles({ clock: { now: () => twoHoursAgo } });
    const key = await files.put(TASK_ID, finishedFile().path);
    const url = await files.urlFor(key, new Date(twoHoursAgo.getTime() + HOUR));
    expect(new URL(url).searchParams.get('X-Amz-Expires')).toBe('3600');
    const res = await fetch(url);
    expect(res.status).toBe(403);
    expect(await res.text()).toContain('Request has expired');
  });

  it('deletes the object on remove: its URL then answers 404', async () => {
    const files = bucketFiles();
    const key = await files.put(TASK_ID, finishedFile().path);
    const url = await files.urlFor(key, inAnHour());
    expect((await fetch(url)).status).toBe(200);
    await files.remove(key);
    const res = await fetch(url);
    expect(res.status).toBe(404);
    expect(await res.text()).toContain('NoSuchKey');
    await files.remove(key); // removing twice is harmless
  });

  it('serves nothing from local disk: /files links are refused', async () => {
    const files = bucketFiles();
    expect(await files.locate(`${TASK_ID}.mp4`)).toBeUndefined();
    expect(files.verify(`${TASK_ID}.mp4`, '9999999999', 'sig', new Date())).toBe(false);
  });

  it('rejects a put to a bucket that does not exist', async () => {
    const files = bucketFiles({ bucket: 'no-such-bucket' });
    const { path } = finishedFile();
    await expect(files.put(TASK_ID, path)).rejects.toMatchObject({ name: 'NoSuchBucket' });
    expect(existsSync(path)).toBe(true);
  });

  it('rejects a put to an endpoint nothing listens on, after its retries, instead of hanging', async () => {
    const files = bucketFiles({ endpoint: `http://127.0.0.1:${await closedPort()}` });
    const { path } = finishedFile();
    await expect(files.put(TASK_ID, path)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(existsSync(path)).toBe(true);
  });
});

describe('storage configuration', () => {
  const s3Env = { VIDGEN_STORAGE: 's3', VIDGEN_S3_BUCKET: 'vidgen-outputs' };

  it('keeps files on local disk by default', () => {
    expect(loadConfig({}).storage).toEqual({ kind: 'local' });
  });

  it('reads the bucket settings, with us-east-1 and virtual-hosted style by default', () => {
    expect(loadConfig(s3Env).storage).toEqual({ kind: 's3', bucket: 'vidgen-outputs', prefix: undefined, endpoint: undefined, region: 'us-east-1', forcePathStyle: false });
    const env = { ...s3Env, VIDGEN_S3_PREFIX: 'renders', VIDGEN_S3_ENDPOINT: 'http://127.0.0.1:9000', VIDGEN_S3_REGION: 'eu-west-1', VIDGEN_S3_FORCE_PATH_STYLE: 'true' };
    expect(loadConfig(env).storage).toEqual({ kind: 's3', bucket: 'vidgen-outputs', prefix: 'renders', endpoint: 'http://127.0.0.1:9000', region: 'eu-west-1', forcePathStyle: true });
  });

  it.each([
    [{ VIDGEN_STORAGE: 'gcs' }, /VIDGEN_STORAGE must be local or s3, got "gcs"/],
    [{ VIDGEN_STORAGE: 's3' }, /VIDGEN_STORAGE=s3 needs VIDGEN_S3_BUCKET/],
    [{ ...s3Env, VIDGEN_S3_BUCKET: 'Not_A_Bucket' }, /VIDGEN_S3_BUCKET must be a bucket name/],
    [{ ...s3Env, VIDGEN_S3_ENDPOINT: 'minio:9000' }, /VIDGEN_S3_ENDPOINT must be an http: or https: URL/],
    [{ ...s3Env, VIDGEN_S3_REGION: 'EU West' }, /VIDGEN_S3_REGION must be a region name/],
    [{ ...s3Env, VIDGEN_S3_FORCE_PATH_STYLE: 'sometimes' }, /VIDGEN_S3_FORCE_PATH_STYLE must be true or false/],
    [{ ...s3Env, VIDGEN_OUTPUT_TTL_HOURS: '169' }, /VIDGEN_OUTPUT_TTL_HOURS can be at most 168 with VIDGEN_STORAGE=s3/],
  ])('refuses %o with a clear message', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('builds bucket storage from configuration, credentials from the AWS SDK chain', async () => {
    vi.stubEnv('AWS_ACCESS_KEY_ID', s3.credentials.accessKeyId);
    vi.stubEnv('AWS_SECRET_ACCESS_KEY', s3.credentials.secretAccessKey);
    const config = loadConfig({ ...s3Env, VIDGEN_DATA_DIR: dir, VIDGEN_S3_ENDPOINT: s3.endpoint, VIDGEN_S3_FORCE_PATH_STYLE: 'true', VIDGEN_S3_PREFIX: 'configured' });
    const files = await createOutputFiles(config, () => 'http://unused.test');
    const { path, bytes } = finishedFile();
    const url = await files.urlFor(await files.put(TASK_ID, path), inAnHour());
    expect(url.startsWith(`${s3.endpoint}/${s3.bucket}/configured/${TASK_ID}.mp4?`)).toBe(true);
    expect(Buffer.from(await (await fetch(url)).arrayBuffer())).toEqual(bytes);
    expect(existsSync(join(dir, 'file-url-secret'))).toBe(false);
  });
});

describe('the worker with S3 output files', () => {
  it('completes a task whose output URL is a presigned bucket URL serving the MP4, deleted when it expires', async () => {
    const video = finishedFile().bytes;
    const provider: Provider = {
      name: 'scripted',
      needsLocalMedia: false,
      async generate(request): Promise<GenerationResult> {
        writeFileSync(request.outputPath, video);
        return { ok: true };
      },
    };
    const h = harness();
    // s3rver judges expiry by the real time: the task's clock starts there.
    h.clock.advance(Math.max(0, Date.now() - h.clock.now().getTime()));
    const files = bucketFiles({ clock: h.clock, prefix: 'worker' });
    const worker = testWorker(h, { provider, files, workDir: join(dir, 'work') });
    try {
      const { key } = await h.account(100);
      worker.start();
      const submitted = await h.request('POST', SUBMIT, { key, body: validSubmit() });
      const id = ((await submitted.json()) as { requestId: string }).requestId;
      worker.wake();
      const task = async () => (await (await h.request('GET', `${SUBMIT}/${id}`, { key })).json()) as any;
      await until(async () => (await task()).status === 'succeeded');

      const url: string = (await task()).output.url;
      expect(url.startsWith(`${s3.endpoint}/${s3.bucket}/worker/${id}.mp4?`)).toBe(true);
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(Buffer.from(await res.arrayBuffer())).toEqual(video);

      h.clock.advance(7 * 24 * HOUR);
      await until(async () => (await fetch(url)).status === 404, 10_000);
    } finally {
      await worker.stop();
      await h.store.close();
    }
  });
});
