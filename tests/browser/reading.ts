// A reader's wheel through a dashboard's conversation, checked step by step:
// every step shows items, near the last step's and never behind them (no leap
// to the log's end, no throw back to where a jump or a drag landed).
import { expect } from 'vitest';
import type { Page } from 'playwright-core';

/** Pages of this session's log the page asks for (the cacheable GET and the events connection), as `afterSeq`s. */
export function pageRequests(page: Page, id: string): number[] {
  const asked: number[] = [];
  page.on('request', (r) => {
    const url = new URL(r.url());
    if (url.pathname === `/sessions/${id}/events`) asked.push(Number(url.searchParams.get('after')));
    else if (url.pathname === '/graphql' && r.method() === 'POST' && /query SessionEvents\b/.test(r.postData() ?? '')) {
      asked.push(Number(JSON.parse(r.postData()!).variables?.afterSeq));
    }
  });
  return asked;
}

/** The seqs of the conversation items inside the scroll box's visible area, and its loading line. */
export const conversationView = (page: Page) =>
  page.evaluate(() => {
    const box = document.querySelector('[data-testid="conversation-scroll"]')!;
    const r = box.getBoundingClientRect();
    const seqs = [...box.querySelectorAll('.conversation > li[data-seq]')]
      .filter((li) => {
        const b = li.getBoundingClientRect();
        return b.height > 0 && b.bottom > r.top && b.top < r.bottom;
      })
      .map((li) => Number(li.getAttribute('data-seq')));
    return { seqs, loading: box.querySelector('[data-testid="window-loading"]')?.textContent ?? null };
  });

/**
 * Turns the wheel over the conversation, most of a screen a step, until an item past `until` is in view.
 * Every step must show items, none of them more than a few screens from the last step's (no leap, nor a window
 * moved away). A page the wheel reached before it arrived shows its loading line a moment (the suite's full run
 * loads the machine): the step waits for it, then checks where the page placed the reader. Returns the steps taken.
 */
export async function readOn(page: Page, direction: 1 | -1, until: number): Promise<number> {
  const box = (await page.getByTestId('conversation-scroll').boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  let last = await conversationView(page);
  for (let step = 1; step <= 600; step++) {
    await page.mouse.wheel(0, direction * box.height * 0.8);
    // The items the wheel brought in rendered and measured (two frames), and any window move it caused begun.
    await page.waitForTimeout(50);
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    let now = await conversationView(page);
    if (now.loading !== null) await expect.poll(async () => (now = await conversationView(page)).loading, { timeout: 15_000 }).toBeNull();
    const where = `step ${step}: ${JSON.stringify(last.seqs)} → ${JSON.stringify(now.seqs)}`;
    expect(now.seqs.length, where).toBeGreaterThan(0);
    // A step is under a screen: the items in view move on by well under 200 events (a screen shows about 20), and never back.
    if (direction > 0) {
      expect(Math.max(...now.seqs), where).toBeLessThan(Math.max(...last.seqs) + 200);
      expect(Math.min(...now.seqs), where).toBeGreaterThanOrEqual(Math.min(...last.seqs));
    } else {
      expect(Math.min(...now.seqs), where).toBeGreaterThan(Math.min(...last.seqs) - 200);
      expect(Math.max(...now.seqs), where).toBeLessThanOrEqual(Math.max(...last.seqs));
    }
    last = now;
    if (direction > 0 ? Math.max(...now.seqs) >= until : Math.min(...now.seqs) <= until) return step;
  }
  throw new Error(`the wheel did not reach #${until}: ${JSON.stringify(last)}`);
}
