// Keyboard and reading: a skip link past the sidebar, one
// tab stop per timeline row (arrows reach the row's other controls), the
// composer's character count and its refusal of a message over the limit
// before Send, long messages collapsed, and the contrast of every text (not
// only controls) measured in the light and the dark theme.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { MAX_MESSAGE_CHARS } from '../../src/core/text-limits.ts';
import { screenshot } from './chromium.ts';
import { contrasts } from './contrast.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };
let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let id: string;
const LONG = 199_000;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  id = (await app.ok('mutation { createSession(input: { title: "Keyboard" }) { id } }')).createSession.id;
  const send = async (text: string) => {
    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
    await app.services.host.idle();
  };
  await send('what time is it?\n!call clock');
  await send(`${'a long line of text '.repeat(LONG / 20 - 1)}the end.`.padEnd(LONG, '.'));
  await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq } }', { i: { sessionId: id, atSeq: 3, title: 'Keyboard child' } });
}, 60_000);

afterAll(() => dashboard?.close());

const focused = (page: import('playwright-core').Page) =>
  page.evaluate(() => {
    const el = document.activeElement as HTMLElement | null;
    return el ? (el.getAttribute('aria-label') ?? el.innerText.trim()) : null;
  });

describe('dashboard: keyboard and reading', () => {
  it('skips to the page; one tab stop per timeline row, arrows reach the fork button and the next row', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    await page.locator('table.timeline tr[data-seq="3"]').waitFor(TIMEOUT);
    await page.keyboard.press('Tab');
    expect(await focused(page)).toBe('Skip to the page');
    await page.keyboard.press('Enter');
    expect(await page.evaluate(() => document.activeElement?.tagName)).toBe('MAIN');

    // Each row shown has exactly one control in the tab order.
    const stops = await page.evaluate(() =>
      [...document.querySelectorAll('table.timeline tr[data-seq]')].map(
        (tr) => [...tr.querySelectorAll<HTMLElement>('button, a[href], input, select')].filter((el) => el.tabIndex >= 0).length,
      ),
    );
    expect(stops.length).toBeGreaterThan(10);
    expect(new Set(stops)).toEqual(new Set([1]));

    await page.locator('table.timeline tr[data-seq="3"] td.type button').focus();
    await page.keyboard.press('ArrowRight');
    // Event 3 has a child forked at it: its marker link comes first in the row.
    expect(await focused(page)).toBe('1 fork');
    await page.keyboard.press('ArrowRight');
    expect(await focused(page)).toBe('Fork here at event 3');
    await page.keyboard.press('ArrowDown');
    expect(await focused(page)).toBe('Fork here at event 4');
    await page.keyboard.press('ArrowLeft');
    expect(await page.evaluate(() => document.activeElement?.closest('tr')?.getAttribute('data-seq'))).toBe('4');
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'Fork at event 4' }).waitFor(TIMEOUT);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached', ...TIMEOUT });
    // Focus goes back to the button that opened it (after the dialog is gone: waited for, or it lands after the next focus).
    await expect.poll(() => focused(page), TIMEOUT).toBe('Fork here at event 4');
    // Tab from a row's control goes on to the next row, not to its fork button.
    await page.locator('table.timeline tr[data-seq="3"] td.type button').focus();
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.closest('tr')?.getAttribute('data-seq'))).toBe('4');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('counts characters and refuses a message over the limit before Send, in words', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.waitFor(TIMEOUT);
    const count = page.locator('#composer-count');
    const send = page.getByRole('button', { name: 'Send', exact: true });
    await composer.fill('short');
    expect(await count.textContent()).toBe('');
    await composer.fill('x'.repeat(1_500));
    expect(await count.textContent()).toBe(`1,500 / ${MAX_MESSAGE_CHARS.toLocaleString('en-US')} characters`);
    expect(await send.isDisabled()).toBe(false);
    const over = 250_000;
    await composer.fill('y'.repeat(over));
    expect(await count.textContent()).toBe(`250,000 / 200,000 characters`);
    expect(await page.getByRole('alert').filter({ hasText: 'This message has' }).textContent()).toBe(
      'This message has 250,000 characters; a message may have at most 200,000. Shorten it by 50,000 characters or send it in parts.',
    );
    expect(await send.isDisabled()).toBe(true);
    expect(await composer.getAttribute('aria-invalid')).toBe('true');
    await composer.fill('y'.repeat(MAX_MESSAGE_CHARS));
    expect(await send.isDisabled()).toBe(false);
    expect(await page.locator('.composer-refusal').count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('collapses a long message to its start; Show all opens it', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    const user = page.locator('.conversation li.msg.user').filter({ has: page.getByTestId('long-text') });
    await user.waitFor(TIMEOUT);
    const height = async () => (await user.boundingBox())!.height;
    expect(await height()).toBeLessThan(800);
    const show = user.getByRole('button', { name: `Show all ${LONG.toLocaleString('en-US')} characters` });
    expect(await show.getAttribute('aria-expanded')).toBe('false');
    await show.click();
    await expect.poll(height, TIMEOUT).toBeGreaterThan(5_000);
    await user.getByRole('button', { name: 'Show less' }).click();
    await expect.poll(height, TIMEOUT).toBeLessThan(800);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('every text has contrast >= 4.5:1 in the light and the dark theme (selected rows, meta text, totals)', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    await page.getByTestId('session-totals').waitFor(TIMEOUT);
    await page.locator('table.timeline tr[data-seq="3"]').waitFor(TIMEOUT);
    await page.locator('.tree-link.current').waitFor(TIMEOUT);
    for (const scheme of ['light', 'dark'] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      const measured = await contrasts(page, { text: true });
      expect(measured.length).toBeGreaterThan(100);
      // The selected session's meta text is among them.
      expect(measured.some((c) => c.what.startsWith('span') && c.what.includes('ev ·'))).toBe(true);
      expect(
        measured.filter((c) => c.ratio < 4.5),
        scheme,
      ).toEqual([]);
      console.log(`${scheme}: ${measured.length} texts, lowest contrast ${Math.min(...measured.map((c) => c.ratio)).toFixed(2)}:1`);
      await screenshot(page, `dashboard-contrast-${scheme}.png`);
    }
    expect(errors).toEqual([]);
    await page.close();
  });
});
