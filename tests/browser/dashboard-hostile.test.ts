// Content from outside shown by the dashboard (docs/dashboard.md, docs/operations.md
// "Threat model"): a recording imported through POST /recordings carries markup,
// script, javascript:/data: links, bidi overrides, zero-width characters and
// megabyte lines in every place the dashboard renders — the title, the
// instructions, a runner's tools, the input, the model's text, tool names,
// arguments and results, file paths, contents and diffs, an agent error and a
// plugin event's data. In Chromium: no script of it runs (no global set, no
// dialog, no request leaves the origin, no CSP violation: no markup of it
// reached the DOM), it is shown as text, the characters that disguise a title
// or a path are shown, and the page never scrolls sideways.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { postRecording, sha256 } from '../security/hostile-doors.ts';
import { screenshot } from './chromium.ts';
import { noHorizontalOverflow, openPage, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { ATTACKER, clean, hiddenLeft, payload, watch } from './hostile-page.ts';

const TIMEOUT = { timeout: 20_000 };

/** Right-to-left override: `report<U+202E>fdp.exe` reads as `reportexe.pdf`; a zero-width space hides inside `pay<U+200B>pal`. */
const DISGUISED_TITLE = `report\u202Efdp.exe\u202C pay\u200Bpal ${payload('title').slice(0, 120)} ${'W'.repeat(500)}`.slice(0, 500); // the longest title (500), ending in one unbroken word
const DISGUISED_PATH = `docs/invoice\u202Etxt.exe\u202C/pay\u200Bpal<img src=x onerror=window.__pwned='path'>.md`;
const LONG_PATH = `deep/${'p'.repeat(250)}.txt`; // the longest name a path may hold (255 bytes), one unbroken word
const MEGABYTE_LINE = 'M'.repeat(1024 * 1024);
const TEN_THOUSAND_LINES = Array.from({ length: 10_000 }, (_, i) => `output line ${i + 1}`).join('\n');
const fileV1 = Buffer.from(`${payload('file')}\n\u202Eevil\n`);
const fileV2 = Buffer.from(`${payload('file')}\n${payload('diff')}\n`);
const longFile = Buffer.from(`${'L'.repeat(512 * 1024)}\n`);
/** A model name and a call id (short names the log does not check) carrying bidi overrides, zero-width characters and ANSI escapes. */
const DISGUISED_MODEL = `gpt\u202Eledom\u202C pay\u200Bpal\u2060\uFEFF \x1b[2J\x1b[31mred\x1b]8;;http://${ATTACKER}/\x07link\x1b]8;;\x07`;
const DISGUISED_CALL = 'c2\u202E2c\u202C\x1b[31m';

function hostileRecording(): string {
  const turn = 1;
  const events: Array<{ type: string; data: unknown }> = [
    { type: 'session/title', data: { title: DISGUISED_TITLE } },
    { type: 'session/instructions', data: { text: `${payload('instructions')} ${'I'.repeat(90_000)}` } },
    {
      type: 'session/runner-tools',
      data: { tools: [{ name: `<img src=x onerror="window.__pwned='runner-tool'">`, description: payload('runner-tool-description'), effect: 'read-only' }] },
    },
    { type: 'inbox/add', data: { inputId: 'in_1', text: payload('input') } },
    { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId: 'in_1' } },
    { type: 'step/start', data: { turn, step: 1 } },
    {
      type: 'model/message',
      data: {
        turn,
        step: 1,
        text: `${payload('model')} ${MEGABYTE_LINE}`,
        toolCalls: [
          {
            id: 'c1',
            name: 'write_file',
            arguments: JSON.stringify({ path: DISGUISED_PATH, content: payload('arguments') }),
            effect: 'idempotent',
            files: 'only',
          },
        ],
      },
    },
    {
      type: 'plugin/files/change',
      data: {
        callId: 'c1',
        changes: [
          { path: DISGUISED_PATH, hash: sha256(fileV1), size: fileV1.byteLength },
          { path: LONG_PATH, hash: sha256(longFile), size: longFile.byteLength },
        ],
      },
    },
    {
      type: 'tool/result',
      data: { turn, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: `${payload('result')} ${MEGABYTE_LINE}`, name: 'write_file' },
    },
    { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    { type: 'step/start', data: { turn, step: 2 } },
    {
      type: 'model/message',
      data: {
        turn,
        step: 2,
        text: '',
        // Its arguments a megabyte line (the model writes them; nothing bounds them).
        toolCalls: [
          {
            id: DISGUISED_CALL,
            name: `<svg onload="window.__pwned='tool-name'">`,
            arguments: `${payload('tool-arguments')} ${MEGABYTE_LINE}`,
            effect: 'idempotent',
            files: 'only',
          },
        ],
      },
    },
    { type: 'plugin/files/change', data: { callId: DISGUISED_CALL, changes: [{ path: DISGUISED_PATH, hash: sha256(fileV2), size: fileV2.byteLength }] } },
    {
      type: 'tool/result',
      data: { turn, step: 2, callId: DISGUISED_CALL, resultId: 'r2', status: 'error', content: `${payload('tool-error')}\n${TEN_THOUSAND_LINES}` },
    },
    { type: 'plugin/agent/error', data: { turn, step: 2, message: `${payload('agent-error')} ${MEGABYTE_LINE}` } },
    { type: 'step/end', data: { turn, step: 2, reason: 'failed' } },
    { type: 'turn/end', data: { turn, reason: 'failed' } },
    { type: 'plugin/hostile/note', data: { html: payload('plugin'), [payload('plugin-key').slice(0, 80)]: MEGABYTE_LINE } },
    // Last, so the seqs above stay where the checks below look for them.
    { type: 'session/model', data: { provider: 'scripted', model: DISGUISED_MODEL } },
  ];
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_hostile', title: DISGUISED_TITLE } }];
  events.forEach((e, seq) => lines.push({ seq, ...e }));
  for (const b of [fileV1, fileV2, longFile]) lines.push({ blob: sha256(b), base64: b.toString('base64') });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

let dashboard: Dashboard;
let app: TestApp;
let origin: string;
let id: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
  const r = await postRecording(app, hostileRecording());
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  id = r.body.session.id;
}, 60_000);
afterAll(() => dashboard?.close());

/** How the disguised title and path read on the page: each hidden character as its escape. */
const SHOWN_TITLE = 'report\\u202efdp.exe\\u202c pay\\u200bpal';
const SHOWN_PATH = "docs/invoice\\u202etxt.exe\\u202c/pay\\u200bpal<img src=x onerror=window.__pwned='path'>.md";
/** The panes that scroll sideways (their content wider than they are). */
const sidewaysScrolled = (page: Page) =>
  page.evaluate(() =>
    ['conversation-scroll', 'files-pane', 'timeline-scroll']
      .map((id) => document.querySelector(`[data-testid="${id}"]`))
      .filter((el): el is HTMLElement => !!el && el.scrollWidth > el.clientWidth + 1)
      .map((el) => `${el.dataset.testid} ${el.scrollWidth}/${el.clientWidth}`),
  );

describe('dashboard: hostile content', () => {
  for (const viewport of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ])
    it(`runs none of it, shows it as text, and keeps the page from scrolling sideways (${viewport.width}x${viewport.height})`, async () => {
      const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 20_000 });
      const watcher = await watch(page, origin);
      const response = await page.goto(`${origin}/sessions/${id}`);
      expect(response?.headers()['content-security-policy']).toContain("script-src 'self'");
      const conversation = page.getByTestId('conversation-scroll');
      await conversation.getByText(`<script>window.__pwned='model'</script>`, { exact: false }).first().waitFor(TIMEOUT);
      await conversation.getByText(`<script>window.__pwned='input'</script>`, { exact: false }).first().waitFor(TIMEOUT);
      await screenshot(page, `dashboard-hostile-${viewport.width}.png`);
      expect(await noHorizontalOverflow(page)).toBe(true);
      // Bounded: megabyte lines (a message, a result, a call's arguments, an error, a plugin's data) show their start,
      // in items no taller than a few screens, and the panes hold kilobytes of text, not megabytes.
      await conversation.getByText(`<script>window.__pwned='tool-arguments'</script>`, { exact: false }).first().waitFor(TIMEOUT);
      const sizes = await page.evaluate(() => ({
        tallestItem: Math.max(...[...document.querySelectorAll('.conversation > li')].map((li) => li.getBoundingClientRect().height)),
        conversationText: document.querySelector('[data-testid="conversation-scroll"]')!.textContent!.length,
        timelineText: document.querySelector('[data-testid="timeline-scroll"]')!.textContent!.length,
      }));
      expect(sizes.tallestItem).toBeLessThan(5_000); // 281,000 px at 1440x900 when a megabyte of arguments showed whole
      expect(sizes.conversationText).toBeLessThan(50_000);
      expect(sizes.timelineText).toBeLessThan(50_000);
      // The call id and the model name (in the sessions list) read as what they are.
      expect(await conversation.locator(`.tool-call .tool-meta .muted`).allTextContents()).toContain('c2\\u202e2c\\u202c\\x1b[31m');
      expect(await hiddenLeft(page)).toEqual([]);

      // The disguised title reads as what it is: in the header and the sessions list.
      await expect.poll(() => page.locator('main h1').first().textContent(), TIMEOUT).toContain(SHOWN_TITLE);
      expect(await page.locator('.sidebar').textContent()).toContain(SHOWN_TITLE);
      // The tool call's list of the files it changed names the disguised path as it is.
      expect(await conversation.getByTestId('call-files').first().textContent()).toContain(SHOWN_PATH);

      // The session's header: the title, its instructions and the runner's tools.
      await showDetails(page);
      for (const testId of ['session-instructions', 'session-tools']) {
        const panel = page.getByTestId(testId);
        if (await panel.count()) await panel.locator('summary').first().click();
      }
      await page.getByText(`<script>window.__pwned='instructions'</script>`, { exact: false }).first().waitFor(TIMEOUT);
      expect(await noHorizontalOverflow(page)).toBe(true);
      expect(await sidewaysScrolled(page)).toEqual([]);

      // Every event's data in the timeline, the plugin event's among them.
      const rows = page.locator('table.timeline tr[data-seq]');
      await expect.poll(() => rows.count(), TIMEOUT).toBeGreaterThan(0);
      for (const seq of [7, 9, 14, 17, 8]) {
        await page.locator(`table.timeline tr[data-seq="${seq}"] td.type button`).click();
        await page.getByTestId('event-data').waitFor(TIMEOUT);
        // The 10,000-line result's data scrolls in its own box: the timeline does not grow by its height.
        if (seq === 14) expect((await page.getByTestId('event-data').boundingBox())!.height).toBeLessThan(viewport.height);
      }
      // The change set's data names the disguised path as JSON escapes it, and what JSON leaves raw escaped too.
      await expect.poll(() => page.getByTestId('event-data').textContent(), TIMEOUT).toContain('docs/invoice\\u202etxt.exe\\u202c/pay\\u200bpal');
      expect(await hiddenLeft(page)).toEqual([]);
      expect(await noHorizontalOverflow(page)).toBe(true);

      // Files: the disguised path, its content and the diff of its two versions; the long path and its megabyte line.
      await page.getByRole('tab', { name: 'Files' }).click();
      await page.getByTestId('files-pane').waitFor(TIMEOUT);
      await page.locator('.file-tree .file-node').first().waitFor(TIMEOUT);
      await page.locator(`.file-node[data-path="${LONG_PATH}"]`).click();
      await page.getByTestId('file-text').waitFor(TIMEOUT);
      expect(await noHorizontalOverflow(page)).toBe(true);
      await page.locator(`.file-node[data-path="${DISGUISED_PATH}"]`).click();
      await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toContain(`<script>window.__pwned='diff'</script>`);
      expect(await page.getByTestId('file-view').locator('.file-head code').textContent()).toBe(SHOWN_PATH);
      expect(await page.locator(`.file-node[data-path="${DISGUISED_PATH}"]`).textContent()).toContain(
        "pay\\u200bpal<img src=x onerror=window.__pwned='path'>.md",
      );
      await page.getByLabel('Compare files with').selectOption('event');
      await page.getByLabel('Compare from event').fill('9');
      await page.getByLabel('Compare from event').press('Enter');
      const changed = page.getByTestId('file-changes').locator('li');
      await changed.first().getByRole('button').click();
      await expect.poll(() => page.getByTestId('file-diff').textContent(), TIMEOUT).toContain(`<script>window.__pwned='diff'</script>`);
      await screenshot(page, `dashboard-hostile-files-${viewport.width}.png`);
      expect(await noHorizontalOverflow(page)).toBe(true);
      expect(await hiddenLeft(page)).toEqual([]);
      // No link is made from content: every link stays on this origin (the dashboard's own pages and anchors).
      const links = await page.evaluate(() => [...document.querySelectorAll('a[href]')].map((a) => (a as HTMLAnchorElement).href));
      expect(links.length).toBeGreaterThan(0);
      expect(links.filter((href) => new URL(href).origin !== origin)).toEqual([]);
      // The panes scroll down, never sideways: what is too wide scrolls in its own box (a file's text, the tree) or wraps.
      expect(await sidewaysScrolled(page)).toEqual([]);

      expect(await watcher.verdict()).toEqual(clean);
      expect(errors).toEqual([]);
      await page.close();
    });

  it('an export opened in the browser downloads (GET /recordings) or shows as text (event pages): none of it runs', async () => {
    const { page } = await openPage(dashboard.browser);
    const watcher = await watch(page, origin);
    const download = page.waitForEvent('download');
    await page.goto(`${origin}/recordings?session=${id}`).catch(() => {}); // a download is not a navigation
    expect((await download).suggestedFilename()).toMatch(/^[A-Za-z0-9._-]+\.jsonl$/);
    await page.goto(`${origin}/sessions/${id}/events`);
    expect(await page.evaluate(() => document.contentType)).toBe('application/json');
    expect(await page.evaluate(() => document.querySelectorAll('script, img, svg, iframe').length)).toBe(0);
    expect(await watcher.verdict()).toEqual(clean);
    await page.close();
  });

  it('enforces its CSP: script injected into the page is refused and reported', async () => {
    const { page } = await openPage(dashboard.browser);
    const watcher = await watch(page, origin);
    await page.goto(`${origin}/sessions/${id}`);
    await page.getByTestId('conversation-scroll').waitFor(TIMEOUT);
    await page.evaluate(() => {
      const s = document.createElement('script');
      s.textContent = "window.__pwned = 'inline'";
      document.body.append(s);
    });
    await expect.poll(async () => (await watcher.verdict()).violations.length, TIMEOUT).toBeGreaterThan(0);
    const { pwned, violations } = await watcher.verdict();
    expect(pwned).toBeUndefined();
    expect(violations[0]).toMatch(/^script-src-elem inline/);
    await page.close();
  });
});
