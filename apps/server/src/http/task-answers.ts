/**
 * Task answers kept as their JSON, by page key (domain/task-view.ts's `taskPageKeyOf`: a task's id, creation time and
 * version), for list pages.
 *
 * A page of twenty tasks built from their rows cost about six times a task query on this stack (every column read,
 * five dates made and written out, the resource built and serialised, twenty times; BENCHMARKS.md), while most of a
 * page is what the same caller saw a moment ago: a console or a client polling its list. With the answers kept, a
 * page reads only each task's key (the store's `listTaskPage`) and the records of the tasks whose key has no answer
 * kept, and joins the kept JSON. A task that changed has a new key, so it is always read and serialised again; the
 * answer of its old key is never asked for again and ages out. Nothing here expires by time.
 *
 * Bounded by size, not count: at most `capacity` characters of keys and answers (a task's answer is ≈ 0.7 KB, up to
 * ≈ 20 KB with the longest prompt, metadata and media URLs the spec allows), the answers kept longest ago dropped
 * first. An answer is looked up only by the keys of the caller's own page, which the store read for its account.
 */
export class TaskAnswers {
  private readonly kept = new Map<string, string>();
  /** Characters of the keys and answers kept. */
  private used = 0;

  constructor(private readonly capacity: number) {}

  /** The JSON of the task's answer for `key`, if kept. */
  get(key: string): string | undefined {
    return this.kept.get(key);
  }

  /** Keeps `json`, the task's answer for `key` (unless it alone is over the capacity); returns it. */
  keep(key: string, json: string): string {
    const size = key.length + json.length;
    const previous = this.kept.get(key);
    if (previous !== undefined) {
      this.kept.delete(key);
      this.used -= key.length + previous.length;
    }
    if (size > this.capacity) return json;
    // A Map iterates in insertion order: its first entry is the answer kept longest ago.
    for (const [oldest, answer] of this.kept) {
      if (this.used + size <= this.capacity) break;
      this.kept.delete(oldest);
      this.used -= oldest.length + answer.length;
    }
    this.kept.set(key, json);
    this.used += size;
    return json;
  }

  /** Answers kept, and the characters they and their keys take. */
  get size(): { answers: number; characters: number } {
    return { answers: this.kept.size, characters: this.used };
  }
}
