// The sessions list with thousands of sessions: virtualised (the DOM stays
// bounded whatever the count, at desktop and phone sizes), forks under their
// parent with the full title and lineage on hover, the last-active time, and
// one tab stop with arrow keys, Home and End moving through every row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const SESSIONS = 5000;
const FORKS = 12;
const TIMEOUT = { timeout: 20_000 };
/** Rows in the DOM may not grow with the list: a screen's worth plus the overscan. */
const MAX_ROWS_IN_DOM = 60;

let dashboard: Dashboard;
let rootId: string;

beforeAll(async () => {
  dashboard = await startDashboard();
  const { app } = dashboard;
  // Through GraphQL, a few at a time.
  let next = 0;
  const ids: string[] = [];
  const worker = async (until = SESSIONS - FORKS) => {
    while (next < until) {
      const i = next++;
      const r = await app.ok(`mutation ($t: String) { createSession(input: { title: $t }) { id } }`, {
        t: `Session ${String(i).padStart(4, '0')} of a long day`,
      });
      ids[i] = r.createSession.id;
    }
  };
  // The first alone: it is the oldest root (the forks go under it), whatever order the others' transactions begin in.
  await worker(1);
  await Promise.all(Array.from({ length: 12 }, () => worker()));
  rootId = ids[0];
  for (let i = 0; i < FORKS; i++)
    await app.ok(`mutation ($id: ID!, $t: String) { forkSession(input: { sessionId: $id, atSeq: 0, title: $t }) { session { id } } }`, {
      id: rootId,
      t: `Variant ${i}`,
    });
}, 300_000);
afterAll(() => dashboard?.close());

describe('the sessions list with 5,000 sessions', () => {
  it('keeps its DOM bounded, shows forks under their parent with the full title on hover, and moves with the keyboard', async () => {
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    await page.goto(dashboard.origin);
    const tree = page.locator('nav.tree');
    await expect.poll(() => tree.locator('ul.tree-rows').getAttribute('data-count'), TIMEOUT).toBe(String(SESSIONS));
    expect(await page.locator('.tree-node').count()).toBeLessThanOrEqual(MAX_ROWS_IN_DOM);
    expect(await page.getByText('No sessions yet').count()).toBe(0);
    await screenshot(page, 'dashboard-list-5000.png');

    // Newest root first, each with its last-active time.
    const first = page.locator('.tree-node[data-index="0"]');
    await first.waitFor(TIMEOUT);
    const firstId = (await first.getAttribute('data-session-id'))!;
    expect(await first.getAttribute('data-depth')).toBe('0');
    expect(await first.locator('.last-active').textContent()).toMatch(/just now|min ago/);

    // One tab stop: Tab reaches the first row's link; End goes to the last row (the oldest root's last fork).
    await page.locator('.sidebar input.search').focus();
    await page.keyboard.press('Tab'); // the list view controls come first when shown
    for (let i = 0; i < 6 && !(await page.evaluate(() => !!document.activeElement?.closest('.tree-node'))); i++) await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.closest('.tree-node')?.getAttribute('data-index'))).toBe('0');
    expect(await page.locator('.tree-node a[tabindex="0"]').count()).toBe(1);
    await page.keyboard.press('End');
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest('.tree-node')?.getAttribute('data-index')), TIMEOUT).toBe(String(SESSIONS - 1));
    const lastRow = page.locator(`.tree-node[data-index="${SESSIONS - 1}"]`);
    expect(await lastRow.getAttribute('data-depth')).toBe('1');
    expect(await lastRow.locator('a').getAttribute('title')).toBe(`Variant ${FORKS - 1} (fork of Session 0000 of a long day at event 0)`);
    await page.keyboard.press('ArrowUp');
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest('.tree-node')?.getAttribute('data-index')), TIMEOUT).toBe(String(SESSIONS - 2));
    // The parent of the forks sits right above them.
    expect(await page.locator(`.tree-node[data-index="${SESSIONS - FORKS - 1}"]`).getAttribute('data-session-id')).toBe(rootId);
    expect(await page.locator('.tree-node').count()).toBeLessThanOrEqual(MAX_ROWS_IN_DOM);
    await page.keyboard.press('Home');
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest('.tree-node')?.getAttribute('data-index')), TIMEOUT).toBe('0');

    // Enter opens the focused session.
    await page.keyboard.press('Enter');
    await page.waitForURL(`**/sessions/${firstId}`, TIMEOUT);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('stays bounded on a phone, in the drawer', async () => {
    const { page } = await openPage(dashboard.browser, { viewport: { width: 390, height: 844 }, timeoutMs: 20_000 });
    await page.goto(dashboard.origin);
    await page.getByRole('button', { name: 'Sessions' }).click();
    await expect.poll(() => page.locator('ul.tree-rows').getAttribute('data-count'), TIMEOUT).toBe(String(SESSIONS));
    await page.locator('.tree-node[data-index="0"]').waitFor(TIMEOUT);
    expect(await page.locator('.tree-node').count()).toBeLessThanOrEqual(MAX_ROWS_IN_DOM);
    await screenshot(page, 'dashboard-list-5000-phone.png');
    await page.close();
  });
});
