/**
 * A `worker` stores each output's URL at completion but serves no HTTP: with local storage it must
 * be told where the api processes serving /files are (VIDGEN_PUBLIC_BASE_URL), or keep outputs in a
 * bucket. Refused otherwise at start (ConfigError, exit code 2), not found out from a wrong stored URL.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { SERVER_ROOT } from './support/pipeline-processes.js';

const POSTGRES = { VIDGEN_DATABASE_URL: 'postgres://vidgen@db.internal:5432/vidgen' };
const S3 = { VIDGEN_STORAGE: 's3', VIDGEN_S3_BUCKET: 'vidgen-outputs' };

describe('the output URLs of a worker', () => {
  it.each([
    ['local storage by default', { ...POSTGRES, VIDGEN_ROLE: 'worker' }],
    ['local storage named', { ...POSTGRES, VIDGEN_ROLE: 'worker', VIDGEN_STORAGE: 'local' }],
    ['an empty VIDGEN_PUBLIC_BASE_URL', { ...POSTGRES, VIDGEN_ROLE: 'worker', VIDGEN_PUBLIC_BASE_URL: '' }],
    ['a PORT of its own', { ...POSTGRES, VIDGEN_ROLE: 'worker', PORT: '9000' }],
  ])('refuses a worker with %s and no VIDGEN_PUBLIC_BASE_URL, saying what to set', (_, env) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    let message = '';
    try {
      loadConfig(env);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/the worker role with local storage needs VIDGEN_PUBLIC_BASE_URL/);
    expect(message).toMatch(/api process\(es\) that serve \/files/);
    expect(message).toMatch(/VIDGEN_STORAGE=s3/);
  });

  it.each([
    ['the role all (it serves its own files)', {}],
    ['the role all on PostgreSQL', { ...POSTGRES, VIDGEN_ROLE: 'all' }],
    ['an api', { ...POSTGRES, VIDGEN_ROLE: 'api' }],
    ['a worker with s3 storage', { ...POSTGRES, VIDGEN_ROLE: 'worker', ...S3 }],
    ['a worker with a public base URL', { ...POSTGRES, VIDGEN_ROLE: 'worker', VIDGEN_PUBLIC_BASE_URL: 'https://vidgen.example.com' }],
  ])('accepts %s', (_, env: NodeJS.ProcessEnv) => {
    const config = loadConfig(env);
    expect(config.role).toBe(env.VIDGEN_ROLE ?? 'all');
  });

  it('keeps the public base URL it was given', () => {
    const config = loadConfig({ ...POSTGRES, VIDGEN_ROLE: 'worker', VIDGEN_PUBLIC_BASE_URL: 'http://10.0.0.5:8080' });
    expect(config.publicBaseUrl).toBe('http://10.0.0.5:8080');
    expect(config.storage).toEqual({ kind: 'local' });
  });

  it('stops `serve --role worker` before it connects to anything, with exit code 2 and the message', async () => {
    const run = promisify(execFile)(process.execPath, ['dist/main.js', '--role', 'worker'], {
      cwd: SERVER_ROOT,
      // A database nobody listens on: the refusal comes first.
      env: { ...process.env, VIDGEN_DATABASE_URL: 'postgres://vidgen@127.0.0.1:1/vidgen', VIDGEN_STORAGE: 'local', VIDGEN_PUBLIC_BASE_URL: '', VIDGEN_LOG_LEVEL: 'silent' },
    });
    const failure = (await run.then(() => undefined, (error: unknown) => error)) as { code: number; stderr: string } | undefined;
    expect(failure?.code).toBe(2);
    expect(failure?.stderr).toMatch(/vidgen: configuration error: the worker role with local storage needs VIDGEN_PUBLIC_BASE_URL/);
  });
});
