/**
 * The CPU a task costs, for bench/pipeline.ts: read from /proc (Linux) at the start and the end of the throughput
 * window. Each server process's main thread (JavaScript, and the syscalls it makes: sockets, SQLite) apart from its
 * other threads (libuv's pool, which copies and moves the output files, and V8's helpers: GC, compilation);
 * PostgreSQL's processes (its backends, the WAL writer, the checkpointer: every process named `postgres`, so nothing
 * else may use the cluster while a bench runs; a backend that has exited counts through its postmaster's reaped
 * children); the bench itself (its HTTP client and webhook receiver); and the machine's idle share.
 * On a machine without /proc: undefined, and the table is left out.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';

export interface CpuSnapshot {
  /** CPU seconds of each server process: its main thread, and all of its threads. */
  servers: { role: string; main: number; total: number }[];
  postgres: number;
  bench: number;
  /**
   * /proc/stat's jiffies: all, idle (iowait included), and steal: time a virtual machine's CPUs wanted to run and the
   * host ran something else, which no process's own times count (absent: not read).
   */
  machine: { all: number; idle: number; steal?: number };
}

/** USER_HZ, the unit of /proc's CPU times: 100 on every Linux that node runs on. */
export const TICKS = 100;

/** The fields of a /proc/<pid>[/task/<tid>]/stat line after the command (which may hold spaces), from `state` on. Throws when gone. */
export function statFields(statPath: string): string[] {
  const stat = readFileSync(statPath, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}

/** utime + stime: the 12th and 13th fields from `state`. */
const ownSeconds = (fields: string[]) => (Number(fields[11]) + Number(fields[12])) / TICKS;

/** A process's CPU seconds so far, all of its threads (or the thread `tid` only), from /proc. Throws when it is gone. */
export function cpuSecondsOf(pid: number, tid?: number): number {
  return ownSeconds(statFields(tid === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${tid}/stat`));
}

/**
 * PostgreSQL's CPU seconds so far: its live processes' own, and those of the ones that exited (backends of closed
 * connections), which the postmaster's reaped-children times hold. Undefined without /proc.
 */
export function postgresCpuSeconds(): number | undefined {
  if (!existsSync('/proc/stat')) return undefined;
  const processes = new Map<string, string[]>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') processes.set(pid, statFields(`/proc/${pid}/stat`));
    } catch {
      // gone meanwhile
    }
  }
  let seconds = 0;
  for (const fields of processes.values()) {
    seconds += ownSeconds(fields);
    // The postmaster (its parent is not PostgreSQL): plus its children that exited, cutime and cstime.
    if (!processes.has(fields[1]!)) seconds += (Number(fields[13]) + Number(fields[14])) / TICKS;
  }
  return seconds;
}

export function cpuSnapshot(servers: { role: string; pid: number }[]): CpuSnapshot | undefined {
  if (!existsSync('/proc/stat')) return undefined;
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest time is counted in user already).
  const [all, idle, steal] = (() => {
    const jiffies = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    return [jiffies.slice(0, 8).reduce((sum, n) => sum + n, 0), jiffies[3]! + jiffies[4]!, jiffies[7] ?? 0];
  })();
  const usage = process.cpuUsage();
  return {
    servers: servers.map(({ role, pid }) => ({ role, main: cpuSecondsOf(pid, pid), total: cpuSecondsOf(pid) })),
    postgres: postgresCpuSeconds()!,
    bench: (usage.user + usage.system) / 1e6,
    machine: { all: all!, idle: idle!, steal: steal! },
  };
}

export interface CpuCost {
  /** Milliseconds a task, per server role (summed over that role's processes): main thread, and the other threads. */
  byRole: { role: string; main: number; other: number }[];
  postgres: number;
  bench: number;
  total: number;
  /** The machine's idle share over the window, in %. */
  idlePercent: number;
  /** The share of the window the host took from this machine's CPUs (steal), in %; undefined when not read. */
  stealPercent?: number;
}

/** Per task between two snapshots of the same processes. */
export function cpuPerTask(before: CpuSnapshot, after: CpuSnapshot, tasks: number): CpuCost {
  const ms = (seconds: number) => (seconds * 1000) / tasks;
  const roles = new Map<string, { main: number; other: number }>();
  after.servers.forEach((server, i) => {
    const start = before.servers[i]!;
    const role = roles.get(server.role) ?? { main: 0, other: 0 };
    role.main += ms(server.main - start.main);
    role.other += ms(server.total - server.main - (start.total - start.main));
    roles.set(server.role, role);
  });
  const byRole = [...roles.entries()].map(([role, cost]) => ({ role, ...cost }));
  const postgres = ms(after.postgres - before.postgres);
  const bench = ms(after.bench - before.bench);
  const total = byRole.reduce((sum, role) => sum + role.main + role.other, 0) + postgres + bench;
  const window = after.machine.all - before.machine.all;
  const idlePercent = (100 * (after.machine.idle - before.machine.idle)) / window;
  const stealPercent = after.machine.steal === undefined || before.machine.steal === undefined ? undefined : (100 * (after.machine.steal - before.machine.steal)) / window;
  return { byRole, postgres, bench, total, idlePercent, ...(stealPercent === undefined ? {} : { stealPercent }) };
}
