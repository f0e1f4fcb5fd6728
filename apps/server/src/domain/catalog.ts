/**
 * The models this service offers, their rules and their prices (D4, D5). The
 * models endpoint publishes exactly this; the submission rules read it.
 */
import type { components } from '@vidgen/types';

type Schemas = components['schemas'];
export type ModelId = Schemas['ModelId'];
export type Resolution = Schemas['Resolution'];
export type AspectRatio = Schemas['AspectRatio'];
export type MediaKind = Schemas['MediaKind'];
export type GenerationMode = Schemas['GenerationMode'];
export type Model = Schemas['Model'];

/** Credits per second of video, by model and resolution. */
export type PriceTable = Record<ModelId, Record<Resolution, number>>;

export const DEFAULT_PRICES: PriceTable = {
  'vidgen-2.0': { '480p': 5, '720p': 8, '1080p': 16 },
  'vidgen-2.0-fast': { '480p': 3, '720p': 5, '1080p': 10 },
  'vidgen-1.5-pro': { '480p': 2, '720p': 4, '1080p': 8 },
};

const RESOLUTIONS: Resolution[] = ['480p', '720p', '1080p'];
const ASPECT_RATIOS: AspectRatio[] = ['16:9', '9:16', '1:1'];
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

interface ModelRules {
  description: string;
  durations: number[];
  media: { kinds: MediaKind[]; maxItems: number };
  modes: GenerationMode[];
}

const ALL_MODES: GenerationMode[] = ['text_to_video', 'first_frame', 'first_last_frame', 'multimodal_reference'];

export const MODEL_RULES: Readonly<Record<ModelId, ModelRules>> = {
  'vidgen-2.0': {
    description: 'Richer multimodal reference workflows; the best quality.',
    durations: range(4, 15),
    media: { kinds: ['image', 'video', 'audio'], maxItems: 5 },
    modes: ALL_MODES,
  },
  'vidgen-2.0-fast': {
    description: 'The vidgen-2.0 workflows, faster and cheaper.',
    durations: range(4, 15),
    media: { kinds: ['image', 'video', 'audio'], maxItems: 5 },
    modes: ALL_MODES,
  },
  'vidgen-1.5-pro': {
    description: 'Simpler image-guided generation.',
    durations: [5, 10],
    media: { kinds: ['image'], maxItems: 2 },
    modes: ['text_to_video', 'first_frame', 'first_last_frame'],
  },
};

export const MODEL_IDS = Object.keys(MODEL_RULES) as ModelId[];

export function describeModels(prices: PriceTable): Model[] {
  return MODEL_IDS.map((id) => ({
    id,
    description: MODEL_RULES[id].description,
    durations: MODEL_RULES[id].durations,
    aspectRatios: ASPECT_RATIOS,
    resolutions: RESOLUTIONS,
    media: MODEL_RULES[id].media,
    modes: MODEL_RULES[id].modes,
    prices: RESOLUTIONS.map((resolution) => ({ resolution, creditsPerSecond: prices[id][resolution] })),
  }));
}

/** The credits a task costs: rate(model, resolution) × duration. */
export const priceOf = (prices: PriceTable, model: ModelId, resolution: Resolution, duration: number): number =>
  prices[model][resolution] * duration;

/** Parses `VIDGEN_PRICES` (JSON of the PriceTable's shape, partial allowed) over the defaults. */
export function parsePriceTable(json: string | undefined): PriceTable {
  const table: PriceTable = structuredClone(DEFAULT_PRICES);
  if (!json) return table;
  const parsed: unknown = JSON.parse(json);
  if (!parsed || typeof parsed !== 'object') throw new Error('must be a JSON object of model → resolution → credits per second');
  for (const [model, rates] of Object.entries(parsed)) {
    if (!(model in table)) throw new Error(`unknown model ${model}`);
    for (const [resolution, rate] of Object.entries(rates as object)) {
      if (!RESOLUTIONS.includes(resolution as Resolution)) throw new Error(`unknown resolution ${resolution} for ${model}`);
      if (!Number.isInteger(rate) || (rate as number) < 0) throw new Error(`${model} ${resolution}: must be a whole number ≥ 0`);
      table[model as ModelId][resolution as Resolution] = rate as number;
    }
  }
  return table;
}
