/** Channels: their configuration (keys from the environment or a file, never inline), the order new tasks try them in, and their room. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';
import { createChannels } from '../src/pipeline.js';
import type { UpstreamChannelRecord } from '../src/store/store.js';
import { channelsFor, freeSlots, type ChannelConfig } from '../src/upstream/channels.js';

const dir = mkdtempSync(join(tmpdir(), 'vidgen-channels-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const MODELS = { 'vidgen-2.0': 'dreamina-seedance-2-0-260128' };
const ROUTED = JSON.stringify({ 'vidgen-2.0': 'byteplus' });
const channelsEnv = (channels: unknown[], extra: Record<string, string> = {}) => ({ VIDGEN_UPSTREAM_CHANNELS: JSON.stringify(channels), ...extra });

describe('channel configuration', () => {
  it('reads each channel with its defaults, the key from a variable or a file', () => {
    const keyFile = join(dir, 'volc-key');
    writeFileSync(keyFile, 'volc-secret\n');
    const { channels } = loadConfig(
      channelsEnv(
        [
          { name: 'bp-sg', apiKeyEnv: 'BP_KEY', models: MODELS },
          { name: 'volc-bj', kind: 'volcengine', apiKeyFile: keyFile, models: { 'vidgen-2.0': 'doubao-seedance' }, maxInFlight: 7, priority: 2, weight: 3 },
        ],
        { BP_KEY: 'bp-secret' },
      ),
    ).upstream;
    expect(channels).toEqual([
      { name: 'bp-sg', kind: 'byteplus', baseUrl: 'https://ark.ap-southeast.bytepluses.com/api/v3', apiKey: 'bp-secret', modelIds: MODELS, maxInFlight: 100, priority: 0, weight: 1 },
      { name: 'volc-bj', kind: 'volcengine', baseUrl: 'https://ark.cn-beijing.volces.com/api/v3', apiKey: 'volc-secret', modelIds: { 'vidgen-2.0': 'doubao-seedance' }, maxInFlight: 7, priority: 2, weight: 3 },
    ]);
  });

  it('reads the channels from a file too', () => {
    const file = join(dir, 'channels.json');
    writeFileSync(file, JSON.stringify([{ name: 'from-file', apiKeyEnv: 'K', models: MODELS }]));
    expect(loadConfig({ VIDGEN_UPSTREAM_CHANNELS_FILE: file, K: 'k' }).upstream.channels.map((c) => c.name)).toEqual(['from-file']);
  });

  it('makes the single VIDGEN_BYTEPLUS_* configuration one channel named byteplus, its old concurrency name read as the limit', () => {
    const env = { VIDGEN_BYTEPLUS_API_KEY: 'legacy-key', VIDGEN_BYTEPLUS_MODELS: JSON.stringify(MODELS) };
    expect(loadConfig(env).upstream.channels).toEqual([
      { name: 'byteplus', kind: 'byteplus', baseUrl: 'https://ark.ap-southeast.bytepluses.com/api/v3', apiKey: 'legacy-key', modelIds: MODELS, maxInFlight: 100, priority: 0, weight: 1 },
    ]);
    expect(loadConfig({ ...env, VIDGEN_BYTEPLUS_CONCURRENCY: '40' }).upstream.channels[0]!.maxInFlight).toBe(40);
    expect(loadConfig({ ...env, VIDGEN_BYTEPLUS_MAX_IN_FLIGHT: '120' }).upstream.channels[0]!.maxInFlight).toBe(120);
    expect(loadConfig({}).upstream.channels).toEqual([]);
  });

  it('has the following knobs with their defaults', () => {
    expect(loadConfig({}).upstream).toMatchObject({ pollMs: 5_000, batchSize: 100, downloadConcurrency: 8, downloadAttempts: 5, requestTimeoutMs: 30_000, cooldownAfter: 3, cooldownMs: 30_000 });
    expect(() => loadConfig({ VIDGEN_UPSTREAM_BATCH_SIZE: '501' })).toThrow(/VIDGEN_UPSTREAM_BATCH_SIZE must be a whole number from 1 to 500/);
  });

  it.each([
    [[{ name: 'a', apiKey: 'inline-secret', models: MODELS }], /give the key as apiKeyEnv .* or apiKeyFile/],
    [[{ name: 'a', apiKeyEnv: 'UNSET_KEY', models: MODELS }], /apiKeyEnv names UNSET_KEY, which is not set/],
    [[{ name: 'a', apiKeyFile: '/nonexistent/key', models: MODELS }], /apiKeyFile cannot be read \(ENOENT\)/],
    [[{ name: 'a', models: MODELS }], /needs apiKeyEnv or apiKeyFile/],
    [[{ name: 'A B', apiKeyEnv: 'K', models: MODELS }], /name must be/],
    [[{ name: 'a', kind: 'openai', apiKeyEnv: 'K', models: MODELS }], /kind must be one of byteplus, volcengine/],
    [[{ name: 'a', baseUrl: 'ftp://x', apiKeyEnv: 'K', models: MODELS }], /baseUrl must be an http\(s\) URL/],
    [[{ name: 'a', apiKeyEnv: 'K', models: { 'vidgen-9': 'x' } }], /unknown model vidgen-9/],
    [[{ name: 'a', apiKeyEnv: 'K', models: MODELS, maxInFlight: 0 }], /maxInFlight must be a whole number from 1/],
    [[{ name: 'a', apiKeyEnv: 'K', models: MODELS }, { name: 'a', apiKeyEnv: 'K', models: MODELS }], /channel a is configured twice/],
    [[], /non-empty JSON array/],
  ])('refuses %j with a message naming the problem, and never the key', (channels, message) => {
    let error: unknown;
    try {
      loadConfig(channelsEnv(channels, { K: 'k-secret' }));
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toMatch(/inline-secret|k-secret/);
  });

  it('refuses to start when a model routed upstream has no channel that maps it', () => {
    expect(() => createChannels(loadConfig({ VIDGEN_PROVIDERS: ROUTED }))).toThrow(/no upstream channel is configured/);
    const config = loadConfig({ VIDGEN_PROVIDERS: JSON.stringify({ 'vidgen-2.0-fast': 'byteplus' }), ...channelsEnv([{ name: 'a', apiKeyEnv: 'K', models: MODELS }], { K: 'k' }) });
    expect(() => createChannels(config)).toThrow(/no upstream channel maps vidgen-2.0-fast/);
    expect(createChannels(loadConfig({ VIDGEN_PROVIDERS: ROUTED, ...channelsEnv([{ name: 'a', apiKeyEnv: 'K', models: MODELS }], { K: 'k' }) }))).toHaveLength(1);
  });
});

const channel = (name: string, patch: Partial<ChannelConfig> = {}): ChannelConfig => ({
  name,
  kind: 'byteplus',
  baseUrl: 'https://upstream.test/api/v3',
  apiKey: `${name}-key`,
  modelIds: MODELS,
  maxInFlight: 10,
  priority: 0,
  weight: 1,
  ...patch,
});
const record = (name: string, patch: Partial<UpstreamChannelRecord> = {}): [string, UpstreamChannelRecord] => [
  name,
  { name, inFlight: 0, consecutiveFailures: 0, cooldownUntil: null, lastError: null, lastErrorAt: null, creates: 0, createFailures: 0, lostCreates: 0, discardedResults: 0, ...patch },
];
const NOW = new Date('2026-11-24T10:00:00Z');

describe('choosing channels', () => {
  it('offers the channels that map the model by priority, skipping those cooling down and those already tried', () => {
    const channels = [channel('backup', { priority: 1 }), channel('main'), channel('cooling'), channel('other-model', { modelIds: { 'vidgen-1.5-pro': 'x' } }), channel('tried')];
    const health = new Map([record('cooling', { cooldownUntil: new Date(NOW.getTime() + 1000) })]);
    const names = channelsFor({ channels, model: 'vidgen-2.0', health, now: NOW, exclude: new Set(['tried']), random: () => 0 }).map((c) => c.name);
    expect(names).toEqual(['main', 'backup']);
    // A cool-down that has ended no longer skips it.
    const later = new Date(NOW.getTime() + 1000);
    expect(channelsFor({ channels, model: 'vidgen-2.0', health, now: later, random: () => 0 }).map((c) => c.name)).toContain('cooling');
  });

  it('shares new tasks out by weight within a priority', () => {
    const channels = [channel('heavy', { weight: 3 }), channel('light', { weight: 1 })];
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const firsts = Array.from({ length: 4000 }, () => channelsFor({ channels, model: 'vidgen-2.0', health: new Map(), now: NOW, random })[0]!.name);
    const heavy = firsts.filter((n) => n === 'heavy').length / firsts.length;
    expect(heavy).toBeGreaterThan(0.7);
    expect(heavy).toBeLessThan(0.8);
  });

  it('counts the room left on channels not cooling down', () => {
    const channels = [channel('a', { maxInFlight: 10 }), channel('b', { maxInFlight: 5 }), channel('c', { maxInFlight: 5 })];
    const health = new Map([record('a', { inFlight: 7 }), record('b', { inFlight: 9 }), record('c', { cooldownUntil: new Date(NOW.getTime() + 1) })]);
    expect(freeSlots(channels, health, NOW)).toBe(3);
    expect(freeSlots(channels, new Map(), NOW)).toBe(20);
  });
});
