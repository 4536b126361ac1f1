// A compaction in the dashboard: the Compact action writes one
// (compactSession), and the conversation shows it as one collapsible row,
// "history summarised: seq a–b", holding the summary the model now reads.
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

describe('compaction in the dashboard', () => {
  it('Compact writes a compaction, shown as one collapsible row with its summary', async () => {
    const context = await (await browser).newContext({ viewport: { width: 1440, height: 900 } });
    const { page, errors } = await openPage(context);
    await page.goto(`${origin}/sessions/${id}`);
    const button = page.getByRole('button', { name: 'Compact' });
    await button.waitFor(TIMEOUT);
    await button.click();

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
