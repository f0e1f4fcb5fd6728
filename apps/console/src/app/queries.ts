/**
 * Server state shared by several pages, through TanStack Query over the client. Query keys are
 * listed here so a mutation anywhere can invalidate what it changed.
 */
import type { Scope } from '@vidgen/client';
import { useQuery } from '@tanstack/react-query';
import { useClient } from './session';

export const queryKeys = {
  account: ['account'] as const,
  models: ['models'] as const,
  usage: (days: number) => ['usage', days] as const,
  tasks: ['tasks'] as const,
  taskList: (status: string | undefined, cursor: string | undefined) => ['tasks', 'list', status ?? 'all', cursor ?? ''] as const,
  task: (requestId: string) => ['tasks', 'one', requestId] as const,
  ledger: ['ledger'] as const,
  taskLedger: (requestId: string) => ['ledger', 'task', requestId] as const,
  keys: ['keys'] as const,
  deliveries: ['deliveries'] as const,
  deliveryList: (status: string | undefined, requestId: string | undefined, cursor: string | undefined) =>
    ['deliveries', 'list', status ?? 'all', requestId ?? '', cursor ?? ''] as const,
  delivery: (deliveryId: string) => ['deliveries', 'one', deliveryId] as const,
  webhookSecret: ['webhookSecret'] as const,
};

export function useAccount() {
  const client = useClient();
  return useQuery({ queryKey: queryKeys.account, queryFn: ({ signal }) => client.account({ signal }) });
}

export function useModels() {
  const client = useClient();
  return useQuery({ queryKey: queryKeys.models, queryFn: ({ signal }) => client.models({ signal }), staleTime: 5 * 60_000 });
}

/** What the signed-in key may do (from the account summary's `key`); empty while unknown. */
export function useScopes(): ReadonlySet<Scope> {
  const account = useAccount();
  return new Set(account.data?.key.scopes ?? []);
}
