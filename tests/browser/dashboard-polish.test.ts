// Small things that make a day's work smoother: focus back where it was when a
// dialog or menu closes (Escape), menus that close on Escape and outside
// clicks, 24 px targets on a phone, counts formatted one way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { completedTurn, openPage, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let id: string;
let tall: string;

/** A turn whose answer is `lines` lines long: items far taller than the pane's estimate. */
function tallTurn(n: number, lines: number): NewEvent[] {
  const text = Array.from({ length: lines }, (_, i) => `answer ${n}, line ${i + 1}`).join('\n');
  return [
    { type: 'inbox/add', data: { inputId: `in_${n}`, text: `question ${n}` } },
    { type: 'inbox/remove', data: { inputId: `in_${n}`, reason: 'taken' } },
    { type: 'turn/start', data: { turn: n, inputId: `in_${n}` } },
    { type: 'step/start', data: { turn: n, step: 1 } },
    { type: 'model/message', data: { turn: n, step: 1, text, toolCalls: [] } },
    { type: 'step/end', data: { turn: n, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: n, reason: 'completed' } },
  ] as NewEvent[];
}

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  id = (await app.ok('mutation { createSession(input: { title: "Polish" }) { id } }')).createSession.id;
  // Over 1,000 events: the header's count needs a thousands separator.
  await app.services.store.append(id, Array.from({ length: 100 }, (_, i) => completedTurn(i + 1)).flat());
  await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: id, atSeq: 3, title: 'Polish child' } });
  tall = (await app.ok('mutation { createSession(input: { title: "Tall answers" }) { id } }')).createSession.id;
  await app.services.store.append(tall, Array.from({ length: 80 }, (_, i) => tallTurn(i + 1, 3 + ((i * 7) % 23))).flat());
}, 60_000);
afterAll(() => dashboard?.close());

const focusedName = (page: import('playwright-core').Page) =>
  page.evaluate(() => document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent?.trim() ?? null);

/** Presses Escape and answers what has the focus in the first task after the dialog left the page (where a quick Tab would start from). */
async function escapeDialog(page: import('playwright-core').Page): Promise<string | null> {
  await page.evaluate(() => {
    (window as unknown as { focusAfterClose: Promise<string | null> }).focusAfterClose = new Promise((resolve) => {
      const seen = new MutationObserver(() => {
        if (document.querySelector('dialog')) return;
        seen.disconnect();
        const next = new MessageChannel();
        next.port1.onmessage = () => resolve(document.activeElement?.getAttribute('aria-label') ?? document.activeElement?.textContent?.trim() ?? null);
        next.port2.postMessage(null);
      });
      seen.observe(document.body, { childList: true, subtree: true });
    });
  });
  await page.keyboard.press('Escape');
  return page.evaluate(() => (window as unknown as { focusAfterClose: Promise<string | null> }).focusAfterClose);
}

/**
 * Clicks `opener` and, in the next task (before a frame is painted: as soon as a second key or click can come),
 * presses Escape or presses outside the popup; answers whether `openSelector` still matches two frames later.
 */
const dismissAtOnce = (page: import('playwright-core').Page, opener: string, openSelector: string, how: 'Escape' | 'outside') =>
  page.evaluate(
    async ([opener, openSelector, how]) => {
      const nextTask = () =>
        new Promise<void>((resolve) => {
          const c = new MessageChannel();
          c.port1.onmessage = () => resolve();
          c.port2.postMessage(null);
        });
      const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
      document.querySelector<HTMLElement>(opener)!.click();
      await nextTask();
      if (!document.querySelector(openSelector)) return 'did not open';
      if (how === 'Escape') (document.activeElement ?? document.body).dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
      else document.querySelector('.session-head h1')!.dispatchEvent(new PointerEvent('pointerdown', { bubbles: true }));
      await frame();
      await frame();
      return document.querySelector(openSelector) ? 'still open' : 'closed';
    },
    [opener, openSelector, how] as const,
  );

describe('dashboard polish', () => {
  it('gives the focus back on Escape: the Fork dialog and the Compare menu; the menu closes on an outside click', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    const last = 1100;
    const fork = page.getByRole('button', { name: `Fork here at event ${last}`, exact: true });
    await fork.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: `Fork at event ${last}` }).waitFor(TIMEOUT);
    // Back on its opener as the dialog goes, not a frame later (a Tab pressed at once went on from <body>).
    expect(await escapeDialog(page)).toBe(`Fork here at event ${last}`);

    const summary = page.locator('.compare-menu > summary');
    const menuOpen = () => page.locator('.compare-menu').evaluate((d) => (d as HTMLDetailsElement).open);
    await summary.click();
    await expect.poll(menuOpen, TIMEOUT).toBe(true);
    await page.keyboard.press('Escape');
    await expect.poll(menuOpen, TIMEOUT).toBe(false);
    expect(await focusedName(page)).toBe('Compare with…');
    await summary.click();
    await expect.poll(menuOpen, TIMEOUT).toBe(true);
    await page.locator('.session-head h1').click();
    await expect.poll(menuOpen, TIMEOUT).toBe(false);

    // An Escape or an outside press right after opening (before the next frame) closes the menus too: they listened
    // only once the open state had rendered, and a quick second key or click left them open (the test timed out here).
    for (const how of ['Escape', 'outside'] as const) {
      expect(await dismissAtOnce(page, '.compare-menu > summary', '.compare-menu[open]', how), `Compare, ${how}`).toBe('closed');
      expect(await dismissAtOnce(page, '.children-menu > button', '.children-menu [role="menu"]', how), `Children, ${how}`).toBe('closed');
    }

    // One way of writing numbers: the header's count has its separator.
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id });
    expect(session.eventCount).toBeGreaterThan(1000);
    expect(await page.locator('.session-head .meta.counts').textContent()).toContain(`${session.eventCount.toLocaleString('en-US')} events`);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('opens at the latest turn on each of 20 fresh loads (after the heights are measured)', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport: { width: 1280, height: 720 } });
    const scroll = page.getByTestId('conversation-scroll');
    const gap = () => scroll.evaluate((el) => el.scrollHeight - el.clientHeight - el.scrollTop);
    for (let load = 0; load < 20; load++) {
      await page.goto(`${dashboard.origin}/sessions/${tall}?load=${load}`);
      await page.locator('li.turn-end[data-turn="80"]').waitFor(TIMEOUT);
      await expect.poll(gap, { ...TIMEOUT, message: `load ${load}` }).toBeLessThanOrEqual(2);
      expect(await page.locator('li.turn-end[data-turn="80"]').isVisible()).toBe(true);
    }
    expect(errors).toEqual([]);
    await page.close();
  });

  it('makes every control at least 24 px each way on a phone', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport: { width: 390, height: 844 } });
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    await page.locator('table.timeline tr[data-seq]').first().waitFor(TIMEOUT);
    await showDetails(page);
    const small = await page.evaluate(() =>
      [...document.querySelectorAll<HTMLElement>('main button, main .button, main select, main input, main summary')]
        .filter((el) => el.offsetParent !== null && el.getClientRects().length > 0)
        .map((el) => ({ el, r: el.getBoundingClientRect() }))
        .filter(({ r }) => r.width > 0 && (r.height < 23.5 || r.width < 23.5))
        .map(
          ({ el, r }) =>
            `${el.tagName} "${(el.getAttribute('aria-label') ?? el.textContent ?? '').trim().slice(0, 30)}" ${Math.round(r.width)}x${Math.round(r.height)}`,
        ),
    );
    expect(small).toEqual([]);
    expect(errors).toEqual([]);
    await page.close();
  });
});
