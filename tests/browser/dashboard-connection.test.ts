// The dashboard tells the truth about its connection: a rejected token says so
// (never "No sessions yet" or "Loading…" forever), is not retried — so a good
// token typed after it works at once instead of meeting the per-address
// auth-failure throttle's 429 — and a server that is down says so with Retry,
// then every page recovers without a reload when it is back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const GOOD = 'good-dashboard-token-0123456789ab';
const BAD = 'bad-dashboard-token-0123456789abc';
const TIMEOUT = { timeout: 15_000 };

describe('a rejected token', () => {
  let dashboard: Dashboard;
  beforeAll(async () => {
    // Five failures a minute per address: a page that kept retrying a rejected token would be throttled within seconds.
    dashboard = await startDashboard({ security: { apiTokens: new Map([[GOOD, 'acme']]), rateLimit: false, authFailures: { max: 5, windowMs: 60_000 } } });
    for (const title of ['first', 'second', 'third'])
      await dashboard.app.gql(`mutation { createSession(input: { title: "${title}" }) { id } }`, undefined, { authorization: `Bearer ${GOOD}` });
  });
  afterAll(() => dashboard?.close());

  it('says "token rejected", does not retry it, and a good token typed after it works at once', async () => {
    const { page } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/?token=${BAD}`);
    const banner = page.getByTestId('connection-problem');
    await expect.poll(() => banner.getAttribute('data-kind'), TIMEOUT).toBe('token-rejected');
    expect(await banner.textContent()).toContain('Token rejected.');
    await expect.poll(() => page.locator('.sidebar > .error').textContent(), TIMEOUT).toMatch(/Token rejected/);
    expect(await page.getByText('No sessions yet').count()).toBe(0);
    expect(await page.getByText('Loading sessions…').count()).toBe(0);
    await screenshot(page, 'dashboard-token-rejected.png');

    // Long enough for a retry loop (250 ms, 500 ms, 1 s, 2 s …) to pass the five failures the server allows.
    await page.waitForTimeout(4000);
    await banner.getByRole('textbox', { name: 'API token' }).fill(GOOD);
    await banner.getByRole('button', { name: 'Use token' }).click();
    await page.locator('.tree .tree-node').first().waitFor(TIMEOUT);
    await expect.poll(() => page.locator('.tree .tree-node').count(), TIMEOUT).toBe(3);
    expect(await banner.count()).toBe(0);
    await page.close();
  });
});

describe('a server that is down, then back', () => {
  let dashboard: Dashboard;
  let databaseUrl: string;
  let second: TestApp | undefined;
  let firstClosed = false;
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    dashboard = await startDashboard({ databaseUrl });
  });
  afterAll(async () => {
    await second?.close();
    if (firstClosed) await (await dashboard.browser.catch(() => undefined))?.close();
    else await dashboard?.close();
  });

  it('says "unreachable" with Retry instead of Loading… forever, and each page recovers without a reload', async () => {
    const first = dashboard.app;
    const port = Number(new URL(first.url).port);
    const a = (await first.ok('mutation { createSession(input: { title: "Alpha" }) { id } }')).createSession.id as string;
    const b = (await first.ok('mutation { createSession(input: { title: "Bravo" }) { id } }')).createSession.id as string;
    const { page } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    await page.goto(`${dashboard.origin}/sessions/${a}`);
    await page.getByRole('heading', { name: 'Alpha' }).waitFor(TIMEOUT);

    firstClosed = true;
    await first.close();
    // Another session, opened while the server is down: said so, never "Loading…" forever or a raw "Failed to fetch".
    await page.locator(`.tree-node[data-session-id="${b}"] a`).first().click();
    const banner = page.getByTestId('connection-problem');
    await expect.poll(() => banner.getAttribute('data-kind'), TIMEOUT).toBe('unreachable');
    await expect.poll(() => page.locator('main.session-page .error').textContent(), TIMEOUT).toMatch(/cannot reach the server/);
    expect(await page.getByText('Failed to fetch').count()).toBe(0);
    await screenshot(page, 'dashboard-unreachable.png');

    // Retry while it is still down: tried again, and still said so.
    await banner.getByRole('button', { name: 'Retry now' }).click();
    expect(await banner.getAttribute('data-kind')).toBe('unreachable');

    // Back: the page finds it by itself (no reload, no click).
    second = await startTestApp({ databaseUrl, port });
    await page.getByRole('heading', { name: 'Bravo' }).waitFor(TIMEOUT);
    await expect.poll(() => banner.count(), TIMEOUT).toBe(0);
    await expect.poll(() => page.locator('main .error').count(), TIMEOUT).toBe(0);
    // The list is live again: a session made now appears without a reload. Its sessionsChanged and the session
    // page's (session-feed.ts) are set up again after the reconnect and replay nothing: both listen first.
    await waitFor(() => second!.services.live.stats().sessions === 2, { what: "the page's sessionsChanged subscriptions" });
    const c = (await second.ok('mutation { createSession(input: { title: "Charlie" }) { id } }')).createSession.id as string;
    await page.locator(`.tree-node[data-session-id="${c}"]`).waitFor(TIMEOUT);
    await page.close();
  });
});
