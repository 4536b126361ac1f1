// The sidebar's recording import shows its upload's progress (bytes sent of
// the total, percent) and a Cancel that aborts it; the server keeps nothing of
// a cancelled import (no session, its spool file removed). The browser's
// upload is throttled (Chromium's network emulation) so the upload lasts long
// enough to watch and to cancel.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { longRecordingLines } from '../fixtures/recordings/recordings.ts';
import { openPage, sessionIdOf, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 20_000 };
let dashboard: Dashboard;
let app: TestApp;
let spoolDir: string;

beforeAll(async () => {
  spoolDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-dashboard-spool-'));
  ({ app } = dashboard = await startDashboard({ uploadDir: spoolDir }));
}, 60_000);
afterAll(async () => {
  await dashboard?.close();
  fs.rmSync(spoolDir, { recursive: true, force: true });
});

const sessionCount = async () => (await app.ok('{ sessionCount }')).sessionCount as number;

/** A recording of about `events` events, as the file picker hands it over. */
function recordingFile(events: number, title: string) {
  const lines = longRecordingLines(events, title);
  return { name: `${title}.jsonl`, mimeType: 'application/x-ndjson', buffer: Buffer.from(lines.join('\n') + '\n'), events: lines.length - 1 };
}

/** Uploads from this page go at `bytesPerSecond` (Chromium's network emulation). */
async function throttleUploads(page: Page, bytesPerSecond: number) {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: bytesPerSecond });
}

/** The progress as shown, read at one instant: bytes sent and total (its data), its figures and its bar's value. */
const progressOf = (page: Page) =>
  page.getByTestId('import-progress').evaluate((el: HTMLElement) => ({
    sent: Number(el.dataset.sent),
    total: Number(el.dataset.total),
    figures: el.querySelector('.import-figures')?.textContent ?? '',
    bar: Number(el.querySelector('progress')?.value),
  }));

describe('recording import: progress and cancel', () => {
  it('shows bytes sent of the total and the percent while it uploads, then opens the imported session', async () => {
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    await page.goto(dashboard.origin);
    await throttleUploads(page, 128 * 1024);
    const file = recordingFile(5_000, 'watched'); // about 400 KB: a few seconds at 128 KB/s
    await page.getByTestId('import-file').setInputFiles(file);

    const bar = page.getByTestId('import-progress');
    await bar.waitFor(TIMEOUT);
    // Part-way: some bytes sent, not all, in the figures and the bar.
    await expect.poll(async () => (await progressOf(page)).sent, TIMEOUT).toBeGreaterThan(0);
    const mid = await progressOf(page);
    expect(mid.total).toBe(file.buffer.length);
    expect(mid.sent).toBeLessThan(mid.total);
    const percent = Math.floor((mid.sent / mid.total) * 100);
    const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
    expect(mid.figures).toBe(`${kb(mid.sent)} of ${kb(file.buffer.length)} (${percent}%)`);
    expect(mid.bar).toBe(percent);
    expect(await page.getByRole('button', { name: 'Cancel import' }).isEnabled()).toBe(true);

    await page.waitForURL(/\/sessions\/ses_/, TIMEOUT);
    await bar.waitFor({ state: 'detached', ...TIMEOUT });
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { title eventCount } }', { id: sessionIdOf(page) });
    expect(session).toEqual({ title: 'watched', eventCount: file.events });
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it('once the file is sent, shows how far the server has checked and written it, then opens the session', async () => {
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    await page.goto(dashboard.origin);
    // Sent at once (no throttle); its import on the server lasts seconds: what the page shows then is the server's progress.
    const file = recordingFile(40_000, 'imported slowly');
    await page.getByTestId('import-file').setInputFiles(file);
    const bar = page.getByTestId('import-progress');
    await bar.waitFor(TIMEOUT);
    const importing = page.locator('[data-testid="import-progress"][data-imported]');
    await importing.waitFor(TIMEOUT);
    const seen = await importing.evaluate((el: HTMLElement) => ({
      imported: Number(el.dataset.imported),
      figures: el.querySelector('.import-figures')?.textContent ?? '',
      bar: Number(el.querySelector('progress')?.value),
    }));
    expect(seen.imported).toBeLessThanOrEqual(file.buffer.length);
    const percent = Math.floor((seen.imported / file.buffer.length) * 100);
    expect(seen.bar).toBe(percent);
    expect(seen.figures).toMatch(
      new RegExp(`^importing: [\\d.,]+ (MB|KB|bytes) of ${(file.buffer.length / 2 ** 20).toFixed(1)} MB checked \\(${percent}%\\), [\\d,]+ lines$`),
    );

    await page.waitForURL(/\/sessions\/ses_/, { timeout: 60_000 });
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { title eventCount } }', { id: sessionIdOf(page) });
    expect(session).toEqual({ title: 'imported slowly', eventCount: file.events });
    expect(errors).toEqual([]);
    await page.close();
  }, 120_000);

  it('Cancel aborts the upload: the page says so, and the server keeps no session and no spool file', async () => {
    const before = await sessionCount();
    const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
    await page.goto(dashboard.origin);
    await throttleUploads(page, 64 * 1024);
    const file = recordingFile(20_000, 'cancelled'); // about 1.7 MB: half a minute at 64 KB/s
    await page.getByTestId('import-file').setInputFiles(file);

    // Under way: bytes sent, and the server spooling them.
    await expect.poll(async () => (await progressOf(page)).sent, TIMEOUT).toBeGreaterThan(0);
    await expect.poll(() => fs.readdirSync(spoolDir).length, TIMEOUT).toBe(1);
    const cancel = page.getByRole('button', { name: 'Cancel import' });
    expect((await progressOf(page)).sent).toBeLessThan(file.buffer.length);
    await cancel.focus();
    await page.keyboard.press('Enter');

    const said = page.getByTestId('import-cancelled');
    await said.waitFor(TIMEOUT);
    expect(await said.textContent()).toBe('Import of cancelled.jsonl cancelled: nothing was imported.');
    expect(await page.getByTestId('import-progress').count()).toBe(0);
    expect(await page.getByTestId('import-error').count()).toBe(0);
    await expect.poll(() => fs.readdirSync(spoolDir), TIMEOUT).toEqual([]);
    expect(await sessionCount()).toBe(before);
    expect(new URL(page.url()).pathname).toBe('/');
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
