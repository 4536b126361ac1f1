// A long session as a user meets it on a phone (390x844) and on a desktop
// (1440x900): 20,000 events, forks, a turn waiting on an approval. Nothing
// sticks out sideways or is cut off, a turn's end reads in order, and while
// the server is down its banner covers none of the session's title and
// buttons, the totals say they are the last known (or why there are none,
// never "…" for good) and are read again when the server is back. Layout
// facts (boxes, overlaps, the viewport), not pixels.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page, Route } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { screenshot } from './chromium.ts';
import { appendTurns, noHorizontalOverflow, openPage, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 20_000 };
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1440, height: 900 };
const TURNS = 1818; // 11 events each: 19,998 events, then the waiting turn's
const TITLE = 'Migrating the billing service to the new event pipeline (phase 2, eu-west)';

let dashboard: Dashboard;
let app: TestApp;
let databaseUrl: string;
let second: TestApp | undefined;
let firstClosed = false;
let id: string;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  ({ app } = dashboard = await startDashboard({ databaseUrl }));
  id = (await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title: TITLE, approvalRequired: ['note_write'] } }))
    .createSession.id;
  await appendTurns(app, id, 1, TURNS);
  for (const at of [120, 19_000])
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
      i: { sessionId: id, atSeq: at, title: `Another approach from ${at}` },
    });
  const text = 'please note it\n!call note_write {"key":"greeting","value":"a fairly long value to note down for later"}';
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
  await app.services.host.idle();
  const { session } = await app.ok('query($id: ID!) { session(id: $id) { status eventCount } }', { id });
  expect(session.status).toBe('WAITING');
  expect(session.eventCount).toBeGreaterThan(20_000);
}, 120_000);

afterAll(async () => {
  await second?.close();
  if (firstClosed) await (await dashboard.browser.catch(() => undefined))?.close();
  else await dashboard?.close();
});

type Box = { x: number; y: number; width: number; height: number };
const overlap = (a: Box, b: Box) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
const boxOf = async (l: Locator): Promise<Box> => {
  const box = await l.boundingBox();
  expect(box, `${l} has a box`).not.toBeNull();
  return box!;
};
/** The boxes of what matches `selector` and is shown, named by their text. */
const shownBoxes = (page: Page, selector: string) =>
  page.$$eval(selector, (els) =>
    els
      .filter((el) => (el as HTMLElement).offsetParent !== null && el.getClientRects().length > 0)
      .map((el) => {
        const r = el.getBoundingClientRect();
        return { name: (el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 40), x: r.x, y: r.y, width: r.width, height: r.height };
      }),
  );

async function openSession(viewport: { width: number; height: number }, url = `${dashboard.origin}/sessions/${id}`) {
  const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 20_000 });
  await page.goto(url);
  await page.getByTestId('approval-prompt').waitFor(TIMEOUT);
  return { page, errors };
}

describe('a 20,000-event session with forks and a turn waiting on an approval', () => {
  for (const viewport of [PHONE, DESKTOP])
    it(`at ${viewport.width}x${viewport.height}: nothing sticks out or is cut off; a turn's end reads in order`, async () => {
      const { page, errors } = await openSession(viewport);
      expect(await noHorizontalOverflow(page)).toBe(true);
      // The decision is within reach: both buttons wholly on screen sideways.
      for (const name of ['Approve note_write', 'Deny…']) {
        const b = await boxOf(page.getByRole('button', { name, exact: true }));
        expect(b.x, name).toBeGreaterThanOrEqual(0);
        expect(b.x + b.width, name).toBeLessThanOrEqual(viewport.width);
      }

      // The last ended turn: "turn N" and its status, its figures, its seq and actions; none over another, the figures
      // beside "turn N" (not under the actions, as the phone had them: three lines read out of order).
      const end = page.locator(`li.turn-end[data-turn="${TURNS}"]`);
      await end.getByTestId('turn-stats').waitFor(TIMEOUT);
      const row = await boxOf(end);
      const label = await boxOf(end.locator(':scope > span').first());
      const stats = await boxOf(end.getByTestId('turn-stats'));
      const actions = await boxOf(end.locator('.turn-end-actions'));
      expect([overlap(label, stats), overlap(label, actions), overlap(stats, actions)]).toEqual([false, false, false]);
      expect(Math.abs(stats.y - label.y)).toBeLessThanOrEqual(4);
      expect(stats.x).toBeGreaterThan(label.x);
      expect(actions.y).toBeGreaterThanOrEqual(stats.y - 4); // on their line (centred) or below
      for (const b of [label, stats, actions]) expect(b.x + b.width).toBeLessThanOrEqual(row.x + row.width + 0.5);
      // Two lines at most on a phone, one on a desktop.
      expect(row.height).toBeLessThanOrEqual(viewport === PHONE ? 2 * actions.height + 16 : actions.height + 12);

      // The timeline's rows: the event's summary keeps a readable share of the width (on a phone the type column
      // left it three characters), and a type too long for its column ends in … inside it, not cut at its edge.
      const rows = await page.$$eval('table.timeline.virtual tr[data-seq]', (trs) =>
        trs.map((tr) => {
          const table = tr.closest('table')!.getBoundingClientRect();
          const summary = tr.querySelector('td.summary')!.getBoundingClientRect();
          const cell = tr.querySelector('td.type')!.getBoundingClientRect();
          const type = tr.querySelector<HTMLElement>('td.type > button')!;
          const b = type.getBoundingClientRect();
          return { seq: tr.getAttribute('data-seq'), share: summary.width / table.width, spills: b.right > cell.right + 0.5 || b.left < cell.left - 0.5 };
        }),
      );
      expect(rows.length).toBeGreaterThan(10);
      expect(Math.min(...rows.map((r) => r.share))).toBeGreaterThan(0.2);
      expect(rows.filter((r) => r.spills).map((r) => r.seq)).toEqual([]);

      if (viewport === DESKTOP) {
        // A fork's row in the sessions tree is indented: its counts and "just now" stay inside the sidebar.
        const sidebar = await boxOf(page.locator('.sidebar'));
        const meta = await shownBoxes(page, '.sidebar .tree-meta > *');
        expect(meta.length).toBeGreaterThan(6);
        expect(meta.filter((m) => m.x + m.width > sidebar.x + sidebar.width + 0.5).map((m) => m.name)).toEqual([]);
      }
      await showDetails(page);
      expect(await noHorizontalOverflow(page)).toBe(true);
      const controls = await shownBoxes(page, 'main .session-head button, main .session-head .button, main .session-head summary');
      expect(controls.length).toBeGreaterThan(5);
      expect(controls.filter((c) => c.x < 0 || c.x + c.width > viewport.width).map((c) => c.name)).toEqual([]);
      await screenshot(page, `dashboard-long-session-${viewport.width}.png`);
      expect(errors).toEqual([]);
      await page.close();
    });

  it('while the server is down: the banner covers no title or button, the totals say they are the last known or why there are none, and are read again when it is back', async () => {
    const phone = await openSession(PHONE);
    await showDetails(phone.page);
    const desktop = await openSession(DESKTOP);
    for (const { page } of [phone, desktop]) await expect.poll(() => page.getByTestId('session-totals').getAttribute('data-state'), TIMEOUT).toBe('current');

    // A third page whose totals reads are held back until the server is gone: they fail while the server is down.
    const late = await openPage(dashboard.browser, { viewport: DESKTOP, timeoutMs: 20_000 });
    const held: Route[] = [];
    let heldNow!: () => void;
    const wasHeld = new Promise<void>((resolve) => (heldNow = resolve));
    await late.page.route('**/graphql', (route) => {
      if (!route.request().postData()?.includes('query DashboardSessionTotals')) return route.continue();
      held.push(route);
      heldNow();
    });
    await late.page.goto(`${dashboard.origin}/sessions/${id}`);
    await late.page.getByTestId('approval-prompt').waitFor(TIMEOUT);
    await wasHeld;
    expect(await late.page.getByTestId('session-totals').getAttribute('data-state')).toBe('loading');

    const port = Number(new URL(app.url).port);
    firstClosed = true;
    await app.close();
    for (const route of held.splice(0)) await route.abort('connectionrefused');
    await late.page.unroute('**/graphql'); // retries held meanwhile go on, to a server that is not there

    for (const [{ page }, viewport] of [
      [phone, PHONE],
      [desktop, DESKTOP],
    ] as const) {
      const banner = page.getByTestId('connection-problem');
      await expect.poll(() => banner.getAttribute('data-kind'), TIMEOUT).toBe('unreachable');
      const b = await boxOf(banner);
      expect(b.x).toBeGreaterThanOrEqual(0);
      expect(b.x + b.width).toBeLessThanOrEqual(viewport.width);
      // Nothing of the page's top under it: the top bar's Sessions, the title, Rename, the status, every header button.
      const under = [
        ...(await shownBoxes(page, '.top-bar button, .top-bar a')),
        ...(await shownBoxes(
          page,
          'main .session-head h1, main .session-head button, main .session-head .button, main .session-head summary, main .session-head .badge',
        )),
      ];
      expect(under.length).toBeGreaterThan(5);
      expect(under.filter((u) => overlap(u, b)).map((u) => u.name)).toEqual([]);
      expect(await noHorizontalOverflow(page)).toBe(true);
      // The totals read before stay, said to be the last known.
      const totals = page.getByTestId('session-totals');
      await expect.poll(() => totals.getAttribute('data-state'), TIMEOUT).toBe('last-known');
      expect(await totals.getByTestId('totals-stale').textContent()).toContain('the server is unreachable');
      expect(await totals.textContent()).not.toContain('…');
      await screenshot(page, `dashboard-long-session-down-${viewport.width}.png`);
    }
    // The page whose read failed says why there are no totals, not "…" (which it said for good).
    const lateTotals = late.page.getByTestId('session-totals');
    await expect.poll(() => lateTotals.getAttribute('data-state'), TIMEOUT).toBe('unavailable');
    expect(await lateTotals.textContent()).toMatch(/^Totals not available: the server is unreachable/);

    // Back: every page reads its totals again by itself.
    second = await startTestApp({ databaseUrl, port });
    for (const { page } of [phone, desktop, late]) {
      const totals = page.getByTestId('session-totals');
      await expect.poll(() => totals.getAttribute('data-state'), TIMEOUT).toBe('current');
      expect(await totals.locator('dd').first().textContent()).toMatch(/^1,8\d\d$/);
      await expect.poll(() => page.getByTestId('connection-problem').count(), TIMEOUT).toBe(0);
    }
    for (const { page } of [phone, desktop, late]) await page.close();
  });
});
