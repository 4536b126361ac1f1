// A 20,000-event session opened at a link to one event (#seq-7000), then read
// onwards with the wheel, down through more pages of the log than the
// conversation folds at once, and back up past the event: each step shows the
// events after (or before) the last, at 1440x900 and on a phone (390x844).
// Before, once the window had grown down so far that it dropped the page of
// the event linked to, the pane went back to placing the reader as when it
// opened: at the window's end, which is the stretch standing for the rest of
// the log, so it leapt to the session's latest events. Likewise from where the
// thumb was dragged to: the first page the window grew down by threw the
// reader back to where the drag had landed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { screenshot } from './chromium.ts';
import { appendTurns, eventCountOf, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

// 11 events each: with the title, 20,010 events.
const TURNS = 1819;
const LINKED = 7000;
/** The conversation folds at most 10 pages of 200 events: reading 12 pages on drops the linked event's page. */
const READ_DOWN_TO = LINKED + 12 * 200;

let dashboard: Dashboard;
let sessionId: string;
let length: number;

beforeAll(async () => {
  dashboard = await startDashboard();
  const { app } = dashboard;
  sessionId = (await app.ok(`mutation { createSession(input: {title: "Twenty thousand events"}) { id } }`)).createSession.id;
  await appendTurns(app, sessionId, 1, TURNS);
  length = await eventCountOf(app, sessionId);
}, 180_000);

afterAll(() => dashboard?.close());

/** The seqs of the conversation items inside the scroll box's visible area, and its loading line. */
const view = (page: Page) =>
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
 * Every step must show items, none of them more than a few screens from the last step's (no leap), and
 * never the loading line of a window moved away. Returns the steps taken.
 */
async function readOn(page: Page, direction: 1 | -1, until: number): Promise<number> {
  const box = (await page.getByTestId('conversation-scroll').boundingBox())!;
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  let last = await view(page);
  for (let step = 1; step <= 600; step++) {
    await page.mouse.wheel(0, direction * box.height * 0.8);
    // The items the wheel brought in rendered and measured (two frames), and any window move it caused begun.
    await page.waitForTimeout(50);
    await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    const now = await view(page);
    const where = `step ${step}: ${JSON.stringify(last.seqs)} → ${JSON.stringify(now.seqs)}`;
    expect(now.loading, where).toBeNull();
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

describe('dashboard: read on from a link to one event of a 20,000-event session', () => {
  for (const viewport of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ])
    it(`scrolls down 12 pages of the log in order, then back up past the event (${viewport.width}x${viewport.height})`, async () => {
      expect(length).toBeGreaterThan(20_000);
      const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 15_000 });
      await page.goto(`${dashboard.origin}/sessions/${sessionId}#seq-${LINKED}`);
      await page.locator('.conversation > li[data-target]').first().waitFor();
      await expect.poll(async () => (await view(page)).seqs.some((s) => Math.abs(s - LINKED) < 10)).toBe(true);

      const down = await readOn(page, 1, READ_DOWN_TO);
      await screenshot(page, `dashboard-jump-scroll-down-${viewport.width}.png`);
      // The window dropped the linked event's page: its edge is past it. Back up through the pages it dropped, past the event.
      const edge = Number((await page.getByTestId('window-edge').textContent())!.match(/^From event #(\d+)/)![1]);
      expect(edge).toBeGreaterThan(LINKED);
      const up = await readOn(page, -1, LINKED - 100);
      await screenshot(page, `dashboard-jump-scroll-up-${viewport.width}.png`);
      console.log(
        `${viewport.width}x${viewport.height}: #${LINKED} → #${READ_DOWN_TO} in ${down} wheel steps (window from #${edge}), back to #${LINKED - 100} in ${up}`,
      );
      expect(new URL(page.url()).hash).toBe(`#seq-${LINKED}`);
      expect(errors).toEqual([]);
      await page.close();
    }, 240_000);

  it('reads on down in order from where the thumb was dragged to (the middle of the log)', async () => {
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 15_000 });
    await page.goto(`${dashboard.origin}/sessions/${sessionId}`);
    await page.locator(`.conversation > li.turn-end[data-turn="${TURNS}"]`).waitFor();
    await page.evaluate(() => {
      const box = document.querySelector('[data-testid="conversation-scroll"]')!;
      box.scrollTop = Math.round((box.scrollHeight - box.clientHeight) / 2);
    });
    await expect.poll(async () => (await view(page)).seqs.some((s) => Math.abs(s - length / 2) < 400)).toBe(true);
    const from = Math.max(...(await view(page)).seqs);
    // Three pages of the log on: past the three the scroll folded there, so the window grows down.
    await readOn(page, 1, from + 3 * 200);
    expect(await page.locator('.conversation > li[data-target]').count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  }, 240_000);
});
