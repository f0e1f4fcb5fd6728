import { useEffect, useRef } from 'react';
import { CopyButton } from '../../ui/CopyButton';
import type { IssuedKey } from './CreateKeyForm';
import { keyLabel } from './KeyTable';

/** The key just issued, shown this once: the service keeps only its hash and cannot show it again. */
export function NewKeyPanel({ issued, onDone }: { issued: IssuedKey; onDone: () => void }) {
  const panel = useRef<HTMLElement>(null);
  useEffect(() => {
    panel.current?.focus();
  }, [issued]);
  return (
    <section ref={panel} role="region" aria-label="New key" className="card new-key" tabIndex={-1}>
      <h2>New key: {keyLabel(issued.apiKey)}</h2>
      <p className="warning-text">
        <strong>Copy it now. It will not be shown again:</strong> the service keeps only a hash of it. If it is lost, revoke it and create another.
      </p>
      <p className="new-key-value">
        <code data-testid="new-key">{issued.key}</code>
      </p>
      <div className="new-key-actions">
        <CopyButton value={issued.key} label="Copy key" />
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
    </section>
  );
}
