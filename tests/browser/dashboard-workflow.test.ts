// The dashboard as a new user meets it: start a session with a
// model the server offers, send, rename; name a fork; import by keyboard
// (errors name the file; imported forks say so); legible controls (contrast
// computed from computed styles) in light and dark; usable at 800 px wide.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { contrasts } from './contrast.ts';
import { openPage as openPageOn, RECORDINGS, sessionIdOf, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
});

afterAll(() => dashboard?.close());

const openPage = (viewport?: { width: number; height: number }) => openPageOn(browser, { viewport });

/** A session with two completed turns and a fork of it (so the page has every kind of control). */
async function sessionWithFork(title: string) {
  const created = await app.ok(`mutation($t: String) { createSession(input: {title: $t}) { id } }`, { t: title });
  const id = created.createSession.id as string;
  for (const text of ['first question', '!call clock {}\nsecond question']) {
    await app.ok(`mutation($input: SendMessageInput!) { sendMessage(input: $input) { inputId } }`, { input: { sessionId: id, text } });
  }
  for (let i = 0; i < 100; i++) {
    const s = (await app.ok(`query($id: ID!) { session(id: $id) { status turnCount } }`, { id })).session;
    if (s.status === 'IDLE' && s.turnCount === 2) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  await app.ok(`mutation($id: ID!) { forkSession(input: {sessionId: $id, atSeq: 3, title: "a child"}) { cutSeq } }`, { id });
  return id;
}

async function expectLegibleControls(page: Page) {
  const measured = await contrasts(page);
  expect(measured.length).toBeGreaterThan(20);
  expect(measured.filter((c) => c.ratio < 4.5)).toEqual([]);
}

describe('dashboard workflow', () => {
  it('creates a session with a model the server offers, sends, renames it; a fork dialog names the child', async () => {
    const { page, errors } = await openPage();
    await page.goto(origin + '/');
    await page.getByRole('button', { name: 'New session' }).click();
    const dialog = page.getByRole('dialog', { name: 'New session' });
    // The picker lists what the `models` query offers, the default chosen.
    await expect.poll(() => dialog.getByLabel('Provider').inputValue(), TIMEOUT).toBe('scripted');
    const offered = await dialog.getByLabel('Provider').locator('option').allTextContents();
    expect(offered).toEqual(expect.arrayContaining(['scripted (default)', 'openai']));
    expect(await dialog.getByLabel('Model').inputValue()).toBe('scripted');
    await dialog.getByLabel('Title').fill('Fresh start');
    await screenshot(page, 'dashboard-new-session-dialog.png');
    await dialog.getByRole('button', { name: 'Create' }).click();
    await page.waitForURL(/\/sessions\/ses_/, TIMEOUT);
    const id = sessionIdOf(page);
    await page.getByRole('heading', { name: 'Fresh start' }).waitFor(TIMEOUT);
    // Create → type: the new session's composer has the focus.
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute('aria-label')), TIMEOUT).toBe('Message');
    const model = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
    expect(model).toContain('"provider":"scripted"');

    await page.getByLabel('Message').fill('hello there');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    await page.locator('li.msg.assistant', { hasText: 'Echo: hello there' }).waitFor(TIMEOUT);
    // The ended turn shows its duration, steps and tokens (scripted usage: words), with a bar per step.
    const stats = page.locator('li.turn-end[data-turn="1"] [data-testid="turn-stats"]');
    await expect.poll(() => stats.textContent(), TIMEOUT).toMatch(/^\d+(\.\d)? (ms|s) · 1 step · 0 tool calls · 2 in · 3 out tokens/);
    expect(await stats.locator('.step-bar').count()).toBe(1);
    expect(await stats.getByRole('img').getAttribute('aria-label')).toMatch(/^Turn 1 step latencies: step 1 \d+/);

    await page.getByRole('button', { name: 'Rename session' }).click();
    await page.getByLabel('Session title').fill('Renamed start');
    await page.getByLabel('Session title').press('Enter');
    await page.getByRole('heading', { name: 'Renamed start' }).waitFor(TIMEOUT);
    await page.locator(`li[data-session-id="${id}"] .tree-title`, { hasText: 'Renamed start' }).waitFor(TIMEOUT);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { title } }`, { id })).session.title).toBe('Renamed start');

    // Fork: the dialog proposes "<parent> · fork @N"; the child takes the edited title.
    const last = (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount - 1;
    await page.locator(`table.timeline tr[data-seq="${last}"]`).waitFor(TIMEOUT);
    await page.getByRole('button', { name: `Fork here at event ${last}`, exact: true }).click();
    const forkDialog = page.getByRole('dialog', { name: `Fork at event ${last}` });
    const titleField = forkDialog.getByLabel('Title of the new session');
    expect(await titleField.inputValue()).toBe(`Renamed start · fork @${last}`);
    await screenshot(page, 'dashboard-fork-dialog.png');
    await titleField.fill('Renamed start · try B');
    await forkDialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL((url) => !url.pathname.includes(id), TIMEOUT);
    await page.getByRole('heading', { name: 'Renamed start · try B' }).waitFor(TIMEOUT);
    // Escape closes a dialog without forking.
    await page.getByRole('button', { name: 'Branch from turn 1', exact: true }).click();
    await page.getByRole('dialog', { name: 'Branch from turn 1' }).waitFor(TIMEOUT);
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached', ...TIMEOUT });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('reaches "Import recording" by keyboard; a failed import names its file until dismissed; an imported fork says so', async () => {
    const { page, errors } = await openPage();
    await page.goto(origin + '/');
    await page.getByRole('button', { name: 'Import recording' }).waitFor(TIMEOUT);
    // Playwright turns on file-chooser interception when the first listener is
    // added, without waiting for the browser: listen early, or the first chooser
    // may open natively (nothing in headless) before interception is on.
    page.on('filechooser', () => {});
    let focused = '';
    for (let i = 0; i < 10 && focused !== 'Import recording'; i++) {
      await page.keyboard.press('Tab');
      focused = await page.evaluate(() => (document.activeElement as HTMLElement | null)?.innerText?.trim() ?? '');
    }
    expect(focused).toBe('Import recording');
    const bad = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-import-')), 'broken-recording.jsonl');
    fs.writeFileSync(bad, '{"not": "a recording"}\n');
    const [chooser] = await Promise.all([page.waitForEvent('filechooser', TIMEOUT), page.keyboard.press('Enter')]);
    await chooser.setFiles(bad);
    const banner = page.getByTestId('import-error');
    await expect.poll(() => banner.textContent(), TIMEOUT).toContain('Could not import broken-recording.jsonl');
    await screenshot(page, 'dashboard-import-error.png');
    await banner.getByRole('button', { name: 'Dismiss the import error for broken-recording.jsonl' }).click();
    await banner.waitFor({ state: 'detached', ...TIMEOUT });

    // A recording of a fork: no parent here, its lineage labelled as imported.
    const [again] = await Promise.all([page.waitForEvent('filechooser', TIMEOUT), page.getByRole('button', { name: 'Import recording' }).press('Enter')]);
    await again.setFiles(path.join(RECORDINGS, 'v4-forked-child.jsonl'));
    await page.waitForURL(/\/sessions\/ses_/, TIMEOUT);
    const id = sessionIdOf(page);
    await expect.poll(() => page.getByTestId('imported-lineage').textContent(), TIMEOUT).toMatch(/Imported fork: the recording was forked at event \d+/);
    expect(await page.locator(`li[data-session-id="${id}"] .fork-at`).textContent()).toMatch(/^imported fork @\d+$/);
    // The broken upload's 400 is the browser's own console line; nothing else went wrong.
    expect(errors.filter((e) => !e.includes('status of 400'))).toEqual([]);
    await page.close();
  });

  it('keeps every control legible (contrast >= 4.5:1) in light and dark, with distinct names', async () => {
    const id = await sessionWithFork('Contrast check');
    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${id}`);
    await page.getByRole('button', { name: 'Branch from turn 2', exact: true }).waitFor(TIMEOUT);
    await page.getByRole('button', { name: 'Branch from turn 1', exact: true }).waitFor(TIMEOUT);
    await page.locator('table.timeline tr[data-seq="3"]').waitFor(TIMEOUT);
    await page.getByRole('button', { name: 'Fork here at event 3', exact: true }).waitFor(TIMEOUT);
    await expectLegibleControls(page);

    await page.emulateMedia({ colorScheme: 'dark' });
    await expect.poll(() => page.evaluate(() => getComputedStyle(document.body).backgroundColor)).not.toBe('rgb(246, 247, 249)');
    await expectLegibleControls(page);
    await screenshot(page, 'dashboard-dark.png');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('is usable at 800 px wide: no button clipped or overlapping another', async () => {
    const id = await sessionWithFork('Narrow window');
    const { page, errors } = await openPage({ width: 800, height: 900 });
    await page.goto(`${origin}/sessions/${id}`);
    await page.getByRole('button', { name: 'Branch from turn 2', exact: true }).waitFor(TIMEOUT);
    // The timeline's rows in view (it opens at the latest events; only the rows near them exist).
    await page.locator('table.timeline tr[data-seq]').last().waitFor(TIMEOUT);
    const problems = await page.evaluate(() => {
      const clipOf = (el: Element) => {
        let box = { left: 0, right: innerWidth, top: 0, bottom: innerHeight };
        for (let e = el.parentElement; e; e = e.parentElement) {
          const s = getComputedStyle(e);
          if (s.overflowX !== 'visible' || s.overflowY !== 'visible') {
            const r = e.getBoundingClientRect();
            box = {
              left: Math.max(box.left, r.left),
              right: Math.min(box.right, r.right),
              top: Math.max(box.top, r.top),
              bottom: Math.min(box.bottom, r.bottom),
            };
          }
        }
        return box;
      };
      const shown: Array<{ name: string; r: DOMRect }> = [];
      const out: string[] = [];
      for (const b of document.querySelectorAll('button, .button')) {
        const r = b.getBoundingClientRect();
        // Not shown: the closed sessions drawer below 900 px (visibility: hidden, inert).
        if (!r.width || !r.height || !b.checkVisibility({ visibilityProperty: true })) continue;
        const clip = clipOf(b);
        // Scrolled out of its pane vertically is scrolling, not clipping; only the rows in view count.
        if (r.bottom <= clip.top || r.top >= clip.bottom || r.top < clip.top - 1 || r.bottom > clip.bottom + 1) continue;
        const name = b.getAttribute('aria-label') || (b as HTMLElement).innerText.trim();
        if (r.left < clip.left - 1 || r.right > clip.right + 1)
          out.push(`${name} clipped: ${Math.round(r.left)}–${Math.round(r.right)} in ${Math.round(clip.left)}–${Math.round(clip.right)}`);
        for (const o of shown) {
          const w = Math.min(r.right, o.r.right) - Math.max(r.left, o.r.left);
          const h = Math.min(r.bottom, o.r.bottom) - Math.max(r.top, o.r.top);
          if (w > 1 && h > 1) out.push(`${name} overlaps ${o.name}`);
        }
        shown.push({ name, r });
      }
      return { out, count: shown.length };
    });
    expect(problems.count).toBeGreaterThan(10);
    expect(problems.out).toEqual([]);
    await screenshot(page, 'dashboard-800px.png');
    expect(errors).toEqual([]);
    await page.close();
  });
});
