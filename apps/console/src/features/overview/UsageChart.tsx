/**
 * Usage per day as hand-drawn SVG bars (no chart library: the page's whole bundle stays small).
 * Each chart is one image whose label gives the totals; the numbers of every day are in the
 * table under them, for screen readers, keyboards and anyone who wants the exact figures.
 */
import type { UsageBucket } from '@vidgen/client';
import { formatCredits, formatNumber } from '../../ui/format';

/** Buckets are UTC days: named in UTC, or a reader west of Greenwich would see each a day early. */
const dayName = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', timeZone: 'UTC' });
const dayLong = new Intl.DateTimeFormat(undefined, { weekday: 'short', year: 'numeric', month: 'short', day: 'numeric', timeZone: 'UTC' });

/** viewBox units: each day is a slot this wide; the plot is this tall. */
const SLOT = 10;
const HEIGHT = 100;
/** A day with anything in it stays visible next to a much larger one. */
const MIN_BAR = 1.5;

interface Series {
  key: string;
  label: string;
  value: (bucket: UsageBucket) => number;
}

const CREDIT_SERIES: Series[] = [
  { key: 'charged', label: 'Charged', value: (b) => b.creditsCharged },
  { key: 'refunded', label: 'Refunded', value: (b) => b.creditsRefunded },
];

const TASK_SERIES: Series[] = [
  { key: 'succeeded', label: 'Succeeded', value: (b) => b.tasks.succeeded },
  { key: 'failed', label: 'Failed', value: (b) => b.tasks.failed },
  { key: 'cancelled', label: 'Cancelled', value: (b) => b.tasks.cancelled },
];

export function totals(buckets: UsageBucket[]) {
  const sum = (value: (bucket: UsageBucket) => number) => buckets.reduce((total, bucket) => total + value(bucket), 0);
  return {
    charged: sum((b) => b.creditsCharged),
    refunded: sum((b) => b.creditsRefunded),
    net: sum((b) => b.creditsNet),
    succeeded: sum((b) => b.tasks.succeeded),
    failed: sum((b) => b.tasks.failed),
    cancelled: sum((b) => b.tasks.cancelled),
    seconds: sum((b) => b.secondsDelivered),
  };
}

export function UsageCharts({ buckets, days }: { buckets: UsageBucket[]; days: number }) {
  const sums = totals(buckets);
  const taskCount = sums.succeeded + sums.failed + sums.cancelled;
  return (
    <>
      <div className="usage-charts">
        <figure className="card usage-chart">
          <figcaption>Credits per day</figcaption>
          <Bars
            buckets={buckets}
            series={CREDIT_SERIES}
            layout="grouped"
            unit={formatCredits}
            label={`Credits over the last ${days} days: ${formatNumber(sums.charged)} charged, ${formatNumber(sums.refunded)} refunded, ${formatNumber(sums.net)} net.`}
          />
        </figure>
        <figure className="card usage-chart">
          <figcaption>Tasks ended per day</figcaption>
          <Bars
            buckets={buckets}
            series={TASK_SERIES}
            layout="stacked"
            unit={(n) => `${formatNumber(n)} ${n === 1 ? 'task' : 'tasks'}`}
            label={`Tasks ended over the last ${days} days: ${formatNumber(taskCount)} in all, ${formatNumber(sums.succeeded)} succeeded, ${formatNumber(sums.failed)} failed, ${formatNumber(sums.cancelled)} cancelled.`}
          />
        </figure>
      </div>
      <details className="usage-numbers">
        <summary>Usage by day, in numbers</summary>
        {/* Focusable: on a phone the table scrolls sideways, and a keyboard must be able to scroll it. */}
        <div className="table-wrap scroll-box" tabIndex={0} role="region" aria-label="Usage per day">
          <table>
            <caption className="visually-hidden">Usage per day (UTC), oldest first</caption>
            <thead>
              <tr>
                <th scope="col">Day (UTC)</th>
                <th scope="col">Credits charged</th>
                <th scope="col">Credits refunded</th>
                <th scope="col">Net credits</th>
                <th scope="col">Succeeded</th>
                <th scope="col">Failed</th>
                <th scope="col">Cancelled</th>
                <th scope="col">Seconds delivered</th>
              </tr>
            </thead>
            <tbody>
              {buckets.map((bucket) => (
                <tr key={bucket.start}>
                  <th scope="row">
                    <time dateTime={bucket.start}>{dayLong.format(new Date(bucket.start))}</time>
                  </th>
                  <td>{formatNumber(bucket.creditsCharged)}</td>
                  <td>{formatNumber(bucket.creditsRefunded)}</td>
                  <td>{formatNumber(bucket.creditsNet)}</td>
                  <td>{formatNumber(bucket.tasks.succeeded)}</td>
                  <td>{formatNumber(bucket.tasks.failed)}</td>
                  <td>{formatNumber(bucket.tasks.cancelled)}</td>
                  <td>{formatNumber(bucket.secondsDelivered)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row">Total</th>
                <td>{formatNumber(sums.charged)}</td>
                <td>{formatNumber(sums.refunded)}</td>
                <td>{formatNumber(sums.net)}</td>
                <td>{formatNumber(sums.succeeded)}</td>
                <td>{formatNumber(sums.failed)}</td>
                <td>{formatNumber(sums.cancelled)}</td>
                <td>{formatNumber(sums.seconds)}</td>
              </tr>
            </tfoot>
          </table>
        </div>
      </details>
    </>
  );
}

function Bars({
  buckets,
  series,
  layout,
  unit,
  label,
}: {
  buckets: UsageBucket[];
  series: Series[];
  layout: 'grouped' | 'stacked';
  unit: (n: number) => string;
  label: string;
}) {
  const perBucket = (bucket: UsageBucket) => series.map((s) => s.value(bucket));
  const max = Math.max(1, ...buckets.map((bucket) => (layout === 'stacked' ? sumOf(perBucket(bucket)) : Math.max(...perBucket(bucket)))));
  const height = (value: number) => (value === 0 ? 0 : Math.max(MIN_BAR, (value / max) * HEIGHT));
  const width = buckets.length * SLOT;
  const first = buckets[0];
  const last = buckets.at(-1);

  return (
    <>
      <p className="chart-scale muted" aria-hidden="true">
        {unit(max)}
      </p>
      {/* Stretched to the box (preserveAspectRatio none): the bars scale, and no text is drawn inside to be distorted. */}
      <svg role="img" aria-label={label} viewBox={`0 0 ${width} ${HEIGHT}`} preserveAspectRatio="none" className="chart">
        <line className="chart-grid" x1={0} x2={width} y1={0.5} y2={0.5} vectorEffect="non-scaling-stroke" />
        {buckets.map((bucket, i) => {
          const values = perBucket(bucket);
          const x = i * SLOT;
          let stackedTop = HEIGHT;
          return (
            <g key={bucket.start}>
              {values.map((value, j) => {
                const h = height(value);
                if (h === 0) return null;
                const s = series[j]!;
                if (layout === 'stacked') {
                  // The minimum height of small parts may push a full column past the top: clip it there.
                  const top = Math.max(0, stackedTop - h);
                  const part = <rect key={s.key} className={`bar bar-${s.key}`} x={x + 1} width={SLOT - 2} y={top} height={stackedTop - top} />;
                  stackedTop = top;
                  return part;
                }
                const barWidth = (SLOT - 2) / values.length;
                return <rect key={s.key} className={`bar bar-${s.key}`} x={x + 1 + j * barWidth} width={barWidth} y={HEIGHT - h} height={h} />;
              })}
              {/* The whole day's column, for a tooltip on hover. */}
              <rect className="chart-hit" x={x} width={SLOT} y={0} height={HEIGHT}>
                <title>{`${dayName.format(new Date(bucket.start))}: ${series.map((s) => `${s.label.toLowerCase()} ${formatNumber(s.value(bucket))}`).join(', ')}`}</title>
              </rect>
            </g>
          );
        })}
        <line className="chart-axis" x1={0} x2={width} y1={HEIGHT - 0.5} y2={HEIGHT - 0.5} vectorEffect="non-scaling-stroke" />
      </svg>
      {first && last ? (
        <p className="chart-range muted" aria-hidden="true">
          <span>{dayName.format(new Date(first.start))}</span>
          <span>{dayName.format(new Date(last.start))}</span>
        </p>
      ) : null}
      <ul className="chart-legend">
        {series.map((s) => (
          <li key={s.key}>
            <span className={`swatch bar-${s.key}`} aria-hidden="true" /> {s.label}
          </li>
        ))}
      </ul>
    </>
  );
}

function sumOf(values: number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
