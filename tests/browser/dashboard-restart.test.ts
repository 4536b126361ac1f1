// A server restart with the dashboard open. The server is
// stopped gracefully while a turn streams its answer and started again on the
// same port and database. The page resumes from what it last saw: the list
// shows a session created after the restart (without a reload), the session
// page gets the events written since (the turn ends `interrupted`, the text
// that had streamed kept as the step's answer), nothing says "running" or
// "reconnecting" any more, and a send's "cannot reach" banner from while the
// server was down is gone.
//
// The second test kills the service process (SIGKILL, a separate process
// serving the page) while a turn streams: nothing is closed on the way out.
// A session is made while it is down; the restarted process repairs the open
// turn (crash recovery, docs/contract.md#crash-recovery) and the page catches up: the list asks for
// what changed since it last saw (sessions(changedSince:), not a re-read of
// every session), the turn ends `interrupted` with the closers the repair
// wrote, Cancel is disabled and no banner is left.
//
// The third stops the service process gracefully (SIGTERM, as an operator
// or a deploy does) while the page is open: the page says the server is
// unreachable, with Retry, within the seconds its requests take to fail (not
// after the client's retries give up, and not cleared by a request the
// draining server still answered), also on a session opened while it is down;
// while down, the page's subscriptions share one poll of /healthz; started
// again on the same port and database, the banner goes, the page shows
// that session, the list is live and a message is answered, without a reload.
//
// The fourth deletes a session while the server is down: the count the
// changed-since read returns differs from what the list holds, so the list is
// read again and the deleted session goes.
//
// The fifth restarts the server under an open fan-out page (a fork point's
// variants side by side, their live text on one subscription) while a variant
// streams: the card keeps what it showed, then shows the stored answer once
// (no text twice, however the replay after the last seen event meets what had
// streamed); the page's one subscription is taken again (without a variant
// deleted meanwhile), and another variant's answer streams into its card.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { screenshot } from './chromium.ts';
import { appendTurns, openPage, recordVariantLiveTexts, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
const WORDS = Array.from({ length: 60 }, (_, i) => `word${i}`).join(' ');

/** The page after the restart: turn 1 ended `interrupted`, idle, Cancel disabled, no streaming bubble, no banner. */
async function expectInterruptedAndIdle(page: Page, timeout = TIMEOUT) {
  const turnEnd = page.locator('.conversation .turn-end[data-turn="1"]');
  await expect.poll(() => turnEnd.locator('.badge').first().textContent(), timeout).toBe('interrupted');
  await page.getByText('Idle.').waitFor(TIMEOUT);
  expect(await page.getByRole('button', { name: 'Cancel turn' }).isDisabled()).toBe(true);
  expect(await page.getByTestId('live-text').count()).toBe(0);
  await expect.poll(() => page.locator('main .error').count(), TIMEOUT).toBe(0);
  expect(await page.locator('.session-head .badge.status-idle').count()).toBe(1);
}

/** Which list reads a page makes, in order: a full page of sessions (Sessions), or the changes since (SessionsChangedSince). */
function recordListReads(page: Page): string[] {
  const reads: string[] = [];
  page.on('request', (req) => {
    const op = (req.postDataJSON?.() as { query?: string } | null)?.query?.match(/^\s*query (Sessions|SessionsChangedSince)\b/)?.[1];
    if (op) reads.push(op);
  });
  return reads;
}

/** Records every text the page's streaming bubble shows, in order: read with the function returned. */
async function recordLiveTexts(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const w = window as unknown as { __liveTexts: string[] };
    w.__liveTexts = [];
    new MutationObserver(() => {
      const text = document.querySelector('[data-testid="live-text"]')?.textContent;
      if (text && text !== w.__liveTexts.at(-1)) w.__liveTexts.push(text);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  return () => page.evaluate(() => (window as unknown as { __liveTexts: string[] }).__liveTexts);
}

/** It works on: a message sent now is answered; the page logged only the lost connection (a failed WebSocket, a failed send). */
async function expectAnsweredAfter(page: Page, errors: string[], text: string, shot: string) {
  await page.getByRole('textbox', { name: 'Message' }).fill(text);
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await page
    .locator('.conversation .msg.assistant')
    .filter({ hasText: `Echo: ${text}` })
    .waitFor(TIMEOUT);
  await screenshot(page, shot);
  expect(errors.filter((e) => !/WebSocket|Failed to load resource|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
  await page.close();
}

let dashboard: Dashboard;
let browser: Promise<Browser>;
let databaseUrl: string;
let second: TestApp | undefined;
let firstClosed = false;
const services: ServiceProcess[] = [];

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  ({ browser } = dashboard = await startDashboard({ databaseUrl }));
}, 60_000);

afterAll(async () => {
  await Promise.all(services.map((p) => p.stop('SIGKILL')));
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
    const liveTexts = await recordLiveTexts(page);

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
    await expectInterruptedAndIdle(page);

    // What had streamed is the step's stored answer, shown as the assistant's message.
    const { session } = await second.ok('query($id: ID!) { session(id: $id) { status events(first: 50) { edges { node { type data } } } } }', { id });
    expect(session.status).toBe('IDLE');
    const events = session.events.edges.map((e: any) => e.node);
    const answer = events.find((e: any) => e.type === 'model/message');
    expect(answer.data.text).toMatch(/^Echo: word0 word1 word2 word3/);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' } });
    await expect.poll(() => page.locator('.conversation .msg.assistant .msg-text').first().textContent(), TIMEOUT).toBe(answer.data.text);
    // The streaming bubble never showed the text twice over (what had streamed, then the stored answer after it).
    for (const t of await liveTexts()) expect(t.split('Echo:').length - 1, t).toBeLessThanOrEqual(1);

    await expectAnsweredAfter(page, errors, 'back again', 'dashboard-restart-back.png');
  }, 120_000);

  it('after a SIGKILL of the service: the list catches up by what changed, the turn shows the repair, nothing stale', async () => {
    const databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, FORKLINE_API_TOKENS: undefined, FORKLINE_LEASE_TTL_MS: '2000' };
    const first = await startService({ env });
    services.push(first);
    const origin = new URL(first.url).origin;
    const gql = async (url: string, query: string, variables?: unknown) => {
      const r = await postGraphQL(url, query, variables);
      if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
      return r.body.data;
    };
    const create = async (url: string, title: string) =>
      (await gql(url, 'mutation($t: String!) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id as string;
    const before = await create(first.url, 'There before the crash');
    const id = await create(first.url, 'Streaming when killed');

    const { page, errors } = await openPage(browser);
    const listReads = recordListReads(page);
    await page.goto(`${origin}/sessions/${id}`);
    await page.locator(`.tree-node[data-session-id="${before}"]`).waitFor(TIMEOUT);
    const composer = page.getByRole('textbox', { name: 'Message' });
    await composer.fill(`${WORDS}\n!slow 150`);
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const streaming = page.getByTestId('live-text');
    await expect.poll(() => streaming.textContent(), TIMEOUT).toContain('word3');
    await page.getByText('A turn is running.').waitFor(TIMEOUT);
    // The whole list once, then what changed while its subscription was going live (docs/api.md, sessionsChanged).
    await expect.poll(() => listReads, TIMEOUT).toEqual(['Sessions', 'SessionsChangedSince']);

    // SIGKILL: no shutdown, no closers, the lease left held by a dead process.
    expect(await first.stop('SIGKILL')).toBeNull();
    const sidebarError = page.locator('.sidebar > .error');
    await expect.poll(() => sidebarError.textContent(), TIMEOUT).toBe('live updates: reconnecting…');
    await expect.poll(() => page.locator('main .error[role=alert]').textContent(), TIMEOUT).toBe('live events: reconnecting…');

    // A session made while the page's server is down (by another process on the same database).
    const other = await startTestApp({ databaseUrl });
    let made: string;
    try {
      made = await create(other.url, 'Made while it was down');
    } finally {
      await other.close();
    }

    // The service again, on the same port and database.
    const port = new URL(first.url).port;
    const restarted = await startService({ env: { ...env, PORT: port } });
    services.push(restarted);

    // The list: the session made while down, from a changed-since read; no stale banner.
    await page.locator(`.tree-node[data-session-id="${made}"]`).waitFor({ timeout: 30_000 });
    await expect.poll(() => sidebarError.count(), TIMEOUT).toBe(0);
    expect(await page.locator(`.tree-node[data-session-id="${before}"]`).count()).toBe(1);
    // Never the whole list again: only the changes since (once per resubscription).
    expect(listReads[0]).toBe('Sessions');
    expect(listReads.slice(2)).toEqual(expect.arrayContaining(['SessionsChangedSince']));
    expect(listReads.slice(2).every((r) => r === 'SessionsChangedSince')).toBe(true);

    // The session page: the repair's closers, the turn interrupted, idle, Cancel disabled, no banners.
    await expectInterruptedAndIdle(page, { timeout: 30_000 });
    expect(
      await page
        .locator('.sidebar .tree-node[data-session-id="' + id + '"] .badge')
        .first()
        .textContent(),
    ).toMatch(/idle/i);

    // What the page shows is what crash recovery wrote: synthetic closers, nothing of what had streamed.
    const { session } = await gql(
      restarted.url,
      'query($id: ID!) { session(id: $id) { status events(first: 50) { edges { node { type data synthetic } } } } }',
      { id },
    );
    expect(session.status).toBe('IDLE');
    const events = session.events.edges.map((e: any) => e.node);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'interrupted' }, synthetic: true });
    expect(events.some((e: any) => e.type === 'model/message')).toBe(false);
    expect(await page.locator('.conversation .msg.assistant').count()).toBe(0);

    await expectAnsweredAfter(page, errors, 'back after the crash', 'dashboard-restart-sigkill.png');
  }, 120_000);

  it('a graceful stop of the service: "unreachable" with Retry at once and while down, then everything resumes', async () => {
    const databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, FORKLINE_API_TOKENS: undefined };
    const first = await startService({ env });
    services.push(first);
    const origin = new URL(first.url).origin;
    const create = async (url: string, title: string) => {
      const r = await postGraphQL(url, 'mutation($t: String!) { createSession(input: { title: $t }) { id } }', { t: title });
      return r.body.data.createSession.id as string;
    };
    const a = await create(first.url, 'Open when stopped');
    const b = await create(first.url, 'Opened while down');
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${a}`);
    await page.getByRole('heading', { name: 'Open when stopped' }).waitFor(TIMEOUT);
    await page.locator(`.tree-node[data-session-id="${b}"]`).waitFor(TIMEOUT);

    expect(await first.stop('SIGTERM')).toBe(0);
    const banner = page.getByTestId('connection-problem');
    // Said within the seconds a request takes to fail, not once the client gives up retrying a query (15 s): looked
    // for during 13 s from when the service is down (the stop itself, seconds on a loaded machine, not counted).
    await expect.poll(() => banner.getAttribute('data-kind'), { timeout: 13_000 }).toBe('unreachable');
    await expect.poll(() => page.locator('main .error[role=alert]').textContent(), TIMEOUT).toBe('live events: reconnecting…');

    // Another session, opened while down: the banner says why it does not load (not a bare "Loading…").
    await page.locator(`.tree-node[data-session-id="${b}"] a`).first().click();
    await expect.poll(() => banner.getAttribute('data-kind'), { timeout: 10_000 }).toBe('unreachable');
    expect(await banner.getByRole('button', { name: 'Retry now' }).count()).toBe(1);
    await screenshot(page, 'dashboard-restart-sigterm-down.png');
    // Every subscription of the page waits on one poll of /healthz (at most every 2 s), not one poll each:
    // each refused request is a console error, and one each made several a second.
    let polls = 0;
    const countPoll = (req: { url(): string }) => void (new URL(req.url()).pathname === '/healthz' && polls++);
    page.on('request', countPoll);
    await page.waitForTimeout(6_000);
    page.off('request', countPoll);
    expect(polls).toBeGreaterThan(0);
    // A poll that starts in the window backs off 250 ms, 0.5, 1, 2, 2…: six in 6 s, more if it starts again as waiters
    // come and go (one poll each per subscription made ten requests a second).
    expect(polls).toBeLessThanOrEqual(8);

    const restarted = await startService({ env: { ...env, PORT: new URL(first.url).port } });
    services.push(restarted);
    await page.getByRole('heading', { name: 'Opened while down' }).waitFor({ timeout: 30_000 });
    await expect.poll(() => banner.count(), TIMEOUT).toBe(0);
    await expect.poll(() => page.locator('.sidebar > .error').count(), TIMEOUT).toBe(0);
    const c = await create(restarted.url, 'Made after the restart');
    await page.locator(`.tree-node[data-session-id="${c}"]`).waitFor(TIMEOUT);
    await expectAnsweredAfter(page, errors, 'back after a graceful stop', 'dashboard-restart-sigterm-back.png');
  }, 120_000);

  it('a session deleted while the server was down goes from the list: the count differs, so the list is read again', async () => {
    const databaseUrl = await createTestDatabase();
    let app = await startTestApp({ databaseUrl });
    const port = Number(new URL(app.url).port);
    const create = async (on: TestApp, title: string) =>
      (await on.ok('mutation($t: String!) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id as string;
    const kept = await create(app, 'Kept');
    const doomed = await create(app, 'Deleted while down');
    const { page, errors } = await openPage(browser);
    const listReads = recordListReads(page);
    await page.goto(`${new URL(app.url).origin}/sessions/${kept}`);
    await page.locator(`.tree-node[data-session-id="${doomed}"]`).waitFor(TIMEOUT);
    // The whole list, then what changed while its subscription was going live (docs/api.md, sessionsChanged).
    await expect.poll(() => listReads, TIMEOUT).toEqual(['Sessions', 'SessionsChangedSince']);

    await app.close();
    await expect.poll(() => page.locator('.sidebar > .error').textContent(), TIMEOUT).toBe('live updates: reconnecting…');
    // Another process deletes one session and makes another while the page's server is down.
    const other = await startTestApp({ databaseUrl });
    let made: string;
    try {
      await other.ok('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: doomed });
      made = await create(other, 'Made while down');
    } finally {
      await other.close();
    }
    app = await startTestApp({ databaseUrl, port });
    try {
      await page.locator(`.tree-node[data-session-id="${made}"]`).waitFor({ timeout: 30_000 });
      await expect.poll(() => page.locator(`.tree-node[data-session-id="${doomed}"]`).count(), TIMEOUT).toBe(0);
      expect(await page.locator(`.tree-node[data-session-id="${kept}"]`).count()).toBe(1);
      await expect.poll(() => page.locator('.sidebar > .error').count(), TIMEOUT).toBe(0);
      // The changes since first (once per resubscription); the count (2, the list held 3) told it a session
      // was deleted: then the whole list.
      expect(listReads[2]).toBe('SessionsChangedSince');
      // (A loaded machine may see the socket drop more than once: each resubscription reads the changes again,
      // so the whole list's read need not be the last one.)
      expect(listReads.slice(3)).toContain('Sessions');
      expect(errors.filter((e) => !/WebSocket|Failed to load resource|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
      await page.close();
    } finally {
      await app.close();
    }
  }, 120_000);

  it('a fan-out page across a restart: the streaming card shows its stored answer once; the others stream after', async () => {
    const databaseUrl = await createTestDatabase();
    let app = await startTestApp({ databaseUrl });
    const origin = new URL(app.url).origin;
    const port = Number(new URL(app.url).port);
    const parent = (await app.ok('mutation { createSession(input: { title: "Fanned out" }) { id } }')).createSession.id as string;
    await appendTurns(app, parent, 1, 1);
    const atSeq = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: parent })).session.eventCount - 1;
    const fork = async (title: string) =>
      (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: parent, atSeq, title } })).forkSession
        .session.id as string;
    const variants = [await fork('variant 1'), await fork('variant 2'), await fork('variant 3')];
    const card = (id: string) => page.locator(`[data-testid="variant-card"][data-session-id="${id}"]`);

    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${parent}/forks/${atSeq}`);
    await expect.poll(() => page.getByTestId('variant-card').count(), TIMEOUT).toBe(3);
    const liveTexts = await recordVariantLiveTexts(page);

    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: variants[0], text: `${WORDS}\n!slow 150` } });
    await expect.poll(async () => (await liveTexts())[variants[0]]?.at(-1) ?? '', TIMEOUT).toContain('word3');

    await app.close();
    await expect.poll(() => page.locator('main .error[role=alert]').textContent(), TIMEOUT).toBe('live updates: reconnecting…');
    // While down the card keeps what had streamed.
    expect(await card(variants[0]).getByTestId('variant-live').textContent()).toContain('word3');

    // A variant the page follows is deleted while the server is down (by another process on the same database):
    // the page's resubscription names it, and is refused; the page's read drops it, and its cards stream again.
    const other = await startTestApp({ databaseUrl });
    try {
      await other.ok('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: variants[2] });
    } finally {
      await other.close();
    }
    app = await startTestApp({ databaseUrl, port });
    try {
      await expect.poll(() => page.getByTestId('variant-card').count(), TIMEOUT).toBe(2);
      // The turn ended interrupted, what had streamed stored as its answer: the card shows it, once.
      const stored = (await app.services.store.log.page(variants[0], atSeq, 100)).find((e) => e.type === 'model/message')!.data as { text: string };
      expect(stored.text).toMatch(/^Echo: word0 word1 word2 word3/);
      await expect.poll(() => card(variants[0]).getByTestId('variant-answer').count(), TIMEOUT).toBe(1);
      expect(await card(variants[0]).getByTestId('variant-answer').locator('.msg-text').textContent()).toBe(stored.text);
      expect(await card(variants[0]).getByTestId('variant-live').count()).toBe(0);
      await expect.poll(() => page.locator('main .error').count(), TIMEOUT).toBe(0);

      // The page's subscription is back: another variant's answer streams into its card.
      await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
        i: { sessionId: variants[1], text: '!slow 60\nafter the restart, word by word' },
      });
      await expect
        .poll(
          () =>
            card(variants[1])
              .getByTestId('variant-answer')
              .textContent({ timeout: 200 })
              .catch(() => ''),
          TIMEOUT,
        )
        .toContain('Echo: after the restart, word by word');
      const live = await liveTexts();
      expect(live[variants[1]]?.length ?? 0).toBeGreaterThan(1); // streamed, not only shown once stored
      // No card ever showed a text twice over (what had streamed, then the stored answer after it).
      for (const texts of Object.values(live)) for (const t of texts) expect(t.split('Echo:').length - 1, t).toBeLessThanOrEqual(1);
      await screenshot(page, 'dashboard-restart-fan-out.png');
      expect(errors.filter((e) => !/WebSocket|Failed to load resource|ERR_CONNECTION_REFUSED/.test(e))).toEqual([]);
      await page.close();
    } finally {
      await app.close();
    }
  }, 120_000);
});
