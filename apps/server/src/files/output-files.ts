/**
 * Output files from configuration: local disk (one machine) or an S3-compatible bucket (several). The AWS SDK is loaded
 * only for a bucket: a process on local disk never runs it, and loading it would keep ≈ 5 MB more heap resident for good.
 */
import { join } from 'node:path';
import type { Config } from '../config.js';
import { systemClock, type Clock } from '../interfaces.js';
import { createLocalOutputFiles, loadSigningSecret, type OutputFiles } from './storage.js';

/** `publicBaseUrl` is where this service listens (local storage's /files URLs); known only once it does. */
export async function createOutputFiles(config: Config, publicBaseUrl: () => string, clock: Pick<Clock, 'now'> = systemClock): Promise<OutputFiles> {
  const { storage } = config;
  switch (storage.kind) {
    case 'local':
      return createLocalOutputFiles({
        directory: join(config.dataDir, 'outputs'),
        publicBaseUrl: () => config.publicBaseUrl ?? publicBaseUrl(),
        secret: loadSigningSecret(config.dataDir, config.fileUrlSecret),
      });
    case 's3': {
      const { createS3OutputFiles } = await import('./s3-storage.js');
      return createS3OutputFiles({ ...storage, clock });
    }
  }
}
