// The dashboard on a phone (390x844) and below 900 px: the sessions sidebar is
// a drawer, the conversation comes first and gets the width, the page never
// scrolls sideways, the composer is reachable and sends, and a long title
// wraps between words (in the drawer, up to three lines). At 1440x900 the sidebar stays beside the page.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };
const PHONE = { width: 390, height: 844 };
const LONG_TITLE =
  'Reconciling the quarterly infrastructure migration plan with the incident review notes and the capacity forecast for Supercalifragilistic regions';

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let longId: string;
let otherId: string;

const send = (sessionId: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  const create = async (title: string) =>
    (await app.ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id as string;
  longId = await create(LONG_TITLE);
  otherId = await create('Short one');
  await send(longId, 'What is the plan for the eu-west region?');
  await app.services.host.idle();
}, 60_000);

afterAll(() => dashboard?.close());

/** Nothing sticks out sideways: the page does not scroll horizontally. */
const horizontalOverflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);

/** Words of the heading split across lines (a word's text boxes on more than one line). */
const wordsBrokenAcrossLines = (page: Page) =>
  page.evaluate(() => {
    const h1 = document.querySelector('.session-head h1')!;
    const text = h1.firstChild as Text;
    const broken: string[] = [];
    for (const m of text.data.matchAll(/\S+/g)) {
      const range = document.createRange();
      range.setStart(text, m.index!);
      range.setEnd(text, m.index! + m[0].length);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      if (tops.size > 1) broken.push(m[0]);
    }
    return broken;
  });

describe('dashboard on a phone (390x844)', () => {
  it('puts the conversation first with the width of the screen; the sessions open as a drawer', async () => {
    const { page, errors } = await openPage(browser, { viewport: PHONE });
    await page.goto(`${origin}/sessions/${longId}`);
    const answer = page.locator('.conversation .msg.assistant').filter({ hasText: 'Echo: What is the plan' });
    await answer.waitFor(TIMEOUT);

    // The sidebar is off screen and out of the tab order; the page has the width.
    const drawer = page.locator('#sessions-drawer');
    expect(await drawer.isVisible()).toBe(false);
    expect(await drawer.getAttribute('inert')).not.toBeNull();
    const chat = await page.getByRole('region', { name: 'Conversation pane' }).boundingBox();
    expect(chat!.width).toBeGreaterThan(PHONE.width - 40);
    const bubble = await answer.boundingBox();
    expect(bubble!.width).toBeGreaterThan(200);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);

    // The long title wraps between words (folded: two lines of it; Details shows all of it).
    expect(await page.locator('.session-head h1').textContent()).toBe(LONG_TITLE);
    expect(await wordsBrokenAcrossLines(page)).toEqual([]);
    await screenshot(page, 'dashboard-phone-session.png');

    // The composer is reachable and sends.
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.scrollIntoViewIfNeeded();
    const box = await composer.boundingBox();
    expect(box!.width).toBeGreaterThan(300);
    await composer.fill('And the us-east region?');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('.conversation .msg.assistant').filter({ hasText: 'Echo: And the us-east region?' }).waitFor(TIMEOUT);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);

    // "Sessions" opens the drawer over the page; picking a session closes it.
    const toggle = page.getByRole('button', { name: 'Sessions', exact: true });
    await page.evaluate(() => scrollTo(0, 0));
    await toggle.click();
    await expect.poll(() => drawer.isVisible(), TIMEOUT).toBe(true);
    expect(await page.getByRole('button', { name: 'Close sessions' }).getAttribute('aria-expanded')).toBe('true');
    const link = page.locator(`#sessions-drawer .tree-node[data-session-id="${otherId}"] > a`);
    await link.waitFor(TIMEOUT);
    await expect.poll(async () => (await link.boundingBox())!.x, TIMEOUT).toBeGreaterThanOrEqual(0); // slid in
    const linkBox = await link.boundingBox();
    expect(linkBox!.x + linkBox!.width).toBeLessThanOrEqual(PHONE.width);
    await screenshot(page, 'dashboard-phone-drawer.png');
    await link.click();
    await page.locator(`main[data-session-id="${otherId}"]`).waitFor(TIMEOUT);
    await expect.poll(() => drawer.isVisible(), TIMEOUT).toBe(false);

    // Escape closes it too.
    await toggle.click();
    await expect.poll(() => drawer.isVisible(), TIMEOUT).toBe(true);
    await page.keyboard.press('Escape');
    await expect.poll(() => drawer.isVisible(), TIMEOUT).toBe(false);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('folds the header: the conversation starts near the top, the details open on demand', async () => {
    const { page, errors } = await openPage(browser, { viewport: PHONE });
    await page.goto(`${origin}/sessions/${longId}`);
    const firstItem = page.locator('ol.conversation > li').first();
    await firstItem.waitFor(TIMEOUT);
    const top = async (selector: string) => (await page.locator(selector).first().boundingBox())!.y;
    const bottom = async (selector: string) => {
      const b = (await page.locator(selector).first().boundingBox())!;
      return b.y + b.height;
    };
    const details = page.getByRole('button', { name: 'Details', exact: true });

    // Folded: the title (two lines of the 150-character one), the status and "Details"; the conversation right below.
    expect(await details.getAttribute('aria-expanded')).toBe('false');
    expect(await page.locator('.session-head .badge.status-idle').textContent()).toBe('idle');
    expect(await page.locator('.session-head .badge.status-idle').isVisible()).toBe(true);
    const h1 = page.locator('.session-head h1');
    const lineHeight = await h1.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight) || 1.2 * parseFloat(getComputedStyle(el).fontSize));
    expect((await h1.boundingBox())!.height).toBeLessThanOrEqual(2 * lineHeight + 1);
    expect(await h1.evaluate((el) => el.scrollHeight > el.clientHeight)).toBe(true); // the rest is folded, not lost
    for (const folded of [
      '.session-head .format-version',
      '.session-head code',
      '.session-insights',
      '.jump-bar',
      '.session-search',
      '.session-head .head-actions',
    ])
      expect(await page.locator(folded).first().isVisible(), folded).toBe(false);
    expect(await bottom('.session-head')).toBeLessThanOrEqual(170);
    expect(await top('ol.conversation > li')).toBeLessThanOrEqual(210); // 24 px controls (touch targets) make the folded header a few px taller
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    await screenshot(page, 'dashboard-phone-folded.png');

    // Details: the whole title, counts (the format version explained), lineage, totals, jump and search.
    await details.click();
    const hide = page.getByRole('button', { name: 'Hide details' });
    expect(await hide.getAttribute('aria-expanded')).toBe('true');
    expect(await h1.evaluate((el) => el.scrollHeight <= el.clientHeight)).toBe(true);
    expect(await wordsBrokenAcrossLines(page)).toEqual([]);
    const format = page.locator('.session-head .format-version');
    expect(await format.textContent()).toBe('format v4');
    expect(await format.getAttribute('title')).toMatch(/^Event format version 4: /);
    for (const shown of [
      '.session-head .format-version',
      '.session-head code',
      '.session-insights',
      '.jump-bar',
      '.session-search',
      '.session-head .head-actions',
    ])
      expect(await page.locator(shown).first().isVisible(), shown).toBe(true);
    await page.getByTestId('session-totals').waitFor(TIMEOUT);
    expect(await page.getByRole('textbox', { name: 'Seq to jump to' }).or(page.getByLabel('Seq to jump to')).first().isVisible()).toBe(true);
    expect(await top('ol.conversation > li')).toBeGreaterThan(200);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    await screenshot(page, 'dashboard-phone-details.png');

    // And folds again.
    await hide.click();
    await expect.poll(() => page.locator('.session-insights').isVisible(), TIMEOUT).toBe(false);
    expect(await top('ol.conversation > li')).toBeLessThanOrEqual(210);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('ends a timeline type too long for its narrow column in …, not cut mid-letter', async () => {
    const { page, errors } = await openPage(browser, { viewport: PHONE });
    await page.goto(`${origin}/sessions/${longId}`);
    await page.locator('table.timeline tr[data-seq] td.type button').first().waitFor(TIMEOUT);
    // text-overflow draws its … only in a block container; a button is an inline-flex one here, which cuts the text at its edge.
    const types = await page.$$eval('table.timeline tr[data-seq] td.type > button', (buttons) =>
      buttons.map((b) => ({
        text: b.textContent,
        cut: b.scrollWidth > b.clientWidth,
        display: getComputedStyle(b).display,
        overflow: getComputedStyle(b).textOverflow,
      })),
    );
    const cut = types.filter((t) => t.cut);
    expect(cut.map((t) => t.text)).toContain('model/message');
    expect(cut.filter((t) => !['block', 'inline-block'].includes(t.display) || t.overflow !== 'ellipsis')).toEqual([]);
    await page.getByTestId('timeline-scroll').scrollIntoViewIfNeeded();
    await screenshot(page, 'dashboard-phone-timeline.png');
    expect(errors).toEqual([]);
    await page.close();
  });

  it("ends a title of the longest kind after three lines in the drawer: one session does not fill the phone's list", async () => {
    const title = Array.from({ length: 50 }, (_, i) => `word${i}xyz`)
      .join(' ')
      .slice(0, 500);
    const id = (await app.ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id as string;
    const { page, errors } = await openPage(browser, { viewport: PHONE });
    await page.goto(`${origin}/`);
    await page.getByRole('button', { name: 'Sessions', exact: true }).click();
    const row = page.locator(`#sessions-drawer .tree-node[data-session-id="${id}"] .tree-title`);
    await row.waitFor(TIMEOUT);
    const lineHeight = await row.evaluate((el) => parseFloat(getComputedStyle(el).lineHeight));
    // Three lines, not the 16 it took whole at this width; its text is all there (for a screen reader; the link's title on hover).
    expect((await row.boundingBox())!.height).toBeLessThanOrEqual(3 * lineHeight + 1);
    expect(await row.textContent()).toBe(title);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    await screenshot(page, 'dashboard-phone-long-title.png');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the home page and the new-session dialog fit the screen', async () => {
    const { page, errors } = await openPage(browser, { viewport: PHONE });
    await page.goto(`${origin}/`);
    await page.getByRole('heading', { name: 'Sessions' }).waitFor(TIMEOUT);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    await page.getByRole('button', { name: 'Sessions', exact: true }).click();
    await page.getByRole('button', { name: 'New session' }).click();
    const dialog = page.getByRole('dialog', { name: 'New session' });
    await dialog.waitFor(TIMEOUT);
    const box = await dialog.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(PHONE.width);
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('dashboard at 1440x900', () => {
  it('keeps the sidebar beside the page, with no drawer button', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${longId}`);
    await page.locator('.conversation .msg.assistant').first().waitFor(TIMEOUT);
    expect(await page.locator('#sessions-drawer').isVisible()).toBe(true);
    expect(await page.getByRole('button', { name: 'Sessions', exact: true }).count()).toBe(0);
    // Nothing folds at this width: no "Details", the totals and the search in view.
    expect(await page.getByRole('button', { name: 'Details', exact: true }).isVisible()).toBe(false);
    expect(await page.locator('.session-insights').isVisible()).toBe(true);
    expect(await page.locator('.session-search').isVisible()).toBe(true);
    expect(await page.locator('.session-head .format-version').textContent()).toBe('format v4');
    const sidebar = await page.locator('.sidebar').boundingBox();
    const main = await page.locator('main').boundingBox();
    expect(sidebar!.x + sidebar!.width).toBeLessThanOrEqual(main!.x + 1);
    expect(await wordsBrokenAcrossLines(page)).toEqual([]);
    expect(await horizontalOverflow(page)).toBeLessThanOrEqual(0);
    expect(errors).toEqual([]);
    await page.close();
  });
});
