// A scroll box kept at its end while the reader is there: whatever changes
// size under it (rows measured, a turn's figures arriving, the box itself
// shortened by the composer or the window), the view is moved back to the end
// in the ResizeObserver callback, before the frame is painted. The reader
// scrolling up lets go; scrolling back down to the end holds it again.
// @tanstack/virtual-core keeps the end when a row resizes or one is appended,
// but not when the box shrinks or the list's height changes for another reason.

/** At most this many px from the end is "at the end" (browsers round scroll offsets). */
const END_PX = 1;

export interface KeepAtEnd {
  /** Holds the box at its end from now on (opening at the latest events). */
  hold(): void;
  /** Lets go (a jump placed the reader elsewhere). */
  release(): void;
  /** The element whose height is the box's content (the virtual list): its resizes are watched too. */
  content(el: Element | null): void;
  stop(): void;
}

export function keepAtEnd(box: HTMLElement): KeepAtEnd {
  let holding = false;
  let watched: Element | null = null;
  let last = { top: box.scrollTop, height: box.scrollHeight };
  const gap = () => box.scrollHeight - box.clientHeight - box.scrollTop;
  const remember = () => (last = { top: box.scrollTop, height: box.scrollHeight });
  const toEnd = () => {
    if (holding && gap() > END_PX) box.scrollTop = box.scrollHeight;
    remember();
  };
  // Moved up while the content did not shrink (a shrink clamps the offset down): the reader scrolled, by
  // wheel, keys, thumb or script. At the end, whoever moved it there, the end is held again.
  const scrolled = () => {
    if (gap() <= END_PX) holding = true;
    else if (box.scrollTop < last.top - 1 && box.scrollHeight >= last.height) holding = false;
    remember();
  };
  // Before the scroll they cause is reported: a wheel turned up, a finger on the box (iOS drops writes under it).
  const wheel = (e: WheelEvent) => {
    if (e.deltaY < 0) holding = false;
  };
  const touch = () => (holding = false);
  const resized = new ResizeObserver(toEnd);
  resized.observe(box);
  box.addEventListener('scroll', scrolled, { passive: true });
  box.addEventListener('wheel', wheel, { passive: true });
  box.addEventListener('touchstart', touch, { passive: true });
  return {
    hold() {
      holding = true;
      toEnd();
    },
    release() {
      holding = false;
    },
    content(el) {
      if (el === watched) return;
      if (watched) resized.unobserve(watched);
      watched = el;
      if (el) resized.observe(el);
    },
    stop() {
      resized.disconnect();
      box.removeEventListener('scroll', scrolled);
      box.removeEventListener('wheel', wheel);
      box.removeEventListener('touchstart', touch);
    },
  };
}
