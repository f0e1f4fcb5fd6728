/**
 * Where the service's log lines go: standard output, the lines made in one turn of the event loop written together
 * at its end, in one write through pino's synchronous destination (which retries a full pipe and a partial write),
 * instead of one write for each line. A request's line written on its own cost a submission ≈ 4 µs of its ≈ 60 (a
 * system call per request, and the reader of the pipe woken for each; BENCHMARKS.md, thirteenth pass), and a turn of
 * a loaded server answers several requests.
 *
 * A line waits at most until the end of the turn it was made in; the process's exit (a normal one, `process.exit`,
 * an uncaught exception) writes what is left first. A process killed outright (SIGKILL) loses the lines of the turn
 * it was killed in, where one write a line would have lost only the line being made: the request log is not state
 * that must survive a crash (the store holds that), and its lines of that turn are of requests cut off with it.
 */
import pino from 'pino';

export function turnBatchedDestination(fd = 1): pino.DestinationStream {
  const out = pino.destination({ dest: fd, sync: true });
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    out.write(text);
  };
  process.on('exit', flush);
  return {
    write(line: string) {
      pending += line;
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    },
  };
}
