// An event's data as a collapsible tree (<details>, so Enter/Space fold it by
// keyboard) with "Copy JSON" and "Copy link" (the #/s/<id>/e/<seq> deep link).
import { useState } from 'preact/hooks';
import { visibleText } from '../../../src/core/visible-text.ts';

/** Levels open at first: deeper objects start folded, so a large tool result stays one line. */
const OPEN_DEPTH = 2;

export function JsonView({ value, depth = 0, name }: { value: unknown; depth?: number; name?: string }) {
  // Keys and strings as JSON writes them, with the bidi and invisible characters it leaves raw escaped too (core/visible-text.ts).
  const label = name !== undefined && <span class="json-key">{visibleText(name)}: </span>;
  if (value === null || typeof value !== 'object') {
    return (
      <div class="json-leaf">
        {label}
        <span class={`json-${value === null ? 'null' : typeof value}`}>{visibleText(JSON.stringify(value))}</span>
      </div>
    );
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{', '}'];
  if (!entries.length)
    return (
      <div class="json-leaf">
        {label}
        {open + close}
      </div>
    );
  return (
    <details class="json-node" open={depth < OPEN_DEPTH}>
      <summary>
        {label}
        {open}
        <span class="json-count">
          {entries.length} {Array.isArray(value) ? (entries.length === 1 ? 'item' : 'items') : entries.length === 1 ? 'key' : 'keys'}
        </span>
        {close}
      </summary>
      <div class="json-children">
        {entries.map(([k, v]) => (
          <JsonView key={k} name={k} value={v} depth={depth + 1} />
        ))}
      </div>
    </details>
  );
}

/** Copies `text`; says "Copied" (or why not) for a moment. */
export function CopyButton({ text, label, what }: { text: () => string; label: string; what: string }) {
  const [state, setState] = useState<string | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text());
      setState('Copied');
    } catch {
      setState('Copy failed'); // no clipboard permission (e.g. an insecure origin)
    }
    setTimeout(() => setState(null), 1500);
  };
  return (
    <button type="button" class="small" onClick={copy} aria-label={`${label} (${what})`}>
      {state ?? label}
    </button>
  );
}
