// Forks where the reader looks: "Fork here" on an assistant step and "Fork
// before this result" on a tool result in the conversation, and Retry on a
// failed turn (editMessage with the same text: a new session forked right
// before that input, the original unchanged).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { openPage, sessionIdOf, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let id: string;

const send = async (sessionId: string, text: string) => {
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await app.services.host.idle();
};
const log = (sessionId: string) => app.services.store.log.page(sessionId, -1, 500);

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  id = (await app.ok('mutation { createSession(input: { title: "Inline forks" }) { id } }')).createSession.id;
  await send(id, 'what time is it\n!call clock');
  await send(id, '!fail the provider is down');
}, 60_000);
afterAll(() => dashboard?.close());

describe('dashboard: forks in the conversation', () => {
  it('forks before a tool result: the child closes the call as never run', async () => {
    const events = await log(id);
    const result = events.find((e) => e.type === 'tool/result')!;
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    await page.getByRole('button', { name: `Fork before this result (event ${result.seq - 1})`, exact: true }).click();
    const dialog = page.getByRole('dialog', { name: `Fork at event ${result.seq - 1}` });
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(id), TIMEOUT);
    const child = sessionIdOf(page);
    const closer = (await log(child)).find((e) => e.type === 'tool/result' && e.seq > result.seq - 1)!;
    expect(closer.synthetic).toBe(true);
    expect(anyData(closer).callId).toBe(anyData(result).callId);
    expect(anyData(closer).status).toBe('not-started');

    // "Fork here" on an assistant step forks right at its message.
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    const message = events.find((e) => e.type === 'model/message')!;
    await page.getByRole('button', { name: `Fork here (event ${message.seq})`, exact: true }).click();
    await page.getByRole('dialog', { name: `Fork at event ${message.seq}` }).waitFor(TIMEOUT);
    await page.keyboard.press('Escape');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('forks between an input being taken and its turn starting: the dialog and the child say nothing answers it; sent again, it is answered', async () => {
    const events = await log(id);
    const taken = events.find((e) => e.type === 'inbox/remove')!;
    const added = events.find((e) => e.type === 'inbox/add' && anyData(e).inputId === anyData(taken).inputId)!;
    expect(events[taken.seq + 1].type).toBe('turn/start');
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    await page.getByRole('button', { name: `Fork here at event ${taken.seq}`, exact: true }).click();
    const dialog = page.getByRole('dialog', { name: `Fork at event ${taken.seq}` });
    const note = dialog.getByTestId('fork-taken-note');
    await note.waitFor(TIMEOUT);
    expect(await note.textContent()).toContain(
      `Message #${added.seq} ("what time is it !call clock") was taken but its turn had not started at the cut: nothing in the new session will answer it. Send it again to answer it.`,
    );
    await dialog.getByRole('button', { name: 'Send it again in the fork' }).click();
    expect(await dialog.getByLabel('Message to send in the fork (optional)').inputValue()).toBe('what time is it\n!call clock');
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(id), TIMEOUT);
    const child = sessionIdOf(page);
    const said = page.getByTestId('fork-marker').getByTestId('fork-unanswered');
    await said.waitFor(TIMEOUT);
    expect(await said.textContent()).toContain(`Message #${added.seq} ("what time is it !call clock") was taken but its turn had not started at the cut`);
    // The message sent again is the child's first turn, answered.
    await page.locator('.conversation > li.turn-end[data-turn="1"]').getByText('completed').waitFor(TIMEOUT);
    const childLog = await log(child);
    const turnStart = childLog.find((e) => e.type === 'turn/start')!;
    expect(childLog.find((e) => e.type === 'inbox/add' && e.seq > taken.seq && anyData(e).inputId === anyData(turnStart).inputId)).toMatchObject({
      data: { text: 'what time is it\n!call clock' },
    });
    expect(childLog.filter((e) => e.type === 'turn/start').map((e) => anyData(e).turn)).toEqual([1]);

    // A fork one event earlier (the input still queued): the dialog says nothing, the child's agent takes it.
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    await page.getByRole('button', { name: `Fork here at event ${taken.seq - 1}`, exact: true }).click();
    await page.getByRole('dialog', { name: `Fork at event ${taken.seq - 1}` }).waitFor(TIMEOUT);
    expect(await page.getByTestId('fork-taken-note').count()).toBe(0);
    await page.keyboard.press('Escape');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('labels plugin events in words on the timeline, the raw type on hover', async () => {
    const error = (await log(id)).find((e) => e.type === 'plugin/agent/error')!;
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    const type = page.locator(`table.timeline tr[data-seq="${error.seq}"] td.type button`);
    await type.waitFor(TIMEOUT);
    expect(await type.textContent()).toBe('agent error');
    expect(await type.getAttribute('title')).toBe('plugin/agent/error');
    expect(errors).toEqual([]);
    await page.close();
  });

  it("shows each fan-out card's last turn in figures: latency, tokens, cost and its model", async () => {
    const end = (await log(id)).find((e) => e.type === 'turn/end')!;
    await app.ok('mutation($i: FanOutInput!) { fanOut(input: $i) { cutSeq } }', {
      i: { sessionId: id, anchorSeq: end.seq, variants: [{ message: 'one' }, { message: 'two', model: { provider: 'scripted', model: 'other' } }] },
    });
    await app.services.host.idle();
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}/forks/${end.seq}`);
    const cards = page.getByTestId('variant-card');
    await expect.poll(() => cards.locator('[data-testid="variant-figures"]').count(), TIMEOUT).toBe(2);
    const figures = await cards.nth(0).getByTestId('variant-figures').innerText();
    expect(figures).toMatch(/latency\s+\d+(\.\d)? m?s/);
    expect(figures).toMatch(/tokens in\s+\d[\d,]*/);
    expect(figures).toMatch(/tokens out\s+\d[\d,]*/);
    expect(figures).toMatch(/cost\s+–/); // the scripted model has no price
    expect(await cards.nth(1).getByTestId('variant-model').textContent()).toBe('scripted/other');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('retries a failed turn in a new session, with its text', async () => {
    const before = await log(id);
    const failedInput = before.filter((e) => e.type === 'inbox/add').at(-1)!;
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    await page.getByRole('button', { name: 'Retry turn 2', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: `Edit message #${failedInput.seq}` });
    expect(await dialog.getByLabel('Edited message').inputValue()).toBe('!fail the provider is down');
    await dialog.getByLabel('Edited message').fill('the provider is back');
    await dialog.getByRole('button', { name: 'Edit and re-run', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(id), TIMEOUT);
    await page.locator('.msg.assistant .msg-text', { hasText: 'Echo: the provider is back' }).waitFor(TIMEOUT);
    // No Retry on turns that did not fail.
    expect(await page.getByRole('button', { name: /^Retry turn/ }).count()).toBe(0);
    expect(await log(id)).toEqual(before);
    expect(errors).toEqual([]);
    await page.close();
  });

  it("reads a session's fork points once when it opens, not again once its children are known", async () => {
    const parent = (await app.ok('mutation { createSession(input: { title: "Read once" }) { id } }')).createSession.id as string;
    await send(parent, 'hello');
    const atSeq = (await log(parent)).at(-1)!.seq;
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: parent, atSeq } });
    const { page, errors } = await openPage(dashboard.browser);
    const reads: string[] = [];
    page.on('request', (req) => {
      const op = (req.postDataJSON?.() as { query?: string } | null)?.query?.match(/^\s*query (DashboardForkPoints)\b/)?.[1];
      if (op) reads.push(op);
    });
    await page.goto(`${new URL(app.url).origin}/sessions/${parent}`);
    await page.getByTestId('fork-point').first().waitFor(TIMEOUT);
    await page.waitForTimeout(1_000); // a second read would have been sent by now
    expect(reads).toEqual(['DashboardForkPoints']);
    expect(errors).toEqual([]);
    await page.close();
  });
});
