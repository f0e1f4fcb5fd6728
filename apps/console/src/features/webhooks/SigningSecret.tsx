import type { WebhookSecret } from '@vidgen/client';
import { VidgenError } from '@vidgen/client';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type FormEvent } from 'react';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';
import { CopyButton } from '../../ui/CopyButton';
import { formatTime } from '../../ui/format';
import { ErrorNotice, Loading } from '../../ui/states';
import { ConfirmDialog } from '../../ui/ConfirmDialog';

/** The service's default overlap (RotateWebhookSecretRequest.overlapHours) and the range it accepts. */
const OVERLAP = { default: 24, min: 0, max: 168 } as const;

function parseOverlap(text: string): number | undefined {
  if (!/^\d+$/.test(text.trim())) return undefined;
  const hours = Number(text);
  return hours >= OVERLAP.min && hours <= OVERLAP.max ? hours : undefined;
}

function describeRotation(answer: WebhookSecret): string {
  return answer.previousSecretValidUntil
    ? `New secret made: it signs every delivery from now on. The previous secret also signs until ${formatTime(answer.previousSecretValidUntil)}.`
    : 'New secret made: it alone signs every delivery from now on; the previous secret no longer signs.';
}

export function SigningSecret() {
  const client = useClient();
  const queryClient = useQueryClient();
  const ids = useId();
  const secret = useQuery({ queryKey: queryKeys.webhookSecret, queryFn: ({ signal }) => client.webhooks.secret({ signal }) });
  const [shown, setShown] = useState(false);
  const [overlap, setOverlap] = useState(String(OVERLAP.default));
  const [overlapError, setOverlapError] = useState<string>();
  const [confirming, setConfirming] = useState<number>();
  const [notice, setNotice] = useState<string>();
  const overlapInput = useRef<HTMLInputElement>(null);
  const noticeRef = useRef<HTMLParagraphElement>(null);

  const rotate = useMutation({
    mutationFn: (overlapHours: number) => client.webhooks.rotateSecret({ overlapHours }),
    onSuccess: (answer) => {
      queryClient.setQueryData(queryKeys.webhookSecret, answer);
      void queryClient.invalidateQueries({ queryKey: queryKeys.webhookSecret });
      setConfirming(undefined);
      setNotice(describeRotation(answer));
    },
    onError: (error) => {
      setConfirming(undefined);
      const atField = error instanceof VidgenError ? error.details?.find((detail) => detail.field === '/overlapHours') : undefined;
      if (atField) {
        setOverlapError(atField.message);
        overlapInput.current?.focus();
      }
      // The client does not retry a rotation whose answer was lost (a repeat would retire the
      // secret receivers still use); whether it happened shows in the secret, so read it again.
      void queryClient.invalidateQueries({ queryKey: queryKeys.webhookSecret });
    },
  });

  useEffect(() => {
    if (notice) noticeRef.current?.focus();
  }, [notice]);

  const onRotate = (event: FormEvent) => {
    event.preventDefault();
    const hours = parseOverlap(overlap);
    if (hours === undefined) {
      setOverlapError(`Enter a whole number of hours from ${OVERLAP.min} to ${OVERLAP.max}.`);
      overlapInput.current?.focus();
      return;
    }
    setOverlapError(undefined);
    setNotice(undefined);
    rotate.reset();
    setConfirming(hours);
  };

  const value = secret.data?.secret;
  const previousUntil = secret.data?.previousSecretValidUntil;

  return (
    <section aria-labelledby={`${ids}-heading`} className="signing-secret">
      <h2 id={`${ids}-heading`}>Signing secret</h2>
      <p className="muted">Every delivery is signed with it: your receivers verify the signature with this secret.</p>
      {secret.error ? (
        <ErrorNotice error={secret.error} retry={() => void secret.refetch()} />
      ) : value === undefined ? (
        <Loading label="Loading the secret…" />
      ) : (
        <div className="card secret-card">
          <p className="secret-line">
            <code id={`${ids}-secret`} data-testid="webhook-secret" className="secret-value">
              {shown ? (
                value
              ) : (
                <>
                  {value.startsWith('whsec_') ? 'whsec_' : ''}
                  <span aria-hidden="true">••••••••••••••••</span>
                  <span className="visually-hidden">(hidden)</span>
                </>
              )}
            </code>
          </p>
          <div className="secret-actions">
            <button type="button" aria-controls={`${ids}-secret`} onClick={() => setShown((now) => !now)}>
              {shown ? 'Hide secret' : 'Show secret'}
            </button>
            <CopyButton value={value} label="Copy secret" />
          </div>
          <p className="field-hint">
            {previousUntil ? <>The previous secret also signs deliveries until {formatTime(previousUntil)}.</> : 'Only this secret signs deliveries.'}
          </p>
        </div>
      )}

      {notice ? (
        <p ref={noticeRef} role="status" className="notice" tabIndex={-1}>
          {notice}
        </p>
      ) : null}

      <form className="rotate-form" onSubmit={onRotate} noValidate>
        <div className="field">
          <label htmlFor={`${ids}-overlap`}>Overlap (hours)</label>
          <input
            ref={overlapInput}
            id={`${ids}-overlap`}
            type="number"
            inputMode="numeric"
            min={OVERLAP.min}
            max={OVERLAP.max}
            step={1}
            value={overlap}
            onChange={(event) => {
              setOverlap(event.target.value);
              setOverlapError(undefined);
            }}
            aria-invalid={overlapError ? true : undefined}
            aria-describedby={[`${ids}-overlap-hint`, overlapError ? `${ids}-overlap-error` : ''].join(' ').trim()}
          />
          <p id={`${ids}-overlap-hint`} className="field-hint">
            How long the current secret keeps signing beside the new one, so receivers can switch without rejecting a delivery ({OVERLAP.min}–{OVERLAP.max};{' '}
            {OVERLAP.min} retires it at once).
          </p>
          {overlapError ? (
            <p id={`${ids}-overlap-error`} className="field-error">
              {overlapError}
            </p>
          ) : null}
        </div>
        {rotate.error && !overlapError ? <ErrorNotice error={rotate.error} /> : null}
        <button type="submit" disabled={rotate.isPending}>
          Rotate secret
        </button>
      </form>

      {confirming !== undefined ? (
        <ConfirmDialog
          title="Rotate the signing secret?"
          confirmLabel="Rotate"
          danger={confirming === 0}
          busy={rotate.isPending}
          onConfirm={() => rotate.mutate(confirming)}
          onCancel={() => setConfirming(undefined)}
        >
          <p>
            {confirming === 0
              ? 'The current secret stops signing at once: receivers still verifying with it will reject deliveries until they switch.'
              : `Deliveries are signed with a new secret from now on, and also with the current one for ${confirming} hour${confirming === 1 ? '' : 's'}, so receivers can switch in time.`}
          </p>
          {previousUntil ? <p>The secret before the current one, still signing until {formatTime(previousUntil)}, stops signing at once.</p> : null}
        </ConfirmDialog>
      ) : null}
    </section>
  );
}
