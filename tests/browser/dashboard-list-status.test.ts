// The sessions list tells sessions apart: a session whose last turn failed
// shows "failed" (Session.lastTurnFailed, kept on its row), not "idle", and the
// status filter has "failed"; a fork is labelled by what distinguishes it from
// its parent, its full title on hover.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let plan: string;
let failedVariant: string;
let okVariant: string;

const send = async (sessionId: string, text: string) => {
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await app.services.host.idle();
};
const failed = async (id: string) => (await app.ok('query($id: ID!) { session(id: $id) { lastTurnFailed } }', { id })).session.lastTurnFailed as boolean;
const fork = async (sessionId: string, atSeq: number, title: string) =>
  (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId, atSeq, title } })).forkSession.session
    .id as string;

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  plan = (await app.ok('mutation { createSession(input: { title: "Plan the launch" }) { id } }')).createSession.id;
  await send(plan, 'hello');
  okVariant = await fork(plan, 0, 'Plan the launch · variant with a careful model');
  failedVariant = await fork(plan, 0, 'Plan the launch · variant 2');
  await send(failedVariant, '!fail the provider is down');
}, 60_000);
afterAll(() => dashboard?.close());

describe('the sessions list: failed, and forks told apart', () => {
  it('keeps lastTurnFailed on the row: set by a failed turn, cleared by the next one, kept by a fork at the end', async () => {
    expect(await failed(plan)).toBe(false);
    expect(await failed(failedVariant)).toBe(true);
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: failedVariant });
    const child = await fork(failedVariant, session.eventCount - 1, 'Plan the launch · variant 2 · again');
    expect(await failed(child)).toBe(true); // its last turn is the failed one it inherits
    expect(await failed(await fork(failedVariant, 0, 'Plan the launch · early'))).toBe(false);
    await send(child, 'try again');
    expect(await failed(child)).toBe(false);
  });

  it('shows failed, filters by it, and labels forks by what distinguishes them', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(dashboard.origin);
    const row = (id: string) => page.locator(`.tree-node[data-session-id="${id}"]`);
    await row(failedVariant).waitFor(TIMEOUT);
    expect(await row(failedVariant).locator('.badge').first().textContent()).toBe('failed');
    expect(await row(okVariant).locator('.badge').first().textContent()).toBe('idle');
    // A fork reads as what distinguishes it; the full title is on hover.
    expect(await row(okVariant).locator('.tree-title').textContent()).toBe('variant with a careful model');
    expect(await row(failedVariant).locator('.tree-title').textContent()).toBe('variant 2');
    expect(await row(failedVariant).locator('a').getAttribute('title')).toBe('Plan the launch · variant 2 (fork of Plan the launch at event 0)');
    expect(await row(plan).locator('.tree-title').textContent()).toBe('Plan the launch');

    await page.getByLabel('Filter sessions by status').selectOption('FAILED');
    await expect.poll(() => page.locator('.tree-node a:not(.context)').count(), TIMEOUT).toBe(1);
    expect(await page.locator('.tree-node a:not(.context)').first().getAttribute('href')).toContain(failedVariant);
    await screenshot(page, 'dashboard-list-failed.png');
    await page.getByLabel('Filter sessions by status').selectOption('all');
    expect(errors).toEqual([]);
    await page.close();
  });
});
