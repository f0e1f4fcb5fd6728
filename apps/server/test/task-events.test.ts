/** TaskEvents within one process (src/events/in-process.ts): who is called for a task's status, and until when. */
import { describe, expect, it } from 'vitest';
import { createInProcessTaskEvents } from '../src/events/in-process.js';

describe('in-process task events', () => {
  it("calls a task's listeners in the order they subscribed, with each status, and no other task's", () => {
    const events = createInProcessTaskEvents();
    const seen: string[] = [];
    events.subscribe('gen_a', (status) => seen.push(`first ${status}`));
    events.subscribe('gen_a', (status) => seen.push(`second ${status}`));
    events.subscribe('gen_b', (status) => seen.push(`b ${status}`));
    events.publish('gen_a', 'processing');
    events.publish('gen_a', 'succeeded');
    events.publish('gen_c', 'failed');
    expect(seen).toEqual(['first processing', 'second processing', 'first succeeded', 'second succeeded']);
  });

  it('stops calling a listener once unsubscribed; unsubscribing twice takes out nothing more', () => {
    const events = createInProcessTaskEvents();
    const seen: string[] = [];
    const listener = (status: string) => seen.push(status);
    const first = events.subscribe('gen_a', listener);
    events.subscribe('gen_a', listener);
    first();
    first();
    events.publish('gen_a', 'processing');
    // The same function subscribed twice is called once per subscription still held.
    expect(seen).toEqual(['processing']);
  });

  it('calls everyone subscribed when the status came, whoever unsubscribes or subscribes meanwhile', () => {
    const events = createInProcessTaskEvents();
    const seen: string[] = [];
    let stopSecond = () => {};
    events.subscribe('gen_a', (status) => {
      seen.push(`first ${status}`);
      stopSecond();
      events.subscribe('gen_a', (later) => seen.push(`late ${later}`));
    });
    stopSecond = events.subscribe('gen_a', (status) => seen.push(`second ${status}`));
    events.publish('gen_a', 'processing');
    events.publish('gen_a', 'succeeded');
    expect(seen).toEqual(['first processing', 'second processing', 'first succeeded', 'late succeeded']);
  });

  it('lets a task be listened to again after its last listener left', () => {
    const events = createInProcessTaskEvents();
    const seen: string[] = [];
    events.subscribe('gen_a', (status) => seen.push(`gone ${status}`))();
    events.publish('gen_a', 'processing');
    events.subscribe('gen_a', (status) => seen.push(`back ${status}`));
    events.publish('gen_a', 'succeeded');
    expect(seen).toEqual(['back succeeded']);
  });

  it('tells a cancel to a listener that subscribes within recentCancelMs after it, and no other status', () => {
    let clock = 1_000;
    const events = createInProcessTaskEvents({ recentCancelMs: 30_000, now: () => clock });
    const seen: string[] = [];
    events.publish('gen_a', 'processing');
    events.publish('gen_b', 'cancelled');
    events.publish('gen_c', 'cancelled');
    clock += 29_999;
    events.subscribe('gen_a', (status) => seen.push(`a ${status}`));
    events.subscribe('gen_b', (status) => seen.push(`b ${status}`));
    clock += 1;
    events.subscribe('gen_c', (status) => seen.push(`c ${status}`));
    expect(seen).toEqual(['b cancelled']);
    // Pruned once older than recentCancelMs: a later cancel of another task takes the old ones out.
    events.publish('gen_d', 'cancelled');
    clock -= 20_000;
    events.subscribe('gen_b', (status) => seen.push(`b again ${status}`));
    expect(seen).toEqual(['b cancelled']);
  });
});
