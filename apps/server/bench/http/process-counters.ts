/**
 * What a process has spent so far, from /proc (Linux), for per-answer figures between two snapshots (bench:features):
 * user and system CPU seconds of all its threads and of its main thread alone, minor page faults, and context
 * switches (voluntary: the thread waited; involuntary: it was preempted) summed over its threads. A thread that ended
 * between two snapshots takes its switches with it; its CPU and faults stay in the process's own figures.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { statFields, TICKS } from './cpu-cost.js';

export interface ProcessCounters {
  user: number;
  system: number;
  mainUser: number;
  mainSystem: number;
  minorFaults: number;
  voluntarySwitches: number;
  involuntarySwitches: number;
}

const statusField = (status: string, name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);

/** The process's counters now. Throws when it is gone. */
export function processCounters(pid: number): ProcessCounters {
  const all = statFields(`/proc/${pid}/stat`);
  const main = statFields(`/proc/${pid}/task/${pid}/stat`);
  let voluntarySwitches = 0;
  let involuntarySwitches = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      voluntarySwitches += statusField(status, 'voluntary_ctxt_switches');
      involuntarySwitches += statusField(status, 'nonvoluntary_ctxt_switches');
    } catch {
      // the thread ended meanwhile
    }
  }
  return {
    user: Number(all[11]) / TICKS,
    system: Number(all[12]) / TICKS,
    mainUser: Number(main[11]) / TICKS,
    mainSystem: Number(main[12]) / TICKS,
    minorFaults: Number(all[7]),
    voluntarySwitches,
    involuntarySwitches,
  };
}

/** Each counter's change from `before` to `after`, divided by `answers`. */
export function perAnswer(before: ProcessCounters, after: ProcessCounters, answers: number): ProcessCounters {
  const out = {} as ProcessCounters;
  for (const key of Object.keys(before) as (keyof ProcessCounters)[]) out[key] = (after[key] - before[key]) / answers;
  return out;
}
