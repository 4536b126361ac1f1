// A compaction in the dashboard: Compact… asks first (what compaction does,
// optional instructions; Escape or a click outside closes it and gives the
// focus back), then writes one (compactSession) and says the tokens before and
// after; the conversation shows it as one collapsible row, "history
// summarised: seq a–b", holding the summary the model now reads.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let id: string;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  id = (await app.ok('mutation { createSession(input: { title: "to compact" }) { id } }')).createSession.id;
  for (const text of ['first question', 'second question']) {
    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
    await app.services.host.idle();
  }
});
afterAll(() => dashboard?.close());

/** The last compaction's end figures and its start's instructions, from the log. */
async function compactionEnd(): Promise<{ tokensBefore: number; tokensAfter: number; instructions?: string }> {
  const { session } = await app.ok('query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { type data } } } } }', { id });
  const events = session.events.edges.map((e: any) => e.node);
  const end = events.findLast((e: any) => e.type === 'plugin/compaction/end');
  const start = events.findLast((e: any) => e.type === 'plugin/compaction/start');
  return { ...end.data, instructions: start.data.instructions };
}

describe('compaction in the dashboard', () => {
  it('Compact… asks, and Escape or a click outside closes the question with the focus back on Compact…', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    const button = page.getByRole('button', { name: 'Compact…' });
    await button.waitFor(TIMEOUT);
    const dialog = page.getByRole('dialog', { name: 'Compact this session?' });
    const count = async () => (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id })).session.eventCount as number;
    const before = await count();

    await button.click();
    await dialog.waitFor(TIMEOUT);
    expect(await dialog.textContent()).toContain('reads that summary instead of the history');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached', ...TIMEOUT });
    await expect.poll(() => button.evaluate((b) => b === document.activeElement), TIMEOUT).toBe(true);

    await button.click();
    await dialog.waitFor(TIMEOUT);
    const box = (await dialog.boundingBox())!;
    await page.mouse.click(Math.max(5, box.x - 20), Math.max(5, box.y - 20)); // the backdrop
    await dialog.waitFor({ state: 'detached', ...TIMEOUT });
    await expect.poll(() => button.evaluate((b) => b === document.activeElement), TIMEOUT).toBe(true);
    expect(await count()).toBe(before); // asked twice, nothing written
    expect(errors).toEqual([]);
    await page.close();
  });

  it('Compact with instructions writes a compaction and says the tokens before and after; its row holds the summary', async () => {
    const context = await (await browser).newContext({ viewport: { width: 1440, height: 900 } });
    const { page, errors } = await openPage(context);
    await page.goto(`${origin}/sessions/${id}`);
    const button = page.getByRole('button', { name: 'Compact…' });
    await button.waitFor(TIMEOUT);
    await button.click();
    const dialog = page.getByRole('dialog', { name: 'Compact this session?' });
    await dialog.getByLabel('Instructions for the summary (optional)').fill('keep the second question');
    await dialog.getByRole('button', { name: 'Compact', exact: true }).click();

    const result = page.getByTestId('compact-result');
    await result.waitFor(TIMEOUT);
    const end = await compactionEnd();
    expect(end.tokensBefore).toBeGreaterThan(0);
    expect(Number(await result.getAttribute('data-tokens-before'))).toBe(end.tokensBefore);
    expect(Number(await result.getAttribute('data-tokens-after'))).toBe(end.tokensAfter);
    expect(await result.textContent()).toContain(`about ${end.tokensBefore.toLocaleString('en-US')} tokens`);
    expect(await result.textContent()).toContain(`about ${end.tokensAfter.toLocaleString('en-US')} tokens of summary`);
    // The instructions went with the request (the start records them).
    expect(end.instructions).toBe('keep the second question');
    await page.getByRole('dialog', { name: 'History compacted' }).getByRole('button', { name: 'Close' }).click();
    await expect.poll(() => button.evaluate((b) => b === document.activeElement), TIMEOUT).toBe(true);

    const row = page.getByTestId('compaction');
    await row.waitFor(TIMEOUT);
    // The summary is what the log holds, and the row names the range it replaces.
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { seq type data } } } } }', { id });
    const replace = session.events.edges.map((e: any) => e.node).find((e: any) => e.type === 'surface/replace');
    expect(replace).toBeDefined();
    expect(await row.locator('summary').textContent()).toBe(`history summarised: seq ${replace.data.fromSeq}–${replace.data.toSeq}`);
    const summary = row.locator('.compaction-summary');
    expect(await summary.isVisible()).toBe(false); // collapsed
    await row.locator('summary').click();
    await summary.waitFor({ state: 'visible', ...TIMEOUT });
    expect(await summary.textContent()).toBe(replace.data.content);
    expect(errors).toEqual([]);
    await context.close();
  });
});
