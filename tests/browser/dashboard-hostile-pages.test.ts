// Hostile text on the pages dashboard-hostile.test.ts does not open: a fork point side by
// side (/sessions/<id>/forks/<seq>) and compare by turns (/compare/<a>/<b>), on children
// of a 20,000-event session; and a session whose tool lists are as long as the log allows
// (500 names of 200 characters: a note of 100,000 characters). Titles, messages, answers,
// errors, model names, tool names and arguments carry markup, script, javascript: links,
// bidi overrides, zero-width characters, ANSI escapes and megabyte lines. In Chromium, at
// 1440x900 and 390x844: none of it runs (no global set, no dialog, no request off the
// origin, no CSP violation), it reads as text with its hidden characters escaped, the page
// never scrolls sideways, and what the page holds of it is bounded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { postRecording } from '../security/hostile-doors.ts';
import { screenshot } from './chromium.ts';
import { noHorizontalOverflow, openPage, sessionOfTurns, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { ATTACKER, clean, hiddenLeft, payload, watch } from './hostile-page.ts';

const TIMEOUT = { timeout: 30_000 };
const MEGABYTE_LINE = 'M'.repeat(1024 * 1024);
/** `report<U+202E>fdp.exe` reads `reportexe.pdf`; a zero-width space hides in `pay<U+200B>pal`. */
const DISGUISED = 'report\u202Efdp.exe\u202C pay\u200Bpal';
const SHOWN = 'report\\u202efdp.exe\\u202c pay\\u200bpal';
const DISGUISED_MODEL = `gpt\u202Eledom\u202C pay\u200Bpal \x1b[31mred\x1b]8;;http://${ATTACKER}/\x07link`;
const SHOWN_MODEL = 'gpt\\u202eledom\\u202c pay\\u200bpal \\x1b[31mred\\x1b]8;;http://attacker.invalid/\\x07link';
const SIZES = [
  { width: 1440, height: 900 },
  { width: 390, height: 844 },
];

let dashboard: Dashboard;
let app: TestApp;
let origin: string;
let root: string;
let cut: number;
let variants: string[];

const idle = () => app.services.host.idle();
const script = (where: string) => `<script>window.__pwned='${where}'</script>`;

/** A turn appended as a runner would: a megabyte input, a call with a hostile name and megabyte arguments, a megabyte answer. */
function megabyteTurn(turn: number): NewEvent[] {
  const inputId = `in_big_${turn}`;
  const call = { id: 'c_big', name: `<svg onload="window.__pwned='tool-name'">`, arguments: `${payload('arguments')} ${MEGABYTE_LINE}` };
  return [
    { type: 'inbox/add', data: { inputId, text: `${payload('big-input')} ${MEGABYTE_LINE}` } },
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId } },
    { type: 'step/start', data: { turn, step: 1 } },
    { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [call] } },
    { type: 'tool/result', data: { turn, step: 1, callId: call.id, resultId: 'r_big', status: 'ok', content: `${payload('result')} ${MEGABYTE_LINE}` } },
    { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    { type: 'step/start', data: { turn, step: 2 } },
    { type: 'model/message', data: { turn, step: 2, text: `${payload('big-answer')} ${MEGABYTE_LINE}`, toolCalls: [] } },
    { type: 'step/end', data: { turn, step: 2, reason: 'completed' } },
    { type: 'turn/end', data: { turn, reason: 'completed' } },
  ];
}

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
  // A realistic parent: 20,000 events (1,818 turns of 11, after its title).
  let length: number;
  ({ id: root, length } = await sessionOfTurns(app, `${DISGUISED} parent ${payload('parent-title')}`.slice(0, 500), 1_818));
  cut = length - 1;
  const fan = await app.ok('mutation($i: FanOutInput!) { fanOut(input: $i) { children { id } } }', {
    i: {
      sessionId: root,
      atSeq: cut,
      variants: [
        { title: `${DISGUISED} ${payload('title-1')}`.slice(0, 500), message: payload('input-1'), model: { provider: 'scripted', model: DISGUISED_MODEL } },
        { title: payload('title-2').slice(0, 500), message: `!fail ${payload('error')}` },
        { title: 'megabytes', message: 'short' },
      ],
    },
  });
  variants = fan.fanOut.children.map((c: { id: string }) => c.id);
  await idle();
  // The third variant's next turn (its turn 1,820) holds megabyte lines everywhere the two pages show text.
  await app.services.store.append(variants[2], megabyteTurn(1_820));
}, 120_000);
afterAll(() => dashboard?.close());

/** The tallest element matching `selector`, in px. */
const tallest = (page: Page, selector: string) =>
  page.evaluate((sel) => Math.max(0, ...[...document.querySelectorAll(sel)].map((el) => el.getBoundingClientRect().height)), selector);
const textLength = (page: Page, selector: string) => page.evaluate((sel) => document.querySelector(sel)?.textContent?.length ?? 0, selector);

describe.each(SIZES)('hostile text on the fork point and compare pages ($width x $height)', (viewport) => {
  it('a fork point side by side: nothing runs, titles, inputs, answers, errors and model names read escaped, bounded', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 20_000 });
    const watcher = await watch(page, origin);
    await page.goto(`${origin}/sessions/${root}/forks/${cut}`);
    const cards = page.getByTestId('variant-card');
    await expect.poll(() => cards.count(), TIMEOUT).toBe(3);
    await expect.poll(() => cards.evaluateAll((els) => els.map((el) => el.getAttribute('data-state'))), TIMEOUT).toEqual(['answered', 'failed', 'answered']);
    const card = (i: number) => cards.nth(i);
    expect(await card(0).locator('.variant-title').textContent()).toContain(SHOWN);
    expect(await card(0).locator('.variant-title').textContent()).toContain(script('title-1'));
    expect(await card(1).locator('.variant-title').textContent()).toContain(script('title-2'));
    // A 500-character title shows three lines of itself (the whole on hover), not the card's first screen.
    expect(await card(0).locator('.variant-title').getAttribute('title')).toContain(SHOWN);
    expect((await card(0).locator('.variant-title').boundingBox())!.height).toBeLessThan(80);
    expect(await card(0).locator('.variant-input').textContent()).toContain(script('input-1'));
    expect(await card(0).getByTestId('variant-answer').textContent()).toContain(`Echo: ${payload('input-1').slice(0, 60)}`);
    expect(await card(0).getByTestId('variant-model').textContent()).toBe(`scripted/${SHOWN_MODEL}`);
    expect(await card(1).getByTestId('variant-error').textContent()).toContain(script('error'));
    expect(await card(1).getByTestId('variant-error').textContent()).toContain('approve\\u202edenied\\u202c pay\\u200bpal');
    expect(await card(2).locator('.variant-input').textContent()).toContain(script('big-input'));
    expect(await card(2).getByTestId('variant-answer').textContent()).toContain(script('big-answer'));
    expect(await page.locator('main h1, main .page-head').first().textContent()).toBeTruthy();
    await screenshot(page, `dashboard-hostile-fork-point-${viewport.width}.png`);

    expect(await noHorizontalOverflow(page)).toBe(true);
    expect(await hiddenLeft(page)).toEqual([]);
    // A megabyte input and answer: the card shows their start, not a megabyte of text hundreds of screens tall.
    expect(await tallest(page, '[data-testid="variant-card"]')).toBeLessThan(5_000);
    expect(await textLength(page, 'main')).toBeLessThan(50_000);
    const links = await page.evaluate(() => [...document.querySelectorAll('a[href]')].map((a) => (a as HTMLAnchorElement).href));
    expect(links.filter((href) => new URL(href).origin !== origin)).toEqual([]);
    expect(await watcher.verdict()).toEqual(clean);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);

  it('compare by turns: nothing runs, inputs, answers, calls and model names read escaped, megabyte lines bounded', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 20_000 });
    const watcher = await watch(page, origin);
    await page.goto(`${origin}/compare/${variants[0]}/${variants[2]}`);
    const row = (turn: number) => page.locator(`[data-testid="turn-row"][data-turn="${turn}"]`);
    await row(1_820).waitFor(TIMEOUT);
    const left = row(1_819).getByTestId('turn-left');
    const right = row(1_820).getByTestId('turn-right');
    expect(await left.textContent()).toContain(script('input-1'));
    expect(await left.textContent()).toContain(`Echo: ${payload('input-1').slice(0, 60)}`);
    expect(await left.textContent()).toContain(SHOWN_MODEL);
    expect(await right.textContent()).toContain(script('big-input'));
    expect(await right.textContent()).toContain(`<svg onload="window.__pwned='tool-name'">`);
    expect(await right.textContent()).toContain(script('arguments'));
    expect(await right.textContent()).toContain(script('big-answer'));
    expect(await right.textContent()).toContain('approve\\u202edenied\\u202c pay\\u200bpal');
    await right.scrollIntoViewIfNeeded();
    await screenshot(page, `dashboard-hostile-compare-turns-${viewport.width}.png`);

    expect(await noHorizontalOverflow(page)).toBe(true);
    expect(await hiddenLeft(page)).toEqual([]);
    // Three megabyte lines in one turn: each shows its start, so the row is a few screens at most, not 300,000 px.
    expect(await tallest(page, '[data-testid="turn-row"]')).toBeLessThan(5_000);
    expect(await textLength(page, 'main')).toBeLessThan(100_000);
    expect(await watcher.verdict()).toEqual(clean);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});

describe.each(SIZES)('a session whose tool lists are as long as the log allows ($width x $height)', (viewport) => {
  let id: string;
  beforeAll(async () => {
    if (id) return;
    // 500 names of 200 characters each (the most session/tools, session/tool-approval and session/runner-tools hold), hostile.
    const names = Array.from({ length: 500 }, (_, i) =>
      `${i} <img src=x onerror="window.__pwned='tools'"> \u202Eexe.txt\u200B ${'n'.repeat(200)}`.slice(0, 200),
    );
    const events = [
      { type: 'session/tools', data: { tools: names } },
      { type: 'session/tool-approval', data: { tools: names } },
      { type: 'session/runner-tools', data: { tools: names.map((name) => ({ name, effect: 'read-only' })) } },
      // A plugin event's type is its note's text: the longest a door takes (200 characters).
      { type: `plugin/hostile/${'t'.repeat(185)}`, data: { html: payload('plugin') } },
    ];
    const lines = [
      { format: 'forkline.recording', version: 4, session: { id: 'ses_tools', title: 'long tool lists' } },
      ...events.map((e, seq) => ({ seq, ...e })),
    ];
    const r = await postRecording(app, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    id = r.body.session.id;
  });

  it('its notes are bounded where the conversation makes them and where it shows them: the first names, then how many more', async () => {
    const { page, errors } = await openPage(dashboard.browser, { viewport, timeoutMs: 20_000 });
    const watcher = await watch(page, origin);
    await page.goto(`${origin}/sessions/${id}`);
    const notes = page.getByTestId('conversation-scroll').locator('.note-text');
    await expect.poll(() => notes.count(), TIMEOUT).toBe(4);
    const texts = await notes.allTextContents();
    for (const [i, prefix] of ['tools: ', 'tools needing approval: ', 'runner tools: '].entries()) {
      expect(texts[i].startsWith(prefix), texts[i].slice(0, 80)).toBe(true);
      expect(texts[i]).toMatch(/, … and \d+ more \(500 in all\)$/);
      expect(texts[i].length).toBeLessThan(1_200); // was 100,000 (tools) to 114,000 (runner tools) characters
      expect(texts[i]).toContain('\\u202eexe.txt\\u200b');
    }
    expect(texts[3]).toBe(`hostile ${'t'.repeat(185)}`);
    await screenshot(page, `dashboard-long-tool-lists-${viewport.width}.png`);
    expect(await tallest(page, '.conversation > li')).toBeLessThan(viewport.height);
    expect(await textLength(page, '[data-testid="conversation-scroll"]')).toBeLessThan(10_000);
    expect(await noHorizontalOverflow(page)).toBe(true);
    expect(await hiddenLeft(page)).toEqual([]);
    expect(await watcher.verdict()).toEqual(clean);
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
