/**
 * What the operator CLI shows of the upstream: the configured channels beside what the store knows of
 * them (`vidgen channels`), the cost report (`vidgen upstream report`) and a task's upstream part
 * (`vidgen tasks show`). Each view is `{ json, text }`: `--json` prints the first. No channel key is
 * ever part of one; an upstream error is printed with every configured key blanked out, in case an
 * upstream echoed one back.
 */
import type { ChannelConfig } from '../upstream/channels.js';
import type { UpstreamChannelRecord, UpstreamTaskRecord, UpstreamUsageRow } from '../store/store.js';

export interface View {
  json: unknown;
  text: string;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

/** `text` with every one of `keys` replaced, so that an upstream error that quotes a key does not print it. */
export function withoutKeys(text: string | null, keys: readonly string[]): string | null {
  if (text === null) return null;
  return keys.reduce((clean, key) => (key ? clean.split(key).join('[key]') : clean), text);
}

/** A base URL as configured, without any user:password part. */
function displayUrl(raw: string): string {
  const url = new URL(raw);
  if (!url.username && !url.password) return raw;
  url.username = '';
  url.password = '';
  return url.toString();
}

export const CHANNEL_HEALTH = Object.freeze({ ok: 'ok', coolingDown: 'cooling_down', failing: 'failing' } as const);
export type ChannelHealth = (typeof CHANNEL_HEALTH)[keyof typeof CHANNEL_HEALTH];

/** Cooling down (skipped for new creates) wins over failing (creates failed in a row, not yet enough to cool down). */
export function channelHealth(record: UpstreamChannelRecord | undefined, now: Date): ChannelHealth {
  if (record?.cooldownUntil && record.cooldownUntil.getTime() > now.getTime()) return CHANNEL_HEALTH.coolingDown;
  if (record && record.consecutiveFailures > 0) return CHANNEL_HEALTH.failing;
  return CHANNEL_HEALTH.ok;
}

function describeHealth(health: ChannelHealth, record: UpstreamChannelRecord | undefined): string {
  switch (health) {
    case CHANNEL_HEALTH.ok:
      return 'ok';
    case CHANNEL_HEALTH.coolingDown:
      return `cooling down until ${record!.cooldownUntil!.toISOString()}`;
    case CHANNEL_HEALTH.failing:
      return `failing (${record!.consecutiveFailures} in a row)`;
    default:
      return health satisfies never;
  }
}

const EMPTY_RECORD = { inFlight: 0, consecutiveFailures: 0, cooldownUntil: null, lastError: null, lastErrorAt: null, creates: 0, createFailures: 0, lostCreates: 0, discardedResults: 0 };

/**
 * Every configured channel (in the configuration's order, even one that has had no task yet), then every
 * channel the store knows that is no longer configured (it may still have tasks in flight).
 */
export function channelsView(configured: readonly ChannelConfig[], stored: readonly UpstreamChannelRecord[], now: Date): View {
  const keys = configured.map((channel) => channel.apiKey);
  const records = new Map(stored.map((record) => [record.name, record]));
  const names = [...configured.map((channel) => channel.name), ...stored.map((record) => record.name).filter((name) => !configured.some((c) => c.name === name))];
  const channels = names.map((name) => {
    const config = configured.find((channel) => channel.name === name);
    const record = records.get(name);
    const health = channelHealth(record, now);
    const counts = record ?? EMPTY_RECORD;
    return {
      name,
      configured: config !== undefined,
      kind: config?.kind ?? null,
      baseUrl: config ? displayUrl(config.baseUrl) : null,
      models: config ? { ...config.modelIds } : null,
      inFlight: counts.inFlight,
      limit: config?.maxInFlight ?? null,
      priority: config?.priority ?? null,
      weight: config?.weight ?? null,
      state: health,
      cooldownUntil: iso(counts.cooldownUntil),
      consecutiveFailures: counts.consecutiveFailures,
      lastError: withoutKeys(counts.lastError, keys),
      lastErrorAt: iso(counts.lastErrorAt),
      creates: counts.creates,
      createFailures: counts.createFailures,
      lostCreates: counts.lostCreates,
      discardedResults: counts.discardedResults,
    };
  });
  const text = channels
    .map((c) =>
      [
        c.configured ? `${c.name}  ${c.kind}  ${c.baseUrl}` : `${c.name}  (not configured)`,
        `  models        ${c.models ? Object.entries(c.models).map(([ours, theirs]) => `${ours} → ${theirs}`).join(', ') || 'none' : '-'}`,
        `  in flight     ${c.inFlight}${c.configured ? ` of ${c.limit}   priority ${c.priority}   weight ${c.weight}` : ''}`,
        `  state         ${describeHealth(c.state, records.get(c.name))}`,
        ...(c.lastError ? [`  last error    ${c.lastErrorAt ?? ''}  ${c.lastError}`] : []),
        `  creates       ${c.creates}   create failures ${c.createFailures}   lost creates ${c.lostCreates}   discarded results ${c.discardedResults}`,
      ].join('\n'),
    )
    .join('\n\n');
  return { json: channels, text: text || 'no channels configured, and none in the store' };
}

/** A task's upstream part for `tasks show` (null when it never went upstream). The video URL is the upstream's signed link: left out. */
export function upstreamTaskJson(upstream: UpstreamTaskRecord | undefined, keys: readonly string[]) {
  if (!upstream) return null;
  return {
    channel: upstream.channel,
    upstreamId: upstream.upstreamId,
    upstreamStatus: upstream.upstreamStatus,
    state: upstream.state,
    outcome: upstream.outcome,
    usage: upstream.usage,
    downloadAttempts: upstream.downloadAttempts,
    lastError: withoutKeys(upstream.lastError, keys),
    nextCheckAt: iso(upstream.nextCheckAt),
    createdAt: iso(upstream.createdAt),
    updatedAt: iso(upstream.updatedAt),
    endedAt: iso(upstream.endedAt),
  };
}

export function upstreamTaskText(upstream: ReturnType<typeof upstreamTaskJson>): string {
  if (!upstream) return 'upstream: none';
  const usage = upstream.usage ? `${upstream.usage.completionTokens ?? '-'} completion / ${upstream.usage.totalTokens ?? '-'} total tokens` : '-';
  return [
    `upstream: ${upstream.channel}  ${upstream.upstreamId ?? '(no upstream id yet)'}  ${upstream.upstreamStatus ?? '-'}`,
    `  state ${upstream.state}${upstream.outcome ? `, outcome ${upstream.outcome}` : ''}${upstream.endedAt ? ` at ${upstream.endedAt}` : ''}`,
    `  usage ${usage}`,
    `  download attempts ${upstream.downloadAttempts}`,
    ...(upstream.lastError ? [`  last error ${upstream.lastError}`] : []),
  ].join('\n');
}

type UsageSums = Omit<UpstreamUsageRow, 'channel' | 'model'> & { creditsKept: number };

function withKept(row: Omit<UpstreamUsageRow, 'channel' | 'model'>): UsageSums {
  return { ...row, creditsKept: row.creditsCharged - row.creditsRefunded };
}

/** Right-aligned columns after the first two; the header is the first row. */
function table(rows: (string | number)[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => String(row[i]).length)));
  return rows.map((row) => row.map((cell, i) => (i < 2 ? String(cell).padEnd(widths[i]!) : String(cell).padStart(widths[i]!))).join('  ').trimEnd()).join('\n');
}

/** The cost report: upstream usage against credits, per channel and model, of tasks created in [from, to). */
export function usageReportView(rows: readonly UpstreamUsageRow[], from: Date, to: Date): View {
  const zero = { tasks: 0, succeeded: 0, completionTokens: 0, totalTokens: 0, creditsCharged: 0, creditsRefunded: 0 };
  const total = withKept(
    rows.reduce(
      (sum, row) => ({
        tasks: sum.tasks + row.tasks,
        succeeded: sum.succeeded + row.succeeded,
        completionTokens: sum.completionTokens + row.completionTokens,
        totalTokens: sum.totalTokens + row.totalTokens,
        creditsCharged: sum.creditsCharged + row.creditsCharged,
        creditsRefunded: sum.creditsRefunded + row.creditsRefunded,
      }),
      zero,
    ),
  );
  const lines = rows.map(({ channel, model, ...sums }) => ({ channel, model, ...withKept(sums) }));
  const cells = (r: UsageSums) => [r.tasks, r.succeeded, r.completionTokens, r.totalTokens, r.creditsCharged, r.creditsRefunded, r.creditsKept];
  const text = [
    `tasks created ${from.toISOString()} to ${to.toISOString()} that went upstream`,
    table([
      ['channel', 'model', 'tasks', 'succeeded', 'completion tokens', 'total tokens', 'credits charged', 'refunded', 'kept'],
      ...lines.map((line) => [line.channel, line.model, ...cells(line)]),
      ['total', '', ...cells(total)],
    ]),
  ].join('\n');
  return { json: { from: from.toISOString(), to: to.toISOString(), rows: lines, total }, text };
}
