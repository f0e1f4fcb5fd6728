import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

describe('configuration', () => {
  it('has defaults that run on one machine', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.dataDir).toBe(resolve('./data'));
    expect(config.database).toEqual({ kind: 'sqlite', path: resolve('./data/vidgen.db') });
    expect(config.devBootstrap).toBe(true);
    expect(config.idempotencyTtlMs).toBe(24 * 3600_000);
  });

  it('turns the development bootstrap off in production', () => {
    expect(loadConfig({ NODE_ENV: 'production' }).devBootstrap).toBe(false);
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT must be a whole number/],
    [{ PORT: '70000' }, /PORT/],
    [{ VIDGEN_DATABASE_URL: 'mysql://x' }, /must start with sqlite:/],
    [{ VIDGEN_DATABASE_URL: 'postgres://localhost/x' }, /not supported by this version yet/],
    [{ VIDGEN_PRICES: '{"vidgen-9":{}}' }, /VIDGEN_PRICES: unknown model/],
    [{ VIDGEN_LOG_LEVEL: 'loud' }, /VIDGEN_LOG_LEVEL/],
    [{ VIDGEN_DEV_BOOTSTRAP: 'maybe' }, /VIDGEN_DEV_BOOTSTRAP must be true or false/],
  ])('refuses %o with a clear message', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
