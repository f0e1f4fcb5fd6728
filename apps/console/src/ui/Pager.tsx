/**
 * Cursor paging as the API does it: a page's `nextCursor` opens the next one, and the cursors
 * followed so far are a stack ("Previous page" pops one; none is the first page).
 */
import { useState } from 'react';

export function useCursorPages() {
  const [cursors, setCursors] = useState<string[]>([]);
  return {
    /** The cursor of the page shown; undefined for the first. */
    cursor: cursors.at(-1),
    pageNumber: cursors.length + 1,
    hasPrevious: cursors.length > 0,
    previous: () => setCursors((stack) => stack.slice(0, -1)),
    next: (nextCursor: string) => setCursors((stack) => [...stack, nextCursor]),
    /** Back to the first page: a cursor belongs to the filters it was issued for. */
    reset: () => setCursors([]),
  };
}

export interface PagerProps {
  label: string;
  pageNumber: number;
  canPrevious: boolean;
  /** The shown page's `nextCursor`, when there is a next page to open now. */
  nextCursor: string | undefined;
  onPrevious: () => void;
  onNext: (nextCursor: string) => void;
}

/**
 * aria-disabled rather than disabled: a button that becomes disabled while focused (the last
 * page reached) would drop keyboard focus to the page's start.
 */
export function Pager({ label, pageNumber, canPrevious, nextCursor, onPrevious, onNext }: PagerProps) {
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" aria-disabled={!canPrevious} onClick={() => canPrevious && onPrevious()}>
        Previous page
      </button>
      <span aria-live="polite">Page {pageNumber}</span>
      <button type="button" aria-disabled={!nextCursor} onClick={() => nextCursor && onNext(nextCursor)}>
        Next page
      </button>
    </nav>
  );
}
