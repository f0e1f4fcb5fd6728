/**
 * Types that follow the arguments: `list`/`listAll` with a `status` give tasks of that status.
 * The `expectTypeOf` lines are checked by `pnpm typecheck` (tsc over test/); the calls run
 * against a stub of the list endpoint.
 */
import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  createClient,
  type ListOptions,
  type Task,
  type TaskCancelled,
  type TaskFailed,
  type TaskList,
  type TaskListWithStatus,
  type TaskStatus,
  type TaskSucceeded,
  type TaskWithStatus,
} from '../src/index.js';
import { json, taskIn } from './helpers.js';

/** The list endpoint: one page of tasks of the `status` asked for (all of them without one). */
function listStub() {
  const tasks = (['queued', 'succeeded', 'failed', 'succeeded'] as const).map((status, i) => taskIn(status, `gen_01JD6Z8K4T9QW3M5R7X2B6C8N${i}`));
  const queries: URLSearchParams[] = [];
  const fetch = async (request: Request) => {
    const url = new URL(request.url);
    queries.push(url.searchParams);
    const status = url.searchParams.get('status');
    return json({ success: true, data: tasks.filter((task) => !status || task.status === status), nextCursor: null });
  };
  return { client: createClient({ baseUrl: 'http://stub', apiKey: 'vg_test_x', fetch }), queries };
}

describe('list and listAll with a status filter', () => {
  it('status: succeeded gives tasks whose output needs no null check', async () => {
    const { client, queries } = listStub();
    const page = await client.list({ status: 'succeeded' });
    expectTypeOf(page.data).toEqualTypeOf<TaskSucceeded[]>();
    expectTypeOf(page.nextCursor).toEqualTypeOf<string | null>();
    expect(page.data.map((task) => task.output.url)).toEqual(['http://127.0.0.1/files/x.mp4', 'http://127.0.0.1/files/x.mp4']);

    const urls: string[] = [];
    for await (const task of client.listAll({ status: 'succeeded', limit: 10 })) {
      expectTypeOf(task).toEqualTypeOf<TaskSucceeded>();
      urls.push(task.output.url);
    }
    expect(urls).toHaveLength(2);
    expect(queries.map((query) => query.get('status'))).toEqual(['succeeded', 'succeeded']);
  });

  it('without a status (or with any TaskStatus) the tasks are plain Task, and output may be null', async () => {
    const { client } = listStub();
    const page = await client.list();
    expectTypeOf(page).toEqualTypeOf<TaskList>();
    expectTypeOf(page.data).toEqualTypeOf<Task[]>();
    expectTypeOf(page.data[0]!.output).toBeNullable();
    // Never called: tsc fails on an unused @ts-expect-error.
    const misuse = () => {
      // @ts-expect-error a task of any status may have no output
      void page.data[0]!.output.url;
    };
    void misuse;
    expect(page.data).toHaveLength(4);

    expectTypeOf(client.listAll({ limit: 2 })).toEqualTypeOf<AsyncGenerator<Task, void, undefined>>();
    const status = 'failed' as TaskStatus;
    expectTypeOf(client.list({ status })).resolves.toEqualTypeOf<TaskList>();
    const options: ListOptions = { status: 'succeeded' };
    expectTypeOf(client.list(options)).resolves.toEqualTypeOf<TaskList>();
  });

  it("the other statuses narrow the same way, from the spec's Task union", async () => {
    const { client } = listStub();
    const failed = await client.list({ status: 'failed' });
    expectTypeOf(failed.data).toEqualTypeOf<TaskFailed[]>();
    expectTypeOf(failed.data[0]!.error.code).toEqualTypeOf<TaskFailed['error']['code']>();
    expect(failed.data.map((task) => task.error.code)).toEqual(['provider_error']);

    const ended = 'failed' as 'failed' | 'cancelled';
    expectTypeOf(client.listAll({ status: ended })).toEqualTypeOf<AsyncGenerator<TaskFailed | TaskCancelled, void, undefined>>();
    expectTypeOf<TaskWithStatus<TaskStatus>>().toEqualTypeOf<Task>();
    expectTypeOf<TaskListWithStatus<TaskStatus>>().toEqualTypeOf<TaskList>();
    const misuse = () => {
      // @ts-expect-error not a status of the spec
      void client.list({ status: 'done' });
    };
    void misuse;
  });

  it('waitForCompletion and submitAndWait resolve with TaskSucceeded', () => {
    const { client } = listStub();
    expectTypeOf(client.waitForCompletion).returns.resolves.toEqualTypeOf<TaskSucceeded>();
    expectTypeOf(client.submitAndWait).returns.resolves.toEqualTypeOf<TaskSucceeded>();
    expectTypeOf<TaskSucceeded['output']['url']>().toEqualTypeOf<string>();
  });
});
