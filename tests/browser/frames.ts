// Frame timing in a dashboard page: the requestAnimationFrame deltas while a
// pane scrolls (the long-session test and the dashboardScroll bench).
import type { Page } from 'playwright-core';

/** requestAnimationFrame deltas while `scrollBy` px are scrolled each frame for `frames` frames. */
export async function scrollFrames(page: Page, testId: string, scrollBy: number, frames: number): Promise<number[]> {
  return page.evaluate(
    ({ testId, scrollBy, frames }) =>
      new Promise<number[]>((resolve) => {
        const box = document.querySelector(`[data-testid="${testId}"]`)!;
        const deltas: number[] = [];
        let last = performance.now();
        const tick = (now: number) => {
          deltas.push(now - last);
          last = now;
          box.scrollTop += scrollBy;
          if (deltas.length < frames) requestAnimationFrame(tick);
          else resolve(deltas.slice(1));
        };
        requestAnimationFrame(tick);
      }),
    { testId, scrollBy, frames },
  );
}

/** Polls until the element matching `selector` is inside the scroll box's visible area. */
export async function scrolledIntoView(page: Page, testId: string, selector: string) {
  await page.waitForFunction(
    ({ testId, selector }) => {
      const box = document.querySelector(`[data-testid="${testId}"]`)?.getBoundingClientRect();
      const el = [...document.querySelectorAll(selector)].at(-1)?.getBoundingClientRect();
      return !!box && !!el && el.height > 0 && el.top >= box.top - 1 && el.bottom <= box.bottom + 1;
    },
    { testId, selector },
    { timeout: 15_000, polling: 'raf' },
  );
}
