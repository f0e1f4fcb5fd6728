/**
 * The job-queue port. A job is one unit of work for a worker (generating one
 * task's video). Jobs are enqueued in the same transaction as their task, so
 * an accepted task always has its job. A worker claims a job with a lease and
 * extends it while it works; a worker that dies stops extending, the lease
 * runs out, and the job is claimed again (at-least-once). Task state
 * transitions, not the queue, guarantee each task is charged and refunded once.
 */
import type { PendingDelivery, TaskRecord } from '../store/store.js';

/** The lane of webhook deliveries; every other lane is a provider's. */
export const WEBHOOKS_LANE = 'webhooks';

export interface Job {
  /** Opaque to workers: each queue names its jobs its own way. */
  id: string;
  taskId: string;
  /** `generate` the task's video, or `deliver` its webhook. */
  kind: 'generate' | 'deliver';
  /** The lane that runs it: the provider routed by model, or `webhooks`. */
  provider: string;
  /** Claims so far, this one included. */
  attempts: number;
  maxAttempts: number;
  /**
   * The task as the claim started it (queued or processing → processing, as Store.startTask does), when the claim was
   * asked to start what it claims and the queue can do that in the claim itself (PostgreSQL's task rows); absent, the
   * worker starts the task.
   */
  started?: TaskRecord;
  /** A `deliver` job handed over by its task's completion (runHeld): its delivery as written, with the secrets to sign it, where the store answered them. */
  delivery?: PendingDelivery;
}

export interface JobQueue {
  /**
   * Up to `limit` due jobs of the `provider` lane (or jobs whose lease ran out), oldest first, each leased to `workerId`.
   * `start`: the worker would start each claimed job's task at once; a queue that can start it in the claim does so
   * (Job.started).
   */
  claim(input: { workerId: string; now: Date; leaseMs: number; provider: string; limit: number; start?: boolean }): Promise<Job[]>;
  /**
   * Keeps a running job's lease for `leaseMs` from `now`; false when the job is no longer this claim's.
   * A duration, not an instant: a queue on the database's clock (pg-boss) cannot mix it with the caller's.
   */
  extendLease(input: { jobId: string; workerId: string; now: Date; leaseMs: number }): Promise<boolean>;
  complete(jobId: string, now: Date): Promise<void>;
  /** Makes the job available again at `runAt` (backoff after an unexpected error). */
  retry(input: { jobId: string; runAt: Date; error: string; now: Date }): Promise<void>;
  /**
   * Hands a running job back untouched (shutdown; or no upstream channel has room yet): available at `runAt`
   * (default at once), this claim not counted as an attempt.
   */
  release(input: { jobId: string; workerId: string; now: Date; runAt?: Date }): Promise<void>;
  /** Gives up on the job for good. */
  bury(input: { jobId: string; error: string; now: Date }): Promise<void>;
  /** Counts by state, for metrics and tests. */
  countJobs(): Promise<Record<'available' | 'leased' | 'done' | 'dead', number>>;
}
