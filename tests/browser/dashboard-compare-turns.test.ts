// Compare by turns in Chromium at a desktop and a phone
// size: two siblings whose seqs drift apart (one wrote an extra event before
// its turn) still line up turn by turn; the turn that differs is marked, the
// view opens there, previous/next difference move between differences, and a
// turn appended live on one side shows up as a new difference; a long tail is
// compared a window of pages at a time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { completedTurn, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
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
    await further.waitFor(TIMEOUT);
    const shown = await rows.count();
    // Turn 2 (the shared one the divergence follows) through the last whole turn of 20 pages.
    expect(shown).toBeGreaterThan(300);
    expect(shown).toBeLessThan(401);
    expect(await rows.first().getAttribute('data-turn')).toBe('2');
    expect(fetched.length).toBeLessThanOrEqual(21);
    expect(await page.getByTestId('turn-diff-count').textContent()).toMatch(new RegExp(`^${shown - 1} of the first ${shown} turns compared differ`));

    await further.click();
    await expect.poll(() => rows.count(), TIMEOUT).toBe(401); // turns 2–402
    expect(await further.count()).toBe(0);
    expect(await rows.last().locator('[data-testid="turn-left"]').textContent()).toContain('left answer 402');
    expect(await rows.last().locator('[data-testid="turn-right"]').textContent()).toBe('no turn 402 in this session');
    expect(errors).toEqual([]);
    await page.close();
  });
});
