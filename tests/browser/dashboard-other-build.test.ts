// Another dashboard build served against this server (tests/browser/other-build.ts,
// how the scroll bench measures the previous build beside this one): its page
// comes from that build's files while the server answers everything the page
// asks it, so a long session opens at its end in both panes. The session's
// past pages come from GET /sessions/<id>/events: answered with the app shell
// instead, the conversation never folded and stayed "Loading…".
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { createLongSession } from '../../bench/long-session.ts';
import { PAGE_SIZE } from '../../client/dashboard/src/event-pages.ts';
import { DASHBOARD_DIST } from '../../src/dashboard-static.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { scrolledIntoView } from './frames.ts';
import { OTHER_BUILD_ARGS, serveOtherBuild } from './other-build.ts';

// Five pages: the panes open on the last two, the one before the last read from the page door.
const EVENTS = 5 * PAGE_SIZE;

let dashboard: Dashboard;
let browser: Promise<Browser>;
let origin: string;
let session: { id: string; turns: number };
let otherBuild: string;

beforeAll(async () => {
  dashboard = await startDashboard({}, OTHER_BUILD_ARGS);
  ({ browser, origin } = dashboard);
  const { store } = dashboard.app.services;
  session = await createLongSession({ store, db: { pool: store.pool } }, EVENTS, { title: 'Served by another build' });
  // This build's files, marked, stand in for another build's: the page shows which files it got.
  otherBuild = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-other-build-'));
  fs.cpSync(DASHBOARD_DIST, otherBuild, { recursive: true });
  const index = path.join(otherBuild, 'index.html');
  fs.writeFileSync(index, fs.readFileSync(index, 'utf8').replace('<head>', '<head><meta name="forkline-build" content="other">'));
}, 120_000);

afterAll(async () => {
  await dashboard?.close();
  if (otherBuild) fs.rmSync(otherBuild, { recursive: true, force: true });
});

describe('another dashboard build against this server', () => {
  it('opens a long session at its end in both panes, its past pages read from the page door', async () => {
    const context = await (await browser).newContext({ viewport: { width: 1440, height: 900 } });
    try {
      await serveOtherBuild(context, otherBuild);
      const { page, errors } = await openPage(context, { timeoutMs: 15_000 });
      const pastPages: Array<{ status: number; type: string }> = [];
      page.on('response', (r) => {
        if (new URL(r.url()).pathname === `/sessions/${session.id}/events`) pastPages.push({ status: r.status(), type: r.headers()['content-type'] ?? '' });
      });
      await page.goto(`${origin}/sessions/${session.id}`);
      expect(await page.locator('meta[name="forkline-build"]').getAttribute('content')).toBe('other');
      await scrolledIntoView(page, 'timeline-scroll', `table.timeline tr[data-seq="${EVENTS - 1}"]`);
      await scrolledIntoView(page, 'conversation-scroll', `.conversation > li.turn-end[data-turn="${session.turns}"]`);
      expect(pastPages.length).toBeGreaterThan(0);
      for (const p of pastPages) {
        expect(p.status).toBe(200);
        expect(p.type).toMatch(/^application\/json/);
      }
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 60_000);
});
