/** Server state of the overview: the last 30 days of usage and the newest tasks. */
import type { TaskList } from '@vidgen/client';
import { useQuery } from '@tanstack/react-query';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';

export const USAGE_DAYS = 30;
export const RECENT_TASKS = 5;
const DAY_MS = 86_400_000;

/**
 * Under ['tasks', 'list'] like every list of tasks: invalidated with queryKeys.tasks, and a
 * task's live status is written into it too. 'recent' is no status, so it never meets a filtered list.
 */
export const recentTasksKey = [...queryKeys.tasks, 'list', 'recent', RECENT_TASKS] as const;

export function useUsage() {
  const client = useClient();
  return useQuery({
    queryKey: queryKeys.usage(USAGE_DAYS),
    // The range is taken when the query runs, so a refetch covers the 30 days up to then.
    queryFn: ({ signal }) => {
      const to = new Date();
      return client.usage({ granularity: 'day', from: new Date(to.getTime() - USAGE_DAYS * DAY_MS), to, signal });
    },
  });
}

export function useRecentTasks() {
  const client = useClient();
  return useQuery({
    queryKey: recentTasksKey,
    queryFn: ({ signal }): Promise<TaskList> => client.list({ limit: RECENT_TASKS, signal }),
  });
}
