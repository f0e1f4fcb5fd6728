import { expect, inject, it } from 'vitest';
import { createClient, type Task } from '../src/index.js';
import { countingFetch } from './helpers.js';

const fixture = inject('fixture');

it('listAll follows the cursor over more than two pages (limit 2), newest first', async () => {
  const counting = countingFetch();
  const client = createClient({ baseUrl: fixture.baseUrl, apiKey: fixture.pages.apiKey, fetch: counting.fetch });
  const submitted: string[] = [];
  for (let i = 0; i < 5; i++) {
    // Long renders, cancelled at once: they never hold up the worker for the other tests.
    const { requestId } = await client.submit({ model: 'vidgen-2.0-fast', prompt: `page task ${i}`, duration: 15, resolution: '1080p' });
    await client.cancel(requestId);
    submitted.push(requestId);
  }

  counting.requests.length = 0;
  const all: Task[] = [];
  for await (const task of client.listAll({ limit: 2 })) all.push(task);
  expect(all.map((task) => task.requestId)).toEqual([...submitted].reverse());
  const pages = counting.requests.map((request) => new URL(request.url));
  expect(pages).toHaveLength(3);
  expect(pages.every((url) => url.searchParams.get('limit') === '2')).toBe(true);
  expect(pages[0]!.searchParams.has('cursor')).toBe(false);
  expect(pages[2]!.searchParams.get('cursor')).toBeTruthy();

  const cancelled: Task[] = [];
  for await (const task of client.listAll({ status: 'cancelled', limit: 2 })) cancelled.push(task);
  expect(cancelled).toHaveLength(5);
  expect(cancelled.every((task) => task.status === 'cancelled')).toBe(true);
});
