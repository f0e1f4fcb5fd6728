import type { ApiKey, ApiKeyList } from '@vidgen/client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { queryKeys, useAccount } from '../../app/queries';
import { useClient } from '../../app/session';
import { Page } from '../../ui/Page';
import { Empty, ErrorNotice, Loading } from '../../ui/states';
import { ConfirmDialog } from '../../ui/ConfirmDialog';
import { CreateKeyForm, type IssuedKey } from './CreateKeyForm';
import { KeyTable, keyLabel } from './KeyTable';
import { NewKeyPanel } from './NewKeyPanel';
import './keys.css';

/** The account's API keys: list them, issue one (shown once), revoke one. */
export default function KeysPage() {
  const client = useClient();
  const queryClient = useQueryClient();
  const account = useAccount();
  const keys = useQuery({ queryKey: queryKeys.keys, queryFn: ({ signal }) => client.keys.list({ signal }) });
  // The new key lives here only, never in a cache, storage or URL, and is gone with "Done".
  const [issued, setIssued] = useState<IssuedKey>();
  const [confirming, setConfirming] = useState<ApiKey>();
  const [notice, setNotice] = useState<string>();
  const noticeRef = useRef<HTMLParagraphElement>(null);

  const revoke = useMutation({
    mutationFn: (key: ApiKey) => client.keys.revoke(key.id),
    onSuccess: (answer, key) => {
      // Shown as revoked at once; the refetch then confirms it.
      queryClient.setQueryData<ApiKeyList>(queryKeys.keys, (list) => list && { ...list, data: list.data.map((k) => (k.id === answer.key.id ? answer.key : k)) });
      void queryClient.invalidateQueries({ queryKey: queryKeys.keys });
      setConfirming(undefined);
      setNotice(`${keyLabel(key)} is revoked: it no longer works.`);
    },
  });

  useEffect(() => {
    // The revoke button that opened the confirm is gone with the revoked key: focus the outcome instead.
    if (notice) noticeRef.current?.focus();
  }, [notice]);

  const currentKeyId = account.data?.key.id;

  return (
    <Page title="Keys">
      {issued ? <NewKeyPanel issued={issued} onDone={() => setIssued(undefined)} /> : null}

      <section aria-labelledby="keys-list-heading">
        <h2 id="keys-list-heading">API keys of this account</h2>
        {notice ? (
          <p ref={noticeRef} role="status" className="notice" tabIndex={-1}>
            {notice}
          </p>
        ) : null}
        {keys.error ? (
          <ErrorNotice error={keys.error} retry={() => void keys.refetch()} />
        ) : !keys.data ? (
          <Loading label="Loading the keys…" />
        ) : keys.data.data.length === 0 ? (
          <Empty>This account has no keys.</Empty>
        ) : (
          <KeyTable
            keys={keys.data.data}
            currentKeyId={currentKeyId}
            onRevoke={(key) => {
              revoke.reset();
              setNotice(undefined);
              setConfirming(key);
            }}
          />
        )}
      </section>

      <section aria-labelledby="keys-create-heading">
        <h2 id="keys-create-heading">Create a key</h2>
        <CreateKeyForm
          scopes={account.data?.key.scopes ?? []}
          onIssued={(key) => {
            setNotice(undefined);
            setIssued(key);
          }}
        />
      </section>

      {confirming ? (
        <ConfirmDialog
          title={`Revoke ${keyLabel(confirming)}?`}
          confirmLabel="Revoke key"
          danger
          busy={revoke.isPending}
          onConfirm={() => revoke.mutate(confirming)}
          onCancel={() => setConfirming(undefined)}
        >
          <p>
            Anything that uses this key (<code>{confirming.hint}</code>) stops working at once, and a revoked key never works again.
          </p>
          {revoke.error ? <ErrorNotice error={revoke.error} /> : null}
        </ConfirmDialog>
      ) : null}
    </Page>
  );
}
