// Finding things in a 1,000,000-event session, scrolling it
// end to end in both panes (item 9: the right rows shown, the DOM bounded; the
// speed is bench/dashboard-scroll.ts's), and export with progress and import
// from the UI (item 8), in Chromium. The in-session
// search is the server's full-text index: hits anywhere in the log, in seq
// order, with markers for the events between them, each jumping both panes
// there; the events filter is served by the server a page of matches at a
// time. Export streams from GET /recordings with a progress bar; the file it
// saves imports back through the sidebar's Import button.
//
// Runtime: the million events are written in bulk inside Postgres
// (bench/long-session.ts: ~30-60 s on a loaded 2-core machine), the rest
// takes seconds; nothing waits for the log to load in the page.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { createLongSession, EVENTS_PER_TURN } from '../../bench/long-session.ts';
import { PAGE_SIZE } from '../../client/dashboard/src/event-pages.ts';
import { screenshot } from './chromium.ts';
import { openPage as openPageOn, startDashboard, type Dashboard } from './dashboard-harness.ts';

const MILLION = 1_000_000;
const EXPORTED = 100_000;
const TIMEOUT = { timeout: 20_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let context: BrowserContext;
let origin: string;
let big: string;
let medium: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-find-'));

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  const { store } = app.services;
  big = (await createLongSession({ store, db: { pool: store.pool } }, MILLION, { title: 'A million events' })).id;
  medium = (await createLongSession({ store, db: { pool: store.pool } }, EXPORTED, { title: 'Exported' })).id;
  context = await (await browser).newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true });
}, 300_000);

afterAll(async () => {
  await context?.close();
  await dashboard?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const openPage = () => openPageOn(context, { timeoutMs: 20_000 });
/** The seqs of turn t's input and answer (seq 0 is the title; turns of EVENTS_PER_TURN events follow). */
const turnSeqs = (t: number) => [1 + (t - 1) * EVENTS_PER_TURN, 1 + (t - 1) * EVENTS_PER_TURN + 4];

describe('finding things in a 1,000,000-event session', () => {
  it('searches the whole log on the server: hits in seq order with gap markers, each jumping there', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    await page.locator(`table.timeline tr[data-seq="${MILLION - 1}"]`).waitFor(TIMEOUT);

    // Three turns far apart: their numbers are words of their input and answer only.
    const turns = [1000, 71_428, 142_000];
    await page.getByTestId('session-search-input').fill(turns.join(' or '));
    const results = page.getByTestId('session-search-results');
    const hits = results.locator('button.session-hit');
    await expect.poll(() => hits.count(), TIMEOUT).toBe(6);
    const seqs = await hits.evaluateAll((bs) => bs.map((b) => Number(b.getAttribute('data-seq'))));
    expect(seqs).toEqual(turns.flatMap(turnSeqs));
    expect(await hits.nth(2).textContent()).toContain('71428');
    // A marker before the first hit and between each two: the events in between.
    const gaps = await results.getByTestId('search-gap').allTextContents();
    const between = [seqs[0] + 1, ...seqs.slice(1).map((s, i) => s - seqs[i])].map((n) => `${(n - 1).toLocaleString('en-US')} event${n - 1 === 1 ? '' : 's'}`);
    expect(gaps.map((g) => g.replace(/⋯/g, '').trim())).toEqual(between);
    await screenshot(page, 'dashboard-session-search.png');

    // A hit jumps both panes to its event, half a million events in.
    await hits.nth(3).click();
    const row = page.locator(`table.timeline tr[data-seq="${seqs[3]}"].target`);
    await row.waitFor(TIMEOUT);
    expect(await hits.nth(3).getAttribute('aria-current')).toBe('true');
    expect(await page.locator('.conversation > li[data-target]').textContent()).toContain('Echo: question 71428');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('filters by type on the server: the latest matches of the million, then earlier ones', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    await page.locator(`table.timeline tr[data-seq="${MILLION - 1}"]`).waitFor(TIMEOUT);
    await page.getByLabel('Filter by event type').selectOption('turn/end');
    const filtered = page.getByTestId('filtered-timeline');
    const note = filtered.locator('.filter-note');
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^200 matching events shown, the latest first/);
    const rows = filtered.locator('tr[data-seq]');
    const turns = Math.floor((MILLION - 1) / EVENTS_PER_TURN);
    const lastEnd = turns * EVENTS_PER_TURN; // seq of the last turn/end
    expect(await rows.last().getAttribute('data-seq')).toBe(String(lastEnd));
    expect(await rows.first().getAttribute('data-seq')).toBe(String(lastEnd - 199 * EVENTS_PER_TURN));
    await filtered.getByRole('button', { name: 'Earlier matches' }).click();
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^400 matching events shown/);
    expect(await rows.first().getAttribute('data-seq')).toBe(String(lastEnd - 399 * EVENTS_PER_TURN));
    expect(errors).toEqual([]);
    await page.close();
  });
});

/** The event types of a long session's turns, by position (bench/long-session.ts); seq 0 is its title. */
const TURN_TYPES = ['inbox/add', 'inbox/remove', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end'];
const typeAt = (seq: number) => (seq === 0 ? 'session/title' : TURN_TYPES[(seq - 1) % EVENTS_PER_TURN]);

/**
 * The timeline rows wholly inside its viewport (under the sticky head), top to bottom, and how many rows the DOM
 * holds, once the scroll position has held for two frames (a wheel scrolls smoothly).
 */
function timelineInView(page: Page) {
  return page.evaluate(async () => {
    const box = document.querySelector('[data-testid="timeline-scroll"]')!;
    const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
    for (let at = -1; at !== box.scrollTop;) {
      at = box.scrollTop;
      await frame();
      await frame();
    }
    const top = box.querySelector('thead th')!.getBoundingClientRect().bottom; // the head's cells stick at the top
    const bottom = box.getBoundingClientRect().bottom;
    const rows = [...box.querySelectorAll('tbody > tr')];
    const shown = rows
      .filter((tr) => tr.getBoundingClientRect().top >= top - 1 && tr.getBoundingClientRect().bottom <= bottom + 1)
      .map((tr) => ({ seq: Number(tr.getAttribute('data-seq') ?? -1), type: tr.querySelector('td.type button')?.textContent ?? null }));
    return { shown, domRows: rows.length, scrollTop: box.scrollTop, maxScroll: box.scrollHeight - box.clientHeight };
  });
}

/** Scrolls the timeline to its start, middle or end (a scrollbar drag), or stays; waits for every row in view to be loaded. */
async function timelineAt(page: Page, where: 'start' | 'middle' | 'end' | 'here') {
  await page.evaluate((where) => {
    const box = document.querySelector('[data-testid="timeline-scroll"]')!;
    const max = box.scrollHeight - box.clientHeight;
    if (where !== 'here') box.scrollTop = where === 'start' ? 0 : where === 'end' ? max : Math.round(max / 2);
  }, where);
  let view = await timelineInView(page);
  for (const until = Date.now() + TIMEOUT.timeout; !(view.shown.length > 5 && view.shown.every((r) => r.seq >= 0)) && Date.now() < until;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    view = await timelineInView(page);
  }
  return view;
}

/** Rows shown are consecutive seqs, each with its own event's type. */
function expectConsecutive(shown: { seq: number; type: string | null }[]) {
  expect(shown.map((r) => r.seq)).toEqual(shown.map((_, i) => shown[0].seq + i));
  expect(shown.map((r) => r.type)).toEqual(shown.map((r) => typeAt(r.seq)));
}

/** The conversation's items in its viewport, top to bottom: their seq and kind, and the turn a turn end closes. */
function conversationInView(page: Page) {
  return page.evaluate(() => {
    const box = document.querySelector('[data-testid="conversation-scroll"]')!;
    const { top, bottom } = box.getBoundingClientRect();
    const items = [...box.querySelectorAll('.conversation > li[data-seq]')];
    const shown = items
      .filter((li) => li.getBoundingClientRect().bottom > top && li.getBoundingClientRect().top < bottom)
      .sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)
      .map((li) => ({
        seq: Number(li.getAttribute('data-seq')),
        kind: li.classList.contains('user')
          ? 'user'
          : li.classList.contains('assistant')
            ? 'assistant'
            : li.classList.contains('turn-end')
              ? 'turn-end'
              : 'other',
        turn: Number(li.getAttribute('data-turn') ?? NaN),
        text: li.querySelector('.msg-text')?.textContent ?? '',
      }));
    return { shown, domItems: items.length };
  });
}

/** Each item shown is the one its seq holds: turn t's question at its inbox/add, its answer at its model/message, its end at 7t. */
function expectConversationRight(shown: Awaited<ReturnType<typeof conversationInView>>['shown']) {
  expect(shown.length).toBeGreaterThan(2);
  expect(shown.map((i) => i.seq)).toEqual([...shown.map((i) => i.seq)].sort((a, b) => a - b));
  for (const item of shown) {
    const turn = Math.floor((item.seq - 1) / EVENTS_PER_TURN) + 1;
    if (item.kind === 'user') expect(item.text).toBe(`question ${turn} about something long enough to be realistic`);
    else if (item.kind === 'assistant') expect(item.text).toContain(`Echo: question ${turn} lorem ipsum`);
    else if (item.kind === 'turn-end') expect(item.seq).toBe(item.turn * EVENTS_PER_TURN);
    else throw new Error(`unexpected item at seq ${item.seq}`);
  }
}

describe('scrolling a 1,000,000-event session', () => {
  it('scrolls the timeline from the end to the start and back, showing the right rows with a bounded DOM; an open row makes room', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    await page.locator(`table.timeline tr[data-seq="${MILLION - 1}"]`).waitFor(TIMEOUT);
    const opened = await timelineInView(page);
    expect(opened.shown.at(-1)?.seq).toBe(MILLION - 1);
    expectConsecutive(opened.shown);
    const rowsInView = opened.shown.length;

    // The middle, the very start and the end again, as a scrollbar drag reaches them: each place shows its own rows.
    const middle = await timelineAt(page, 'middle');
    expectConsecutive(middle.shown);
    const expectedMiddle = Math.floor(middle.scrollTop / 28); // ROW_HEIGHT: the first row at least partly under the head
    expect(Math.abs(middle.shown[0].seq - expectedMiddle)).toBeLessThanOrEqual(2);
    expect(middle.shown[0].seq).toBeGreaterThan(490_000);
    expect(middle.shown[0].seq).toBeLessThan(510_000);

    // The wheel from there: 30 notches down, the rows follow.
    await page.getByTestId('timeline-scroll').hover();
    for (let i = 0; i < 30; i++) await page.mouse.wheel(0, 400);
    await expect.poll(async () => (await timelineInView(page)).scrollTop, TIMEOUT).toBeGreaterThan(middle.scrollTop + 30 * 300);
    const wheeled = await timelineAt(page, 'here');
    expectConsecutive(wheeled.shown);
    expect(wheeled.shown[0].seq).toBeGreaterThan(middle.shown[0].seq + 300);

    const start = await timelineAt(page, 'start');
    expect(start.shown[0].seq).toBe(0);
    expectConsecutive(start.shown);

    const end = await timelineAt(page, 'end');
    expect(end.shown.at(-1)?.seq).toBe(MILLION - 1);
    expectConsecutive(end.shown);
    // Only the rows near the viewport exist, wherever it is.
    for (const at of [opened, middle, wheeled, start, end]) {
      expect(Math.abs(at.shown.length - rowsInView)).toBeLessThanOrEqual(1); // a row more or less as they align
      // The rows wholly in view, one partly shown at each edge, the 6-row overscan on each side and the two spacers.
      expect(at.domRows).toBeLessThanOrEqual(rowsInView + 1 + 2 + 2 * 6 + 2);
    }
    expect(await page.evaluate(() => document.getElementsByTagName('*').length)).toBeLessThan(2_000);

    // Rows are not measured, but an open one is: the rows below make room for its data, and close up again after.
    const back = await timelineAt(page, 'middle');
    const seq = back.shown[3].seq;
    const top = async (s: number) => (await page.locator(`table.timeline tr[data-seq="${s}"]`).boundingBox())!.y;
    await page.locator(`table.timeline tr[data-seq="${seq}"] td.type button`).click();
    const data = page.getByTestId('event-data');
    await data.waitFor(TIMEOUT);
    const box = (await data.boundingBox())!;
    expect(box.height).toBeGreaterThan(60);
    await expect.poll(async () => (await top(seq + 1)) - (box.y + box.height), TIMEOUT).toBeGreaterThanOrEqual(-1);
    await page.locator(`table.timeline tr[data-seq="${seq}"] td.type button`).click();
    await data.waitFor({ state: 'detached', ...TIMEOUT });
    await expect.poll(async () => (await top(seq + 1)) - (await top(seq)), TIMEOUT).toBe(28);
    expectConsecutive((await timelineAt(page, 'here')).shown);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('scrolls the conversation up through earlier pages, at the end, the middle and the start, showing the right items with a bounded DOM', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    const lastTurn = Math.floor((MILLION - 1) / EVENTS_PER_TURN);
    await page.locator(`.conversation > li.turn-end[data-turn="${lastTurn}"]`).waitFor(TIMEOUT);
    const domItems: number[] = [];

    // Scrolls up `screens` viewports, a frame at a time as a reader would, letting earlier pages fold in, and checks what is shown.
    const scrollUp = async (screens: number) => {
      const before = (await conversationInView(page)).shown[0].seq;
      for (let i = 0; i < screens; i++) {
        await page.evaluate(() => {
          const box = document.querySelector('[data-testid="conversation-scroll"]')!;
          box.scrollTop -= box.clientHeight;
        });
        await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
      }
      await expect.poll(async () => (await conversationInView(page)).shown[0]?.seq ?? Infinity, TIMEOUT).toBeLessThan(before);
      const view = await conversationInView(page);
      expectConversationRight(view.shown);
      domItems.push(view.domItems);
      return view;
    };

    // The far end: the latest turn, then upwards past the first loaded pages.
    const end = await conversationInView(page);
    expectConversationRight(end.shown);
    expect(end.shown.at(-1)).toMatchObject({ kind: 'turn-end', turn: lastTurn });
    // The page opened on the last two pages of the log: scrolled past their top, the one before them is folded in.
    const up = await scrollUp(60);
    expect(up.shown[0].seq).toBeLessThan(MILLION - 2 * PAGE_SIZE);

    // The middle: a jump to seq 500,000, then upwards from there.
    await page.getByLabel('Seq to jump to').fill('500000');
    await page.getByRole('button', { name: 'Jump to seq' }).click();
    const jumped = page.locator('.conversation > li[data-target]');
    await expect.poll(() => jumped.textContent(), TIMEOUT).toContain('Echo: question 71429 ');
    const middle = await conversationInView(page);
    expectConversationRight(middle.shown);
    // The jump loaded the page before the target's and after it: above them, earlier pages fold in.
    const middleUp = await scrollUp(60);
    expect(middleUp.shown[0].seq).toBeLessThan(500_000 - PAGE_SIZE);
    expect(middleUp.shown[0].seq).toBeGreaterThan(490_000);

    // The start: the first question, then downwards to later pages.
    await page.getByRole('button', { name: 'Jump to start' }).click();
    await page.locator('li.msg.user', { hasText: 'question 1 about' }).first().waitFor(TIMEOUT);
    for (let i = 0; i < 20; i++) {
      await page.evaluate(() => {
        const box = document.querySelector('[data-testid="conversation-scroll"]')!;
        box.scrollTop += box.clientHeight;
      });
      await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
    }
    await expect.poll(async () => (await conversationInView(page)).shown[0]?.seq ?? 0, TIMEOUT).toBeGreaterThan(200);
    const down = await conversationInView(page);
    expectConversationRight(down.shown);
    domItems.push(down.domItems);

    // And back to the latest turn.
    await page.getByRole('button', { name: 'Jump to latest' }).click();
    await page.locator(`.conversation > li.turn-end[data-turn="${lastTurn}"]`).waitFor(TIMEOUT);
    expectConversationRight((await conversationInView(page)).shown);

    // Only the items near the viewport are in the DOM, however far the window grew.
    expect(Math.max(...domItems)).toBeLessThan(60);
    expect(await page.evaluate(() => document.getElementsByTagName('*').length)).toBeLessThan(2_500);
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('export with progress and import from the UI', () => {
  it('exports a 100,000-event session as a stream with a progress bar, and imports the file back', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${medium}`);
    const button = page.getByTestId('export-recording');
    await button.waitFor(TIMEOUT);
    // Every label the button shows while it exports.
    await page.evaluate(() => {
      const seen: string[] = ((window as unknown as { exportLabels: string[] }).exportLabels = []);
      const el = document.querySelector('[data-testid="export-recording"]')!;
      new MutationObserver(() => seen.push(el.textContent ?? '')).observe(el, { subtree: true, childList: true, characterData: true });
    });
    const [download] = await Promise.all([page.waitForEvent('download', TIMEOUT), button.click()]);
    const file = path.join(dir, download.suggestedFilename());
    await download.saveAs(file);
    expect(download.suggestedFilename()).toBe('exported.jsonl');
    const labels = (await page.evaluate(() => (window as unknown as { exportLabels: string[] }).exportLabels)) as string[];
    const percents = labels
      .map((l) => /Exporting… (\d+)%/.exec(l)?.[1])
      .filter(Boolean)
      .map(Number);
    expect(percents.some((p) => p > 0 && p < 100)).toBe(true);
    await expect.poll(() => button.textContent(), TIMEOUT).toBe('Export recording');
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(lines).toHaveLength(1 + EXPORTED);

    // Back in through the sidebar's Import button (streamed to POST /recordings): a new session of the same length.
    await page.getByTestId('import-file').setInputFiles(file);
    await page.waitForURL((u) => !u.pathname.includes(medium) && u.pathname.startsWith('/sessions/'), TIMEOUT);
    await expect.poll(() => page.locator('.session-head .meta').textContent(), TIMEOUT).toContain(`${EXPORTED.toLocaleString('en-US')} events`);
    expect(errors).toEqual([]);
    await page.close();
  });
});
