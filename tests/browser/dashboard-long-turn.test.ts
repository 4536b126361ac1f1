// The end of a turn of thousands of steps (an imported recording's, a
// runner's): its figures count every step and call (Turn.stepCount and
// toolCallCount), and it draws a bounded number of step bars. Before, it read
// "3333 steps · 3333 tool calls" for a turn of 49,998 (Turn.steps lists the
// first 3,333) and drew 3,333 bars, 20,000 px of them, named one by one in a
// 52 kB label.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { longTurnRecording } from '../fixtures/recordings/recordings.ts';
import { importRecording, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const STEPS = 3_500;
let dashboard: Dashboard;
let id: string;

beforeAll(async () => {
  dashboard = await startDashboard();
  id = await importRecording(dashboard, longTurnRecording(STEPS));
}, 60_000);
afterAll(() => dashboard?.close());

describe('dashboard: the end of a turn of thousands of steps', () => {
  it('counts all its steps and calls, and draws at most 50 step bars', async () => {
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    const endSeq = 3 + 4 * STEPS;
    await page.goto(`${dashboard.origin}/sessions/${id}#seq-${endSeq}`);
    const stats = page.locator('li.turn-end[data-turn="1"] [data-testid="turn-stats"]');
    await stats.waitFor({ timeout: 30_000 });
    expect(await stats.locator('.muted').textContent()).toMatch(/^[^·]+ · 3,500 steps · 3,500 tool calls$/);
    expect(await stats.locator('.step-bar').count()).toBe(50);
    expect(await stats.locator('.step-bars').getAttribute('aria-label')).toMatch(/^Turn 1 step latencies \(its first 50 steps of 3,500\): step 1 /);
    expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);
});
