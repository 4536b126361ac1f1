// A turn a crash interrupted shows a duration that ends at the crash (the last
// event before repair's closers), not at the recovery days later: the crashed
// recording is imported now, its closers written now, and the turn's line and
// its step's bar still say 4.0 s and 3.0 s (src/store/crash-stop-times.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { readFixture } from '../fixtures/recordings/recordings.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let id: string;

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  // Turn 2 starts at 10:00:11, its step at 10:00:12; the last event the process wrote is at 10:00:15.
  id = (await app.ok('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: readFixture('v3-crashed.jsonl') })).importRecording.id;
}, 60_000);
afterAll(() => dashboard?.close());

describe('an interrupted turn in the dashboard', () => {
  it('lasts until the crash, not until the repair', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${dashboard.origin}/sessions/${id}`);
    const end = page.locator('li.turn-end[data-turn="2"]');
    await end.waitFor(TIMEOUT);
    expect(await end.locator('.badge').first().textContent()).toBe('interrupted');
    const stats = end.getByTestId('turn-stats');
    await stats.waitFor(TIMEOUT);
    expect(await stats.locator('.muted').first().textContent()).toBe('4.0 s · 1 step · 2 tool calls');
    expect(await stats.locator('.step-bars').getAttribute('aria-label')).toBe('Turn 2 step latencies: step 1 3.0 s');
    expect(errors).toEqual([]);
    await page.close();
  });
});
