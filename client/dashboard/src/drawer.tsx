// The page's frame on any width: a skip link past the sidebar, and below
// NARROW_PX the sessions sidebar as a drawer over the page (the conversation
// comes first; a "Sessions" button in a top bar opens the drawer). Wide
// windows show the sidebar beside the page and never see the bar.
import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Below this width the sidebar is a drawer (styles.css uses the same figure). */
export const NARROW_PX = 900;
const narrowQuery = `(max-width: ${NARROW_PX - 0.02}px)`;

function useNarrow(): boolean {
  const [narrow, setNarrow] = useState(() => matchMedia(narrowQuery).matches);
  useEffect(() => {
    const list = matchMedia(narrowQuery);
    const changed = () => setNarrow(list.matches);
    list.addEventListener('change', changed);
    return () => list.removeEventListener('change', changed);
  }, []);
  return narrow;
}

/** Moves focus to the page's <main> (the skip link's target), making it focusable first. */
function focusMain() {
  const main = document.querySelector<HTMLElement>('main');
  if (!main) return;
  if (!main.hasAttribute('tabindex')) main.tabIndex = -1;
  main.focus();
}

/**
 * `sidebar` is the sessions list; `closeOn` changes on every navigation (the
 * drawer closes when a session is picked). The drawer is `inert` while closed,
 * so Tab never wanders into what cannot be seen.
 */
export function Frame(props: { sidebar: ComponentChildren; closeOn: string; children: ComponentChildren }) {
  const narrow = useNarrow();
  const [open, setOpen] = useState(false);
  useEffect(() => setOpen(false), [props.closeOn, narrow]);
  useEffect(() => {
    // Listening all along (not only once open), so an Escape right after opening is not missed.
    const onKey = (e: KeyboardEvent) => e.key === 'Escape' && !document.querySelector('dialog[open]') && setOpen(false);
    addEventListener('keydown', onKey);
    return () => removeEventListener('keydown', onKey);
  }, []);
  const hidden = narrow && !open;
  return (
    <div class={`layout${narrow ? ' narrow' : ''}${open ? ' drawer-open' : ''}`}>
      <a
        class="skip-link"
        href="#main"
        onClick={(e) => {
          e.preventDefault();
          focusMain();
        }}
      >
        Skip to the page
      </a>
      {narrow && (
        <header class="top-bar">
          <button type="button" class="drawer-toggle" aria-expanded={open} aria-controls="sessions-drawer" onClick={() => setOpen(!open)}>
            {open ? 'Close sessions' : 'Sessions'}
          </button>
          <a href="/" class="brand">
            forkline
          </a>
        </header>
      )}
      <div id="sessions-drawer" class="drawer" inert={hidden} aria-hidden={hidden ? true : undefined}>
        {props.sidebar}
      </div>
      {narrow && open && <div class="drawer-backdrop" onClick={() => setOpen(false)} />}
      {props.children}
    </div>
  );
}
