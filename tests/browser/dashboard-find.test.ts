// Finding things in a 1,000,000-event session (issue 33 item 6), and export
// with progress and import from the UI (item 8), in Chromium. The in-session
// search is the server's full-text index: hits anywhere in the log, in seq
// order, with markers for the events between them, each jumping both panes
// there; the events filter is served by the server a page of matches at a
// time. Export streams from GET /recordings with a progress bar; the file it
// saves imports back through the sidebar's Import button.
//
// Runtime: the million events are written in bulk inside Postgres
// (bench/long-session.ts: ~30-60 s on a loaded 2-core machine), the rest
// takes seconds; nothing waits for the log to load in the page.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { createLongSession, EVENTS_PER_TURN } from '../../bench/long-session.ts';
import { screenshot } from './chromium.ts';
import { openPage as openPageOn, startDashboard, type Dashboard } from './dashboard-harness.ts';

const MILLION = 1_000_000;
const EXPORTED = 100_000;
const TIMEOUT = { timeout: 20_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let context: BrowserContext;
let origin: string;
let big: string;
let medium: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-find-'));

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  const { store } = app.services;
  big = (await createLongSession({ store, db: { pool: store.pool } }, MILLION, { title: 'A million events' })).id;
  medium = (await createLongSession({ store, db: { pool: store.pool } }, EXPORTED, { title: 'Exported' })).id;
  context = await (await browser).newContext({ viewport: { width: 1440, height: 900 }, acceptDownloads: true });
}, 300_000);

afterAll(async () => {
  await context?.close();
  await dashboard?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const openPage = () => openPageOn(context, { timeoutMs: 20_000 });
/** The seqs of turn t's input and answer (seq 0 is the title; turns of EVENTS_PER_TURN events follow). */
const turnSeqs = (t: number) => [1 + (t - 1) * EVENTS_PER_TURN, 1 + (t - 1) * EVENTS_PER_TURN + 4];

describe('finding things in a 1,000,000-event session', () => {
  it('searches the whole log on the server: hits in seq order with gap markers, each jumping there', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    await page.locator(`table.timeline tr[data-seq="${MILLION - 1}"]`).waitFor(TIMEOUT);

    // Three turns far apart: their numbers are words of their input and answer only.
    const turns = [1000, 71_428, 142_000];
    await page.getByTestId('session-search-input').fill(turns.join(' or '));
    const results = page.getByTestId('session-search-results');
    const hits = results.locator('button.session-hit');
    await expect.poll(() => hits.count(), TIMEOUT).toBe(6);
    const seqs = await hits.evaluateAll((bs) => bs.map((b) => Number(b.getAttribute('data-seq'))));
    expect(seqs).toEqual(turns.flatMap(turnSeqs));
    expect(await hits.nth(2).textContent()).toContain('71428');
    // A marker before the first hit and between each two: the events in between.
    const gaps = await results.getByTestId('search-gap').allTextContents();
    const between = [seqs[0] + 1, ...seqs.slice(1).map((s, i) => s - seqs[i])].map((n) => `${(n - 1).toLocaleString('en-US')} event${n - 1 === 1 ? '' : 's'}`);
    expect(gaps.map((g) => g.replace(/⋯/g, '').trim())).toEqual(between);
    await screenshot(page, 'dashboard-session-search.png');

    // A hit jumps both panes to its event, half a million events in.
    await hits.nth(3).click();
    const row = page.locator(`table.timeline tr[data-seq="${seqs[3]}"].target`);
    await row.waitFor(TIMEOUT);
    expect(await hits.nth(3).getAttribute('aria-current')).toBe('true');
    expect(await page.locator('.conversation > li[data-target]').textContent()).toContain('Echo: question 71428');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('filters by type on the server: the latest matches of the million, then earlier ones', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${big}`);
    await page.locator(`table.timeline tr[data-seq="${MILLION - 1}"]`).waitFor(TIMEOUT);
    await page.getByLabel('Filter by event type').selectOption('turn/end');
    const filtered = page.getByTestId('filtered-timeline');
    const note = filtered.locator('.filter-note');
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^200 matching events shown, the latest first/);
    const rows = filtered.locator('tr[data-seq]');
    const turns = Math.floor((MILLION - 1) / EVENTS_PER_TURN);
    const lastEnd = turns * EVENTS_PER_TURN; // seq of the last turn/end
    expect(await rows.last().getAttribute('data-seq')).toBe(String(lastEnd));
    expect(await rows.first().getAttribute('data-seq')).toBe(String(lastEnd - 199 * EVENTS_PER_TURN));
    await filtered.getByRole('button', { name: 'Earlier matches' }).click();
    await expect.poll(() => note.textContent(), TIMEOUT).toMatch(/^400 matching events shown/);
    expect(await rows.first().getAttribute('data-seq')).toBe(String(lastEnd - 399 * EVENTS_PER_TURN));
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('export with progress and import from the UI', () => {
  it('exports a 100,000-event session as a stream with a progress bar, and imports the file back', async () => {
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${medium}`);
    const button = page.getByTestId('export-recording');
    await button.waitFor(TIMEOUT);
    // Every label the button shows while it exports.
    await page.evaluate(() => {
      const seen: string[] = ((window as unknown as { exportLabels: string[] }).exportLabels = []);
      const el = document.querySelector('[data-testid="export-recording"]')!;
      new MutationObserver(() => seen.push(el.textContent ?? '')).observe(el, { subtree: true, childList: true, characterData: true });
    });
    const [download] = await Promise.all([page.waitForEvent('download', TIMEOUT), button.click()]);
    const file = path.join(dir, download.suggestedFilename());
    await download.saveAs(file);
    expect(download.suggestedFilename()).toBe('exported.jsonl');
    const labels = (await page.evaluate(() => (window as unknown as { exportLabels: string[] }).exportLabels)) as string[];
    const percents = labels.map((l) => /Exporting… (\d+)%/.exec(l)?.[1]).filter(Boolean).map(Number);
    expect(percents.some((p) => p > 0 && p < 100)).toBe(true);
    await expect.poll(() => button.textContent(), TIMEOUT).toBe('Export recording');
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(lines).toHaveLength(1 + EXPORTED);

    // Back in through the sidebar's Import button (streamed to POST /recordings): a new session of the same length.
    await page.getByTestId('import-file').setInputFiles(file);
    await page.waitForURL((u) => !u.pathname.includes(medium) && u.pathname.startsWith('/sessions/'), TIMEOUT);
    await expect.poll(() => page.locator('.session-head .meta').textContent(), TIMEOUT).toContain(`${EXPORTED} events`);
    expect(errors).toEqual([]);
    await page.close();
  });
});
