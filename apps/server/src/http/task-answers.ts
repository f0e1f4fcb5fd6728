/**
 * Task answers kept as their JSON, by page key (domain/task-view.ts's `taskPageKey`: a task's id, creation time and
 * version), for list pages.
 *
 * A page of twenty tasks built from their rows cost about six times a task query on this stack (every column read,
 * five dates made and written out, the resource built and serialised, twenty times; BENCHMARKS.md), while most of a
 * page is what the same caller saw a moment ago: a console or a client polling its list. With the answers kept, a
 * page reads only each task's key (the store's `listTaskPage`) and the records of the tasks whose key has no answer
 * kept, and joins the kept JSON. A task that changed has a new key, so it is always read and serialised again; the
 * answer of its old key is never asked for again and ages out. Nothing here expires by time.
 *
 * Bounded: at most `capacity` answers (a task's answer is ≈ 0.6–2 KB), the one kept longest ago dropped first. An
 * answer is looked up only by the keys of the caller's own page, which the store read for the caller's account.
 */
export class TaskAnswers {
  private readonly kept = new Map<string, string>();

  constructor(private readonly capacity: number) {}

  /** The JSON of the task's answer for `key`, if kept. */
  get(key: string): string | undefined {
    return this.kept.get(key);
  }

  /** Keeps `json`, the task's answer for `key`; returns it. */
  keep(key: string, json: string): string {
    if (this.kept.delete(key) === false && this.kept.size >= this.capacity) {
      // A Map iterates in insertion order: its first key is the answer kept longest ago.
      this.kept.delete(this.kept.keys().next().value as string);
    }
    this.kept.set(key, json);
    return json;
  }

  get size(): number {
    return this.kept.size;
  }
}
