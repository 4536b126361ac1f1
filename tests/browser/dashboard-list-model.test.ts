// The sessions list shows each session's model (Session.model, a column of the
// row: the list reads no log for it): the one it was created with, a fork's
// own or the one inherited at its cut, none for the host's default, and a
// change of model (setSessionModel) as sessionsChanged reports it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { openSubscriptions, subscriptionsOpened } from '../helpers/subscribe.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
const ids: Record<string, string> = {};

const create = async (title: string, model?: string) =>
  (
    await dashboard.app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
      i: { title, ...(model ? { model: { provider: 'scripted', model } } : {}) },
    })
  ).createSession.id as string;

const fork = async (id: string, atSeq: number, title: string, model?: string) =>
  (
    await dashboard.app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: id, atSeq, title, ...(model ? { model: { provider: 'scripted', model } } : {}) },
    })
  ).forkSession.session.id as string;

beforeAll(async () => {
  dashboard = await startDashboard();
  ids.plain = await create('Default model');
  ids.set = await create('Set at creation', 'model-alpha');
  ids.inherits = await fork(ids.set, 1, 'Inherits alpha');
  ids.own = await fork(ids.set, 1, 'Own beta', 'model-beta');
}, 60_000);
afterAll(() => dashboard?.close());

describe('the sessions list', () => {
  it("shows each session's model and follows a change of model live", async () => {
    const { page, errors } = await openPage(dashboard.browser);
    const open = await openSubscriptions(dashboard.app.url);
    await page.goto(dashboard.origin);
    const row = (id: string) => page.locator(`.tree-node[data-session-id="${id}"]`);
    const model = (id: string) => row(id).getByTestId('session-model');
    await row(ids.own).waitFor(TIMEOUT);
    expect(await model(ids.set).textContent()).toBe('model-alpha');
    expect(await model(ids.set).getAttribute('title')).toBe('model: scripted model-alpha');
    expect(await model(ids.inherits).textContent()).toBe('model-alpha');
    expect(await model(ids.own).textContent()).toBe('model-beta');
    expect(await model(ids.plain).count()).toBe(0); // the host's default: no model of its own to show
    await screenshot(page, 'dashboard-list-model.png');

    // The list's sessionsChanged and sessionsDeleted listen (the list may load before they do; a change is not replayed).
    await subscriptionsOpened(dashboard.app.url, open, 2);

    await dashboard.app.ok(`mutation($i: SetSessionModelInput!) { setSessionModel(input: $i) { id } }`, {
      i: { sessionId: ids.plain, model: { provider: 'scripted', model: 'model-gamma' } },
    });
    await expect.poll(() => model(ids.plain).textContent(), TIMEOUT).toBe('model-gamma');
    expect(errors).toEqual([]);
  }, 60_000);
});
