// Tool approval in the dashboard (docs/contract.md#tool-approval): a session
// whose call awaits approval shows the call's tool and input where it is in the
// conversation, with Approve and Deny (an optional reason) reached from the
// keyboard; the list and the header say "waiting"; after a decision the turn
// goes on live (the result, then the turn's end) on a real server with the
// scripted model calling a tool the session marked as needing approval.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;

/** A session whose first turn waits on note_write's approval. */
async function waitingSession(app: TestApp, title: string, value: string): Promise<string> {
  const id = (
    await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', {
      i: { title, approvalRequired: ['note_write'] },
    })
  ).createSession.id as string;
  const text = `please note it\n!call note_write {"key":"greeting","value":"${value}"}`;
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
  await app.services.host.idle();
  const { session } = await app.ok('query($id: ID!) { session(id: $id) { status pendingApprovals { callId name } } }', { id });
  expect(session.status).toBe('WAITING');
  expect(session.pendingApprovals.map((p: { name: string }) => p.name)).toEqual(['note_write']);
  return id;
}

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
}, 60_000);
afterAll(() => dashboard?.close());

const headerStatus = (page: Page) => page.locator('header.session-head .counts .badge').first();
const listStatus = (page: Page, id: string) => page.locator(`li.tree-node[data-session-id="${id}"] .badge`).first();

async function openWaiting(page: Page, id: string, value: string) {
  await page.goto(`${dashboard.origin}/sessions/${id}`);
  const prompt = page.getByTestId('approval-prompt');
  await prompt.waitFor(TIMEOUT);
  // Where the call is: inside the assistant step that made it, under the call's tool and input.
  const callId = await prompt.getAttribute('data-call-id');
  const call = page.locator(`li.msg.assistant .tool-call[data-call-id="${callId}"]`);
  expect(await call.getByTestId('approval-prompt').count()).toBe(1);
  expect(await call.locator('.tool-head code').textContent()).toBe(`note_write({"key":"greeting","value":"${value}"})`);
  expect(await headerStatus(page).textContent()).toBe('waiting');
  await listStatus(page, id).waitFor(TIMEOUT);
  expect(await listStatus(page, id).textContent()).toBe('waiting');
  return { prompt, call };
}

describe('tool approval in the dashboard', () => {
  it('Approve (from the keyboard) runs the tool and the turn goes on live', async () => {
    const id = await waitingSession(app, 'Needs approval', 'hello');
    const { page, errors } = await openPage(dashboard.browser);
    const { call } = await openWaiting(page, id, 'hello');

    // Keyboard: Approve is a tab stop (Shift+Tab away and Tab back lands on it); Enter decides.
    const approve = page.getByRole('button', { name: 'Approve note_write' });
    await approve.focus();
    await page.keyboard.press('Shift+Tab');
    expect(await approve.evaluate((b) => b === document.activeElement)).toBe(false);
    await page.keyboard.press('Tab');
    expect(await approve.evaluate((b) => b === document.activeElement)).toBe(true);
    await page.keyboard.press('Enter');

    // The decision, the tool's result and the turn's end arrive live, without a reload.
    await call.getByTestId('approval-decision').waitFor(TIMEOUT);
    expect(await call.getByTestId('approval-decision').getAttribute('data-decision')).toBe('approved');
    const result = call.getByTestId('tool-result');
    await result.waitFor(TIMEOUT);
    expect(await result.getAttribute('data-status')).toBe('ok');
    await page.locator('li.turn-end[data-turn="1"]').waitFor(TIMEOUT);
    expect(await page.getByTestId('approval-prompt').count()).toBe(0);
    await expect.poll(() => headerStatus(page).textContent(), TIMEOUT).toBe('idle');
    await expect.poll(() => listStatus(page, id).textContent(), TIMEOUT).toBe('idle');

    const { session } = await app.ok('query($id: ID!) { session(id: $id) { status workspace { key value } } }', { id });
    expect(session.status).toBe('IDLE');
    expect(session.workspace).toEqual([expect.objectContaining({ key: 'greeting', value: 'hello' })]);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('Deny with a reason (from the keyboard): the tool never runs and the model is told why', async () => {
    const id = await waitingSession(app, 'Deny me', 'bye');
    const { page, errors } = await openPage(dashboard.browser);
    const { call } = await openWaiting(page, id, 'bye');

    await page.getByRole('button', { name: 'Approve note_write' }).focus();
    await page.keyboard.press('Tab'); // Deny…
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Deny…');
    await page.keyboard.press('Enter');
    // The reason field takes the focus; Enter sends the denial.
    const reason = page.getByLabel('Reason (optional, the model is told)');
    await reason.waitFor(TIMEOUT);
    expect(await reason.evaluate((i) => i === document.activeElement)).toBe(true);
    await page.keyboard.type('not on a Friday');
    await page.keyboard.press('Enter');

    const decision = call.getByTestId('approval-decision');
    await decision.waitFor(TIMEOUT);
    expect(await decision.getAttribute('data-decision')).toBe('denied');
    expect(await decision.textContent()).toContain('not on a Friday');
    const result = call.getByTestId('tool-result');
    await result.waitFor(TIMEOUT);
    expect(await result.getAttribute('data-status')).toBe('error');
    expect(await result.locator('.tool-result-text').textContent()).toContain('was denied: not on a Friday');
    await page.locator('li.turn-end[data-turn="1"]').waitFor(TIMEOUT);
    await expect.poll(() => headerStatus(page).textContent(), TIMEOUT).toBe('idle');

    const { session } = await app.ok('query($id: ID!) { session(id: $id) { status workspace { key } } }', { id });
    expect(session.status).toBe('IDLE');
    expect(session.workspace).toEqual([]); // never ran
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
