import type { Task } from '@vidgen/client';
import type { ReactNode } from 'react';
import { CopyButton } from '../../ui/CopyButton';
import { StatusBadge } from '../../ui/StatusBadge';
import { formatCredits, formatTime } from '../../ui/format';
import { formatSeconds, MODE_LABELS } from './labels';

/** Every field of a task, as the API answers it. */
export function TaskFields({ task }: { task: Task }) {
  return (
    <dl className="fields">
      <Field term="Status">
        <StatusBadge status={task.status} />
      </Field>
      <Field term="Model">{task.model}</Field>
      <Field term="Prompt">{task.prompt}</Field>
      <Field term="Mode">
        {MODE_LABELS[task.mode]} <code className="muted">{task.mode}</code>
      </Field>
      <Field term="Duration">{formatSeconds(task.duration)}</Field>
      <Field term="Resolution">{task.resolution}</Field>
      <Field term="Aspect ratio">{task.aspectRatio}</Field>
      <Field term="References">
        {task.mediaUrls.length === 0 ? (
          'None'
        ) : (
          <ol className="plain-list">
            {task.mediaUrls.map((url, i) => (
              <li key={i}>
                <a href={url} target="_blank" rel="noreferrer noopener">
                  {url}
                </a>
              </li>
            ))}
          </ol>
        )}
      </Field>
      <Field term="Metadata">{task.metadata === null ? 'None' : <pre className="json">{JSON.stringify(task.metadata, null, 2)}</pre>}</Field>
      <Field term="Credits charged">{formatCredits(task.creditsCharged)}</Field>
      <Field term="Credits refunded">{formatCredits(task.creditsRefunded)}</Field>
      {task.output ? (
        <Field term="Output">
          <a href={task.output.url} className="mono">
            {task.output.url}
          </a>{' '}
          <CopyButton value={task.output.url} label="Copy URL" />
          <br />
          <span className="muted">
            Expires <time dateTime={task.output.expiresAt}>{formatTime(task.output.expiresAt)}</time>
          </span>
        </Field>
      ) : null}
      {task.error ? (
        <Field term="Error">
          <code>{task.error.code}</code>: {task.error.message}
        </Field>
      ) : null}
      <Field term="Created">
        <Time iso={task.createdAt} />
      </Field>
      <Field term="Updated">
        <Time iso={task.updatedAt} />
      </Field>
      <Field term="Completed">{task.completedAt ? <Time iso={task.completedAt} /> : 'Not yet'}</Field>
      {task.webhook ? (
        <Field term="Webhook">
          {task.webhook.status}, {task.webhook.attempts} {task.webhook.attempts === 1 ? 'attempt' : 'attempts'}
          {task.webhook.lastAttemptAt ? (
            <>
              , last <Time iso={task.webhook.lastAttemptAt} />
            </>
          ) : null}
        </Field>
      ) : null}
    </dl>
  );
}

function Field({ term, children }: { term: string; children: ReactNode }) {
  return (
    <>
      <dt>{term}</dt>
      <dd>{children}</dd>
    </>
  );
}

function Time({ iso }: { iso: string }) {
  return <time dateTime={iso}>{formatTime(iso)}</time>;
}
