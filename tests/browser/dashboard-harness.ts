// What every dashboard browser test starts from: the built app, Chromium and a
// real server (startTestApp serves `/` too), a page that collects its errors,
// and the completed turn the long-log tests append by the thousand.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { NewEvent } from '../../src/core/events.ts';
import { DASHBOARD_DIST } from '../../src/dashboard-static.ts';
import type { AppOptions } from '../../src/app.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { collectPageErrors, launchChromium } from './chromium.ts';

/** Committed recordings the import tests upload. */
export const RECORDINGS = path.join(PROJECT_ROOT, 'tests', 'fixtures', 'recordings');

/** The session id in the page's URL (`/sessions/<id>…`). */
export const sessionIdOf = (page: Page) => decodeURIComponent(new URL(page.url()).pathname.split('/')[2] ?? '');

export interface Dashboard {
  app: TestApp;
  /** Awaited by every test that drives a page: a missing Chromium fails them (never skips). */
  browser: Promise<Browser>;
  origin: string;
  close(): Promise<void>;
}

/** `chromiumArgs`: more Chromium switches (other-build.ts's). */
export async function startDashboard(opts: Partial<AppOptions> = {}, chromiumArgs: string[] = []): Promise<Dashboard> {
  // `npm test` builds the dashboard first (pretest); a bare `vitest run` may not have.
  if (!fs.existsSync(path.join(DASHBOARD_DIST, 'index.html'))) {
    execFileSync(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--config', 'client/dashboard/vite.config.ts'], {
      cwd: PROJECT_ROOT,
      stdio: 'inherit',
    });
  }
  const browser = launchChromium(chromiumArgs);
  browser.catch(() => {}); // reported by the tests that use it
  const app = await startTestApp(opts);
  return {
    app,
    browser,
    origin: new URL(app.url).origin,
    async close() {
      await (await browser.catch(() => undefined))?.close();
      await app.close();
    },
  };
}

/** A page (in `on`: a browser, or a context with its own permissions) with its console and page errors collected. */
export async function openPage(
  on: Promise<Browser> | BrowserContext,
  { viewport = { width: 1440, height: 900 }, timeoutMs = 10_000 } = {},
): Promise<{ page: Page; errors: string[] }> {
  const page = on instanceof Promise ? await (await on).newPage({ viewport }) : await on.newPage();
  page.setDefaultTimeout(timeoutMs); // a missing element fails fast, well inside the test timeout
  return { page, errors: collectPageErrors(page) };
}

/** Below 900 px a session's header details (counts, lineage, tools, actions, totals, jump, search) fold: opens them (nothing at desktop width). */
export async function showDetails(page: Page): Promise<void> {
  const details = page.getByRole('button', { name: 'Details', exact: true });
  if (await details.isVisible()) await details.click();
}

/** Nothing sticks out sideways: the page does not scroll horizontally. */
export const noHorizontalOverflow = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);

/** One completed turn: a tool call and its result, then an answer (`who` prefixes its ids and texts). */
export function completedTurn(n: number, { who, args = '{}' }: { who?: string; args?: string } = {}): NewEvent[] {
  const id = who ? `${who}_${n}` : `${n}`;
  const said = (what: string) => (who ? `${who} ${what} ${n}` : `${what} ${n}`);
  const inputId = `in_${id}`;
  const c = { id: `c_${id}`, name: 'clock', arguments: args };
  return [
    { type: 'inbox/add', data: { inputId, text: said('question') } },
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn: n, inputId } },
    { type: 'step/start', data: { turn: n, step: 1 } },
    { type: 'model/message', data: { turn: n, step: 1, text: '', toolCalls: [c] } },
    { type: 'tool/result', data: { turn: n, step: 1, callId: c.id, resultId: `r_${id}`, status: 'ok', content: `It is ${n} o'clock.` } },
    { type: 'step/end', data: { turn: n, step: 1, reason: 'completed' } },
    { type: 'step/start', data: { turn: n, step: 2 } },
    { type: 'model/message', data: { turn: n, step: 2, text: said('answer'), toolCalls: [] } },
    { type: 'step/end', data: { turn: n, step: 2, reason: 'completed' } },
    { type: 'turn/end', data: { turn: n, reason: 'completed' } },
  ] as NewEvent[];
}

/** Completed turns `from`…`from + count - 1` appended to a session through the store's checked append, in batches of whole turns (≤ 10,000 events). */
export async function appendTurns(app: TestApp, sessionId: string, from: number, count: number): Promise<void> {
  const all = Array.from({ length: count }, (_, i) => completedTurn(from + i)).flat();
  for (let i = 0; i < all.length; i += 9_999) await app.services.store.append(sessionId, all.slice(i, i + 9_999));
}

/** A new session titled `title` with completed turns 1…`turns` (11 events each, after its title): its id and length. */
export async function sessionOfTurns(app: TestApp, title: string, turns: number): Promise<{ id: string; length: number }> {
  const id: string = (await app.ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id;
  await appendTurns(app, id, 1, turns);
  return { id, length: await eventCountOf(app, id) };
}

/** How many events a session's log holds. */
export const eventCountOf = async (app: TestApp, id: string): Promise<number> =>
  (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id })).session.eventCount;

/**
 * Records every text each fan-out card's live area shows (the variant's answer as it streams), in order, by its
 * session id, from now on: the function returned reads them.
 */
export async function recordVariantLiveTexts(page: Page): Promise<() => Promise<Record<string, string[]>>> {
  await page.evaluate(() => {
    const w = window as unknown as { __variantLive: Record<string, string[]> };
    w.__variantLive = {};
    new MutationObserver(() => {
      for (const card of document.querySelectorAll('[data-testid="variant-card"]')) {
        const text = card.querySelector('[data-testid="variant-live"] .msg-text')?.textContent;
        const seen = (w.__variantLive[card.getAttribute('data-session-id')!] ??= []);
        if (text && text !== seen.at(-1)) seen.push(text);
      }
    }).observe(document.querySelector('.variants-grid')!, { subtree: true, childList: true, characterData: true });
  });
  return () => page.evaluate(() => (window as unknown as { __variantLive: Record<string, string[]> }).__variantLive);
}

/**
 * What the page did around a click that should open a dialog, for the message of a test that fails waiting for
 * it: every pointer event's target (capture phase, so a handler that stops it cannot hide it), each scroll box's
 * moves, dialogs added, closed or removed, and the page's errors. `read()` gives the record as text.
 */
export async function recordClicks(page: Page, errors: string[]): Promise<{ read(): Promise<string> }> {
  await page.evaluate(() => {
    const log: string[] = [];
    (window as unknown as { clickRecord: string[] }).clickRecord = log;
    const t0 = performance.now();
    const add = (what: string) => log.push(`${Math.round(performance.now() - t0)}ms ${what}`);
    const name = (el: EventTarget | null) =>
      el instanceof Element
        ? `<${el.tagName.toLowerCase()} ${el.getAttribute('class') ?? ''}> "${el.textContent?.trim().slice(0, 40)}"${el.isConnected ? '' : ' (detached)'}`
        : String(el);
    for (const type of ['pointerdown', 'mousedown', 'pointerup', 'mouseup', 'click'])
      document.addEventListener(type, (e) => add(`${type} at ${(e as MouseEvent).clientX},${(e as MouseEvent).clientY} on ${name(e.target)}`), true);
    document.addEventListener(
      'scroll',
      (e) =>
        e.target instanceof Element &&
        add(`scroll ${name(e.target).slice(0, 30)} top ${e.target.scrollTop} of ${e.target.scrollHeight - e.target.clientHeight}`),
      true,
    );
    document.addEventListener('close', (e) => add(`close ${name(e.target)}`), true);
    new MutationObserver((ms) => {
      for (const m of ms) {
        for (const n of m.addedNodes) if (n instanceof HTMLDialogElement) add(`dialog added "${n.getAttribute('aria-label')}", open ${n.open}`);
        for (const n of m.removedNodes) if (n instanceof Element && (n.matches('dialog') || n.querySelector('dialog'))) add('dialog removed');
      }
    }).observe(document, { subtree: true, childList: true });
  });
  return {
    read: async () => {
      const log = await page.evaluate(() => (window as unknown as { clickRecord: string[] }).clickRecord).catch((e: Error) => [`unreadable: ${e.message}`]);
      const dialogs = await page
        .evaluate(() => [...document.querySelectorAll('dialog')].map((d) => `"${d.getAttribute('aria-label')}" open ${d.open}`))
        .catch(() => []);
      return [...log, `dialogs now: ${dialogs.join(', ') || 'none'}`, `page errors: ${errors.join('; ') || 'none'}`].join('\n');
    },
  };
}
