// A server restart with the dashboard open (issue 33, item 2). The server is
// stopped gracefully while a turn streams its answer and started again on the
// same port and database. The page resumes from what it last saw: the list
// shows a session created after the restart (without a reload), the session
// page gets the events written since (the turn ends `interrupted`, the text
// that had streamed kept as the step's answer), nothing says "running" or
// "reconnecting" any more, and a send's "cannot reach" banner from while the
// server was down is gone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
const WORDS = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');

let dashboard: Dashboard;
let browser: Promise<Browser>;
let databaseUrl: string;
let second: TestApp | undefined;
let firstClosed = false;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  ({ browser } = dashboard = await startDashboard({ databaseUrl }));
}, 60_000);

afterAll(async () => {
  await second?.close();
  if (firstClosed) await (await browser.catch(() => undefined))?.close();
  else await dashboard?.close();
});

describe('dashboard across a server restart', () => {
  it('resumes the list and the session page; the running turn shows as interrupted with what streamed', async () => {
    const first = dashboard.app;
    const origin = new URL(first.url).origin;
    const port = Number(new URL(first.url).port);
    const { createSession } = await first.ok('mutation { createSession(input: { title: "Streaming when stopped" }) { id } }');
    const id = createSession.id as string;

    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${id}`);
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.fill(`${WORDS}\n!slow 150`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const streaming = page.getByTestId('live-text');
    await expect.poll(() => streaming.textContent(), TIMEOUT).toContain('word3');
    await page.getByText('A turn is running.').waitFor(TIMEOUT);

    // A graceful stop while the answer streams.
    firstClosed = true;
    await first.close();
    const sidebarError = page.locator('.sidebar > .error');
    await expect.poll(() => sidebarError.textContent(), TIMEOUT).toBe('live updates: reconnecting…');
    await expect.poll(() => page.locator('main .error[role=alert]').textContent(), TIMEOUT).toBe('live events: reconnecting…');
    // A send while it is down fails once the client's retries give up: the banner names it.
    await composer.fill('are you there?');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await expect.poll(() => page.locator('.composer-bar .error').textContent(), { timeout: 30_000 }).toMatch(/cannot reach/);
    await screenshot(page, 'dashboard-restart-down.png');

    // Back on the same port and database; a session is made before the page has resubscribed.
    second = await startTestApp({ databaseUrl, port });
    const { createSession: made } = await second.ok('mutation { createSession(input: { title: "Made after the restart" }) { id } }');

    // The list: the new session, and no stale banner.
    await page.locator(`.tree-node[data-session-id="${made.id}"]`).waitFor(TIMEOUT);
    await expect.poll(() => sidebarError.count(), TIMEOUT).toBe(0);

    // The session page: the events since, the turn interrupted, idle, no banners.
    const turnEnd = page.locator('.conversation .turn-end[data-turn="1"]');
    await expect.poll(() => turnEnd.locator('.badge').first().textContent(), TIMEOUT).toBe('interrupted');
    await page.getByText('Idle.').waitFor(TIMEOUT);
    expect(await page.getByRole('button', { name: 'Cancel turn' }).isDisabled()).toBe(true);
    expect(await streaming.count()).toBe(0);
    await expect.poll(() => page.locator('main .error').count(), TIMEOUT).toBe(0);
    expect(await page.locator('.session-head .badge.status-idle').count()).toBe(1);

    // What had streamed is the step's stored answer, shown as the assistant's message.
    const { session } = await second.ok('query($id: ID!) { session(id: $id) { status events(first: 50) { edges { node { type data } } } } }', { id });
    expect(session.status).toBe('IDLE');
    const events = session.events.edges.map((e: any) => e.node);
    const answer = events.find((e: any) => e.type === 'model/message');
    expect(answer.data.text).toMatch(/^Echo: word0 word1 word2 word3/);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' } });
    await expect.poll(() => page.locator('.conversation .msg.assistant .msg-text').first().textContent(), TIMEOUT).toBe(answer.data.text);

    // And it works on: a message sent now is answered.
    await composer.fill('back again');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('.conversation .msg.assistant').filter({ hasText: 'Echo: back again' }).waitFor(TIMEOUT);
    await screenshot(page, 'dashboard-restart-back.png');
    // The page logged the lost connection (a failed WebSocket, the failed send): nothing else.
    expect(errors.filter((e) => !/WebSocket|Failed to load resource|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
    await page.close();
  }, 120_000);
});
