/** How numbers, credits and times read in the console (the browser's locale, UTC shown where it matters). */

const integer = new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 });

export function formatCredits(credits: number): string {
  return `${integer.format(credits)} ${Math.abs(credits) === 1 ? 'credit' : 'credits'}`;
}

export function formatNumber(value: number): string {
  return integer.format(value);
}

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An RFC 3339 instant in the reader's time zone; `—` for none. */
export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : dateTime.format(date);
}

/** "3 min ago", "in 2 h": for lists, next to the exact time in a title. */
export function formatRelative(iso: string, now: number = Date.now()): string {
  const seconds = Math.round((new Date(iso).getTime() - now) / 1000);
  const units: [Intl.RelativeTimeFormatUnit, number][] = [
    ['day', 86_400],
    ['hour', 3_600],
    ['minute', 60],
    ['second', 1],
  ];
  const rtf = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  for (const [unit, size] of units) {
    if (Math.abs(seconds) >= size || unit === 'second') return rtf.format(Math.trunc(seconds / size), unit);
  }
  return iso;
}
