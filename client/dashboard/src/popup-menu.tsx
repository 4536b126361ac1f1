// A popup that behaves like one: Escape or a click outside closes it and the
// focus goes back to the button that opened it (the Compare and Children menus).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

/** Closes `open` on Escape (focus back to `trigger`) and on a pointer press outside `root`. */
export function useDismiss(open: boolean, close: () => void, root: { current: HTMLElement | null }, trigger: { current: HTMLElement | null }) {
  const closeRef = useRef(close);
  closeRef.current = close;
  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key !== 'Escape') return;
      e.preventDefault();
      closeRef.current();
      trigger.current?.focus();
    };
    const onPointer = (e: PointerEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) closeRef.current();
    };
    document.addEventListener('keydown', onKey);
    document.addEventListener('pointerdown', onPointer);
    return () => {
      document.removeEventListener('keydown', onKey);
      document.removeEventListener('pointerdown', onPointer);
    };
  }, [open]);
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
  useDismiss(open, () => setOpen(false), root, button);
  useEffect(() => {
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
