// The dashboard's Files tab (files-tab.tsx) on a session whose agent wrote,
// edited and deleted files with the built-in tools over three turns: the tree
// and viewer at any event (text, and a binary file as its size and hash), what
// changed between two events with its diff, a fork's changes against its
// parent at the cut, and each tool call in the conversation listing the files
// it changed, linked into the tab as of its result. At 1440x900 and 390x844.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { screenshot } from './chromium.ts';
import { noHorizontalOverflow, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { anyData } from '../helpers/event-data.ts';

const TIMEOUT = { timeout: 10_000 };
let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let dir: string;
let parent: string;
let fork: string;
/** Seq of each turn's last tool/result in the parent (the third turn's: the delete). */
let after: number[];
let cut: number;

const call = (name: string, args: object) => `!call ${name} ${JSON.stringify(args)}`;
const send = async (sessionId: string, text: string) => {
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await app.services.host.idle();
};
const resultSeqs = async (id: string) =>
  (await app.services.store.log.page(id, -1, 1000))
    .filter((e) => e.type === 'tool/result')
    .map((e) => {
      expect(anyData(e).status, JSON.stringify(e.data)).toBe('ok');
      return e.seq;
    });

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-dashboard-files-'));
  ({ app, browser, origin } = dashboard = await startDashboard({ workspacesDir: dir }));
  parent = (await app.ok('mutation { createSession(input: {title: "files"}) { id } }')).createSession.id;
  await send(
    parent,
    [call('write_file', { path: 'notes.txt', content: 'one\ntwo\nthree\n' }), '!then', call('write_file', { path: 'data/blob.bin', content: 'a\u0000b' })].join(
      '\n',
    ),
  );
  const t1 = (await resultSeqs(parent)).at(-1)!;
  await send(
    parent,
    [
      call('edit_file', { path: 'notes.txt', oldText: 'two', newText: 'TWO' }),
      '!then',
      call('write_file', { path: 'src/main.py', content: 'print(1)\n' }),
    ].join('\n'),
  );
  const t2 = (await resultSeqs(parent)).at(-1)!;
  await send(parent, call('delete_file', { path: 'data/blob.bin' }));
  const t3 = (await resultSeqs(parent)).at(-1)!;
  after = [t1, t2, t3];
  // A fork after the first turn, whose own call changes notes.txt its own way.
  cut = t1;
  fork = (
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: parent, atSeq: cut, title: 'fork' } })
  ).forkSession.session.id;
  await send(fork, call('write_file', { path: 'notes.txt', content: 'one\nfork\nthree\n' }));
}, 60_000);

afterAll(async () => {
  await dashboard?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const openFilesTab = async (page: Page) => {
  await page.getByRole('tab', { name: 'Files' }).click();
  await page.getByTestId('files-pane').waitFor();
};
const treePaths = (page: Page) => page.locator('.file-tree .file-node').evaluateAll((els) => els.map((el) => el.getAttribute('data-path')));
const atEvent = async (page: Page, seq: number) => {
  await page.getByLabel('Files at event').fill(String(seq));
  await page.getByLabel('Files at event').press('Enter');
  await expect.poll(() => page.getByTestId('files-pane').getAttribute('data-at-seq'), TIMEOUT).toBe(String(seq));
};

describe('dashboard: files', () => {
  for (const viewport of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ]) {
    it(`shows the tree and a file at any event, and what changed between two events (${viewport.width}x${viewport.height})`, async () => {
      const { page, errors } = await openPage(browser, { viewport });
      await page.goto(`${origin}/sessions/${parent}`);
      await openFilesTab(page);

      // Latest: blob.bin was deleted, main.py added, notes.txt edited.
      await expect.poll(() => treePaths(page), TIMEOUT).toEqual(['src/main.py', 'notes.txt']);
      await page.locator('.file-node[data-path="notes.txt"]').click();
      await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toBe('one\nTWO\nthree\n');

      // After the first turn: notes.txt as first written, and the binary file as its size and hash.
      await atEvent(page, after[0]);
      await expect.poll(() => treePaths(page), TIMEOUT).toEqual(['data/blob.bin', 'notes.txt']);
      await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toBe('one\ntwo\nthree\n');
      await page.locator('.file-node[data-path="data/blob.bin"]').click();
      const { session } = await app.ok('query($id: ID!, $a: Int) { session(id: $id) { file(path: "data/blob.bin", atSeq: $a) { size hash } } }', {
        id: parent,
        a: after[0],
      });
      await expect.poll(() => page.getByTestId('file-binary').textContent(), TIMEOUT).toBe(`Binary file: ${session.file.size} B, sha-256 ${session.file.hash}`);

      // Between the first turn and the latest event: each change, with the text diff.
      await page.getByTestId('files-pane').getByRole('button', { name: 'Latest', exact: true }).click();
      await page.getByLabel('Compare files with').selectOption('event');
      await page.getByLabel('Compare from event').fill(String(after[0]));
      await page.getByLabel('Compare from event').press('Enter');
      const changed = page.getByTestId('file-changes').locator('li');
      await expect
        .poll(() => changed.evaluateAll((els) => els.map((el) => [el.getAttribute('data-kind'), el.textContent])), TIMEOUT)
        .toEqual([
          ['DELETED', 'deleted data/blob.bin'],
          ['CHANGED', 'changed notes.txt'],
          ['ADDED', 'added src/main.py'],
        ]);
      await changed.filter({ hasText: 'notes.txt' }).getByRole('button').click();
      const diff = page.getByTestId('file-diff');
      await expect.poll(() => diff.locator('.del').allTextContents(), TIMEOUT).toEqual(['-two\n']);
      expect(await diff.locator('.add').allTextContents()).toEqual(['+TWO\n']);
      await changed.filter({ hasText: 'blob.bin' }).getByRole('button').click();
      const last = (await app.services.store.getSession({ tenant: 'local' }, parent))!.eventCount - 1;
      await expect.poll(() => page.getByTestId('file-absent').textContent(), TIMEOUT).toBe(`No file data/blob.bin at event #${last}.`);
      // The tree marks the changed files.
      expect(await page.locator('.file-node[data-path="src/main.py"] .badge').textContent()).toBe('added');

      await screenshot(page, `dashboard-files-${viewport.width}.png`);
      expect(await noHorizontalOverflow(page)).toBe(true);
      expect(errors).toEqual([]);
      await page.close();
    });
  }

  it("a fork's tab compares with its parent at the cut", async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${fork}`);
    await openFilesTab(page);
    expect(await page.getByLabel('Compare files with').inputValue()).toBe('cut');
    const changed = page.getByTestId('file-changes').locator('li');
    await expect.poll(() => changed.allTextContents(), TIMEOUT).toEqual(['changed notes.txt']);
    await expect.poll(() => page.getByTestId('file-changes').locator('> span').textContent(), TIMEOUT).toContain(`between #${cut} and`);
    await changed.getByRole('button').click();
    await expect.poll(() => page.getByTestId('file-diff').locator('.add').allTextContents(), TIMEOUT).toEqual(['+fork\n']);
    expect(await page.getByTestId('file-diff').locator('.del').allTextContents()).toEqual(['-two\n']);
    await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toBe('one\nfork\nthree\n');
    // The parent kept its own.
    const parentNotes = await app.ok('query($id: ID!) { session(id: $id) { file(path: "notes.txt") { text } } }', { id: parent });
    expect(parentNotes.session.file.text).toBe('one\nTWO\nthree\n');
    expect(errors).toEqual([]);
    await page.close();
  });

  for (const viewport of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ]) {
    it(`each tool call lists the files it changed, linked into the tab as of its result (${viewport.width}x${viewport.height})`, async () => {
      const { page, errors } = await openPage(browser, { viewport });
      await page.goto(`${origin}/sessions/${parent}`);
      const lists = page.locator('.conversation .tool-call [data-testid="call-files"]');
      await lists.first().waitFor(TIMEOUT);
      // The conversation is windowed (a fork marker row among the rows can push the first call out of the
      // rendered window): read it from the top down, each call's list once.
      expect(await allCallFiles(page)).toEqual([['notes.txt'], ['data/blob.bin'], ['notes.txt'], ['src/main.py'], ['−data/blob.bin']]);
      // The first call's link: the Files tab as of its result, notes.txt as it wrote it (before the edit).
      await page.getByTestId('conversation-scroll').evaluate((el) => el.scrollTo({ top: 0 }));
      // By its link: the third call also lists notes.txt, and is the first rendered until the window reaches the top.
      const first = lists.first().locator('a');
      const firstResult = (await app.services.store.log.page(parent, -1, 1000)).find((e) => e.type === 'tool/result')!.seq;
      await expect.poll(() => first.getAttribute('href'), TIMEOUT).toBe(`#files-${firstResult}:notes.txt`);
      expect(await first.textContent()).toBe('notes.txt');
      await first.click();
      await page.getByTestId('files-pane').waitFor();
      expect(await page.getByTestId('files-pane').getAttribute('data-at-seq')).toBe(String(firstResult));
      expect(new URL(page.url()).hash).toBe(`#files-${firstResult}:notes.txt`);
      await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toBe('one\ntwo\nthree\n');
      await expect.poll(() => treePaths(page), TIMEOUT).toEqual(['notes.txt']);
      // Back to the events: the link leaves the address.
      await page.getByRole('tab', { name: 'Events' }).click();
      expect(new URL(page.url()).hash).toBe('');
      // A link pasted into a new page opens the tab there too.
      await page.goto(`${origin}/sessions/${parent}#files-${after[1]}:src%2Fmain.py`);
      await expect.poll(() => page.getByTestId('file-text').textContent(), TIMEOUT).toBe('print(1)\n');
      expect(await noHorizontalOverflow(page)).toBe(true);
      expect(errors).toEqual([]);
      await page.close();
    });
  }
});

/** The file links of every tool call in the (windowed) conversation, in order, scrolling it from the top down. */
async function allCallFiles(page: Page): Promise<string[][]> {
  const seen = new Map<string, string[]>();
  const scroller = page.getByTestId('conversation-scroll');
  await scroller.evaluate((el) => el.scrollTo({ top: 0 }));
  for (let i = 0; i < 50; i++) {
    await page.waitForTimeout(100);
    const batch = await page.locator('.conversation > li').evaluateAll((els) =>
      els.flatMap((li) =>
        [...li.querySelectorAll('.tool-call [data-testid="call-files"]')].map((el, j) => ({
          key: `${li.getAttribute('data-index') ?? li.textContent?.slice(0, 40)}-${j}`,
          top: li.getBoundingClientRect().top,
          links: [...el.querySelectorAll('a')].map((a) => a.textContent ?? ''),
        })),
      ),
    );
    for (const b of batch.sort((a, c) => a.top - c.top)) if (!seen.has(b.key)) seen.set(b.key, b.links);
    const done = await scroller.evaluate((el) => {
      const atEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 2;
      el.scrollBy({ top: el.clientHeight / 2 });
      return atEnd;
    });
    if (done) break;
  }
  return [...seen.values()];
}
