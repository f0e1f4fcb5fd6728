/**
 * The core vocabulary and the ports the service is built from.
 *
 * - **Task**: one video-generation request of an account, identified by its
 *   `requestId` (`gen_…`). Its status moves only through `domain/states.ts`.
 * - **Account**: owns a credit balance, API keys, tasks and a webhook secret.
 * - **API key**: `vg_live_…`/`vg_test_…`; only its SHA-256 is stored. Carries scopes.
 * - **Ledger entry**: one signed change of an account's credits (`grant`,
 *   `charge`, `refund`). An account's balance always equals the sum of its entries.
 * - **Idempotency record**: the first answer to a submission with an
 *   `Idempotency-Key`, replayed for 24 h to the same key and body.
 * - **Job**, **attempt**, **delivery**, **provider**: the generation pipeline and
 *   webhooks (later issues).
 */
export interface Clock {
  now(): Date;
  /** A timer that tests can fire by advancing a manual clock; returns a cancel function. */
  setTimeout(callback: () => void, ms: number): () => void;
}

export const systemClock: Clock = {
  now: () => new Date(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    return () => clearTimeout(timer);
  },
};

/** Tells listeners in this process that a task's status changed (wakes long polls). */
export interface TaskEvents {
  publish(requestId: string, status: string): void;
  /**
   * Calls `listener` on every status change of the task until the returned function is called. A cancel announced in
   * the last seconds before the subscription (in this process, or heard from another) is told at once as well: a worker
   * whose claim started the task subscribes only once the claim has answered, and the cancel's notice may have come first.
   */
  subscribe(requestId: string, listener: (status: string) => void): () => void;
}
