import type { CreateApiKeyRequest, CreatedApiKey, Scope } from '@vidgen/client';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useId, useState, type FormEvent } from 'react';
import { queryKeys } from '../../app/queries';
import { useClient } from '../../app/session';
import { ErrorNotice } from '../../ui/states';

export interface IssuedKey {
  /** The full key: kept in component state only, for the one time it is shown. */
  key: string;
  apiKey: Omit<CreatedApiKey, 'key' | 'success'>;
}

interface FormErrors {
  scopes?: string;
  expires?: string;
}

/**
 * Issues a key with a name, scopes and an optional expiry. The scopes offered are the signed-in
 * key's own: the service refuses to issue a key that may do more than the one asking.
 */
export function CreateKeyForm({ scopes, onIssued }: { scopes: readonly Scope[]; onIssued: (issued: IssuedKey) => void }) {
  const client = useClient();
  const queryClient = useQueryClient();
  const ids = useId();
  const [name, setName] = useState('');
  const [chosen, setChosen] = useState<ReadonlySet<Scope>>(new Set());
  const [expires, setExpires] = useState('');
  const [errors, setErrors] = useState<FormErrors>({});

  const create = useMutation({
    mutationFn: async (body: CreateApiKeyRequest) => {
      const { key, success: _success, ...apiKey } = await client.keys.create(body);
      // Handed straight to the page, and left out of what the mutation returns: the mutation
      // cache keeps its result for minutes, and the key must live nowhere but in the panel.
      onIssued({ key, apiKey });
      return apiKey;
    },
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.keys });
      setName('');
      setChosen(new Set());
      setExpires('');
    },
  });

  const toggle = (scope: Scope, on: boolean) => {
    setChosen((current) => {
      const next = new Set(current);
      if (on) next.add(scope);
      else next.delete(scope);
      return next;
    });
    setErrors((current) => ({ ...current, scopes: undefined }));
  };

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    if (create.isPending) return;
    const found: FormErrors = {};
    // An empty list would not mean "none": the service would give the new key every scope of this one.
    if (chosen.size === 0) found.scopes = 'Choose at least one scope.';
    const days = expires.trim();
    if (days && !(/^\d+$/.test(days) && Number(days) >= 1)) found.expires = 'Enter a whole number of days (1 or more), or leave it empty for a key that never expires.';
    setErrors(found);
    if (found.scopes || found.expires) {
      document.getElementById(found.scopes ? `${ids}-scope-0` : `${ids}-expires`)?.focus();
      return;
    }
    create.mutate({
      ...(name.trim() ? { name: name.trim() } : {}),
      // In the order the signed-in key lists them, whatever order they were ticked in.
      scopes: scopes.filter((scope) => chosen.has(scope)),
      ...(days ? { expiresInDays: Number(days) } : {}),
    });
  };

  return (
    <form className="create-key" onSubmit={onSubmit} noValidate>
      <div className="field">
        <label htmlFor={`${ids}-name`}>Name</label>
        <input
          id={`${ids}-name`}
          value={name}
          autoComplete="off"
          onChange={(event) => setName(event.target.value)}
          aria-describedby={`${ids}-name-hint`}
        />
        <p id={`${ids}-name-hint`} className="field-hint">
          Optional: what the key is for, such as “Backend (production)”.
        </p>
      </div>

      <fieldset aria-describedby={errors.scopes ? `${ids}-scopes-error` : `${ids}-scopes-hint`}>
        <legend>Scopes</legend>
        <p id={`${ids}-scopes-hint`} className="field-hint">
          What the new key may do: at most what this key may do.
        </p>
        <ul className="scope-choices">
          {scopes.map((scope, i) => (
            <li key={scope}>
              <input
                id={`${ids}-scope-${i}`}
                type="checkbox"
                checked={chosen.has(scope)}
                onChange={(event) => toggle(scope, event.target.checked)}
                aria-invalid={errors.scopes ? true : undefined}
              />
              <label htmlFor={`${ids}-scope-${i}`}>{scope}</label>
            </li>
          ))}
        </ul>
        {errors.scopes ? (
          <p id={`${ids}-scopes-error`} className="field-error">
            {errors.scopes}
          </p>
        ) : null}
      </fieldset>

      <div className="field">
        <label htmlFor={`${ids}-expires`}>Expires in days</label>
        <input
          id={`${ids}-expires`}
          type="number"
          inputMode="numeric"
          min={1}
          step={1}
          value={expires}
          onChange={(event) => {
            setExpires(event.target.value);
            setErrors((current) => ({ ...current, expires: undefined }));
          }}
          aria-invalid={errors.expires ? true : undefined}
          aria-describedby={[`${ids}-expires-hint`, errors.expires ? `${ids}-expires-error` : ''].join(' ').trim()}
        />
        <p id={`${ids}-expires-hint`} className="field-hint">
          Optional. Leave empty for a key that never expires.
        </p>
        {errors.expires ? (
          <p id={`${ids}-expires-error`} className="field-error">
            {errors.expires}
          </p>
        ) : null}
      </div>

      {create.error ? <ErrorNotice error={create.error} /> : null}

      <button type="submit" className="primary" disabled={create.isPending}>
        Create key
      </button>
    </form>
  );
}
