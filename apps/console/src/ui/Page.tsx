import { useEffect, useRef, type ReactNode } from 'react';

/**
 * A page's heading and title. The heading takes focus when the page opens, so keyboard and
 * screen-reader users land on the new page rather than on the link they followed.
 */
export function Page({ title, actions, children }: { title: string; actions?: ReactNode; children: ReactNode }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · vidgen console`;
    heading.current?.focus({ preventScroll: true });
  }, [title]);
  return (
    <>
      <div className="page-header">
        <h1 ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {actions ? <div className="page-actions">{actions}</div> : null}
      </div>
      {children}
    </>
  );
}
