// One tab stop per row in a table of rows with several controls (the event
// timeline): Tab reaches a row's first control only; the row's other controls
// (tabindex -1) are reached with ArrowRight/ArrowLeft, and ArrowDown/ArrowUp
// move to the same control (its `data-control`, else its place) of the next
// or previous row shown.
const CONTROLS = 'button:not(:disabled), a[href]';

function controlsOf(row: Element): HTMLElement[] {
  return [...row.querySelectorAll<HTMLElement>(CONTROLS)];
}

/** The row (`tr[data-seq]`) a key event came from, or undefined. */
const rowOf = (el: EventTarget | null) => (el instanceof Element ? (el.closest('tr[data-seq]') ?? undefined) : undefined);

export function rowKeys(e: KeyboardEvent): void {
  if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
  const row = rowOf(e.target);
  if (!row) return;
  const controls = controlsOf(row);
  const at = controls.indexOf(e.target as HTMLElement);
  if (at < 0) return;
  let next: HTMLElement | undefined;
  if (e.key === 'ArrowRight') next = controls[(at + 1) % controls.length];
  else if (e.key === 'ArrowLeft') next = controls[(at - 1 + controls.length) % controls.length];
  else if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
    const rows = [...(row.closest('table')?.querySelectorAll('tr[data-seq]') ?? [])];
    const other = rows[rows.indexOf(row) + (e.key === 'ArrowDown' ? 1 : -1)];
    if (other) {
      const theirs = controlsOf(other);
      // The same kind of control when the rows differ (a span's start has a collapse button before its type).
      const kind = (e.target as HTMLElement).dataset.control;
      next = (kind && theirs.find((c) => c.dataset.control === kind)) || theirs[Math.min(at, theirs.length - 1)];
    }
  }
  if (!next) return;
  e.preventDefault();
  next.focus();
  next.scrollIntoView({ block: 'nearest' });
}
