// A popup that behaves like one: Escape or a click outside closes it and the
// focus goes back to the button that opened it (the Compare and Children menus).
import type { ComponentChildren } from 'preact';
import { useLayoutEffect, useRef, useState } from 'preact/hooks';

/**
 * Closes a popup on Escape (focus back to `trigger`) and on a pointer press outside `root`, whenever `isOpen()`
 * says it is open. It listens from mount and asks at each key or press: listening only once the open state had
 * rendered (a passive effect, after the next paint; for <details>, after its toggle event too) let an Escape or an
 * outside click in the first frame after opening do nothing, and the popup stayed open.
 */
export function useDismiss(isOpen: () => boolean, close: () => void, root: { current: HTMLElement | null }, trigger: { current: HTMLElement | null }) {
  const latest = useRef({ isOpen, close });
  latest.current = { isOpen, close };
  useLayoutEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape' || !latest.current.isOpen()) return;
      e.preventDefault();
      latest.current.close();
      trigger.current?.focus();
    };
    const onPointer = (e: PointerEvent) => {
      if (latest.current.isOpen() && root.current && !root.current.contains(e.target as Node)) latest.current.close();
    };
    document.addEventListener('keydown', onKey);
    document.addEventListener('pointerdown', onPointer);
    return () => {
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('pointerdown', onPointer);
    };
  }, []);
}

/** Arrow keys, Home and End move between a menu's items. */
function moveInMenu(e: KeyboardEvent) {
  const menu = e.currentTarget as HTMLElement;
  const items = [...menu.querySelectorAll<HTMLElement>('[role="menuitem"]')];
  const at = items.indexOf(document.activeElement as HTMLElement);
  const to = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: items.length - 1 }[e.key];
  if (to === undefined || !items.length) return;
  e.preventDefault();
  items[(to + items.length) % items.length].focus();
}

/** A button opening a menu of links (`role="menu"`); the first item takes the focus when it opens. */
export function MenuButton(props: { label: string; menuLabel: string; class?: string; children: ComponentChildren }) {
  const [open, setOpen] = useState(false);
  const root = useRef<HTMLDivElement>(null);
  const button = useRef<HTMLButtonElement>(null);
  useDismiss(
    () => open,
    () => setOpen(false),
    root,
    button,
  );
  // Before the next key: ArrowDown right after opening moves from the first item.
  useLayoutEffect(() => {
    if (open) root.current?.querySelector<HTMLElement>('[role="menuitem"]')?.focus();
  }, [open]);
  return (
    <div class={`popup-menu ${props.class ?? ''}`} ref={root}>
      <button type="button" ref={button} aria-haspopup="menu" aria-expanded={open} onClick={() => setOpen(!open)}>
        {props.label}
      </button>
      {open && (
        <div class="menu" role="menu" aria-label={props.menuLabel} onKeyDown={moveInMenu} onClick={() => setOpen(false)}>
          {props.children}
        </div>
      )}
    </div>
  );
}
