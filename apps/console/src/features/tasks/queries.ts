/** Server state of the tasks pages: lists, one task, its ledger entries and webhook deliveries. */
import { VidgenError, type Task, type TaskList, type TaskStatus } from '@vidgen/client';
import { keepPreviousData, useMutation, useQuery, useQueryClient, type QueryClient } from '@tanstack/react-query';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';

/** Rows per page of the Tasks page. */
export const PAGE_SIZE = 20;

/**
 * Every cached list of tasks starts with this (queryKeys.taskList and the overview's recent
 * tasks), so a task's new status can be written into each list that shows it.
 */
export const taskListsKey = [...queryKeys.tasks, 'list'] as const;

export function useTaskList(status: TaskStatus | undefined, cursor: string | undefined) {
  const client = useClient();
  return useQuery({
    queryKey: queryKeys.taskList(status, cursor),
    queryFn: ({ signal }): Promise<TaskList> => client.list({ limit: PAGE_SIZE, ...(status ? { status } : {}), ...(cursor ? { cursor } : {}), signal }),
    // The page being left stays on screen (buttons disabled) until the next one arrives.
    placeholderData: keepPreviousData,
  });
}

export function useTask(requestId: string) {
  const client = useClient();
  const queryClient = useQueryClient();
  return useQuery<Task, Error, Task, ReturnType<typeof queryKeys.task>>({
    queryKey: queryKeys.task(requestId),
    queryFn: ({ signal }) => client.get(requestId, { signal }),
    // Opened from a list: show the row's copy at once while the task itself loads.
    placeholderData: () => findInLists(queryClient, requestId),
  });
}

function findInLists(queryClient: QueryClient, requestId: string): Task | undefined {
  for (const [, list] of queryClient.getQueriesData<TaskList>({ queryKey: taskListsKey })) {
    const found = list?.data.find((task) => task.requestId === requestId);
    if (found) return found;
  }
  return undefined;
}

/** Writes a task's new state into its own query and into every cached list that holds it. */
export function publishTask(queryClient: QueryClient, task: Task): void {
  queryClient.setQueryData(queryKeys.task(task.requestId), task);
  queryClient.setQueriesData<TaskList>({ queryKey: taskListsKey }, (list) =>
    list?.data.some((row) => row.requestId === task.requestId) ? { ...list, data: list.data.map((row) => (row.requestId === task.requestId ? task : row)) } : list,
  );
}

/** What a task's end or cancellation changes besides the task: the balance, its ledger entries, its webhook. */
export function invalidateAfterTaskEnd(queryClient: QueryClient, requestId: string): void {
  void queryClient.invalidateQueries({ queryKey: queryKeys.account });
  void queryClient.invalidateQueries({ queryKey: queryKeys.taskLedger(requestId) });
  void queryClient.invalidateQueries({ queryKey: queryKeys.deliveries });
  void queryClient.invalidateQueries({ queryKey: ['usage'] });
}

export function useCancelTask() {
  const client = useClient();
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (requestId: string) => client.cancel(requestId),
    onSuccess: (_answer, requestId) => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.tasks });
      invalidateAfterTaskEnd(queryClient, requestId);
    },
  });
}

export function useTaskLedger(requestId: string) {
  const client = useClient();
  return useQuery({
    queryKey: queryKeys.taskLedger(requestId),
    // A task has at most two entries (its charge and its refund): one page holds them.
    queryFn: ({ signal }) => client.ledger({ requestId, signal }),
    // The service filters by requestId; this keeps a mock's canned page (other tasks' entries) off the page.
    select: (page) => page.data.filter((entry) => entry.requestId === requestId),
  });
}

export function useTaskDeliveries(requestId: string, enabled: boolean) {
  const client = useClient();
  return useQuery({
    queryKey: queryKeys.deliveryList(undefined, requestId, undefined),
    queryFn: ({ signal }) => client.webhooks.deliveries({ requestId, signal }),
    select: (page) => page.data.filter((delivery) => delivery.requestId === requestId),
    enabled,
  });
}

export function deliveryQuery(client: ReturnType<typeof useClient>, deliveryId: string) {
  return {
    queryKey: queryKeys.delivery(deliveryId),
    queryFn: ({ signal }: { signal: AbortSignal }) => client.webhooks.delivery(deliveryId, { signal }),
  };
}

export function useRedeliver() {
  const client = useClient();
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: (deliveryId: string) => client.webhooks.redeliver(deliveryId),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: queryKeys.deliveries }),
  });
}

export function isNotFound(error: unknown): boolean {
  return error instanceof VidgenError && error.status === 404;
}
