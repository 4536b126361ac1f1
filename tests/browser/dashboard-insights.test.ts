// Numbers people want to see, at 1440x900: the session's
// totals and each turn's duration, steps, tool calls and tokens in full (not
// truncated), a chart of the last turns' latency and tokens, the workspace at
// any event, a forked turn's duration as of the cut, and the sessions list
// filtered by status and sorted by title.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { formatDuration } from '../../client/dashboard/src/format.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { anyData } from '../helpers/event-data.ts';

const TIMEOUT = { timeout: 10_000 };
let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let parent: string;
let child: string;
let writes: Array<{ seq: number; value: string }>;

const send = async (sessionId: string, text: string) => {
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await app.services.host.idle();
};
const create = async (title: string) =>
  (await app.ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id as string;
const n = (x: number) => x.toLocaleString('en-US');

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  parent = await create('Insights');
  await send(parent, 'first\n!call note_write {"key":"plan","value":"draft"}');
  await send(parent, 'second\n!call note_write {"key":"plan","value":"final"}\n!then\n!call clock');
  await send(parent, 'third, no tools');
  const events = await app.services.store.log.page(parent, -1, 500);
  writes = events.filter((e) => e.type === 'plugin/workspace/write').map((e) => ({ seq: e.seq, value: anyData(e).value as string }));
  // A fork inside turn 2's second step, made a while after the turn ended.
  const cut = events.filter((e) => e.type === 'step/start' && anyData(e).turn === 2)[1].seq;
  await new Promise((r) => setTimeout(r, 300));
  child = (
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
      i: { sessionId: parent, atSeq: cut, title: 'Insights child' },
    })
  ).forkSession.session.id;
}, 60_000);

afterAll(() => dashboard?.close());

describe('dashboard: totals, chart, workspace, durations, list view (1440x900)', () => {
  it('shows the totals and every turn figure in full; the chart jumps to a turn; the workspace at an event', async () => {
    const { session } = await app.ok(
      'query($id: ID!) { session(id: $id) { totals { turns steps toolCalls inputTokens outputTokens turnMs } turns { turn endSeq durationMs usage { inputTokens outputTokens } steps { toolCallCount } } } }',
      { id: parent },
    );
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${parent}`);
    const totals = page.getByTestId('session-totals');
    await totals.waitFor(TIMEOUT);
    const t = session.totals;
    // The line shows placeholders ("…") until Session.totals answers.
    await expect
      .poll(() => totals.innerText(), TIMEOUT)
      .toBe(
        [
          `Turns\n${t.turns}`,
          `Time in turns\n${formatDuration(t.turnMs)}`,
          `Tokens in\n${n(t.inputTokens)}`,
          `Tokens out\n${n(t.outputTokens)}`,
          'Cost\n–', // the scripted model has no price
          `Tool calls\n${t.toolCalls}`,
          `Steps\n${t.steps}`,
        ].join('\n'),
      );

    // Each turn's line says it all, none of it cut off.
    for (const turn of session.turns) {
      const stats = page.locator(`li.turn-end[data-turn="${turn.turn}"] [data-testid="turn-stats"] > .muted`);
      const calls = turn.steps.reduce((k: number, s: any) => k + s.toolCallCount, 0);
      const steps = turn.steps.length;
      await expect
        .poll(() => stats.textContent(), TIMEOUT)
        .toBe(
          `${formatDuration(turn.durationMs)} · ${steps} step${steps === 1 ? '' : 's'} · ${calls} tool call${calls === 1 ? '' : 's'} · ${n(turn.usage.inputTokens)} in · ${n(turn.usage.outputTokens)} out tokens`,
        );
      expect(await stats.evaluate((el) => el.scrollWidth <= el.clientWidth && el.getBoundingClientRect().right <= innerWidth)).toBe(true);
    }

    // The chart: a bar group per turn, each with its figures; a click jumps to the turn's end.
    await page.getByText('Chart: latency and tokens of the last 40 turns').click();
    const chart = page.getByTestId('turn-chart');
    await chart.waitFor(TIMEOUT);
    await expect.poll(() => chart.locator('g.chart-turn').count(), TIMEOUT).toBe(session.turns.length);
    expect(await chart.locator('g.chart-turn[data-turn="2"] title').textContent()).toBe(
      `turn 2 (completed): ${formatDuration(session.turns[1].durationMs)}, ${n(session.turns[1].usage.inputTokens)} in · ${n(session.turns[1].usage.outputTokens)} out tokens, 2 tool calls`,
    );
    await chart.locator('g.chart-turn[data-turn="1"]').click();
    await page.locator(`table.timeline tr.target[data-seq="${session.turns[0].endSeq}"]`).waitFor(TIMEOUT);

    // The workspace: at the event jumped to (turn 1's end), now, at the first write's result, then before it.
    const viewer = page.getByTestId('workspace-viewer');
    const summary = viewer.locator('summary');
    await expect.poll(() => summary.textContent(), TIMEOUT).toBe(`Workspace at event #${session.turns[0].endSeq}`);
    await summary.click();
    await expect.poll(() => viewer.locator('tr[data-key="plan"] td.workspace-value').textContent(), TIMEOUT).toBe('draft');
    await viewer.getByRole('button', { name: 'Latest' }).click();
    await expect.poll(() => summary.textContent(), TIMEOUT).toBe('Workspace now');
    await expect.poll(() => viewer.locator('tr[data-key="plan"] td.workspace-value').textContent(), TIMEOUT).toBe('final');
    await viewer.getByLabel('Workspace at seq').fill(String(writes[0].seq + 1));
    await viewer.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => viewer.locator('tr[data-key="plan"] td.workspace-value').textContent(), TIMEOUT).toBe('draft');
    await viewer.getByLabel('Workspace at seq').fill(String(writes[0].seq));
    await viewer.getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => viewer.locator('p.muted').textContent(), TIMEOUT).toBe(`Empty at event #${writes[0].seq}: no note was written before it.`);
    await viewer.getByRole('button', { name: 'Latest' }).click();
    await expect.poll(() => viewer.locator('tr[data-key="plan"] td.workspace-value').textContent(), TIMEOUT).toBe('final');
    await screenshot(page, 'dashboard-insights.png');
    expect(errors).toEqual([]);
    await page.close();
  });

  it("shows a forked turn's duration up to the cut, as the server times it", async () => {
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { turns { turn reason durationMs } } }', { id: child });
    const forked = session.turns.find((t: any) => t.reason === 'forked');
    const { session: p } = await app.ok('query($id: ID!) { session(id: $id) { turns { turn durationMs } } }', { id: parent });
    expect(forked.durationMs).toBeLessThanOrEqual(p.turns[1].durationMs); // cut inside it, not at the fork's time
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${child}`);
    const stats = page.locator(`li.turn-end[data-turn="${forked.turn}"] [data-testid="turn-stats"] > .muted`);
    await expect.poll(() => stats.textContent(), TIMEOUT).toMatch(new RegExp(`^${formatDuration(forked.durationMs).replace('.', '\\.')} · `));
    expect(errors).toEqual([]);
    await page.close();
  });

  it('filters the sessions list by status and sorts it by title', async () => {
    const running = await create('banana bread');
    await create('Apple pie');
    await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: running, text: '!call sleep {"ms": 20000}' } });
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/`);
    const titles = () => page.locator('nav.tree .tree-link:not(.context) .tree-title').allTextContents();
    await expect.poll(titles, TIMEOUT).toContain('banana bread');

    await page.getByLabel('Sort sessions').selectOption('title');
    // A fork is labelled by what its title adds to its parent's (the whole title on hover).
    await expect.poll(titles, TIMEOUT).toEqual(['Apple pie', 'banana bread', 'Insights', 'child']);
    await page.getByLabel('Filter sessions by status').selectOption('RUNNING');
    await expect.poll(titles, TIMEOUT).toEqual(['banana bread']);
    await page.getByLabel('Filter sessions by status').selectOption('IDLE');
    await expect.poll(titles, TIMEOUT).toEqual(['Apple pie', 'Insights', 'child']);
    await page.getByLabel('Filter sessions by creation date').selectOption('1d');
    await expect.poll(titles, TIMEOUT).toEqual(['Apple pie', 'Insights', 'child']);
    // The choice survives a reload.
    await page.reload();
    await expect.poll(titles, TIMEOUT).toEqual(['Apple pie', 'Insights', 'child']);
    await screenshot(page, 'dashboard-list-view.png');
    await app.ok('mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }', { id: running });
    expect(errors).toEqual([]);
    await page.close();
  });
});
