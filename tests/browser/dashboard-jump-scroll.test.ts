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
import { screenshot } from './chromium.ts';
import { openPage, sessionOfTurns, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { conversationView as view, readOn } from './reading.ts';

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
  ({ id: sessionId, length } = await sessionOfTurns(dashboard.app, 'Twenty thousand events', TURNS));
}, 180_000);

afterAll(() => dashboard?.close());

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
