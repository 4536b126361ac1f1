// The conversation of a long session scrolled the way a reader scrolls a long
// page: the thumb dragged to the top, to the middle, to the bottom. Its
// scrollbar spans the whole log, so each lands on the page there, fetched
// directly (not every page in between), and the main thread is not held for
// long. Prints the figures (time to land, pages fetched, long tasks); asserts
// generous bounds only.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { screenshot } from './chromium.ts';
import { openPage, sessionOfTurns, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { scrolledIntoView } from './frames.ts';
import { pageRequests } from './reading.ts';

// 11 events each: with the title, 11,001 events (56 pages of 200).
const TURNS = 1000;
const TIMEOUT = { timeout: 15_000 };

let dashboard: Dashboard;
let sessionId: string;
let length: number;

beforeAll(async () => {
  dashboard = await startDashboard();
  ({ id: sessionId, length } = await sessionOfTurns(dashboard.app, 'Eleven thousand events', TURNS));
}, 120_000);

afterAll(() => dashboard?.close());

/** Long tasks (PerformanceObserver) from page start, as [startTime, duration]. */
const longTasks = (page: Page, since: number) =>
  page.evaluate((s) => (window as unknown as { longTasks: number[][] }).longTasks.filter(([start]) => start >= s).map(([, d]) => Math.round(d)), since);

/** Sets the conversation's scrollTop once (a thumb dragged and let go) to `where`: 'top', 'bottom' or a fraction of the way. */
const dragTo = (page: Page, where: number | 'top' | 'bottom') =>
  page.evaluate((w) => {
    const box = document.querySelector('[data-testid="conversation-scroll"]')!;
    box.scrollTop = w === 'top' ? 0 : w === 'bottom' ? box.scrollHeight : Math.round((box.scrollHeight - box.clientHeight) * w);
    return { now: performance.now(), scrollTop: box.scrollTop };
  }, where);

/** The seqs of the conversation items inside the scroll box's visible area. */
const seqsInView = (page: Page) =>
  page.evaluate(() => {
    const box = document.querySelector('[data-testid="conversation-scroll"]')!.getBoundingClientRect();
    return [...document.querySelectorAll('.conversation > li[data-seq]')]
      .filter((li) => {
        const r = li.getBoundingClientRect();
        return r.height > 0 && r.bottom > box.top && r.top < box.bottom;
      })
      .map((li) => Number(li.getAttribute('data-seq')));
  });

describe('dashboard: the conversation of an 11,000-event session, scrolled by its thumb', () => {
  it('lands on the start, the middle and the end, fetching the page there and not every page between; prints its figures', async () => {
    expect(length).toBeGreaterThan(11_000);
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 15_000 });
    await page.addInitScript(() => {
      const w = window as unknown as { longTasks: number[][] };
      w.longTasks = [];
      new PerformanceObserver((list) => list.getEntries().forEach((e) => w.longTasks.push([e.startTime, e.duration]))).observe({
        type: 'longtask',
        buffered: true,
      });
    });
    const asked = pageRequests(page, sessionId);
    await page.goto(`${dashboard.origin}/sessions/${sessionId}`);
    await scrolledIntoView(page, 'conversation-scroll', `.conversation > li.turn-end[data-turn="${TURNS}"]`);
    const figures: Record<string, string> = {};

    // To the top: the log's first question, from page 0 (and the one after it).
    asked.length = 0;
    let t0 = Date.now();
    let { now } = await dragTo(page, 'top');
    await scrolledIntoView(page, 'conversation-scroll', '.conversation > li.msg.user[data-input-id="in_1"]');
    figures['thumb to the top → question 1 in view'] =
      `${Date.now() - t0} ms, pages ${JSON.stringify(asked)}, long tasks ${JSON.stringify(await longTasks(page, now))}`;
    expect(asked.length).toBeLessThanOrEqual(4);
    expect(Math.max(...asked)).toBeLessThan(3 * 200);
    await screenshot(page, 'dashboard-conversation-thumb-top.png');

    // To the middle: items of the log's middle (the stretch that stands for the log is 24 px an event, so within a page or two).
    asked.length = 0;
    t0 = Date.now();
    ({ now } = await dragTo(page, 0.5));
    await expect
      .poll(async () => {
        const seqs = await seqsInView(page);
        return seqs.length > 0 && seqs.every((s) => Math.abs(s - length / 2) < 800);
      }, TIMEOUT)
      .toBe(true);
    figures['thumb to the middle → its items in view'] =
      `${Date.now() - t0} ms, pages ${JSON.stringify(asked)}, long tasks ${JSON.stringify(await longTasks(page, now))}`;
    expect(asked.length).toBeLessThanOrEqual(6);

    // A slow scroll upwards from there grows the window page by page and keeps the reader's place.
    const before = await seqsInView(page);
    await page.evaluate(() => {
      document.querySelector('[data-testid="conversation-scroll"]')!.scrollTop -= 300;
    });
    await expect.poll(async () => Math.min(...(await seqsInView(page))), TIMEOUT).toBeLessThan(Math.min(...before));

    // To the bottom: the last answer again.
    asked.length = 0;
    t0 = Date.now();
    ({ now } = await dragTo(page, 'bottom'));
    await scrolledIntoView(page, 'conversation-scroll', `.conversation > li.turn-end[data-turn="${TURNS}"]`);
    figures['thumb to the bottom → the last turn in view'] =
      `${Date.now() - t0} ms, pages ${JSON.stringify(asked)}, long tasks ${JSON.stringify(await longTasks(page, now))}`;
    expect(asked.length).toBeLessThanOrEqual(6);

    console.log(
      `dashboard conversation, ${length}-event session:\n${Object.entries(figures)
        .map(([k, v]) => `  ${k}: ${v}`)
        .join('\n')}`,
    );
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);
});
