import type { Model } from '@vidgen/client';
import { useEffect, useRef, type Dispatch, type ReactNode, type SetStateAction } from 'react';
import type { FieldKey } from './problems';
import { inferMode, mediaKindOf, MODE_LABELS, type MediaKind } from './references';

export interface ReferenceRow {
  /** Stable across removals, so React keeps each input and an error stays at its row. */
  id: number;
  url: string;
}

interface Props {
  model: Model;
  rows: ReferenceRow[];
  setRows: Dispatch<SetStateAction<ReferenceRow[]>>;
  fieldsetId: string;
  inputId: (rowId: number) => string;
  described: (field: FieldKey, ...hints: (string | undefined)[]) => { 'aria-invalid': true | undefined; 'aria-describedby': string | undefined };
  message: (field: FieldKey) => ReactNode;
  clear: (...fields: FieldKey[]) => void;
}

const list = (items: readonly string[]) => items.join(', ');

/**
 * The reference URLs, each with the kind its extension gives, and the mode the set makes, with
 * what the chosen model refuses said before submitting. Nothing here blocks a submission: the
 * service is the judge, and its answer is shown at the same fields.
 */
export function References({ model, rows, setRows, fieldsetId, inputId, described, message, clear }: Props) {
  const nextId = useRef(rows.reduce((max, row) => Math.max(max, row.id + 1), 0));
  const addButton = useRef<HTMLButtonElement>(null);
  const focusNext = useRef<number | 'add' | undefined>(undefined);

  useEffect(() => {
    // After adding or removing a row, focus goes to where the user will want to type next.
    const target = focusNext.current;
    focusNext.current = undefined;
    if (target === 'add') addButton.current?.focus();
    else if (target !== undefined) document.getElementById(inputId(target))?.focus();
  });

  const max = model.media.maxItems;
  const filled = rows.map((row) => ({ ...row, kind: row.url.trim() ? mediaKindOf(row.url) : undefined }));
  const kinds = filled.flatMap((row) => (row.kind ? [row.kind] : []));
  const mode = inferMode(kinds);
  const accepts = (kind: MediaKind) => model.media.kinds.includes(kind);

  const warnings: string[] = [];
  if (!model.modes.includes(mode)) warnings.push(`${model.id} does not offer the ${MODE_LABELS[mode]} mode (it offers ${list(model.modes)}).`);
  if (kinds.includes('audio') && !kinds.some((kind) => kind === 'image' || kind === 'video')) warnings.push('Audio needs an image or a video beside it.');
  if (rows.length > max) warnings.push(`${model.id} takes at most ${max} references: remove ${rows.length - max}.`);

  const add = () => {
    const id = nextId.current++;
    focusNext.current = id;
    setRows((current) => [...current, { id, url: '' }]);
  };
  const remove = (index: number) => {
    const row = rows[index]!;
    const neighbour = rows[index + 1] ?? rows[index - 1];
    focusNext.current = neighbour ? neighbour.id : 'add';
    setRows((current) => current.filter((r) => r.id !== row.id));
    clear(`reference-${row.id}`, 'references');
  };

  return (
    // aria-invalid is not for groups: the fieldset only points at its messages.
    <fieldset id={fieldsetId} className="references" tabIndex={-1} aria-describedby={described('references', `${fieldsetId}-hint`, `${fieldsetId}-mode`)['aria-describedby']}>
      <legend>References</legend>
      <p id={`${fieldsetId}-hint`} className="field-hint">
        Optional. Up to {max} https URLs of the kinds {model.id} accepts: {list(model.media.kinds)}. The kind is read from the file extension.
      </p>
      {rows.length ? (
        <ol className="reference-list">
          {filled.map((row, index) => {
            const field: FieldKey = `reference-${row.id}`;
            const kindId = `${inputId(row.id)}-kind`;
            const refused = row.kind !== undefined && !accepts(row.kind);
            return (
              <li key={row.id} className="field">
                <label htmlFor={inputId(row.id)}>Reference URL {index + 1}</label>
                <div className="reference-row">
                  <input
                    id={inputId(row.id)}
                    type="url"
                    inputMode="url"
                    autoComplete="off"
                    spellCheck={false}
                    placeholder="https://cdn.example.com/first-frame.png"
                    value={row.url}
                    onChange={(event) => {
                      const url = event.target.value;
                      setRows((current) => current.map((r) => (r.id === row.id ? { ...r, url } : r)));
                      clear(field, 'references');
                    }}
                    {...described(field, kindId)}
                  />
                  <button type="button" aria-label={`Remove reference ${index + 1}`} onClick={() => remove(index)}>
                    Remove
                  </button>
                </div>
                <p id={kindId} className={`field-hint reference-kind${refused || (row.url.trim() && !row.kind) ? ' warning' : ''}`}>
                  {!row.url.trim() ? 'Kind: read from the extension' : !row.kind ? 'unknown extension' : refused ? `${row.kind}: ${model.id} does not accept ${row.kind}` : row.kind}
                </p>
                {message(field)}
              </li>
            );
          })}
        </ol>
      ) : null}
      {rows.length < max ? (
        <button ref={addButton} type="button" onClick={add}>
          Add reference
        </button>
      ) : (
        <p className="field-hint">
          {model.id} takes at most {max} reference{max === 1 ? '' : 's'}.
        </p>
      )}
      <p id={`${fieldsetId}-mode`} className="reference-mode" aria-live="polite">
        Mode: <strong>{MODE_LABELS[mode]}</strong> <code>{mode}</code>
      </p>
      {warnings.length ? (
        <ul className="warning reference-warnings">
          {warnings.map((warning) => (
            <li key={warning}>{warning}</li>
          ))}
        </ul>
      ) : null}
      {message('references')}
    </fieldset>
  );
}
