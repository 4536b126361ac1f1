// The sidebar's recording import while its upload waits for one of the server's import slots (docs/operations.md
// "Memory and time"): the file is sent, the server has not begun its import, and the page says so ("waiting for an
// import slot on the server…") until the import runs, when it shows the import's progress instead. Before, it said
// "importing: 0 bytes … (0%)" for as long as it waited.
// Driven, not timed: a deferred trigger holds each new session's COMMIT on an advisory lock the test holds (as
// tests/security/import-slots.test.ts does), one lock for the import that holds the one slot, another for the
// page's, so the page's import is seen waiting, then running, then done.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { createTestDatabase } from '../helpers/db.ts';
import { commitsWaiting as commitsWaitingOn, holdCommits, oneEventRecording } from '../helpers/held-commits.ts';
import { openPage, sessionIdOf, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 20_000 };
/** Held by the import that takes the slot, and by the page's. */
const SLOT_LOCK = 4345;
const PAGE_LOCK = 4346;
const PAGE_TITLE = 'from the page';

let dashboard: Dashboard;
let holder: pg.Client;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  dashboard = await startDashboard({ databaseUrl, importsAtOnce: 1 });
  // The page's import waits on its own lock (the title is written in the import's transaction, before its COMMIT).
  await holdCommits(
    dashboard.app.db.pool,
    `CASE WHEN (SELECT title FROM "Session" WHERE id = NEW.id) = '${PAGE_TITLE}' THEN ${PAGE_LOCK} ELSE ${SLOT_LOCK} END`,
  );
  holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
}, 60_000);
afterAll(async () => {
  await holder?.end();
  await dashboard?.close();
});

const commitsWaiting = (lock: number) => commitsWaitingOn(holder, lock);

const recording = (title: string) => oneEventRecording(title, 'ses_page_slot');

const figuresOf = async (page: Page) => (await page.getByTestId('import-progress').locator('.import-figures').textContent()) ?? '';

describe('recording import while it waits for an import slot', () => {
  it('says it waits for an import slot while queued, then shows the import running, then opens the session', async () => {
    await holder.query('SELECT pg_advisory_lock($1), pg_advisory_lock($2)', [SLOT_LOCK, PAGE_LOCK]);
    let held = [SLOT_LOCK, PAGE_LOCK];
    try {
      // The one slot, taken by another upload whose COMMIT waits.
      const other = fetch(`${dashboard.origin}/recordings`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: recording('holds the slot'),
      });
      await expect.poll(() => commitsWaiting(SLOT_LOCK), { timeout: 15_000, interval: 20 }).toBe(1);

      const { page, errors } = await openPage(dashboard.browser, { timeoutMs: 20_000 });
      await page.goto(dashboard.origin);
      const file = Buffer.from(recording(PAGE_TITLE));
      await page.getByTestId('import-file').setInputFiles({ name: 'queued.jsonl', mimeType: 'application/x-ndjson', buffer: file });

      // Sent, queued: the page says it waits for a slot.
      await expect.poll(() => figuresOf(page), TIMEOUT).toBe(`${file.length} bytes sent (100%); waiting for an import slot on the server…`);
      // Still queued a moment on (the slot is still held): still waiting, and the page's import has not begun.
      expect(await commitsWaiting(PAGE_LOCK)).toBe(0);
      expect(await figuresOf(page)).toMatch(/waiting for an import slot on the server…$/);

      // The slot frees: the page's import runs (and waits at its own COMMIT): the page shows it importing, not waiting.
      await holder.query('SELECT pg_advisory_unlock($1)', [SLOT_LOCK]);
      held = [PAGE_LOCK];
      expect((await other).status).toBe(201);
      await expect.poll(() => commitsWaiting(PAGE_LOCK), { timeout: 15_000, interval: 20 }).toBe(1);
      await expect.poll(() => figuresOf(page), TIMEOUT).toBe(`importing: ${file.length} bytes of ${file.length} bytes checked (100%), 1 lines`);
      expect(await figuresOf(page)).not.toMatch(/waiting for an import slot/);

      await holder.query('SELECT pg_advisory_unlock($1)', [PAGE_LOCK]);
      held = [];
      await page.waitForURL(/\/sessions\/ses_/, TIMEOUT);
      expect(await page.getByTestId('import-progress').count()).toBe(0);
      const { session } = await dashboard.app.ok('query($id: ID!) { session(id: $id) { title } }', { id: sessionIdOf(page) });
      expect(session).toEqual({ title: PAGE_TITLE });
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      for (const lock of held) await holder.query('SELECT pg_advisory_unlock($1)', [lock]);
    }
  }, 90_000);
});
