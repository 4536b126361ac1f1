// The event timeline's spans on a 21,000-event session: turn/start…turn/end,
// step/start…step/end and a model/message's calls…their results show how long
// they lasted (the events' stored times), a span whose end is in a page not
// loaded yet is open "until" the last event held, one still going is running,
// and spans collapse and expand from the keyboard while the rows in the DOM
// stay bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { NewEvent } from '../../src/core/events.ts';
import { formatDuration } from '../../client/dashboard/src/format.ts';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { appendTurns, completedTurn, eventCountOf, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
const BULK_TURNS = 900; // 11 events each, twice: 19,800 events
const LONG_STEPS = 300; // the long turn: 4 events a step, 1,204 events

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let sessionId: string;
let length: number;
/** The long turn's turn/start and turn/end seqs, the timed turns' first seq, the open turn's turn/start. */
let longStart: number;
let longEnd: number;
let timedFrom: number;
let openStart: number;

const eventCount = () => eventCountOf(app, sessionId);
const append = (events: NewEvent[]) => app.services.store.append(sessionId, events);

/** A step with one call and its result. */
const callStep = (turn: number, step: number): NewEvent[] => [
  { type: 'step/start', data: { turn, step } },
  { type: 'model/message', data: { turn, step, text: '', toolCalls: [{ id: `c_${turn}_${step}`, name: 'clock', arguments: '{}' }] } },
  { type: 'tool/result', data: { turn, step, callId: `c_${turn}_${step}`, resultId: `r_${turn}_${step}`, status: 'ok', content: 'now' } },
  { type: 'step/end', data: { turn, step, reason: 'completed' } },
];

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  sessionId = (await app.ok(`mutation { createSession(input: {title: "Spans"}) { id } }`)).createSession.id;
  const bulk = (from: number) => appendTurns(app, sessionId, from, BULK_TURNS);
  await bulk(1);
  // The long turn, in two appends (its end stored later than its start), between two bulks.
  const long = BULK_TURNS + 1;
  const steps = Array.from({ length: LONG_STEPS }, (_, i) => callStep(long, i + 1)).flat();
  longStart = (await eventCount()) + 2;
  await append([
    { type: 'inbox/add', data: { inputId: 'in_long', text: 'a long one' } },
    { type: 'inbox/remove', data: { inputId: 'in_long', reason: 'taken' } },
    { type: 'turn/start', data: { turn: long, inputId: 'in_long' } },
    ...steps.slice(0, steps.length / 2),
  ]);
  await append([...steps.slice(steps.length / 2), { type: 'turn/end', data: { turn: long, reason: 'completed' } }]);
  longEnd = (await eventCount()) - 1;
  await bulk(long + 1);
  // Three turns an event at a time: every event stored at its own moment.
  timedFrom = await eventCount();
  for (let n = long + 1 + BULK_TURNS; n < long + 4 + BULK_TURNS; n++) for (const e of completedTurn(n)) await append([e]);
  // The last turn is still in its step, its call unanswered.
  const last = long + 4 + BULK_TURNS;
  openStart = (await eventCount()) + 2;
  await append([
    { type: 'inbox/add', data: { inputId: 'in_open', text: 'still going' } },
    { type: 'inbox/remove', data: { inputId: 'in_open', reason: 'taken' } },
    { type: 'turn/start', data: { turn: last, inputId: 'in_open' } },
    ...callStep(last, 1).slice(0, 2),
  ]);
  length = await eventCount();
}, 180_000);

afterAll(() => dashboard?.close());

/** The stored times of events from..to. */
async function timesOf(from: number, to: number): Promise<Map<number, number>> {
  const times = new Map<number, number>();
  for (let after = from - 1; after < to; after += 500) {
    const { session } = await app.ok(
      `query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 500) { edges { node { seq createdAt } } } } }`,
      {
        id: sessionId,
        after,
      },
    );
    for (const { node } of session.events.edges) if (node.seq <= to) times.set(node.seq, Date.parse(node.createdAt));
  }
  return times;
}

const row = (page: Page, seq: number) => page.locator(`table.timeline tr[data-seq="${seq}"]`);
const spanText = (page: Page, seq: number) => row(page, seq).getByTestId('span-extent').textContent();

/** Whether the row of `seq` is rendered inside the timeline's viewport (below its sticky head), not merely in the DOM. */
const inView = (page: Page, seq: number) =>
  page.evaluate((seq) => {
    const box = document.querySelector('[data-testid="timeline-scroll"]');
    const tr = box?.querySelector(`tr[data-seq="${seq}"]`);
    if (!box || !tr) return false;
    const view = box.getBoundingClientRect();
    const head = box.querySelector('thead')?.getBoundingClientRect().height ?? 0;
    const r = tr.getBoundingClientRect();
    return r.top >= view.top + head - 1 && r.bottom <= view.bottom + 1;
  }, seq);

/** The seqs of the rows in the timeline's viewport (what a failed jump shows instead). */
const seqsInView = (page: Page) =>
  page.evaluate(() => {
    const view = document.querySelector('[data-testid="timeline-scroll"]')!.getBoundingClientRect();
    return [...document.querySelectorAll('table.timeline tr[data-seq]')]
      .filter((tr) => {
        const r = tr.getBoundingClientRect();
        return r.bottom > view.top && r.top < view.bottom;
      })
      .map((tr) => Number(tr.getAttribute('data-seq')));
  });

/** Moves to `seq` by its address and waits until its row is in the viewport (not only rendered somewhere). */
async function jumpIntoView(page: Page, seq: number) {
  await page.evaluate((seq) => (location.hash = `#seq-${seq}`), seq);
  await expect.poll(async () => ((await inView(page, seq)) ? seq : `rows ${(await seqsInView(page)).join(',')} in view`), TIMEOUT).toBe(seq);
}

/** Moves both panes to `seq` as a typed address does (the page stays open, its pages kept). */
async function jumpTo(page: Page, seq: number) {
  await page.evaluate((seq) => (location.hash = `#seq-${seq}`), seq);
  await page.locator(`table.timeline tr.target[data-seq="${seq}"]`).waitFor(TIMEOUT);
}

describe('timeline spans', () => {
  it('shows each span’s duration from its events’ times; open until a page not loaded, running while not ended; collapses by keyboard', async () => {
    expect(length).toBeGreaterThan(20_000);
    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    await page.goto(`${origin}/sessions/${sessionId}`);
    await row(page, length - 1).waitFor(TIMEOUT);

    // The open turn: its turn, step and calls are running.
    await expect.poll(() => spanText(page, openStart), TIMEOUT).toMatch(/^turn \d+ · running$/);
    expect(await spanText(page, openStart + 1)).toMatch(/^step \d+\.1 · running$/);
    expect(await spanText(page, openStart + 2)).toBe('1 call · running');

    // The three timed turns: every span's duration is what its events' times say.
    const times = await timesOf(timedFrom, length - 1);
    const took = (from: number, to: number) => formatDuration(times.get(to)! - times.get(from)!);
    for (let t = 0; t < 3; t++) {
      const s = timedFrom + t * 11 + 2; // turn/start (after inbox/add, inbox/remove)
      await jumpTo(page, s + 5);
      const n = BULK_TURNS * 2 + 2 + t;
      expect(await spanText(page, s)).toBe(`turn ${n} · ${took(s, s + 8)}`);
      expect(await spanText(page, s + 1)).toBe(`step ${n}.1 · ${took(s + 1, s + 4)}`);
      expect(await spanText(page, s + 2)).toBe(`1 call · ${took(s + 2, s + 3)}`);
      expect(await spanText(page, s + 3)).toBe(`call · ${took(s + 2, s + 3)}`);
      expect(await spanText(page, s + 5)).toBe(`step ${n}.2 · ${took(s + 5, s + 7)}`);
      expect(await spanText(page, s + 8)).toBe(`end of turn ${n} · ${took(s, s + 8)}`);
    }
    // ArrowDown from a span row's type (its collapse button before it) reaches the next row's type, not the control in its place.
    const message = timedFrom + 4; // a model/message with a call; the next row is its result
    await jumpTo(page, message);
    await row(page, message).locator('button[data-control="type"]').focus();
    await page.keyboard.press('ArrowDown');
    expect(
      await page.evaluate(() => [document.activeElement?.closest('tr')?.getAttribute('data-seq'), document.activeElement?.getAttribute('data-control')]),
    ).toEqual([String(message + 1), 'type']);

    // Not every duration is 0 ms: the events were stored apart.
    expect(times.get(length - 1)! - times.get(timedFrom)!).toBeGreaterThan(0);

    // The long turn's end is pages away from its start: open "until" the last event held after the start.
    await jumpTo(page, longStart);
    const longTimes = await timesOf(longStart, longEnd);
    const until = /^turn (\d+) · ≥ (.+), until #(\d+)\+$/.exec((await spanText(page, longStart)) ?? '');
    expect(until, 'the long turn shows as open').not.toBeNull();
    const heldTo = Number(until![3]);
    expect(heldTo).toBeGreaterThan(longStart);
    expect(heldTo).toBeLessThan(longEnd);
    expect(until![2]).toBe(formatDuration(longTimes.get(heldTo)! - longTimes.get(longStart)!));
    // At its end, both ends are held: the whole duration, at the start too.
    const longTook = formatDuration(longTimes.get(longEnd)! - longTimes.get(longStart)!);
    await jumpTo(page, longEnd);
    expect(await spanText(page, longEnd)).toBe(`end of turn ${BULK_TURNS + 1} · ${longTook}`);
    await jumpTo(page, longStart);
    expect(await spanText(page, longStart)).toBe(`turn ${BULK_TURNS + 1} · ${longTook}`);

    // Collapse by keyboard: from the row's type button, ArrowLeft reaches its collapse button; Enter hides the span's rows.
    const table = page.locator('table.timeline.virtual');
    const rowsBefore = Number(await table.getAttribute('aria-rowcount'));
    expect(rowsBefore).toBe(length);
    await row(page, longStart).locator('button[data-control="type"]').focus();
    await page.keyboard.press('ArrowLeft');
    const toggle = row(page, longStart).locator('button[data-control="span"]');
    expect(await toggle.evaluate((el) => el === document.activeElement)).toBe(true);
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    await page.keyboard.press('Enter');
    await expect.poll(() => toggle.getAttribute('aria-expanded')).toBe('false');
    expect(Number(await table.getAttribute('aria-rowcount'))).toBe(length - (longEnd - longStart));
    expect(await spanText(page, longStart)).toBe(`turn ${BULK_TURNS + 1} · ${longTook} · ${(longEnd - longStart).toLocaleString('en-US')} events hidden`);
    // The row after the collapsed turn is the event after its end; none of its rows is in the DOM.
    const seqs = await page.$$eval('table.timeline tr[data-seq]', (trs) => trs.map((tr) => Number(tr.getAttribute('data-seq'))));
    expect(seqs[seqs.indexOf(longStart) + 1]).toBe(longEnd + 1);
    expect(seqs.filter((s) => s > longStart && s <= longEnd)).toEqual([]);
    expect(seqs.length).toBeLessThan(100); // still windowed
    await screenshot(page, 'dashboard-spans-collapsed.png');
    // Space expands it again, the focus staying on it.
    expect(await toggle.evaluate((el) => el === document.activeElement)).toBe(true);
    await page.keyboard.press('Space');
    await expect.poll(() => toggle.getAttribute('aria-expanded')).toBe('true');
    expect(Number(await table.getAttribute('aria-rowcount'))).toBe(length);
    await row(page, longStart + 1).waitFor(TIMEOUT);

    // A step inside collapses alone; a jump into a collapsed span opens it.
    const step = longStart + 1;
    await row(page, step).locator('button[data-control="span"]').click();
    await expect.poll(() => table.getAttribute('aria-rowcount')).toBe(String(length - 3));
    await jumpTo(page, step + 2);
    expect(Number(await table.getAttribute('aria-rowcount'))).toBe(length);

    // After a span collapsed and expanded, a jump lands on its seq with the focus still on a row's control (here the step's
    // collapse button): the scroll must not follow the focused row, which the jump scrolls away.
    // (Back and Forward walk the jumps by the address, whatever holds the focus.)
    await row(page, step).locator('button[data-control="span"]').focus();
    expect(await page.evaluate(() => document.activeElement?.closest('tr')?.getAttribute('data-seq'))).toBe(String(step));
    await jumpIntoView(page, 15_000);
    await jumpIntoView(page, longStart + 600);
    await jumpIntoView(page, 3_000);

    expect(errors).toEqual([]);
  }, 120_000);

  it('a jump lands on its seq after new events arrived, the focus on a row', async () => {
    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    await page.goto(`${origin}/sessions/${sessionId}`);
    const table = page.locator('table.timeline.virtual');
    const before = Number(await table.getAttribute('aria-rowcount'));
    await row(page, before - 1).waitFor(TIMEOUT);
    // A keyboard user's focus on the last row's type (no span needed: the timeline had this before spans).
    await row(page, before - 1)
      .locator('button[data-control="type"]')
      .focus();
    await append([{ type: 'inbox/add', data: { inputId: 'in_live_1', text: 'live 1' } }]);
    const after = await eventCount();
    await expect.poll(() => table.getAttribute('aria-rowcount'), TIMEOUT).toBe(String(after));
    await jumpIntoView(page, 15_000);
    await jumpIntoView(page, after - 1);
    await append([{ type: 'inbox/add', data: { inputId: 'in_live_2', text: 'live 2' } }]);
    await expect.poll(() => table.getAttribute('aria-rowcount'), TIMEOUT).toBe(String(await eventCount()));
    await jumpIntoView(page, 7_000);
    expect(errors).toEqual([]);
  }, 120_000);
});
