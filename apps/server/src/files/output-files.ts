/** Output files from configuration: local disk (one machine) or an S3-compatible bucket (several). */
import { join } from 'node:path';
import type { Config } from '../config.js';
import { systemClock, type Clock } from '../interfaces.js';
import { createS3OutputFiles } from './s3-storage.js';
import { createLocalOutputFiles, loadSigningSecret, type OutputFiles } from './storage.js';

/** `publicBaseUrl` is where this service listens (local storage's /files URLs); known only once it does. */
export function createOutputFiles(config: Config, publicBaseUrl: () => string, clock: Pick<Clock, 'now'> = systemClock): OutputFiles {
  const { storage } = config;
  switch (storage.kind) {
    case 'local':
      return createLocalOutputFiles({
        directory: join(config.dataDir, 'outputs'),
        publicBaseUrl: () => config.publicBaseUrl ?? publicBaseUrl(),
        secret: loadSigningSecret(config.dataDir, config.fileUrlSecret),
      });
    case 's3':
      return createS3OutputFiles({ ...storage, clock });
  }
}
