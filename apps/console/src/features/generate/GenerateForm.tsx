import type { Model, ModelId, SubmitGenerationRequest } from '@vidgen/client';
import { VidgenError } from '@vidgen/client';
import { useMutation, useQueryClient } from '@tanstack/react-query';
import { useEffect, useId, useRef, useState, type FormEvent, type ReactNode } from 'react';
import { useNavigate } from 'react-router';
import { queryKeys, useAccount } from '../../app/queries';
import { useClient } from '../../app/session';
import { formatCredits } from '../../ui/format';
import { Loading } from '../../ui/states';
import { problemsFromError, type FieldKey, type Problems } from './problems';
import { References, type ReferenceRow } from './References';

type Resolution = Model['resolutions'][number];
type AspectRatio = Model['aspectRatios'][number];

interface Settings {
  model: ModelId;
  duration: number;
  resolution: Resolution;
  aspectRatio: AspectRatio;
}

/** The service's own defaults (SubmitGenerationRequest), chosen first when the model offers them. */
const PREFERRED = { duration: 5, resolution: '720p', aspectRatio: '16:9' } as const satisfies Required<
  Pick<SubmitGenerationRequest, 'duration' | 'resolution' | 'aspectRatio'>
>;

/** `current` while the model allows it; else the service's default if allowed; else the first allowed. */
function allowedOr<T>(allowed: readonly T[], current: T | undefined, preferred: T): T {
  if (current !== undefined && allowed.includes(current)) return current;
  return allowed.includes(preferred) ? preferred : allowed[0]!;
}

function settle(model: Model, wanted: Partial<Settings>): Settings {
  return {
    model: model.id,
    duration: allowedOr(model.durations, wanted.duration, PREFERRED.duration),
    resolution: allowedOr(model.resolutions, wanted.resolution, PREFERRED.resolution),
    aspectRatio: allowedOr(model.aspectRatios, wanted.aspectRatio, PREFERRED.aspectRatio),
  };
}

function newIdempotencyKey(): string {
  // randomUUID exists only in secure contexts; a console reached over plain http still needs a key.
  if (typeof crypto.randomUUID === 'function') return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

interface Attempt {
  body: SubmitGenerationRequest;
  idempotencyKey: string;
  /** The reference row behind each of body.mediaUrls, to put `/mediaUrls/N` errors back at their row. */
  rowIds: number[];
}

export function GenerateForm({ models }: { models: Model[] }) {
  const client = useClient();
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const account = useAccount();
  const ids = useId();
  const id = (field: string) => `${ids}-${field}`;

  const [wanted, setWanted] = useState<Partial<Settings>>({});
  const model = models.find((m) => m.id === wanted.model) ?? models[0]!;
  // What the selects show: always values the chosen model allows.
  const settings = settle(model, wanted);
  const [prompt, setPrompt] = useState('');
  const [rows, setRows] = useState<ReferenceRow[]>([]);
  const [webhookUrl, setWebhookUrl] = useState('');
  const [metadata, setMetadata] = useState('');
  const [moreOpen, setMoreOpen] = useState(false);
  const [problems, setProblems] = useState<Problems>();
  const attempts = useRef(0);
  // The Idempotency-Key of the last body sent: sending the same form again (a retry after a
  // failure) reuses it, so the service answers a repeat with the first answer and never charges
  // twice; any change to the form is a new submission and gets a new key.
  const lastSent = useRef<{ content: string; key: string }>(undefined);
  const summary = useRef<HTMLDivElement>(null);

  const submit = useMutation({
    mutationFn: ({ body, idempotencyKey }: Attempt) => client.submit(body, { idempotencyKey }),
    onSuccess: (answer) => {
      void queryClient.invalidateQueries({ queryKey: queryKeys.account });
      void queryClient.invalidateQueries({ queryKey: queryKeys.tasks });
      void navigate(`/tasks/${answer.requestId}`);
    },
    onError: (error, attempt) => {
      attempts.current += 1;
      setProblems(problemsFromError(error, attempt.rowIds, attempts.current));
      // The balance shown may be out of date: the service has just said what it really is.
      if (error instanceof VidgenError && error.code === 'insufficient_credits') void queryClient.invalidateQueries({ queryKey: queryKeys.account });
    },
  });

  useEffect(() => {
    if (problems) summary.current?.focus();
    // Only a new attempt moves focus; clearing a field's message as it is edited must not.
  }, [problems?.attempt]);

  useEffect(() => {
    // A problem inside "More options" must be visible, or its message and the summary's link lead nowhere.
    if (problems?.fields.webhookUrl || problems?.fields.metadata) setMoreOpen(true);
  }, [problems]);

  const clear = (...fields: FieldKey[]) =>
    setProblems((current) => {
      if (!current || !fields.some((field) => current.fields[field])) return current;
      const rest = { ...current.fields };
      for (const field of fields) delete rest[field];
      return { ...current, fields: rest };
    });

  const chooseModel = (modelId: string) => {
    const next = models.find((m) => m.id === modelId);
    if (!next) return;
    // Keep what the new model also allows; reset the rest to a value it does.
    setWanted(settle(next, settings));
    clear('model', 'duration', 'resolution', 'aspectRatio', 'references');
  };

  const rate = model.prices.find((price) => price.resolution === settings.resolution)?.creditsPerSecond;
  const price = rate === undefined ? undefined : rate * settings.duration;
  const balance = account.data?.balance;

  const onSubmit = (event: FormEvent) => {
    event.preventDefault();
    if (submit.isPending) return;
    const found: Problems['fields'] = {};
    if (!prompt.trim()) found.prompt = ['Enter a prompt: what the video should show.'];
    let parsedMetadata: SubmitGenerationRequest['metadata'];
    if (metadata.trim()) {
      try {
        const value: unknown = JSON.parse(metadata);
        if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TypeError('not an object');
        parsedMetadata = value as SubmitGenerationRequest['metadata'];
      } catch {
        found.metadata = ['must be a JSON object, such as {"orderId": "ord_1138"}'];
      }
    }
    attempts.current += 1;
    if (Object.keys(found).length > 0) {
      setProblems({ attempt: attempts.current, message: 'The form has problems: see the fields marked below.', fields: found, unmapped: [] });
      return;
    }
    const sent = rows.map((row) => ({ row: row.id, url: row.url.trim() })).filter((row) => row.url);
    const body: SubmitGenerationRequest = {
      model: settings.model,
      prompt,
      duration: settings.duration,
      resolution: settings.resolution,
      aspectRatio: settings.aspectRatio,
      ...(sent.length ? { mediaUrls: sent.map((row) => row.url) } : {}),
      ...(webhookUrl.trim() ? { webhookUrl: webhookUrl.trim() } : {}),
      ...(parsedMetadata ? { metadata: parsedMetadata } : {}),
    };
    const content = JSON.stringify(body);
    if (lastSent.current?.content !== content) lastSent.current = { content, key: newIdempotencyKey() };
    setProblems(undefined);
    submit.mutate({ body, idempotencyKey: lastSent.current.key, rowIds: sent.map((row) => row.row) });
  };

  /** Props that tie an input to its message: aria-invalid, and aria-describedby with its hints. */
  const described = (field: FieldKey, ...hints: (string | undefined)[]) => {
    const invalid = Boolean(problems?.fields[field]?.length);
    const describedBy = [...hints, invalid ? id(`${field}-error`) : undefined].filter(Boolean).join(' ');
    return { 'aria-invalid': invalid || undefined, 'aria-describedby': describedBy || undefined } as const;
  };
  const message = (field: FieldKey): ReactNode =>
    problems?.fields[field]?.length ? (
      <p id={id(`${field}-error`)} className="field-error">
        {problems.fields[field].join(' · ')}
      </p>
    ) : null;

  const rowPosition = (rowId: number) => rows.findIndex((row) => row.id === rowId) + 1;
  const fieldLabel = (field: FieldKey): string => {
    if (field.startsWith('reference-')) return `Reference URL ${rowPosition(Number(field.slice('reference-'.length)))}`;
    return { model: 'Model', duration: 'Duration', resolution: 'Resolution', aspectRatio: 'Aspect ratio', prompt: 'Prompt', references: 'References', webhookUrl: 'Webhook URL', metadata: 'Metadata' }[
      field as Exclude<FieldKey, `reference-${number}`>
    ];
  };
  const invalidFields = (Object.keys(problems?.fields ?? {}) as FieldKey[]).filter(
    (field) => problems?.fields[field]?.length && (!field.startsWith('reference-') || rowPosition(Number(field.slice('reference-'.length))) > 0),
  );

  return (
    <form className="generate-form" onSubmit={onSubmit} noValidate aria-describedby={problems ? id('summary') : undefined}>
      {problems ? (
        <div id={id('summary')} ref={summary} className="state state-error error-summary" role="alert" tabIndex={-1}>
          <p>
            <strong>{problems.message}</strong>
          </p>
          {problems.unmapped.length ? (
            <ul>
              {problems.unmapped.map((entry, i) => (
                <li key={i}>{entry}</li>
              ))}
            </ul>
          ) : null}
          {invalidFields.length ? (
            <p>
              Check:{' '}
              {invalidFields.map((field, i) => (
                <span key={field}>
                  {i > 0 ? ', ' : null}
                  <a
                    href={`#${id(field)}`}
                    onClick={(event) => {
                      // Focus, not a hash change: the router owns the URL.
                      event.preventDefault();
                      // Every field's element id is id(field), the reference inputs and their fieldset included.
                      document.getElementById(id(field))?.focus();
                    }}
                  >
                    {fieldLabel(field)}
                  </a>
                </span>
              ))}
            </p>
          ) : null}
          {problems.correlationId ? (
            <p className="muted">
              Correlation id: <code>{problems.correlationId}</code>
            </p>
          ) : null}
        </div>
      ) : null}

      <div className="field">
        <label htmlFor={id('model')}>Model</label>
        <select id={id('model')} value={settings.model} onChange={(event) => chooseModel(event.target.value)} {...described('model', id('model-hint'))}>
          {models.map((m) => (
            <option key={m.id} value={m.id}>
              {m.id}
            </option>
          ))}
        </select>
        <p id={id('model-hint')} className="field-hint">
          {model.description}
        </p>
        {message('model')}
      </div>

      <div className="generate-settings">
        <div className="field">
          <label htmlFor={id('duration')}>Duration</label>
          <select
            id={id('duration')}
            value={settings.duration}
            onChange={(event) => {
              setWanted({ ...settings, duration: Number(event.target.value) });
              clear('duration');
            }}
            {...described('duration')}
          >
            {model.durations.map((seconds) => (
              <option key={seconds} value={seconds}>
                {seconds} s
              </option>
            ))}
          </select>
          {message('duration')}
        </div>
        <div className="field">
          <label htmlFor={id('resolution')}>Resolution</label>
          <select
            id={id('resolution')}
            value={settings.resolution}
            onChange={(event) => {
              setWanted({ ...settings, resolution: event.target.value as Resolution });
              clear('resolution');
            }}
            {...described('resolution')}
          >
            {model.resolutions.map((resolution) => (
              <option key={resolution} value={resolution}>
                {resolution}
              </option>
            ))}
          </select>
          {message('resolution')}
        </div>
        <div className="field">
          <label htmlFor={id('aspectRatio')}>Aspect ratio</label>
          <select
            id={id('aspectRatio')}
            value={settings.aspectRatio}
            onChange={(event) => {
              setWanted({ ...settings, aspectRatio: event.target.value as AspectRatio });
              clear('aspectRatio');
            }}
            {...described('aspectRatio')}
          >
            {model.aspectRatios.map((ratio) => (
              <option key={ratio} value={ratio}>
                {ratio}
              </option>
            ))}
          </select>
          {message('aspectRatio')}
        </div>
      </div>

      <div className="field">
        <label htmlFor={id('prompt')}>Prompt</label>
        <textarea
          id={id('prompt')}
          value={prompt}
          rows={4}
          onChange={(event) => {
            setPrompt(event.target.value);
            clear('prompt');
          }}
          {...described('prompt', id('prompt-hint'))}
        />
        <p id={id('prompt-hint')} className="field-hint">
          What the video should show.
        </p>
        {message('prompt')}
      </div>

      <References
        model={model}
        rows={rows}
        setRows={setRows}
        fieldsetId={id('references')}
        inputId={(rowId) => id(`reference-${rowId}`)}
        described={described}
        message={message}
        clear={clear}
      />

      <details className="more-options" open={moreOpen} onToggle={(event) => setMoreOpen(event.currentTarget.open)}>
        <summary>More options</summary>
        <div className="field">
          <label htmlFor={id('webhookUrl')}>Webhook URL</label>
          <input
            id={id('webhookUrl')}
            type="url"
            inputMode="url"
            autoComplete="off"
            spellCheck={false}
            placeholder="https://hooks.example.com/vidgen"
            value={webhookUrl}
            onChange={(event) => {
              setWebhookUrl(event.target.value);
              clear('webhookUrl');
            }}
            {...described('webhookUrl', id('webhookUrl-hint'))}
          />
          <p id={id('webhookUrl-hint')} className="field-hint">
            Optional. The service POSTs the finished task here, signed with your webhook secret.
          </p>
          {message('webhookUrl')}
        </div>
        <div className="field">
          <label htmlFor={id('metadata')}>Metadata</label>
          <textarea
            id={id('metadata')}
            className="mono"
            rows={3}
            spellCheck={false}
            placeholder='{"orderId": "ord_1138"}'
            value={metadata}
            onChange={(event) => {
              setMetadata(event.target.value);
              clear('metadata');
            }}
            {...described('metadata', id('metadata-hint'))}
          />
          <p id={id('metadata-hint')} className="field-hint">
            Optional. A JSON object of your own (at most 4 KiB), stored and returned with the task.
          </p>
          {message('metadata')}
        </div>
      </details>

      <div className="price-panel card" aria-live="polite">
        {price === undefined ? (
          <p className="price">Price: not published for {settings.resolution}</p>
        ) : (
          <p>
            <span className="price">Price: {formatCredits(price)}</span>{' '}
            <span className="muted">
              ({formatCredits(rate!)} a second × {settings.duration} s at {settings.resolution})
            </span>
          </p>
        )}
        {balance === undefined ? null : <p className="muted">Balance: {formatCredits(balance)}</p>}
        {price !== undefined && balance !== undefined && price > balance ? (
          <p className="warning">This costs more than your balance: the service will refuse it until credits are added.</p>
        ) : null}
      </div>

      <div className="form-actions">
        <button type="submit" className="primary" disabled={submit.isPending}>
          Generate
        </button>
        {submit.isPending ? <Loading label="Submitting…" /> : null}
      </div>
    </form>
  );
}
