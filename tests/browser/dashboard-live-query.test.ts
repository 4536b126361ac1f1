// The pages that read and then follow (the session list, a session's page, the
// fork-point and fork-tree pages) miss no change made between their first read
// and the moment the server listens for them: the read is answered over HTTP
// while the subscription goes over the WebSocket, and nothing orders the two.
// Here the subscriptions are held back in the browser while the data changes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { holdSubscriptions } from './hold-subscriptions.ts';
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

/** A session with one answered turn. */
async function answered(title: string) {
  const id = await create(title);
  await send(id, 'first question');
  await app.services.host.idle();
  return id;
}

/** A page at `path` whose subscribe messages of `fields` are held until `ws.release()`. */
async function openHeld(path: string, fields: readonly string[]) {
  const { page, errors } = await openPage(dashboard.browser);
  const ws = await holdSubscriptions(page, fields);
  await page.goto(`${origin}${path}`);
  return { page, errors, ws };
}

/**
 * Runs `change` (which gives the sessions it changed), and waits until a subscriber of the test's own is told
 * of them: the page's held subscription, registered after that, is not.
 */
async function announced(change: () => Promise<string[]>) {
  const open = await openSubscriptions(app.url);
  const changes = subscribeWs<{ sessionsChanged: { id: string } }>(app.url, 'subscription { sessionsChanged { id } }');
  await subscriptionsOpened(app.url, open, 1);
  const ids = await change();
  await changes.until((items) => ids.every((id) => items.some((c) => c.sessionsChanged.id === id)), 'the change announced');
  await changes.close();
}

describe('live pages and a late subscription', () => {
  it('the fork-point page shows a child that answered between its first read and its subscription listening', async () => {
    const parent = await answered('late subscription');
    const child = await fork(parent, 0);

    const { page, errors, ws } = await openHeld(`/sessions/${parent}/forks/0`, ['sessionsChanged']);
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
    const parent = await answered('late tree');

    const { page, errors, ws } = await openHeld(`/sessions/${parent}/family`, ['sessionsChanged']);
    await expect.poll(() => page.locator('.family-page:not(.loading)').count()).toBe(1);
    await expect.poll(() => ws.held()).toBeGreaterThan(0);
    const before = await page.locator('.family-page a[href^="/sessions/"]').count();

    // The fork is announced before the page's subscription listens.
    await announced(async () => [await fork(parent, 1)]);
    ws.release();
    await expect.poll(() => page.locator('.family-page a[href^="/sessions/"]').count(), { timeout: 15_000 }).toBeGreaterThan(before);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the session list shows a session made, and one changed, between its first read and its subscription listening', async () => {
    const existing = await create('listed before');
    const { page, errors, ws } = await openHeld('/', ['sessionListChanges']);
    const row = (id: string) => page.locator(`nav.tree li.tree-node[data-session-id="${id}"]`);
    await row(existing).waitFor();
    await expect.poll(() => ws.held()).toBeGreaterThan(0);

    // One session made and another appended to while the list's subscription has not reached the server.
    let made = '';
    await announced(async () => {
      made = await create('made while the list subscribed');
      await send(existing, 'asked while the list subscribed');
      await app.services.host.idle();
      return [made, existing];
    });
    const { eventCount } = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: existing })).session;
    ws.release();
    await row(made).waitFor({ timeout: 15_000 });
    await expect.poll(() => row(existing).textContent(), { timeout: 15_000 }).toContain(`${eventCount} ev`);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("a session's page shows a turn that ended, and its events, between its first read and its subscriptions listening", async () => {
    const id = await create('late session page');
    await send(id, '!call sleep {"ms": 20000}');
    const status = async () => (await app.ok('query($id: ID!) { session(id: $id) { status eventCount } }', { id })).session;
    await expect.poll(async () => (await status()).status).toBe('RUNNING');

    const { page, errors, ws } = await openHeld(`/sessions/${id}`, ['sessionEvents', 'sessionTurns', 'sessionsChanged']);
    const head = page.locator('header.session-head');
    await expect.poll(() => head.locator('.badge').first().textContent()).toBe('running');
    await expect.poll(() => ws.held('sessionEvents')).toBeGreaterThan(0);

    // The turn ends (RUNNING -> IDLE, with its closing events) before the page's subscriptions listen.
    await app.ok('mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }', { id });
    await app.services.host.idle();
    const after = await status();
    expect(after.status).toBe('IDLE');
    ws.release();
    await expect.poll(() => head.locator('.badge').first().textContent(), { timeout: 15_000 }).toBe('idle');
    await expect.poll(() => head.textContent(), { timeout: 15_000 }).toContain(`${after.eventCount} events`);
    await expect.poll(() => page.locator('ol.conversation li.turn-end.reason-cancelled').count(), { timeout: 15_000 }).toBe(1);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("a session's page names a child forked between its first read and its subscriptions listening", async () => {
    const id = await answered('late child');

    const { page, errors, ws } = await openHeld(`/sessions/${id}`, ['sessionEvents', 'sessionTurns', 'sessionsChanged']);
    await page.locator('header.session-head').waitFor();
    await expect.poll(() => ws.held('sessionEvents')).toBeGreaterThan(0);
    await expect.poll(() => ws.held('sessionsChanged')).toBeGreaterThan(0);

    // The fork changes no event of the parent's log: only sessionsChanged tells the page.
    await announced(async () => [await fork(id, 1)]);
    ws.release();
    await page.getByRole('button', { name: 'Children (1)' }).waitFor({ timeout: 15_000 });
    expect(errors).toEqual([]);
    await page.close();
  });
});
