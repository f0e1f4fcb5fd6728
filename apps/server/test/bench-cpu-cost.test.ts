/**
 * bench:pipeline's CPU accounting (bench/http/cpu-cost.ts): the arithmetic on made-up snapshots, and the /proc reading
 * on this process (Linux; skipped where there is no /proc).
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuPerTask, cpuSnapshot, postgresCpuSeconds, type CpuSnapshot } from '../bench/http/cpu-cost.js';

/** Servers as [role, main thread s, all threads s], then PostgreSQL's and the bench's seconds, and /proc/stat's [all, idle, steal]. */
const snapshot = (servers: [string, number, number][], postgres: number, bench: number, [all, idle, steal]: [number, number, number?]): CpuSnapshot => ({
  servers: servers.map(([role, main, total]) => ({ role, main, total })),
  postgres,
  bench,
  machine: { all, idle, ...(steal === undefined ? {} : { steal }) },
});

describe('the CPU a task (bench/http/cpu-cost.ts)', () => {
  it('sums each role over its processes, main thread apart from the others, per task; the idle share of the machine', () => {
    const before = snapshot([['api', 1, 1.5], ['worker', 2, 4], ['worker', 3, 5]], 10, 0.5, [1000, 400]);
    const after = snapshot([['api', 2, 3], ['worker', 3, 6], ['worker', 5, 8]], 14, 1.5, [2000, 600]);
    const cost = cpuPerTask(before, after, 1000);
    // api: main 1 s, other 0.5 s; workers: main 1 + 2 s, other (2 - 1) + (3 - 2) s; over 1,000 tasks, in ms.
    expect(cost.byRole).toEqual([
      { role: 'api', main: 1, other: 0.5 },
      { role: 'worker', main: 3, other: 2 },
    ]);
    expect(cost.postgres).toBe(4);
    expect(cost.bench).toBe(1);
    expect(cost.total).toBe(1.5 + 5 + 4 + 1);
    expect(cost.idlePercent).toBe(20);
    expect(cost.stealPercent).toBeUndefined();
  });

  it("says what share of the window the host took from the machine's CPUs (steal)", () => {
    const before = snapshot([['all', 1, 1.5]], 0, 0.5, [1000, 400, 50]);
    const after = snapshot([['all', 2, 3]], 0, 1.5, [3000, 600, 350]);
    expect(cpuPerTask(before, after, 1000)).toMatchObject({ idlePercent: 10, stealPercent: 15 });
  });

  it.skipIf(!existsSync('/proc/stat'))("reads a process's main thread and all of its threads from /proc", () => {
    const self = [{ role: 'self', pid: process.pid }];
    const before = cpuSnapshot(self)!;
    // Burn 200 ms of this thread's CPU (measured by the process, not by a clock), then read again.
    const start = process.cpuUsage();
    while (process.cpuUsage(start).user < 200_000);
    const after = cpuSnapshot(self)!;
    const used = after.servers[0]!.main - before.servers[0]!.main;
    expect(used).toBeGreaterThanOrEqual(0.15);
    expect(after.servers[0]!.total).toBeGreaterThanOrEqual(after.servers[0]!.main);
    expect(after.bench - before.bench).toBeGreaterThanOrEqual(0.15);
    expect(after.machine.all).toBeGreaterThan(before.machine.all);
    expect(after.machine.steal).toBeGreaterThanOrEqual(before.machine.steal!);
    // PostgreSQL's processes, when any run here: a non-negative count of seconds.
    expect(postgresCpuSeconds()).toBeGreaterThanOrEqual(0);
  });
});
