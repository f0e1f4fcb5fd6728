import { useState } from 'react';

/** Copies a value to the clipboard and says so to screen readers too. */
export function CopyButton({ value, label = 'Copy' }: { value: string; label?: string }) {
  const [copied, setCopied] = useState<'yes' | 'failed' | undefined>();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied('yes');
    } catch {
      setCopied('failed');
    }
  };
  return (
    <>
      <button type="button" onClick={copy}>
        {label}
      </button>
      <span role="status" className="copy-status">
        {copied === 'yes' ? 'Copied' : copied === 'failed' ? 'Copy failed: select the text and copy it' : ''}
      </span>
    </>
  );
}
