/**
 * Output files in an S3-compatible bucket, for deployments of several
 * machines: whichever worker renders a task uploads its result, and clients
 * download straight from the bucket at a presigned GET URL. Nothing is kept
 * on local disk, so this service's /files route serves nothing here.
 */
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { DeleteObjectCommand, GetObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Clock } from '../interfaces.js';
import { KEY, type OutputFiles } from './storage.js';

export interface S3OutputFilesOptions {
  bucket: string;
  /** A folder inside the bucket; objects are `<prefix>/<taskId>.mp4`. */
  prefix?: string;
  /** An S3-compatible server's URL; AWS's own endpoint for the region when absent. */
  endpoint?: string;
  region: string;
  forcePathStyle: boolean;
  /** The signing time of presigned URLs, so expiries follow the same clock as the task's `expiresAt`. */
  clock: Pick<Clock, 'now'>;
  /** Tests only: otherwise the AWS SDK's standard chain (AWS_ACCESS_KEY_ID, profiles, instance roles …). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

export function createS3OutputFiles(options: S3OutputFilesOptions): OutputFiles {
  const client = new S3Client({
    region: options.region,
    endpoint: options.endpoint,
    forcePathStyle: options.forcePathStyle,
    credentials: options.credentials,
    // Checksums only where S3 requires them: many S3-compatible servers do not
    // understand the aws-chunked uploads with trailing checksums the SDK sends by default.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // An unreachable endpoint fails the task's attempt instead of holding it.
    requestHandler: { connectionTimeout: 10_000, requestTimeout: 120_000 },
  });
  const prefix = (options.prefix ?? '').replace(/^\/+|\/+$/g, '');
  const objectKey = (key: string) => (prefix ? `${prefix}/${key}` : key);

  return {
    async put(taskId, sourcePath) {
      const key = `${taskId}.mp4`;
      const body = createReadStream(sourcePath);
      try {
        // Upload reads the stream into parts it can retry: one PUT for a small
        // file, a multipart upload (aborted on failure) for a large one.
        await new Upload({
          client,
          params: { Bucket: options.bucket, Key: objectKey(key), Body: body, ContentType: 'video/mp4' },
          queueSize: 2,
        }).done();
      } finally {
        body.destroy();
      }
      await rm(sourcePath, { force: true });
      return key;
    },
    urlFor(key, expiresAt) {
      const signingDate = options.clock.now();
      const seconds = Math.floor((expiresAt.getTime() - signingDate.getTime()) / 1000);
      // Signature V4 caps this at 7 days; configuration keeps VIDGEN_OUTPUT_TTL_HOURS within it for s3.
      return getSignedUrl(client, new GetObjectCommand({ Bucket: options.bucket, Key: objectKey(key) }), { signingDate, expiresIn: Math.max(1, seconds) });
    },
    // The service signs no /files URLs of its own here: each one is refused.
    verify: () => false,
    locate: async () => undefined,
    async remove(key) {
      if (KEY.test(key)) await client.send(new DeleteObjectCommand({ Bucket: options.bucket, Key: objectKey(key) }));
    },
  };
}
