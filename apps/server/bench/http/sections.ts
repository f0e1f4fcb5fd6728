/**
 * Sections of BENCHMARKS.md that a benchmark of its own writes (`## Upstream following`, `## Account
 * usage`): found, replaced or inserted without touching the rest of the file, which `pnpm bench`
 * writes, nor the hand-written part after ANALYSIS_MARKER.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The line after which BENCHMARKS.md is written by hand: every run keeps it. */
export const ANALYSIS_MARKER = '<!-- written by hand below: kept by every run -->';
const BENCHMARKS = join(resolve(import.meta.dirname, '../../../..'), 'BENCHMARKS.md');

const startOf = (markdown: string, heading: string) => markdown.search(new RegExp(`^${heading}$`, 'm'));

function sectionEnd(markdown: string, heading: string, start: number): number {
  const rest = markdown.slice(start + heading.length);
  const ends = [rest.search(/^## /m), rest.indexOf(ANALYSIS_MARKER)].filter((i) => i >= 0);
  return ends.length ? start + heading.length + Math.min(...ends) : markdown.length;
}

/** The section under `heading` (to the next `## ` heading or the hand-written part), if any. */
export function sectionOf(markdown: string, heading: string): string | undefined {
  const start = startOf(markdown, heading);
  return start < 0 ? undefined : markdown.slice(start, sectionEnd(markdown, heading, start));
}

/**
 * `markdown` with `section` in place of its section under `heading`, or, without one, inserted before
 * `## Targets` (else before the hand-written part, else at the end). Nothing else changes.
 */
export function placeSection(markdown: string, heading: string, section: string): string {
  const body = `${section.trimEnd()}\n`;
  const start = startOf(markdown, heading);
  if (start >= 0) {
    const end = sectionEnd(markdown, heading, start);
    // A blank line before what follows, as the section had.
    return markdown.slice(0, start) + body + (end < markdown.length ? '\n' : '') + markdown.slice(end);
  }
  const targets = markdown.search(/^## Targets$/m);
  const marker = markdown.indexOf(ANALYSIS_MARKER);
  const at = targets >= 0 && (marker < 0 || targets < marker) ? targets : marker;
  if (at >= 0) return markdown.slice(0, at) + body + '\n' + markdown.slice(at);
  return `${markdown}${markdown.endsWith('\n') || !markdown ? '' : '\n'}\n${body}`;
}

/** Writes `section` into BENCHMARKS.md at the repository root; returns its path. */
export function writeSection(heading: string, section: string): string {
  const previous = existsSync(BENCHMARKS) ? readFileSync(BENCHMARKS, 'utf8') : '';
  writeFileSync(BENCHMARKS, placeSection(previous, heading, section));
  return BENCHMARKS;
}
