// Compare two sessions of one tree: two siblings forked from a
// 5,000-event parent at different turns, then continued apart. The view opens
// at their first divergent seq, highlighted, each row one seq on both sides,
// and the page fetches windows of the logs (never either log whole).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { completedTurn, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TURNS = 455; // 11 events each: with the title, 5,006 events
const TIMEOUT = { timeout: 15_000 };
const scope = { tenant: 'local' };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let parent: string;
let left: string;
let right: string;
const CUT_LEFT = 11 * 400; // the turn/end of turn 400
const CUT_RIGHT = 11 * 403;

const turns = (from: number, count: number, who: string) => Array.from({ length: count }, (_, i) => completedTurn(from + i, { who })).flat();

const FORK = `mutation($id: ID!, $at: Int!, $title: String) { forkSession(input: {sessionId: $id, atSeq: $at, title: $title}) { session { id } } }`;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  parent = (await app.services.store.createSession(scope, { title: 'Five thousand events' })).id;
  await app.services.store.append(parent, turns(1, TURNS, 'parent'));
  left = (await app.ok(FORK, { id: parent, at: CUT_LEFT, title: 'Left sibling' })).forkSession.session.id;
  right = (await app.ok(FORK, { id: parent, at: CUT_RIGHT, title: 'Right sibling' })).forkSession.session.id;
  await app.services.host.idle();
  await app.services.store.append(left, turns(401, 40, 'left'));
  await app.services.store.append(right, turns(404, 10, 'right'));
}, 120_000);

afterAll(() => dashboard?.close());

describe('dashboard: compare two siblings of a 5,000-event session', () => {
  it('opens at the first divergence, highlighted, seqs aligned, fetching only windows', async () => {
    const lengths = await app.ok(
      `query($a: ID!, $b: ID!, $p: ID!) { a: session(id: $a) { eventCount } b: session(id: $b) { eventCount } p: session(id: $p) { eventCount } }`,
      {
        a: left,
        b: right,
        p: parent,
      },
    );
    expect(lengths.p.eventCount).toBeGreaterThan(5_000);
    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    // Every events page the dashboard asks for, and how many events came back.
    const eventPages: Array<{ id: string; afterSeq: number; first: number }> = [];
    let eventsFetched = 0;
    page.on('request', (req) => {
      const body = req.postDataJSON?.() as { query?: string; variables?: { id: string; afterSeq: number; first: number } } | null;
      if (body?.query?.includes('query SessionEvents') && body.variables) eventPages.push(body.variables);
    });
    page.on('response', async (res) => {
      if (!res.url().endsWith('/graphql') || !res.request().postData()?.includes('query SessionEvents')) return;
      const body = await res.json().catch(() => null);
      eventsFetched += body?.data?.session?.events?.edges?.length ?? 0;
    });

    // From the left sibling's page: "Compare with…" lists its parent and sibling.
    await page.goto(`${origin}/sessions/${left}`);
    await page.locator('h1', { hasText: 'Left sibling' }).waitFor(TIMEOUT);
    await page.getByText('Compare with…').click();
    await page.getByRole('link', { name: /^Parent: Five thousand events/ }).waitFor(TIMEOUT);
    await page.getByRole('link', { name: /^Sibling: Right sibling/ }).click();
    await page.waitForURL(`${origin}/compare/${left}/${right}`, TIMEOUT);
    // It opens by turns; by seq (the rows this test reads) is the other view, opened fresh to count its reads.
    await page.getByTestId('turn-row').first().waitFor(TIMEOUT);
    eventPages.length = 0;
    eventsFetched = 0;
    await page.goto(`${origin}/compare/${left}/${right}?by=seq`);

    // The common prefix is the lower cut; the next seq is highlighted and in view.
    const first = CUT_LEFT + 1;
    await expect.poll(() => page.locator('main.compare-page').getAttribute('data-common-prefix'), TIMEOUT).toBe(String(CUT_LEFT));
    expect(await page.getByTestId('diff-summary').textContent()).toContain(`first divergence at #${first}`);
    const row = page.locator(`.diff-row.first-divergent[data-seq="${first}"]`);
    await row.locator('[data-testid="diff-right"] .type').waitFor(TIMEOUT);
    expect(await row.getAttribute('aria-current')).toBe('location');
    expect(await page.locator('.diff-row.first-divergent').count()).toBe(1);
    const box = (await page.getByTestId('diff-scroll').boundingBox())!;
    const at = (await row.boundingBox())!;
    expect(at.y).toBeGreaterThanOrEqual(box.y);
    expect(at.y + at.height).toBeLessThanOrEqual(box.y + box.height);
    // Left: its fork marker; right: the parent's next turn, which the right sibling still shares with the parent.
    await expect.poll(() => row.locator('[data-testid="diff-left"]').textContent(), TIMEOUT).toContain('session/end-seed');
    expect(await row.locator('[data-testid="diff-right"]').textContent()).toContain('inbox/add');
    expect(await row.locator('[data-testid="diff-right"]').textContent()).toContain('parent question 401');
    // The seq before it is shared (one event), the same on both sides.
    const shared = page.locator(`.diff-row[data-seq="${CUT_LEFT}"]`);
    expect(await shared.getAttribute('class')).toContain('shared');
    expect(await shared.locator('[data-testid="diff-left"] .summary').textContent()).toBe(
      await shared.locator('[data-testid="diff-right"] .summary').textContent(),
    );

    // Every rendered row shows its own seq on both sides.
    await expect.poll(() => page.locator('.diff-row [data-testid="diff-right"] .muted', { hasText: '…' }).count(), TIMEOUT).toBe(0);
    const seqs = await page
      .locator('.diff-row')
      .evaluateAll((rows) =>
        rows.map((r) => [Number(r.getAttribute('data-seq')), ...[...r.querySelectorAll('.diff-cell .seq')].map((s) => Number(s.textContent))]),
      );
    expect(seqs.length).toBeGreaterThan(10);
    for (const [seq, l, r] of seqs) expect([l, r]).toEqual([seq, seq]);
    await screenshot(page, 'dashboard-diff.png');

    // Only windows were fetched: a page or two per side, not 5,000 events.
    const opened = { requests: eventPages.length, events: eventsFetched };
    expect(opened.requests).toBeGreaterThan(0);
    expect(opened.requests).toBeLessThanOrEqual(6);
    expect(opened.events).toBeLessThan(1_200);
    expect(eventPages.every((p) => p.afterSeq >= CUT_LEFT - 400)).toBe(true); // around the divergence, not from seq 0

    // Scrolling to the end pages in the end of both logs on demand; the right log past its end shows as such.
    await page.getByTestId('diff-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight));
    const last = Math.max(lengths.a.eventCount, lengths.b.eventCount) - 1;
    const end = page.locator(`.diff-row[data-seq="${last}"]`);
    await expect.poll(() => end.locator('[data-testid="diff-left"]').textContent(), TIMEOUT).toContain('turn/end');
    expect(await end.locator('[data-testid="diff-right"]').textContent()).toContain('past the end');
    console.log(
      `diff of two siblings (${lengths.a.eventCount} and ${lengths.b.eventCount} events): opened with ${opened.requests} event pages, ${opened.events} events; ` +
        `after scrolling to the end ${eventPages.length} pages, ${eventsFetched} events`,
    );
    expect(eventsFetched).toBeLessThan(2_500);

    // The old address redirects to the diff of the parent and the session.
    await page.goto(`${origin}/sessions/${right}/compare`);
    await page.waitForURL(`${origin}/compare/${parent}/${right}`, TIMEOUT);
    await page.getByRole('button', { name: 'By seq' }).click();
    await page.locator(`.diff-row.first-divergent[data-seq="${CUT_RIGHT + 1}"]`).waitFor(TIMEOUT);

    expect(errors).toEqual([]);
    await page.close();
  });

  it('follows appends to either side while it is open', async () => {
    const { page, errors } = await openPage(browser, { timeoutMs: 15_000 });
    await page.goto(`${origin}/compare/${left}/${right}?by=seq`);
    await page.locator('.diff-row.first-divergent').waitFor(TIMEOUT);
    const length = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;
    const before = await length(left);
    await expect.poll(() => page.getByTestId('diff-head-left').textContent(), TIMEOUT).toContain(`${before.toLocaleString('en-US')} events`);

    await app.services.store.append(left, turns(441, 1, 'left'));
    const after = await length(left);
    expect(after).toBeGreaterThan(before);
    await expect.poll(() => page.getByTestId('diff-head-left').textContent(), TIMEOUT).toContain(`${after.toLocaleString('en-US')} events`);
    await page.getByTestId('diff-scroll').evaluate((el) => (el.scrollTop = el.scrollHeight));
    const end = page.locator(`.diff-row[data-seq="${after - 1}"]`);
    await expect
      .poll(
        () =>
          end
            .locator('[data-testid="diff-left"]')
            .textContent({ timeout: 500 })
            .catch(() => ''),
        TIMEOUT,
      )
      .toContain('turn/end');
    expect(await end.locator('[data-testid="diff-right"]').textContent()).toContain('past the end');
    expect(await page.locator('main.compare-page').getAttribute('data-common-prefix')).toBe(String(CUT_LEFT));

    expect(errors).toEqual([]);
    await page.close();
  });
});
