// Compare by turns in Chromium at a desktop and a phone
// size: two siblings whose seqs drift apart (one wrote an extra event before
// its turn) still line up turn by turn; the turn that differs is marked, the
// view opens there, previous/next difference move between differences, and a
// turn appended live on one side shows up as a new difference; a long tail is
// compared a window of pages at a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { completedTurn, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
/** A screenful of turn rows and the overscan about it; the whole tail (hundreds of rows) must never be in the DOM. */
const MAX_ROWS_IN_DOM = 60;
const MAX_NODES_IN_DOM = 1_500;

/** Scrolls the turn list from top to bottom a screen at a time: the turns seen, and the most rows and nodes in the DOM at once. */
const sweep = (page: Page) =>
  page.getByTestId('turn-diff').evaluate(async (box) => {
    const frame = () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
    const seen = new Set<number>();
    let maxRows = 0;
    let maxNodes = 0;
    box.scrollTop = 0;
    for (let still = 0, step = 0; still < 3 && step < 2_000; step++) {
      await frame();
      const shown = box.querySelectorAll('[data-testid="turn-row"]');
      for (const row of shown) seen.add(Number(row.getAttribute('data-turn')));
      maxRows = Math.max(maxRows, shown.length);
      maxNodes = Math.max(maxNodes, box.querySelectorAll('*').length);
      const before = box.scrollTop;
      box.scrollTop += box.clientHeight * 0.8;
      still = box.scrollTop === before ? still + 1 : 0;
    }
    return { turns: [...seen].sort((a, b) => a - b), maxRows, maxNodes };
  });
let dashboard: Dashboard;
let app: TestApp;
let origin: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
});
afterAll(() => dashboard?.close());

const idle = () => app.services.host.idle();
const send = async (sessionId: string, text: string) => {
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await idle();
};
const fork = async (sessionId: string, atSeq: number, title: string, message?: string) =>
  (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId, atSeq, title, message } })).forkSession
    .session.id as string;

describe.each([
  { name: 'desktop', viewport: { width: 1440, height: 900 } },
  { name: 'phone', viewport: { width: 390, height: 844 } },
])('compare by turns ($name)', ({ name, viewport }) => {
  it('aligns turns, not seqs; marks and walks the differences; follows live appends', async () => {
    const root = (await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title: `turns ${name}` } })).createSession
      .id as string;
    await send(root, 'one');
    const cut = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: root })).session.eventCount - 1;
    const left = await fork(root, cut, 'left', 'same question');
    await idle();
    const right = await fork(root, cut, 'right');
    // One more event on the right before its turn: every later seq is one off.
    await app.ok('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "right, renamed") { id } }', { id: right });
    await send(right, 'same question');
    await send(left, 'left only');
    await send(right, 'right only');

    const { page, errors } = await openPage(dashboard.browser, { viewport });
    // A comparison opens by turns (nothing in the address says so: it is the default).
    await page.goto(`${origin}/compare/${left}/${right}`);
    expect(await page.getByRole('button', { name: 'By turns' }).getAttribute('aria-pressed')).toBe('true');
    expect(new URL(page.url()).searchParams.get('by')).toBeNull();
    const rows = page.getByTestId('turn-row');
    await expect.poll(() => rows.count(), TIMEOUT).toBe(3);
    const row = (turn: number) => page.locator(`[data-testid="turn-row"][data-turn="${turn}"]`);
    expect(await rows.evaluateAll((els) => els.map((el) => [el.getAttribute('data-turn'), el.classList.contains('differs') ? 'differs' : 'same']))).toEqual([
      ['1', 'same'],
      ['2', 'same'],
      ['3', 'differs'],
    ]);
    // Turn 2 is the same conversation at different seqs.
    const seqOf = async (turn: number, side: string) => row(turn).locator(`[data-testid="turn-${side}"] .seq`).textContent();
    expect(await seqOf(2, 'left')).not.toBe(await seqOf(2, 'right'));
    expect(await row(2).locator('[data-testid="turn-left"]').textContent()).toContain('Echo: same question');
    expect(await row(3).locator('[data-testid="turn-left"]').textContent()).toContain('left only');
    expect(await row(3).locator('[data-testid="turn-right"]').textContent()).toContain('right only');

    // Opens at the first difference.
    await expect.poll(() => row(3).getAttribute('aria-current'), TIMEOUT).toBe('location');
    expect(await page.getByTestId('turn-diff-count').textContent()).toBe('1 of 3 turns differ · difference 1 of 1');
    const next = page.getByRole('button', { name: 'Next difference' });
    const previous = page.getByRole('button', { name: 'Previous difference' });
    expect(await next.isDisabled()).toBe(true);
    expect(await previous.isDisabled()).toBe(true);

    // Live: a turn only the left has is a new difference.
    await send(left, 'one more');
    await expect.poll(() => rows.count(), TIMEOUT).toBe(4);
    expect(await row(4).getAttribute('class')).toContain('differs');
    expect(await row(4).locator('[data-testid="turn-right"]').textContent()).toBe('no turn 4 in this session');
    await expect.poll(() => page.getByTestId('turn-diff-count').textContent(), TIMEOUT).toBe('2 of 4 turns differ · difference 1 of 2');
    await next.click();
    expect(await row(4).getAttribute('aria-current')).toBe('location');
    expect(await page.getByTestId('turn-diff-count').textContent()).toBe('2 of 4 turns differ · difference 2 of 2');
    await previous.click();
    expect(await row(3).getAttribute('aria-current')).toBe('location');

    // Nothing wider than the screen; on a phone a turn's sides are stacked.
    const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
    expect(scroll).toBeLessThanOrEqual(width);
    const l = (await row(3).locator('[data-testid="turn-left"]').boundingBox())!;
    const r = (await row(3).locator('[data-testid="turn-right"]').boundingBox())!;
    if (viewport.width >= 1000) expect(r.y).toBe(l.y);
    else expect(r.y).toBeGreaterThan(l.y);
    await page.screenshot({ path: `tests/artifacts/dashboard-compare-turns-${name}.png` });

    // "By seq" is one click away and kept in the address (a reload keeps it); "By turns" goes back.
    await page.getByRole('button', { name: 'By seq' }).click();
    await page.locator('.diff-row.first-divergent').waitFor(TIMEOUT);
    expect(new URL(page.url()).searchParams.get('by')).toBe('seq');
    await page.reload();
    await page.locator('.diff-row.first-divergent').waitFor(TIMEOUT);
    expect(await rows.count()).toBe(0);
    await page.getByRole('button', { name: 'By turns' }).click();
    await expect.poll(() => rows.count(), TIMEOUT).toBe(4);
    expect(new URL(page.url()).searchParams.get('by')).toBeNull();
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('compare by turns: a long tail', () => {
  it('folds a window of pages past the divergence, and more on "Compare further"', async () => {
    const scope = { tenant: 'local' };
    const turns = (from: number, count: number, who: string) => Array.from({ length: count }, (_, i) => completedTurn(from + i, { who })).flat();
    const root = (await app.services.store.createSession(scope, { title: 'long tail' })).id;
    await app.services.store.append(root, turns(1, 2, 'root'));
    const cut = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: root })).session.eventCount - 1;
    const left = await fork(root, cut, 'long left');
    const right = await fork(root, cut, 'short right');
    await idle();
    await app.services.store.append(left, turns(3, 400, 'left')); // 4,400 events: 22 pages
    await app.services.store.append(right, turns(3, 2, 'right'));

    const { page, errors } = await openPage(dashboard.browser);
    const fetched: number[] = [];
    page.on('request', (req) => {
      const body = req.postDataJSON?.() as { query?: string; variables?: { id: string; afterSeq: number } } | null;
      if (body?.query?.includes('query SessionEvents') && body.variables?.id === left) fetched.push(body.variables.afterSeq);
    });
    await page.goto(`${origin}/compare/${left}/${right}`);
    const rows = page.getByTestId('turn-row');
    const further = page.getByRole('button', { name: 'Compare further' });
    const count = page.getByTestId('turn-diff-count');
    await further.waitFor(TIMEOUT);
    // Turn 2 (the shared one the divergence follows) through the last whole turn of 20 pages.
    const shown = Number((await count.textContent())?.match(/of the first (\d+) turns compared/)?.[1]);
    expect(shown).toBeGreaterThan(300);
    expect(shown).toBeLessThan(401);
    expect(await count.textContent()).toMatch(new RegExp(`^${shown - 1} of the first ${shown} turns compared differ`));
    expect(await rows.first().getAttribute('data-turn')).toBe('2');
    expect(fetched.length).toBeLessThanOrEqual(21);
    // Only the rows in and near view are in the DOM, not every turn compared.
    const inDom = () =>
      page.evaluate(() => ({
        rows: document.querySelectorAll('[data-testid="turn-row"]').length,
        nodes: document.querySelectorAll('[data-testid="turn-diff"] *').length,
      }));
    const opened = await inDom();
    expect(opened.rows).toBeGreaterThan(3);
    expect(opened.rows).toBeLessThanOrEqual(MAX_ROWS_IN_DOM);
    expect(opened.nodes).toBeLessThanOrEqual(MAX_NODES_IN_DOM);

    await further.click();
    await expect.poll(() => count.textContent(), TIMEOUT).toMatch(/^400 of 401 turns differ/); // turns 2–402
    expect(await further.count()).toBe(0);
    // Scrolled from top to bottom, every turn shows, and the DOM stays bounded all the way.
    const swept = await sweep(page);
    expect(swept.turns).toEqual(Array.from({ length: 401 }, (_, i) => i + 2));
    expect(swept.maxRows).toBeLessThanOrEqual(MAX_ROWS_IN_DOM);
    expect(swept.maxNodes).toBeLessThanOrEqual(MAX_NODES_IN_DOM);
    expect(await rows.last().locator('[data-testid="turn-left"]').textContent()).toContain('left answer 402');
    expect(await rows.last().locator('[data-testid="turn-right"]').textContent()).toBe('no turn 402 in this session');
    // From the bottom, "Next difference" (after turn 3, where the view opened) goes to a row out of the window: it is brought in.
    await page.getByRole('button', { name: 'Next difference' }).click();
    await expect.poll(() => page.locator('[data-testid="turn-row"][aria-current="location"]').getAttribute('data-turn'), TIMEOUT).toBe('4');
    expect(await page.getByTestId('turn-diff-count').textContent()).toMatch(/difference 2 of 400$/);
    expect(errors).toEqual([]);
    await page.close();
  });
});
