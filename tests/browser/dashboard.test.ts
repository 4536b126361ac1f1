// The dashboard in a real browser: Debian's Chromium through
// playwright-core against a real server (startTestApp serves `/` too).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { screenshot } from './chromium.ts';
import { openPage as openPageOn, recordClicks, RECORDINGS, sessionIdOf, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
});

afterAll(() => dashboard?.close());

const openPage = () => openPageOn(browser);
const composerStatus = (page: import('playwright-core').Page) => page.locator('.composer-bar .muted').textContent();

describe('dashboard', () => {
  it('serves the app shell at / and for client-side routes, assets with their types', async () => {
    for (const route of ['/', '/sessions/ses_missing', '/sessions/ses_missing/compare', '/compare/ses_a/ses_b']) {
      const res = await fetch(origin + route);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await res.text()).toContain('<div id="app">');
    }
    const html = await (await fetch(origin + '/')).text();
    const script = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
    expect(script).toBeTruthy();
    const js = await fetch(origin + script);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await fetch(origin + '/assets/missing.js')).status).toBe(404);
    expect((await fetch(origin + '/..%2f..%2fpackage.json')).status).toBe(404);
  });

  it('forks a cold recording mid-turn and continues the child through the composer', async () => {
    const { page, errors } = await openPage();
    await page.goto(origin + '/');

    // Import through the page's file picker; the page opens the new session.
    await page.locator('[data-testid="import-file"]').setInputFiles(path.join(RECORDINGS, 'v4-completed-tools.jsonl'));
    await page.waitForURL(/\/sessions\/ses_/, TIMEOUT);
    const parentId = sessionIdOf(page);
    await expect.poll(() => page.locator('h1').textContent(), TIMEOUT).toBe('What time is it');
    await page.locator('table.timeline tr[data-seq="19"]').waitFor(TIMEOUT);

    // Fork at the tool call (seq 6): before its result (seq 7) was recorded.
    await page.getByRole('button', { name: 'Fork here at event 6', exact: true }).click();
    // The dialog names the child before it is made.
    const forkDialog = page.getByRole('dialog', { name: 'Fork at event 6' });
    expect(await forkDialog.getByLabel('Title of the new session').inputValue()).toBe('What time is it · fork @6');
    await forkDialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(parentId), TIMEOUT);
    const childId = sessionIdOf(page);
    expect(childId).toMatch(/^ses_/);

    const marker = page.getByTestId('fork-marker');
    await expect.poll(() => marker.textContent(), TIMEOUT).toContain('at event 6');
    expect(await marker.textContent()).toContain('7 events inherited');
    const result = page.locator('[data-testid="tool-result"][data-status="not-started"]');
    const wording = await result.locator('.tool-result-text').textContent();
    expect(wording).toContain(`forked at event 6 of session ${parentId} before the result was recorded`);
    expect(wording).toContain('The parent session may have executed the call after the cut.');
    expect(wording).toContain('"clock" is read-only, so it is safe to call it again');
    expect(await result.textContent()).toContain('synthetic');
    expect(await page.locator('.turn-end.reason-forked').textContent()).toContain('forked');
    // Timeline badges: the copy is inherited, the closers synthetic.
    expect(await page.locator('table.timeline tr[data-seq="6"]').textContent()).toContain('inherited');
    expect(await page.locator('table.timeline tr[data-seq="7"]').textContent()).toContain('session/end-seed');
    expect(await page.locator('table.timeline tr[data-seq="8"]').textContent()).toMatch(/tool\/result.*synthetic/);

    // Continue the child: the answer streams in word by word, then is persisted.
    await page.getByLabel('Message').fill('!slow 120\nhello from the fork, one word at a time please');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const liveText = page.getByTestId('live-text');
    await expect.poll(() => liveText.textContent({ timeout: 500 }).catch(() => ''), TIMEOUT).toMatch(/Echo:/);
    const partial = (await liveText.textContent({ timeout: 500 }).catch(() => '')) ?? '';
    expect(partial).not.toContain('one word at a time please'); // seen before the last word arrived
    const finalAnswer = page.locator('li.msg.assistant:not(.streaming)', { hasText: 'Echo: hello from the fork, one word at a time please' });
    await finalAnswer.waitFor(TIMEOUT);
    await liveText.waitFor({ state: 'detached', ...TIMEOUT });
    await expect.poll(() => page.locator('.turn-end[data-turn="2"]').textContent(), TIMEOUT).toContain('completed');

    // The child sits under its parent in the sessions tree.
    const childRow = page.locator(`.tree-node[data-session-id="${childId}"]`);
    await childRow.waitFor(TIMEOUT);
    const parentRow = page.locator(`.tree-node[data-session-id="${parentId}"]`);
    expect(Number(await childRow.getAttribute('data-depth'))).toBe(Number(await parentRow.getAttribute('data-depth')) + 1);
    const childIndex = Number(await childRow.getAttribute('data-index'));
    expect(childIndex).toBeGreaterThan(Number(await parentRow.getAttribute('data-index')));
    await screenshot(page, 'dashboard-fork-mid-turn.png');

    // Export downloads the child's recording (JSON Lines, V4).
    const [download] = await Promise.all([page.waitForEvent('download', TIMEOUT), page.getByRole('button', { name: 'Export recording' }).click()]);
    const lines = fs
      .readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n');
    expect(JSON.parse(lines[0])).toMatchObject({ format: 'forkline.recording', version: 4 });
    expect(JSON.parse(lines[8])).toMatchObject({ seq: 7, type: 'session/end-seed' });

    // Compare with the parent (it opens by turns; By seq): aligned by seq from the cut, the parent's real result against the child's closers.
    await page.getByText('Compare with…').click();
    await page.getByRole('link', { name: /^Parent: What time is it/ }).click();
    await page.waitForURL(`${origin}/compare/${parentId}/${childId}`, TIMEOUT);
    await page.getByRole('button', { name: 'By seq' }).click();
    const firstDiff = page.locator('.diff-row.first-divergent[data-seq="7"]');
    await expect.poll(() => firstDiff.locator('[data-testid="diff-left"]').textContent(), TIMEOUT).toContain('tool/result');
    expect(await firstDiff.locator('[data-testid="diff-left"]').textContent()).toContain('ok: 2026-11-30T10:00:05Z');
    await page.locator('[data-testid="diff-left"]', { hasText: 'It is 10:00 UTC.' }).first().waitFor(TIMEOUT);
    expect(await page.locator('[data-testid="diff-right"]', { hasText: 'It is 10:00 UTC.' }).count()).toBe(0);
    await expect.poll(() => firstDiff.locator('[data-testid="diff-right"]').textContent(), TIMEOUT).toContain('session/end-seed');
    expect(await page.locator('.diff-row[data-seq="6"]').getAttribute('class')).toContain('shared');
    expect(await page.locator('.diff-row[data-seq="8"] [data-testid="diff-right"]').textContent()).toMatch(/tool\/result.*synthetic/);
    await page.locator('[data-testid="diff-right"]', { hasText: 'Echo: hello from the fork' }).first().waitFor(TIMEOUT);
    await screenshot(page, 'dashboard-compare.png');

    expect(errors).toEqual([]);
    await page.close();
  });

  it('branches from a completed turn without the input queued after it', async () => {
    const { session } = await app.ok(`mutation { createSession(input: {title: "Queued after turn 1"}) { session: id } }`).then((d) => ({
      session: d.createSession.session as string,
    }));
    const send = (text: string) =>
      app.ok(`mutation($input: SendMessageInput!) { sendMessage(input: $input) { inputId } }`, { input: { sessionId: session, text } });
    const turns = async () =>
      (await app.ok(`query($id: ID!) { session(id: $id) { turns { turn reason } } }`, { id: session })).session.turns as Array<{
        turn: number;
        reason: string | null;
      }>;
    await send('first question');
    await waitFor(async () => (await turns()).some((t) => t.turn === 1 && t.reason === 'completed'), { what: 'turn 1 completed' });
    // B keeps turn 2 running; C waits in the inbox behind it.
    await send('!call sleep {"ms": 20000}\nsecond question');
    await waitFor(async () => (await turns()).some((t) => t.turn === 2 && t.reason === null), { what: 'turn 2 running' });
    await send('third question');

    const { page, errors } = await openPage();
    await page.goto(`${origin}/sessions/${session}`);
    await page.locator('li.msg.user', { hasText: 'third question' }).getByText('queued').waitFor(TIMEOUT);
    await page.locator('li.msg.user', { hasText: 'second question' }).waitFor(TIMEOUT);
    expect(await composerStatus(page)).toBe('A turn is running. 1 queued.');

    // Once seen failing here (the click done, no dialog within 10 s) and not reproduced since: a failure says what the page saw.
    const clicks = await recordClicks(page, errors);
    await page.locator('.turn-end[data-turn="1"]').getByRole('button', { name: 'Branch from turn 1', exact: true }).click();
    await page
      .getByRole('dialog', { name: 'Branch from turn 1' })
      .getByRole('button', { name: 'Branch', exact: true })
      .click()
      .catch(async (e: Error) => {
        throw new Error(`${e.message}\nThe page saw:\n${await clicks.read()}`);
      });
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(session), TIMEOUT);
    const childId = sessionIdOf(page);
    await page.getByTestId('fork-marker').waitFor(TIMEOUT);

    const conversation = page.getByRole('list', { name: 'Conversation' });
    expect(await conversation.textContent()).toContain('first question');
    expect(await conversation.textContent()).toContain('Echo: first question');
    expect(await conversation.textContent()).not.toContain('second question');
    expect(await conversation.textContent()).not.toContain('third question');
    const timeline = await page.locator('table.timeline').textContent();
    expect(timeline).not.toContain('second question');
    expect(timeline).not.toContain('third question');
    const child = (await app.ok(`query($id: ID!) { session(id: $id) { eventCount pendingInputs { text } parent { id } } }`, { id: childId })).session;
    expect(child.parent.id).toBe(session);
    expect(child.pendingInputs).toEqual([]);
    expect(await page.locator('table.timeline tbody tr[data-seq]').count()).toBe(child.eventCount);
    await screenshot(page, 'dashboard-branch.png');

    // Back on the parent, the composer's cancel ends the sleeping turn 2.
    await page.locator(`li[data-session-id="${session}"] > a`).click();
    await page.waitForURL((url) => url.pathname.endsWith(session), TIMEOUT);
    await page.getByRole('button', { name: 'Cancel turn' }).click();
    await expect
      .poll(
        () =>
          page
            .locator('.turn-end[data-turn="2"]')
            .textContent({ timeout: 500 })
            .catch(() => ''),
        TIMEOUT,
      )
      .toContain('cancelled');
    // The composer counts from the log: in the frame where turn 3 has taken the third question, nothing is queued.
    const whenTaken = await page.waitForFunction(
      () => {
        const third = [...document.querySelectorAll('li.msg.user')].find((li) => li.textContent?.includes('third question'));
        if (!third || third.textContent?.includes('queued')) return false;
        return document.querySelector('.composer-bar .muted')?.textContent ?? '';
      },
      undefined,
      { polling: 'raf', ...TIMEOUT },
    );
    expect(await whenTaken.jsonValue()).not.toContain('queued');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('deletes a session with its forks after confirming; the sidebar and an open page follow', async () => {
    const root = (await app.services.store.createSession({ tenant: 'local' }, { title: 'Short-lived root' })).id;
    await app.services.store.append(root, [{ type: 'session/title', data: { title: 'Short-lived root' } }]);
    const child = (await app.services.store.fork({ tenant: 'local' }, root, 1, { title: 'Short-lived child' })).session.id;
    const { page, errors } = await openPage();
    const watcher = (await openPage()).page; // another tab showing the child
    await watcher.goto(`${origin}/sessions/${child}`);
    await watcher.getByRole('heading', { name: 'Short-lived child' }).waitFor(TIMEOUT);
    await page.goto(`${origin}/sessions/${root}`);
    await page.locator(`li[data-session-id="${child}"]`).waitFor(TIMEOUT);
    const dialogs: string[] = [];
    page.on('dialog', (d) => (dialogs.push(d.message()), void d.accept()));
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.waitForURL((url) => url.pathname === '/', TIMEOUT);
    expect(dialogs).toEqual(['Delete "Short-lived root" and every fork below it (1 direct)? Their events go too.']);
    await page.locator(`li[data-session-id="${root}"]`).waitFor({ state: 'detached', ...TIMEOUT });
    expect(await page.locator(`li[data-session-id="${child}"]`).count()).toBe(0);
    await watcher.getByText(`No session ${child}: it does not exist or was deleted.`).waitFor(TIMEOUT);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { id } }`, { id: child })).session).toBeNull();
    expect(errors).toEqual([]);
    await watcher.close();
    await page.close();
  });
});
