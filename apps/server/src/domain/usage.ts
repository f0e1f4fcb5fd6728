/**
 * Usage buckets (GET /account/usage) from the running totals the store keeps per UTC hour and model:
 * the range rounded out to whole buckets, every bucket present (zeros included), per model when asked.
 * Pure: the store reads the hours, this adds them up.
 */
import { MODEL_IDS, type ModelId } from './catalog.js';
import type { UsageHour } from '../store/store.js';

export type Granularity = 'hour' | 'day';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** The most buckets a range may hold: a year of days, a month of hours. */
export const MAX_RANGE_MS: Record<Granularity, number> = { day: 366 * DAY_MS, hour: 31 * DAY_MS };

export const bucketMs = (granularity: Granularity) => (granularity === 'day' ? DAY_MS : HOUR_MS);
const floorTo = (ms: number, step: number) => Math.floor(ms / step) * step;
const ceilTo = (ms: number, step: number) => Math.ceil(ms / step) * step;

/** The range a query covers: `from` rounded down and `to` rounded up to whole buckets (UTC). */
export function usageRange(from: Date, to: Date, granularity: Granularity): { from: Date; to: Date } {
  const step = bucketMs(granularity);
  return { from: new Date(floorTo(from.getTime(), step)), to: new Date(ceilTo(to.getTime(), step)) };
}

export interface UsageTotals {
  tasks: { succeeded: number; failed: number; cancelled: number };
  secondsDelivered: number;
  creditsCharged: number;
  creditsRefunded: number;
  creditsNet: number;
}

export interface UsageBucketValue extends UsageTotals {
  start: Date;
  end: Date;
  model?: ModelId;
}

const zero = (): UsageTotals => ({ tasks: { succeeded: 0, failed: 0, cancelled: 0 }, secondsDelivered: 0, creditsCharged: 0, creditsRefunded: 0, creditsNet: 0 });

function add(into: UsageTotals, hour: UsageHour): void {
  into.tasks.succeeded += hour.succeeded;
  into.tasks.failed += hour.failed;
  into.tasks.cancelled += hour.cancelled;
  into.secondsDelivered += hour.secondsDelivered;
  into.creditsCharged += hour.creditsCharged;
  into.creditsRefunded += hour.creditsRefunded;
  into.creditsNet = into.creditsCharged - into.creditsRefunded;
}

/**
 * Every bucket of [from, to) in time order (the range already whole buckets), from the hours the
 * store read: summed per bucket, or per bucket and model (every model of the catalog) with `byModel`.
 */
export function usageBuckets(input: { from: Date; to: Date; granularity: Granularity; byModel: boolean; hours: UsageHour[] }): UsageBucketValue[] {
  const step = bucketMs(input.granularity);
  const start = input.from.getTime();
  const count = Math.max(0, Math.round((input.to.getTime() - start) / step));
  const models: (ModelId | undefined)[] = input.byModel ? [...MODEL_IDS] : [undefined];
  const buckets: UsageBucketValue[] = [];
  for (let i = 0; i < count; i++) {
    for (const model of models) {
      buckets.push({ start: new Date(start + i * step), end: new Date(start + (i + 1) * step), ...(model ? { model } : {}), ...zero() });
    }
  }
  for (const hour of input.hours) {
    const index = Math.floor((hour.hourStart.getTime() - start) / step);
    if (index < 0 || index >= count) continue;
    const modelIndex = input.byModel ? models.indexOf(hour.model as ModelId) : 0;
    // A model no longer in the catalog has no row of its own here.
    if (modelIndex < 0) continue;
    add(buckets[index * models.length + modelIndex]!, hour);
  }
  return buckets;
}
