// An empty session list (a tenant's first visit) misses no session made
// between its first read and the moment the server listens for it: with no
// row it could have asked the subscription to start with, it reads again on the
// subscription's first result, which says it listens (docs/api.md,
// sessionListChanges). Its own server, so the tenant has no session at first.
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

describe('an empty session list and a late subscription', () => {
  it('shows a session made between its first read and its subscription listening, with no other change', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    // The list's subscription, whichever field it follows.
    const ws = await holdSubscriptions(page, ['sessionsChanged', 'sessionListChanges']);
    await page.goto(`${origin}/`);
    await page.getByText('No sessions yet').waitFor();
    await expect.poll(() => ws.held()).toBeGreaterThan(0);

    // The session is made, and announced to a subscriber of the test's own, while the list's is held.
    const open = await openSubscriptions(app.url);
    const changes = subscribeWs<{ sessionsChanged: { id: string } }>(app.url, 'subscription { sessionsChanged { id } }');
    await subscriptionsOpened(app.url, open, 1);
    const made = (await app.ok('mutation { createSession(input: { title: "made while the list subscribed" }) { id } }')).createSession.id as string;
    await changes.until((items) => items.some((c) => c.sessionsChanged.id === made), 'the session announced');
    await changes.close();

    ws.release();
    await page.locator(`nav.tree li.tree-node[data-session-id="${made}"]`).waitFor({ timeout: 15_000 });
    expect(errors).toEqual([]);
    await page.close();
  });
});
