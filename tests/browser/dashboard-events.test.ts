// The events pane's tools: a deep link #/s/<id>/e/<seq> scrolls both
// panes to its event and highlights it; the filter by type and origin is
// served by the server (the latest matches of the whole log, earlier ones a
// page at a time) on a log of 2,200 events; an event's data opens as a
// collapsible JSON tree that copies.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { completedTurn, eventCountOf, openPage as openPageOn, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };
const TURNS = 200; // 11 events a turn: 2,200 events, 11 pages of 200

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let context: BrowserContext;
let origin: string;
let sessionId: string;
let length: number;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  sessionId = (await app.ok(`mutation { createSession(input: {title: "Events tools"}) { id } }`)).createSession.id;
  await app.services.store.append(sessionId, Array.from({ length: TURNS }, (_, i) => completedTurn(i + 1, { args: '{"zone":"UTC"}' })).flat());
  length = await eventCountOf(app, sessionId);
  context = await (await browser).newContext({ viewport: { width: 1440, height: 900 }, permissions: ['clipboard-read', 'clipboard-write'] });
}, 60_000);

afterAll(async () => {
  await context?.close();
  await dashboard?.close();
});

const openPage = () => openPageOn(context);

/** The element's box lies inside the scroll box's visible area. */
const inView = (page: Page, testId: string, selector: string) =>
  page.waitForFunction(
    ({ testId, selector }) => {
      const box = document.querySelector(`[data-testid="${testId}"]`)?.getBoundingClientRect();
      const el = document.querySelector(selector)?.getBoundingClientRect();
      return !!box && !!el && el.height > 0 && el.top >= box.top - 1 && el.bottom <= box.bottom + 1;
    },
    { testId, selector },
    { timeout: 10_000, polling: 'raf' },
  );

describe('dashboard events pane', () => {
  it('opens a deep link #/s/<id>/e/<seq>: both panes scroll to the event and highlight it; old routes still work', async () => {
    const { page, errors } = await openPage();
    const seq = 1_008; // turn 92's step 1 end: no item of its own, so the conversation highlights the next one, answer 92
    await page.goto(`${origin}/#/s/${sessionId}/e/${seq}`);
    await inView(page, 'timeline-scroll', `table.timeline tr[data-seq="${seq}"].target`);
    expect(await page.locator(`table.timeline tr[data-seq="${seq}"]`).getAttribute('aria-current')).toBe('location');
    await inView(page, 'conversation-scroll', '.conversation > li[data-target]');
    expect(await page.locator('.conversation > li[data-target]').textContent()).toContain('answer 92');
    await screenshot(page, 'dashboard-deep-link.png');

    // The path routes stay: /sessions/<id>#seq-N opens at an event too.
    await page.goto(`${origin}/sessions/${sessionId}#seq-50`);
    await inView(page, 'timeline-scroll', 'table.timeline tr[data-seq="50"].target');
    // A deep link typed into an open page moves it (hashchange).
    await page.evaluate((id) => (location.hash = `#/s/${id}/e/1500`), sessionId);
    await inView(page, 'timeline-scroll', 'table.timeline tr[data-seq="1500"].target');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('filters by type and origin on the server: the latest matches of the whole log, earlier ones on request', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${sessionId}`);
    await page.locator(`table.timeline tr[data-seq="${length - 1}"]`).waitFor(TIMEOUT);
    await page.getByLabel('Filter by event type').selectOption('turn/end');
    const filtered = page.getByTestId('filtered-timeline');
    const note = filtered.locator('.filter-note');
    const rows = filtered.locator('tr[data-seq]');
    // 200 turns: one page of 200 matches holds every turn/end of the log, loaded or not.
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^200 matching events shown \(every match in the log\)/);
    const types = await filtered.locator('td.type button').allTextContents();
    expect(new Set(types)).toEqual(new Set(['turn/end']));
    const seqs = (await rows.evaluateAll((trs) => trs.map((tr) => Number(tr.getAttribute('data-seq'))))) as number[];
    expect(seqs).toHaveLength(TURNS);
    expect(seqs[0]).toBe(11); // turn 1's end: far below the pages the timeline fetched
    await screenshot(page, 'dashboard-filter.png');

    // More matches than a page: the latest 200 first, then the earlier ones.
    await page.getByLabel('Filter by event type').selectOption('');
    await page.getByLabel('Filter by origin').selectOption('own');
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^200 matching events shown, the latest first/);
    expect(await rows.first().getAttribute('data-seq')).toBe(String(length - 200));
    await filtered.getByRole('button', { name: 'Earlier matches' }).click();
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^400 matching events shown/);
    expect(await rows.first().getAttribute('data-seq')).toBe(String(length - 400));

    // Origin: nothing in this log is synthetic.
    await page.getByLabel('Filter by origin').selectOption('synthetic');
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^0 matching events shown/);
    await page.getByRole('button', { name: 'Clear filter' }).click();
    await page.getByTestId('timeline-scroll').waitFor(TIMEOUT);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("opens an event's data as a collapsible JSON tree with copy", async () => {
    const { page, errors } = await openPage();
    const seq = length - 7; // the last turn's tool call (model/message with toolCalls)
    await page.goto(`${origin}/#/s/${sessionId}/e/${seq}`);
    const row = page.locator(`table.timeline tr[data-seq="${seq}"]`);
    await row.waitFor(TIMEOUT);
    await row.getByRole('button', { name: 'model/message' }).click();
    const data = page.getByTestId('event-data');
    await data.waitFor(TIMEOUT);
    // Two levels open; the tool call's fields folded until opened.
    // data ⊃ toolCalls ⊃ 0: the innermost node whose subtree has a "0:" summary is the call itself.
    const call = data.locator('details.json-node', { has: page.locator('summary', { hasText: /^0:/ }) }).last();
    expect(await call.getAttribute('open')).toBeNull();
    await call.locator('summary').first().click();
    await expect.poll(() => call.textContent(), TIMEOUT).toContain('"clock"');
    await data
      .locator('summary', { hasText: /^data:/ })
      .first()
      .press('Enter'); // folds by keyboard
    await expect.poll(() => data.locator('details.json-node').first().getAttribute('open')).toBeNull();

    await data.getByRole('button', { name: `Copy JSON (event ${seq})` }).click();
    await data.getByRole('button', { name: 'Copied' }).or(data.getByText('Copied')).first().waitFor(TIMEOUT);
    const copied = JSON.parse(await page.evaluate(() => navigator.clipboard.readText()));
    expect(copied).toMatchObject({ seq, type: 'model/message', data: { turn: TURNS, step: 1, toolCalls: [{ name: 'clock' }] } });
    await data.getByRole('button', { name: `Copy link (event ${seq})` }).click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText()), TIMEOUT).toBe(`${origin}/#/s/${sessionId}/e/${seq}`);
    await screenshot(page, 'dashboard-json-viewer.png');
    expect(errors).toEqual([]);
    await page.close();
  });
});
