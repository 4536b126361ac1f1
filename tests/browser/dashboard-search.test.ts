// The dashboard's search box in a real browser: a non-empty query
// lists searchSessions hits (title, kind, seq, snippet with the matched words
// in <b>, content rendered as text, never as HTML); a hit opens its session
// at the matching event.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { anyData } from '../helpers/event-data.ts';

const TIMEOUT = { timeout: 10_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
});

afterAll(() => dashboard?.close());

const turn = (n: number, input: string, answer: string): NewEvent[] => [
  { type: 'inbox/add', data: { inputId: `in_${n}`, text: input } },
  { type: 'inbox/remove', data: { inputId: `in_${n}`, reason: 'taken' } },
  { type: 'turn/start', data: { turn: n, inputId: `in_${n}` } },
  { type: 'step/start', data: { turn: n, step: 1 } },
  { type: 'model/message', data: { turn: n, step: 1, text: answer, toolCalls: [] } },
  { type: 'step/end', data: { turn: n, step: 1, reason: 'completed' } },
  { type: 'turn/end', data: { turn: n, reason: 'completed' } },
];

describe('dashboard search', () => {
  it('lists hits with highlighted snippets (as text) and opens a hit at its event', async () => {
    const id = (await app.ok(`mutation { createSession(input: { title: "Lighthouse maintenance" }) { id } }`)).createSession.id;
    const written = await app.services.store.append(id, [
      ...turn(1, 'When was the lens cleaned?', 'Last spring.'),
      ...turn(2, 'And the foghorn?', 'The foghorn was tuned in May by the keeper <img src=x onerror=__injected(1)> & co.'),
    ]);
    const answerSeq = written.find((e) => e.type === 'model/message' && String(anyData(e).text).includes('foghorn'))!.seq;

    const { page, errors } = await openPage(browser);
    await page.goto(origin + '/');
    await page.locator(`.tree [data-session-id="${id}"]`).waitFor(TIMEOUT);

    await page.getByRole('searchbox', { name: 'Search titles, inputs and answers' }).fill('foghorn tuned');
    const hit = page.locator(`.search-results li[data-session-id="${id}"][data-seq="${answerSeq}"]`);
    await hit.waitFor(TIMEOUT);
    await expect.poll(() => page.locator('.search-results li').count(), TIMEOUT).toBe(1);
    // Matched words in <b>; the content's own markup is text, never HTML.
    expect(await hit.locator('.hit-snippet b').allTextContents()).toEqual(['foghorn', 'tuned']);
    expect(await hit.locator('.hit-snippet').textContent()).toContain('keeper <img src=x onerror=__injected(1)> & co');
    expect(await page.locator('.search-results img').count()).toBe(0);
    // (had it run, the undefined __injected would be a page error, caught below)
    expect(await hit.locator('.tree-title').textContent()).toBe('Lighthouse maintenance');
    expect(await hit.locator('.hit-kind').textContent()).toBe('answer');

    await hit.locator('a').click();
    await page.waitForURL(new RegExp(`/sessions/${id}#seq-${answerSeq}$`), TIMEOUT);
    const row = page.locator(`table.timeline tr[data-seq="${answerSeq}"]:is(.target, [data-target])`);
    await row.waitFor(TIMEOUT);
    await expect.poll(() => row.isVisible(), TIMEOUT).toBe(true);
    await screenshot(page, 'dashboard-search.png');

    // A title hit; clearing the box brings the tree back.
    await page.getByRole('searchbox', { name: 'Search titles, inputs and answers' }).fill('lighthouse');
    await expect.poll(() => page.locator('.search-results li .tree-title b').allTextContents(), TIMEOUT).toEqual(['Lighthouse']);
    await page.getByRole('searchbox', { name: 'Search titles, inputs and answers' }).fill('');
    await page.locator(`.tree [data-session-id="${id}"]`).waitFor(TIMEOUT);
    expect(errors).toEqual([]);
    await page.close();
  });
});
