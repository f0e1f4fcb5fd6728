/**
 * Channels: the upstream accounts (and regions) a deployment sells through. Each is one BytePlus
 * ModelArk or Volcengine Ark account (the same protocol) with its own key, model ids, limit of
 * tasks in flight upstream, and a priority and weight. Read from VIDGEN_UPSTREAM_CHANNELS (JSON) or
 * VIDGEN_UPSTREAM_CHANNELS_FILE; without either, the single VIDGEN_BYTEPLUS_* configuration is one
 * channel named `byteplus`. Keys come from an environment variable or a file, never from the JSON
 * itself, and never appear in a log line, an error or `vidgen channels`.
 */
import { readFileSync } from 'node:fs';
import { MODEL_IDS, type ModelId } from '../domain/catalog.js';
import type { UpstreamChannelRecord } from '../store/store.js';

export const CHANNEL_KINDS = ['byteplus', 'volcengine'] as const;
export type ChannelKind = (typeof CHANNEL_KINDS)[number];

export const DEFAULT_BASE_URLS: Record<ChannelKind, string> = {
  byteplus: 'https://ark.ap-southeast.bytepluses.com/api/v3',
  volcengine: 'https://ark.cn-beijing.volces.com/api/v3',
};

export interface ChannelConfig {
  /** Unique; what the store, the CLI and /metrics call it. */
  name: string;
  kind: ChannelKind;
  baseUrl: string;
  /** Resolved from `apiKeyEnv` or `apiKeyFile`; never printed. */
  apiKey: string;
  /** Our model → the upstream's model (or endpoint) id; a model not here is not sent to this channel. */
  modelIds: Partial<Record<ModelId, string>>;
  /** The most tasks of ours it may have queued or running upstream at once (the account's own limit, or less). */
  maxInFlight: number;
  /** Lower first: a channel is used only when every channel of a lower priority is full, failing or cooling down. */
  priority: number;
  /** Among channels of one priority, the share of new tasks each gets. */
  weight: number;
}

export class ChannelConfigError extends Error {}

const NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/;

function wholeNumber(value: unknown, where: string, min: number, max: number, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ChannelConfigError(`${where} must be a whole number from ${min} to ${max}`);
  }
  return value;
}

function modelIdsOf(value: unknown, where: string): Partial<Record<ModelId, string>> {
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new ChannelConfigError(`${where}.models must be an object of model → upstream model id`);
  const map: Partial<Record<ModelId, string>> = {};
  for (const [model, id] of Object.entries(value)) {
    if (!MODEL_IDS.includes(model as ModelId)) throw new ChannelConfigError(`${where}.models: unknown model ${model}`);
    if (typeof id !== 'string' || !id.trim()) throw new ChannelConfigError(`${where}.models.${model} must be an upstream model id`);
    map[model as ModelId] = id;
  }
  return map;
}

function keyOf(entry: Record<string, unknown>, where: string, env: NodeJS.ProcessEnv): string {
  if ('apiKey' in entry) throw new ChannelConfigError(`${where}: give the key as apiKeyEnv (a variable's name) or apiKeyFile (a path), not inline`);
  if (typeof entry.apiKeyEnv === 'string') {
    const key = env[entry.apiKeyEnv]?.trim();
    if (!key) throw new ChannelConfigError(`${where}.apiKeyEnv names ${entry.apiKeyEnv}, which is not set`);
    return key;
  }
  if (typeof entry.apiKeyFile === 'string') {
    let key: string;
    try {
      key = readFileSync(entry.apiKeyFile, 'utf8').trim();
    } catch (error) {
      throw new ChannelConfigError(`${where}.apiKeyFile cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
    if (!key) throw new ChannelConfigError(`${where}.apiKeyFile is empty`);
    return key;
  }
  throw new ChannelConfigError(`${where} needs apiKeyEnv or apiKeyFile`);
}

/** One channel of VIDGEN_UPSTREAM_CHANNELS. */
function channelOf(entry: unknown, index: number, env: NodeJS.ProcessEnv): ChannelConfig {
  const where = `channel ${index + 1}`;
  if (!entry || typeof entry !== 'object' || Array.isArray(entry)) throw new ChannelConfigError(`${where} must be an object`);
  const e = entry as Record<string, unknown>;
  if (typeof e.name !== 'string' || !NAME.test(e.name)) throw new ChannelConfigError(`${where}.name must be 1-63 lowercase letters, digits, '.', '_' or '-'`);
  const named = `channel ${e.name}`;
  const kind = (e.kind ?? 'byteplus') as ChannelKind;
  if (!CHANNEL_KINDS.includes(kind)) throw new ChannelConfigError(`${named}.kind must be one of ${CHANNEL_KINDS.join(', ')}`);
  const baseUrl = e.baseUrl === undefined ? DEFAULT_BASE_URLS[kind] : e.baseUrl;
  if (typeof baseUrl !== 'string' || !URL.canParse(baseUrl) || !/^https?:$/.test(new URL(baseUrl).protocol)) {
    throw new ChannelConfigError(`${named}.baseUrl must be an http(s) URL`);
  }
  return {
    name: e.name,
    kind,
    baseUrl,
    apiKey: keyOf(e, named, env),
    modelIds: modelIdsOf(e.models, named),
    maxInFlight: wholeNumber(e.maxInFlight, `${named}.maxInFlight`, 1, 100_000, 100),
    priority: wholeNumber(e.priority, `${named}.priority`, 0, 1000, 0),
    weight: wholeNumber(e.weight, `${named}.weight`, 1, 1000, 1),
  };
}

/**
 * The channels this deployment configures (empty when none is). `legacy` is the single
 * VIDGEN_BYTEPLUS_* configuration, used when VIDGEN_UPSTREAM_CHANNELS(_FILE) is not set.
 */
export function parseChannels(
  env: NodeJS.ProcessEnv,
  legacy: { baseUrl: string; apiKey: string | undefined; modelIds: Record<ModelId, string>; maxInFlight: number },
): ChannelConfig[] {
  let raw = env.VIDGEN_UPSTREAM_CHANNELS;
  if (!raw && env.VIDGEN_UPSTREAM_CHANNELS_FILE) {
    try {
      raw = readFileSync(env.VIDGEN_UPSTREAM_CHANNELS_FILE, 'utf8');
    } catch (error) {
      throw new ChannelConfigError(`VIDGEN_UPSTREAM_CHANNELS_FILE cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`);
    }
  }
  if (!raw) {
    if (!legacy.apiKey) return [];
    const modelIds = Object.fromEntries(Object.entries(legacy.modelIds).filter(([, id]) => id)) as Partial<Record<ModelId, string>>;
    return [{ name: 'byteplus', kind: 'byteplus', baseUrl: legacy.baseUrl, apiKey: legacy.apiKey, modelIds, maxInFlight: legacy.maxInFlight, priority: 0, weight: 1 }];
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ChannelConfigError('the channels must be a JSON array of channel objects');
  }
  if (!Array.isArray(parsed) || parsed.length === 0) throw new ChannelConfigError('the channels must be a non-empty JSON array of channel objects');
  const channels = parsed.map((entry, i) => channelOf(entry, i, env));
  const names = new Set<string>();
  for (const channel of channels) {
    if (names.has(channel.name)) throw new ChannelConfigError(`channel ${channel.name} is configured twice`);
    names.add(channel.name);
  }
  return channels;
}

/**
 * The channels to offer a new task of `model`, in the order to try them: those that map the model,
 * are not cooling down and were not tried for it already; by priority, and within a priority in a
 * random order drawn by weight (so that the weights share the tasks out over time).
 */
export function channelsFor(input: {
  channels: readonly ChannelConfig[];
  model: ModelId;
  health: ReadonlyMap<string, UpstreamChannelRecord>;
  now: Date;
  exclude?: ReadonlySet<string>;
  random?: () => number;
}): ChannelConfig[] {
  const random = input.random ?? Math.random;
  const open = input.channels.filter((channel) => {
    if (!channel.modelIds[input.model] || input.exclude?.has(channel.name)) return false;
    const cooldownUntil = input.health.get(channel.name)?.cooldownUntil;
    return !cooldownUntil || cooldownUntil.getTime() <= input.now.getTime();
  });
  const byPriority = new Map<number, ChannelConfig[]>();
  for (const channel of open) byPriority.set(channel.priority, [...(byPriority.get(channel.priority) ?? []), channel]);
  const ordered: ChannelConfig[] = [];
  for (const priority of [...byPriority.keys()].sort((a, b) => a - b)) {
    const pool = [...byPriority.get(priority)!];
    while (pool.length > 0) {
      let pick = random() * pool.reduce((sum, channel) => sum + channel.weight, 0);
      let index = 0;
      while (index < pool.length - 1 && pick >= pool[index]!.weight) pick -= pool[index++]!.weight;
      ordered.push(pool.splice(index, 1)[0]!);
    }
  }
  return ordered;
}

/** Slots free for new creates across the channels that are not cooling down (for the worker's claim). */
export function freeSlots(channels: readonly ChannelConfig[], health: ReadonlyMap<string, UpstreamChannelRecord>, now: Date): number {
  let free = 0;
  for (const channel of channels) {
    const record = health.get(channel.name);
    if (record?.cooldownUntil && record.cooldownUntil.getTime() > now.getTime()) continue;
    free += Math.max(0, channel.maxInFlight - (record?.inFlight ?? 0));
  }
  return free;
}
