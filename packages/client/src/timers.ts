/**
 * The longest delay `setTimeout` takes: a longer one (or `Infinity`) is not an error but fires
 * after 1 ms, in browsers and in Node (with a `TimeoutOverflowWarning`).
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * `setTimeout` for any delay: one longer than `MAX_TIMER_DELAY_MS` is waited out in chunks, and
 * `Infinity` sets no timer at all (the callback never runs). Returns the function that cancels it.
 */
export function setLongTimeout(callback: () => void, ms: number): () => void {
  if (ms === Infinity) return () => {};
  let left = Math.max(0, ms);
  let handle: ReturnType<typeof setTimeout>;
  const arm = () => {
    const chunk = Math.min(left, MAX_TIMER_DELAY_MS);
    left -= chunk;
    handle = setTimeout(left > 0 ? arm : callback, chunk);
  };
  arm();
  return () => clearTimeout(handle);
}
