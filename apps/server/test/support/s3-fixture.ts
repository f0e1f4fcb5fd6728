/**
 * A real S3-protocol server (s3rver) on loopback, a port from the OS, its
 * objects in a temporary directory, with one empty bucket. s3rver checks the
 * access key and a presigned URL's expiry but not Signature V4 signatures.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

export interface S3Fixture {
  endpoint: string;
  bucket: string;
  /** s3rver's one account. */
  credentials: { accessKeyId: string; secretAccessKey: string };
  close(): Promise<void>;
}

export async function startS3Fixture(bucket = 'vidgen-outputs'): Promise<S3Fixture> {
  const directory = mkdtempSync(join(tmpdir(), 'vidgen-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, directory, silent: true, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  return {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    async close() {
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
