// The work area is protected: with every detail of a session open (tools,
// instructions, chart, workspace, its six children) the conversation and the
// composer keep most of the window — at 1280x720 at least 60% of its height,
// and at 1440x900 the composer stays on screen. Children are a compact menu.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
const CHILDREN = 6;
let dashboard: Dashboard;
let app: TestApp;
let parent: string;

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  parent = (await app.ok('mutation { createSession(input: { title: "Work area" }) { id } }')).createSession.id;
  await app.ok('mutation($i: SetSessionInstructionsInput!) { setSessionInstructions(input: $i) { id } }', {
    i: { sessionId: parent, instructions: Array.from({ length: 30 }, (_, i) => `Rule ${i}: be brief and exact.`).join('\n') },
  });
  for (const text of ['first\n!call note_write {"key":"plan","value":"draft"}', 'second\n!call clock', 'third']) {
    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: parent, text } });
    await app.services.host.idle();
  }
  for (let i = 0; i < CHILDREN; i++)
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
      i: { sessionId: parent, atSeq: 3 + i, title: `Work area · a long variant title that would take a line of its own ${i}` },
    });
}, 90_000);
afterAll(() => dashboard?.close());

/** Opens tools, instructions, chart, workspace and the children menu. */
async function openEveryDetail(page: Page) {
  await page.goto(`${dashboard.origin}/sessions/${parent}`);
  await page.locator('li.turn-end').first().waitFor(TIMEOUT);
  for (const testId of ['session-tools', 'session-instructions', 'turn-chart-details', 'workspace-viewer']) {
    const details = page.getByTestId(testId);
    if (!(await details.evaluate((d) => (d as HTMLDetailsElement).open))) await details.locator('summary').first().click();
  }
  await page.getByTestId('turn-chart').waitFor(TIMEOUT);
  await page.locator('.workspace-table').waitFor(TIMEOUT);
  await page.locator('.instructions-text').waitFor(TIMEOUT);
  await page.locator('.tools-table').first().waitFor(TIMEOUT);
  const menu = page.getByRole('button', { name: `Children (${CHILDREN})` });
  await menu.click();
  await expect.poll(() => page.getByRole('menu', { name: 'Children' }).getByRole('menuitem').count(), TIMEOUT).toBe(CHILDREN);
}

describe('dashboard: the conversation keeps the window', () => {
  it('keeps at least 60% of a 1280x720 window with every detail open; children are a menu', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport: { width: 1280, height: 720 } });
    await openEveryDetail(page);
    await screenshot(page, 'dashboard-work-area-1280.png');
    const chat = await page.locator('section.pane.chat').boundingBox();
    expect(chat!.height).toBeGreaterThanOrEqual(0.6 * 720);
    expect(chat!.y + chat!.height).toBeLessThanOrEqual(720 + 1);
    // The conversation itself (not only the composer) has most of that.
    const conv = await page.locator('section.pane.chat [data-testid="conversation-scroll"]').boundingBox();
    expect(conv!.height).toBeGreaterThanOrEqual(0.33 * 720);
    // The children are menu items (one per child, the full title on hover), not a line each in the header.
    const items = page.getByRole('menu', { name: 'Children' }).getByRole('menuitem');
    expect(await items.first().getAttribute('title')).toMatch(/^Work area · a long variant title .* \d @\d+$/);
    // Escape closes the menu and gives the focus back to its button.
    await page.keyboard.press('Escape');
    expect(await page.getByRole('menu', { name: 'Children' }).count()).toBe(0);
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe(`Children (${CHILDREN})`);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('keeps the composer on screen at 1440x900 with every detail open', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport: { width: 1440, height: 900 } });
    await openEveryDetail(page);
    await page.keyboard.press('Escape');
    const composer = await page.getByRole('textbox', { name: 'Message' }).boundingBox();
    expect(composer).not.toBeNull();
    expect(composer!.y + composer!.height).toBeLessThanOrEqual(900);
    expect(composer!.y).toBeGreaterThan(0.4 * 900);
    await screenshot(page, 'dashboard-work-area-1440.png');
    expect(errors).toEqual([]);
    await page.close();
  });
});
