/**
 * Preloaded into a server process by bench/pipeline.ts when VIDGEN_BENCH_HEAP_PROF=<dir> is set: V8's sampling heap
 * profiler over the process's whole life, counting every allocation sampled, also of objects the collector has since
 * freed (`includeObjectsCollectedByMinorGC` / `…MajorGC`): what the process allocates, and where, not only what it
 * keeps. A CPU profile shows the collector's time; this shows what made it collect (BENCHMARKS.md, twenty-sixth pass).
 *
 * Written when the process stops (the bench stops it with SIGTERM) to `<dir>/<VIDGEN_BENCH_HEAP_PROF_NAME>-<role>-<pid>.heapprofile`,
 * which Chrome's DevTools open (Memory, Load); `bench/heap-report.ts <dir>` sums them per task. Plain JavaScript:
 * loaded before the built server, without tsx.
 */
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const dir = process.env.VIDGEN_BENCH_HEAP_PROF;
const role = process.argv.includes('--role') ? process.argv[process.argv.indexOf('--role') + 1] : 'process';
if (dir) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.enable');
  // One sample every 4 KiB allocated on average (V8's default is 32 KiB): a task's few dozen KiB then leave samples.
  // VIDGEN_BENCH_HEAP_PROF_PROMOTED=1 leaves out what a scavenge freed: what is left is what outlived the young
  // generation (promoted, then freed by a full collection or still alive), the collector's costly part, by allocation site.
  const promotedOnly = process.env.VIDGEN_BENCH_HEAP_PROF_PROMOTED === '1';
  session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMinorGC: !promotedOnly, includeObjectsCollectedByMajorGC: true });
  let written = false;
  const write = () => {
    if (written) return;
    written = true;
    // An in-process session answers at once: the profile is written before the process goes on to exit.
    session.post('HeapProfiler.stopSampling', (error, answer) => {
      if (error) return void process.stderr.write(`heap-sample: ${error.message}\n`);
      const name = `${process.env.VIDGEN_BENCH_HEAP_PROF_NAME ?? 'server'}-${role}-${process.pid}.heapprofile`;
      writeFileSync(join(dir, name), JSON.stringify(answer.profile));
    });
  };
  // Before the server's own SIGTERM handler, which drains and exits.
  process.prependListener('SIGTERM', write);
  process.on('exit', write);
}
