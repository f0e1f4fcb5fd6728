/**
 * Where the service's log lines go: standard output, the lines of the last few milliseconds (`HOLD_MS`) written
 * together, in one write, instead of one write for each line. A request's line written on its own cost a submission
 * ≈ 4 µs of its ≈ 60 (a system call per request, and the reader of the pipe woken for each; BENCHMARKS.md, thirteenth
 * pass). Written at the end of each turn of the event loop instead, as until the twentieth pass, a loaded server still
 * wrote every few requests (a submission's turn answers a handful): held for `HOLD_MS`, the floor with the request line
 * cost a submission 1.0 and 2.2 µs over the plain floor, against 4.2 and 2.7 µs written each turn (alternating runs of
 * `bench:features --request submit`; BENCHMARKS.md, twentieth pass).
 *
 * Each line is encoded into one buffer as it comes (its UTF-8 bytes, once), and the buffer's bytes are written when
 * the hold ends or the buffer is full: joining the lines as a string and writing that through pino's destination took
 * ≈ 1 µs a request more in a profile of the loaded server (1.37 against 0.36 µs), most of it counting the UTF-8 bytes
 * of the joined string, which the write then converted again (BENCHMARKS.md, fourteenth pass).
 * A full pipe (EAGAIN: standard output set non-blocking by its reader) is waited out, as pino's synchronous
 * destination does; any other failure to write throws, as it would there.
 *
 * A line waits at most `HOLD_MS` (less when the buffer fills first); the process's exit (a normal one,
 * `process.exit`, an uncaught exception, the event loop running dry: the hold's timer keeps no process alive)
 * writes what is left first. A process killed outright (SIGKILL) loses the lines of its last `HOLD_MS`, where one
 * write a line would have lost only the line being made: the request log is not state that must survive a crash
 * (the store holds that), and those lines are mostly of requests cut off with it.
 */
import { writeSync } from 'node:fs';
import type pino from 'pino';

/** Bytes of lines held before they are written anyway: ≈ 180 request lines. */
const BUFFER_BYTES = 64 * 1024;
/** How long a write waits for a full pipe to drain before trying again. */
const FULL_PIPE_WAIT_MS = 10;
/** How long a line is held for the lines after it before they are all written (≈ 100 request lines at 10,000 a second). */
export const HOLD_MS = 10;
const pause = new Int32Array(new SharedArrayBuffer(4));

/** Writes `length` bytes of `bytes` to `fd`, however many writes it takes. */
function writeAll(fd: number, bytes: Buffer, length: number): void {
  let written = 0;
  while (written < length) {
    try {
      written += writeSync(fd, bytes, written, length - written);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      Atomics.wait(pause, 0, 0, FULL_PIPE_WAIT_MS);
    }
  }
}

/**
 * A destination that also takes a line as bytes put straight into its buffer (http/request-log.ts): no string is made
 * for the line, nor encoded. A line so written is written with the lines held with it, in the order they came.
 */
export interface LineBytesDestination extends pino.DestinationStream {
  /** Where the held lines are gathered; a line's bytes go in from the offset `reserve()` gave. */
  readonly bytes: Buffer;
  /** Room for a line of at most `length` bytes (what is held written first if needed): its offset in `bytes`, or -1 when a line that long is never held. */
  reserve(length: number): number;
  /** The line reserved last ends at `end` (exclusive) in `bytes`. */
  commit(end: number): void;
}

/**
 * The destination on `fd`. `schedule` runs the write of the held lines later: by default after `HOLD_MS` on a timer
 * that keeps no process alive; tests pass their own, to say when.
 */
export function batchedLogDestination(
  fd = 1,
  schedule: (write: () => void) => void = (write) => setTimeout(write, HOLD_MS).unref(),
): LineBytesDestination {
  const buffer = Buffer.allocUnsafeSlow(BUFFER_BYTES);
  let used = 0;
  let scheduled = false;
  /** Writes what is held; a hold already under way keeps its timer, for the lines that come after. */
  const writeHeld = () => {
    if (used === 0) return;
    const length = used;
    used = 0;
    writeAll(fd, buffer, length);
  };
  /** The hold's end (and the process's): what is held written, and the next line starts a hold of its own. */
  const flush = () => {
    scheduled = false;
    writeHeld();
  };
  const held = () => {
    if (!scheduled) {
      scheduled = true;
      schedule(flush);
    }
  };
  process.on('exit', flush);
  return {
    bytes: buffer,
    reserve(length) {
      if (length > BUFFER_BYTES) return -1;
      if (used + length > BUFFER_BYTES) writeHeld();
      return used;
    },
    commit(end) {
      used = end;
      held();
    },
    write(line: string) {
      // A UTF-16 code unit is at most 3 bytes of UTF-8: with that much room, the line fits whole.
      if (used + line.length * 3 > BUFFER_BYTES) {
        writeHeld();
        if (line.length * 3 > BUFFER_BYTES) {
          const bytes = Buffer.from(line);
          writeAll(fd, bytes, bytes.length);
          return;
        }
      }
      used += buffer.write(line, used);
      held();
    },
  };
}
