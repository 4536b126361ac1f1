// A 20,000-event session in the dashboard: it opens at its latest
// events, scrolls, jumps, and takes a message while staying responsive. It
// prints its timings (the goals: first screen < 1 s, send → visible < 1 s,
// scroll p95 < 20 ms, keystroke < 16 ms) and asserts none of them: speed is
// measured by `npm run bench` (dashboardScroll: scroll frames), not here, where
// a loaded machine would make it flake. What it asserts holds on any machine:
// each step happens (within the waits' timeout), the DOM stays small, past
// pages are immutable, no error.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { appendTurns, completedTurn, eventCountOf, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { scrolledIntoView, scrollFrames } from './frames.ts';

// 11 events each: with the title, 20,010 events. DASHBOARD_TURNS=90910 measures a
// 1,000,010-event session instead (minutes to write: a manual run, not the suite's).
const TURNS = Number(process.env.DASHBOARD_TURNS ?? 1819);
const TIMEOUT = { timeout: 15_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let sessionId: string;
let length: number;

beforeAll(
  async () => {
    ({ app, browser, origin } = dashboard = await startDashboard());
    sessionId = (await app.ok(`mutation { createSession(input: {title: "Twenty thousand events"}) { id } }`)).createSession.id;
    await appendTurns(app, sessionId, 1, TURNS);
    length = await eventCountOf(app, sessionId);
  },
  120_000 + TURNS * 10,
);

afterAll(() => dashboard?.close());

const p95 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * 0.95))];
const ms = (x: number) => `${x.toFixed(1)} ms`;

describe('dashboard on a 20,000-event session', () => {
  it('opens at the latest events, scrolls, jumps and takes a message without freezing; prints its figures', async () => {
    expect(length).toBeGreaterThanOrEqual(20_000);
    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    const figures: Record<string, string> = { events: String(length) };

    // First screen: the last answer in the conversation and the last row of the timeline.
    await page.goto(origin + '/'); // the app shell and assets cached, as when a user opens a session from the list
    // Pages wholly in the log's past come from GET /sessions/<id>/events, final and immutable (HTTP-cacheable).
    const pastPages: Array<{ status: number; cache: string }> = [];
    page.on('response', (r) => {
      if (new URL(r.url()).pathname === `/sessions/${sessionId}/events`) pastPages.push({ status: r.status(), cache: r.headers()['cache-control'] ?? '' });
    });
    let t0 = Date.now();
    await page.goto(`${origin}/sessions/${sessionId}`);
    await page.locator('li.msg.assistant', { hasText: `answer ${TURNS}` }).waitFor(TIMEOUT);
    await scrolledIntoView(page, 'conversation-scroll', `.conversation > li.turn-end[data-turn="${TURNS}"]`);
    await scrolledIntoView(page, 'timeline-scroll', `table.timeline tr[data-seq="${length - 1}"]`);
    const firstScreen = Date.now() - t0;
    figures['first screen'] = ms(firstScreen);
    const domNodes = await page.evaluate(() => document.querySelectorAll('*').length);
    figures['DOM elements'] = String(domNodes);
    await screenshot(page, 'dashboard-20k.png');

    // Scrolling: the timeline through pages not yet loaded, the conversation upwards (earlier pages fold in).
    const timelineFrames = await scrollFrames(page, 'timeline-scroll', -400, 120);
    const chatFrames = await scrollFrames(page, 'conversation-scroll', -300, 120);
    figures['scroll p95 (events)'] = ms(p95(timelineFrames));
    figures['scroll p95 (conversation)'] = ms(p95(chatFrames));

    // Reaching the top of the conversation's window folds in the page before it; the item read stays in place.
    // (The stretch above the window stands for the log before it: scrollTop 0 is the log's start.)
    const edge = page.getByTestId('window-edge');
    const edgeBefore = await edge.textContent();
    const readSeq = await page.evaluate(
      () =>
        new Promise<string | null>((resolve) => {
          const box = document.querySelector('[data-testid="conversation-scroll"]')!;
          const windowTop = document.querySelector('[data-testid="window-edge"]')!.getBoundingClientRect().top - box.getBoundingClientRect().top;
          box.scrollTop += windowTop;
          // The topmost item in view once the list has rendered for that offset.
          requestAnimationFrame(() => {
            const top = box.getBoundingClientRect().top;
            const items = [...box.querySelectorAll('.conversation > li[data-seq]')];
            resolve(items.find((li) => li.getBoundingClientRect().top >= top)?.getAttribute('data-seq') ?? null);
          });
        }),
    );
    expect(readSeq).not.toBeNull();
    await expect.poll(() => edge.textContent(), TIMEOUT).not.toBe(edgeBefore);
    await scrolledIntoView(page, 'conversation-scroll', `.conversation > li[data-seq="${readSeq}"]`);

    // Jump to start and to a seq: both panes follow.
    await page.getByRole('button', { name: 'Jump to start' }).click();
    await page.locator('li.msg.user', { hasText: 'question 1' }).first().waitFor(TIMEOUT);
    await page.locator('table.timeline tr[data-seq="0"]').waitFor(TIMEOUT);
    t0 = Date.now();
    await page.getByLabel('Seq to jump to').fill('12345');
    await page.getByRole('button', { name: 'Jump to seq' }).click();
    await page.locator('table.timeline tr.target[data-seq="12345"]').waitFor(TIMEOUT);
    await page.locator('.conversation > li[data-target]').first().waitFor(TIMEOUT);
    figures['jump to seq 12345'] = ms(Date.now() - t0);
    expect(pastPages.length).toBeGreaterThan(0);
    expect(pastPages.filter((p) => p.status !== 200 || !/\bimmutable\b/.test(p.cache))).toEqual([]);
    await screenshot(page, 'dashboard-20k-jump.png');
    await page.getByRole('button', { name: 'Jump to latest' }).click();
    await scrolledIntoView(page, 'timeline-scroll', `table.timeline tr[data-seq="${length - 1}"]`);

    // Keystrokes in the composer: the page's own work (keydown → the input handler and Preact's
    // microtask render done), and the event's timestamp (CDP delivery included) → the next frame.
    const composer = page.getByLabel('Message');
    await composer.click();
    await page.evaluate(() => {
      const w = window as unknown as { keys: { rendered: number[]; frame: number[] } };
      w.keys = { rendered: [], frame: [] };
      const area = document.querySelector('textarea')!;
      let start = 0;
      area.addEventListener('keydown', (e) => {
        start = performance.now();
        requestAnimationFrame(() => w.keys.frame.push(performance.now() - e.timeStamp));
      });
      // After Preact's input handler (registered first): its render is the microtask queued before these.
      area.addEventListener('input', () => queueMicrotask(() => queueMicrotask(() => w.keys.rendered.push(performance.now() - start))));
    });
    const text = 'a long message typed into a twenty thousand event session';
    await page.keyboard.type(text, { delay: 25 });
    const keys = await page.evaluate(() => (window as unknown as { keys: { rendered: number[]; frame: number[] } }).keys);
    figures['keystroke → rendered p95 (page work)'] = ms(p95(keys.rendered));
    figures['key event → next frame p95'] = ms(p95(keys.frame));

    // Send → the new rows visible: the answer in the conversation, its turn/end in the timeline.
    t0 = Date.now();
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('li.msg.user', { hasText: text }).waitFor(TIMEOUT);
    await scrolledIntoView(page, 'conversation-scroll', '.conversation > li.msg.user');
    const userVisible = Date.now() - t0;
    await page.locator('li.msg.assistant:not(.streaming)', { hasText: `Echo: ${text}` }).waitFor(TIMEOUT);
    await scrolledIntoView(page, 'conversation-scroll', '.conversation > li.msg.assistant:not(.streaming)');
    const answerVisible = Date.now() - t0;
    const after = await eventCountOf(app, sessionId);
    await scrolledIntoView(page, 'timeline-scroll', `table.timeline tr[data-seq="${after - 1}"]`);
    figures['send → input visible'] = ms(userVisible);
    figures['send → answer visible'] = ms(answerVisible);
    figures['send → last row visible'] = ms(Date.now() - t0);
    await screenshot(page, 'dashboard-20k-sent.png');

    // A second message: the agent kept its fold from the first turn, so only the new events are read.
    const second = 'and a second message';
    await page.locator('textarea').fill(second);
    t0 = Date.now();
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('li.msg.assistant:not(.streaming)', { hasText: `Echo: ${second}` }).waitFor(TIMEOUT);
    await scrolledIntoView(page, 'conversation-scroll', '.conversation > li.msg.assistant:not(.streaming)');
    const secondAnswerVisible = Date.now() - t0;
    figures['second send → answer visible'] = ms(secondAnswerVisible);

    console.log(
      `dashboard, ${length}-event session:\n${Object.entries(figures)
        .map(([k, v]) => `  ${k}: ${v}`)
        .join('\n')}`,
    );

    // No timing asserted (see the header): the page holds a window of the log, not all of it.
    expect(domNodes).toBeLessThan(10_000);
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it("shows a failed turn's reason in the conversation and titles each nested fork marker by its own ancestor", async () => {
    const root = (await app.ok(`mutation { createSession(input: {title: "Root of three"}) { id } }`)).createSession.id as string;
    await app.services.store.append(root, completedTurn(1));
    const rootLength = await eventCountOf(app, root);
    const child = (await app.services.store.fork({ tenant: 'local' }, root, rootLength - 1, { title: 'Middle child' })).session.id;
    const childLength = await eventCountOf(app, child);
    const grandchild = (await app.services.store.fork({ tenant: 'local' }, child, childLength - 1, { title: 'Grandchild' })).session.id;
    await app.ok(`mutation($input: SendMessageInput!) { sendMessage(input: $input) { inputId } }`, {
      input: { sessionId: grandchild, text: '!fail the model is out of coffee' },
    });

    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    await page.goto(`${origin}/sessions/${grandchild}`);
    await page.getByTestId('agent-error').getByText('the model is out of coffee').waitFor(TIMEOUT);
    const markers = page.getByTestId('fork-marker');
    await expect
      .poll(() => markers.allTextContents(), TIMEOUT)
      .toEqual([expect.stringContaining('Forked from Root of three'), expect.stringContaining('Forked from Middle child')]);
    await screenshot(page, 'dashboard-failed-turn-nested-forks.png');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('restores the running indicator of a tool call when the page opens mid-call, and the header says running', async () => {
    const id = (await app.ok(`mutation { createSession(input: {title: "Sleeping tool"}) { id } }`)).createSession.id as string;
    await app.ok(`mutation($input: SendMessageInput!) { sendMessage(input: $input) { inputId } }`, {
      input: { sessionId: id, text: '!call sleep {"ms": 20000}\nwake me later' },
    });
    // The call is made (its model/message stored): the sleep runs for 20 s.
    const callMade = async () =>
      (await app.ok(`query($id: ID!) { session(id: $id) { lastAnswer { toolCallCount } } }`, { id })).session.lastAnswer?.toolCallCount;
    await expect.poll(callMade, { timeout: 15_000 }).toBe(1);

    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    await page.goto(`${origin}/sessions/${id}`);
    await page.locator('[data-testid="tool-waiting"][data-waiting="running"]').waitFor(TIMEOUT);
    expect(await page.locator('.session-head .badge.status-running').textContent()).toBe('running');
    await screenshot(page, 'dashboard-running-tool.png');
    await page.getByRole('button', { name: 'Cancel turn' }).click();
    await page.locator('.turn-end[data-turn="1"]').getByText('cancelled').waitFor(TIMEOUT);
    await expect.poll(() => page.locator('.session-head .badge').first().textContent(), TIMEOUT).toBe('idle');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
