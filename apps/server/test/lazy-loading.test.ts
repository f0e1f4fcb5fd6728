/**
 * A process on the embedded defaults (SQLite, output files on local disk) never loads the PostgreSQL side (pg, pg-boss)
 * or the AWS SDK: code it never runs would only sit in its heap (≈ 7.6 MB of it on Node 20), and every major collection
 * marks it again. Loaded in a child node with what main.ts loads, then the backend and the files opened as it opens them.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const dir = mkdtempSync(join(tmpdir(), 'vidgen-lazy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The packages (by name) of every CommonJS module loaded after `lines` ran in a child node with tsx, from apps/server. */
async function packagesLoadedBy(lines: string[]): Promise<Set<string>> {
  const script = [
    ...lines,
    "const { createRequire } = await import('node:module');",
    'const names = new Set();',
    'for (const path of Object.keys(createRequire(import.meta.url).cache)) {',
    '  const match = /node_modules\\/((?:@[^/]+\\/)?[^/]+)\\/(?!.*node_modules\\/)/.exec(path);',
    '  if (match) names.add(match[1]);',
    '}',
    'console.log(JSON.stringify([...names]));',
    'process.exit(0);',
  ].join('\n');
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    cwd: join(import.meta.dirname, '..'),
  });
  return new Set(JSON.parse(stdout.trim().split('\n').at(-1)!) as string[]);
}

describe('what a process on the embedded defaults loads', () => {
  it('is neither pg, pg-boss nor the AWS SDK, which a bucket does load', async () => {
    const config = `loadConfig({ VIDGEN_DATA_DIR: ${JSON.stringify(dir)}, VIDGEN_DATABASE_URL: 'sqlite::memory:' })`;
    const defaults = await packagesLoadedBy([
      "const { loadConfig } = await import('./src/config.ts');",
      "await import('./src/app.ts');",
      "await import('./src/http/node-server.ts');",
      "const { createOutputFiles } = await import('./src/pipeline.ts');",
      "const { openBackend } = await import('./src/store/open.ts');",
      "const pino = (await import('pino')).default;",
      `const config = ${config};`,
      "const backend = await openBackend(config, { logger: pino({ level: 'silent' }), listen: { api: true, worker: true }, supervise: true });",
      "await createOutputFiles(config, () => 'http://127.0.0.1:1');",
      'await backend.close();',
    ]);
    // The check sees what it should: packages the defaults do load.
    expect(defaults).toContain('better-sqlite3');
    expect(defaults).toContain('pino');
    const unwanted = [...defaults].filter((name) => name === 'pg' || name === 'pg-boss' || name.startsWith('@aws-sdk/') || name.startsWith('@smithy/'));
    expect(unwanted).toEqual([]);

    // And they are still there when configured: a bucket's files load the SDK (nothing is sent until a file is stored).
    const s3 = await packagesLoadedBy([
      "const { loadConfig } = await import('./src/config.ts');",
      "const { createOutputFiles } = await import('./src/pipeline.ts');",
      `const config = loadConfig({ VIDGEN_DATA_DIR: ${JSON.stringify(dir)}, VIDGEN_STORAGE: 's3', VIDGEN_S3_BUCKET: 'outputs', VIDGEN_S3_REGION: 'us-east-1', VIDGEN_S3_ENDPOINT: 'http://127.0.0.1:1' });`,
      "await createOutputFiles(config, () => 'http://127.0.0.1:1');",
    ]);
    expect(s3).toContain('@aws-sdk/client-s3');
    expect(s3).not.toContain('pg');
  });
});
