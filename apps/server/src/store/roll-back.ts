/**
 * Thrown inside a store's transaction to undo everything it wrote and answer
 * `outcome` instead (a refusal found after a write, e.g. the active-task cap
 * after the charge). Both adapters catch it at their transaction boundary.
 */
export class RollBack<T> {
  constructor(readonly outcome: T) {}
}
