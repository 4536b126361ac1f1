// The pages that read a query and follow sessionsChanged (the fork-point and
// fork-tree pages) miss no change made between their first read and the
// moment the server listens for them: the read is answered over HTTP while the
// subscription goes over the WebSocket, and nothing orders the two. Here the
// subscription is held back in the browser until a child's turn has ended.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page, WebSocketRoute } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';

let dashboard: Dashboard;
let app: TestApp;
let origin: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
});
afterAll(() => dashboard?.close());

const create = async (title: string) =>
  (await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title } })).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
const fork = async (sessionId: string, atSeq: number) =>
  (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId, atSeq } })).forkSession.session.id as string;

/** Holds the page's sessionsChanged subscribe messages until `release` is called (the rest of the socket flows). */
async function holdSessionsChanged(page: Page) {
  const held: Array<() => void> = [];
  let holding = true;
  await page.routeWebSocket(/\/graphql/, (ws: WebSocketRoute) => {
    const server = ws.connectToServer();
    ws.onMessage((msg) => {
      if (holding && typeof msg === 'string' && msg.includes('"subscribe"') && msg.includes('sessionsChanged')) held.push(() => server.send(msg));
      else server.send(msg);
    });
    server.onMessage((msg) => ws.send(msg));
  });
  return {
    held: () => held.length,
    release: () => {
      holding = false;
      for (const send of held.splice(0)) send();
    },
  };
}

describe('live pages and a late subscription', () => {
  it('the fork-point page shows a child that answered between its first read and its subscription listening', async () => {
    const parent = await create('late subscription');
    await send(parent, 'first question');
    await app.services.host.idle();
    const child = await fork(parent, 0);

    const { page, errors } = await openPage(dashboard.browser);
    const ws = await holdSessionsChanged(page);
    await page.goto(`${origin}/sessions/${parent}/forks/0`);
    const card = page.getByTestId('variant-card');
    await expect.poll(() => card.getAttribute('data-state')).toBe('waiting');
    await expect.poll(() => ws.held()).toBeGreaterThan(0);

    // The child answers while the page's subscription has not reached the server.
    await send(child, 'asked in the child');
    await app.services.host.idle();
    ws.release();
    await expect.poll(() => card.getAttribute('data-state'), { timeout: 15_000 }).toBe('answered');
    expect(await card.getByTestId('variant-answer').textContent()).toContain('Echo: asked in the child');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the fork tree shows a fork made between its first read and its subscription listening', async () => {
    const parent = await create('late tree');
    await send(parent, 'first question');
    await app.services.host.idle();

    const { page, errors } = await openPage(dashboard.browser);
    const ws = await holdSessionsChanged(page);
    await page.goto(`${origin}/sessions/${parent}/family`);
    await expect.poll(() => page.locator('.family-page:not(.loading)').count()).toBe(1);
    await expect.poll(() => ws.held()).toBeGreaterThan(0);
    const before = await page.locator('.family-page a[href^="/sessions/"]').count();

    // The fork is announced (a subscriber of the test's own sees it) before the page's subscription listens.
    const open = await openSubscriptions(app.url);
    const changes = subscribeWs<{ sessionsChanged: { id: string } }>(app.url, 'subscription { sessionsChanged { id } }');
    await subscriptionsOpened(app.url, open, 1);
    const child = await fork(parent, 1);
    await changes.until((items) => items.some((c) => c.sessionsChanged.id === child), 'the fork announced');
    await changes.close();
    ws.release();
    await expect.poll(() => page.locator('.family-page a[href^="/sessions/"]').count(), { timeout: 15_000 }).toBeGreaterThan(before);
    expect(errors).toEqual([]);
    await page.close();
  });
});
