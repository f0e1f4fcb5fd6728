/**
 * What a task makes a server process allocate, and where, from the heap profiles bench/pipeline.ts leaves with
 * VIDGEN_BENCH_HEAP_PROF=<dir> (bench/http/heap-sample.mjs: V8's sampling heap profiler, freed objects included):
 *
 *   VIDGEN_BENCH_HEAP_PROF=/tmp/heap pnpm --filter @vidgen/server bench:pipeline -- --stores postgres,postgres-floor --topologies split --paced 0
 *   pnpm --filter @vidgen/server exec tsx bench/heap-report.ts /tmp/heap [--top 20]
 *
 * For each measurement and role: KiB allocated a task by one process (its samples' bytes over the tasks its role's
 * processes took, shared evenly: the split topology's submissions alternate between its api processes, and its workers
 * claim about half each), and the functions that allocated most of it themselves (V8's call frames: a function inlined
 * into another is still its own frame). Warm-up and paced tasks included: a process's whole life over its tasks.
 * Profiles taken with VIDGEN_BENCH_HEAP_PROF_PROMOTED=1 hold only what outlived the young generation: read "allocated"
 * as "promoted" (allocated, and still alive after its scavenges).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children?: ProfileNode[];
}

/** A call frame as `function file:line`, the file relative to apps/server or the package store. */
const site = ({ functionName, url, lineNumber }: ProfileNode['callFrame']) =>
  `${functionName || '(anonymous)'} ${url.replace(/^.*\/(apps\/server\/|node_modules\/\.pnpm\/)/, '').replace(/^file:\/\//, '')}:${lineNumber + 1}`;

/** Bytes allocated in all, and by the function that allocated them itself. */
function allocations(head: ProfileNode): { total: number; bySite: Map<string, number> } {
  const bySite = new Map<string, number>();
  let total = 0;
  const pending = [head];
  for (let node = pending.pop(); node; node = pending.pop()) {
    total += node.selfSize;
    if (node.selfSize) {
      const key = site(node.callFrame);
      bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
    }
    pending.push(...(node.children ?? []));
  }
  return { total, bySite };
}

const { values, positionals } = parseArgs({ options: { top: { type: 'string', default: '20' } }, allowPositionals: true });
const dir = positionals[0];
if (!dir) throw new Error('usage: tsx bench/heap-report.ts <dir> [--top 20]');
const files = readdirSync(dir);
for (const tasksFile of files.filter((file) => file.endsWith('.tasks.json')).sort()) {
  const name = tasksFile.slice(0, -'.tasks.json'.length);
  const { variant, tasks, processes } = JSON.parse(readFileSync(join(dir, tasksFile), 'utf8')) as { variant: string; tasks: number; processes: Record<string, number> };
  for (const [role, count] of Object.entries(processes)) {
    const profiles = files.filter((file) => file.startsWith(`${name}-${role}-`) && file.endsWith('.heapprofile'));
    if (!profiles.length) continue;
    const bySite = new Map<string, number>();
    let total = 0;
    for (const file of profiles) {
      const found = allocations((JSON.parse(readFileSync(join(dir, file), 'utf8')) as { head: ProfileNode }).head);
      total += found.total;
      for (const [key, bytes] of found.bySite) bySite.set(key, (bySite.get(key) ?? 0) + bytes);
    }
    // Per process and per task of its own: the role's tasks shared by its processes.
    const perTask = (bytes: number) => bytes / profiles.length / (tasks / count) / 1024;
    console.log(`\n${variant} (${name}), ${role}: ${perTask(total).toFixed(1)} KiB allocated a task a process (${profiles.length} of ${count} profiled, ${tasks} tasks)`);
    for (const [key, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
      console.log(`  ${perTask(bytes).toFixed(2).padStart(7)}  ${key}`);
    }
  }
}
