// A message's text, collapsed when long: the first lines and a button to show
// it all (a 199,000-character message would otherwise fill about 78,000 px of
// the conversation). What was opened stays open while the page lives, also
// when the windowed conversation drops the row and renders it again.
// Shown with the characters that would disguise it (bidi overrides, invisible
// ones, controls) as escapes, as a terminal shows it (docs/operations.md "Threat model").
import { useState } from 'preact/hooks';
import { visibleLines } from '../../../src/core/visible-text.ts';

/** Longer texts (in characters or lines) are collapsed... */
export const COLLAPSE_CHARS = 3_000;
const COLLAPSE_LINES = 40;
/** ...to this much of their start. */
const PREVIEW_CHARS = 1_200;
const PREVIEW_LINES = 16;

const opened = new Set<string>();
const n = (x: number) => x.toLocaleString('en-US');

/** Where the preview of `text` ends, or undefined when the text is short enough to show whole. */
function previewEnd(text: string): number | undefined {
  let lines = 0;
  let end: number | undefined;
  for (let i = text.indexOf('\n'); i !== -1 && lines <= COLLAPSE_LINES; i = text.indexOf('\n', i + 1)) {
    lines++;
    if (lines === PREVIEW_LINES) end = i;
  }
  if (text.length <= COLLAPSE_CHARS && lines <= COLLAPSE_LINES) return undefined;
  return Math.min(end ?? PREVIEW_CHARS, PREVIEW_CHARS);
}

/** Too long to show whole: LongText shows its start (a call's arguments say `name(…)` and show them so below). */
export const isLongText = (text: string): boolean => previewEnd(text) !== undefined;

/** `id` names the text for the page's life (e.g. its session and seq). */
export function LongText({ text, id, class: cls = 'msg-text' }: { text: string; id: string; class?: string }) {
  const [open, setOpen] = useState(() => opened.has(id));
  const end = previewEnd(text);
  if (end === undefined) return <div class={cls}>{visibleLines(text)}</div>;
  const toggle = () => {
    if (open) opened.delete(id);
    else opened.add(id);
    setOpen(!open);
  };
  return (
    <div class={`${cls} long-text${open ? ' open' : ''}`} data-testid="long-text">
      {visibleLines(open ? text : `${text.slice(0, end)}…`)}
      <div class="long-text-bar">
        <button type="button" class="small" aria-expanded={open} onClick={toggle}>
          {open ? 'Show less' : `Show all ${n(text.length)} characters`}
        </button>
        {!open && <span class="muted">{n(text.length - end)} more characters hidden</span>}
      </div>
    </div>
  );
}
