// axe-core on every page state of the dashboard, in both themes, at 1280x720
// and 390x844: no violations (WCAG 2.x A and AA rules, and best practices).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CDPSession, Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { completedTurn, openPage, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';
import { longRecordingLines } from '../fixtures/recordings/recordings.ts';

const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let parent: string;
let child: string;
let waiting: string;

beforeAll(async () => {
  ({ app } = dashboard = await startDashboard());
  parent = (await app.ok('mutation { createSession(input: { title: "Accessible" }) { id } }')).createSession.id;
  await app.services.store.append(parent, Array.from({ length: 6 }, (_, i) => completedTurn(i + 1)).flat());
  // A model of its own: the list's row shows it (after the turns and the fork's cut, so neither moves).
  await app.services.store.append(parent, [{ type: 'session/model', data: { provider: 'scripted', model: 'scripted-axe' } }]);
  child = (
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
      i: { sessionId: parent, atSeq: 20, title: 'Accessible child' },
    })
  ).forkSession.session.id;
  // A call awaiting approval (docs/contract.md#tool-approval): the page shows Approve and Deny.
  waiting = (await app.ok('mutation { createSession(input: { title: "Waiting", approvalRequired: ["note_write"] }) { id } }')).createSession.id;
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
    i: { sessionId: waiting, text: 'note it\n!call note_write {"key":"k","value":"v"}' },
  });
  await app.services.host.idle();
}, 60_000);
afterAll(() => dashboard?.close());

interface Violation {
  id: string;
  help: string;
  nodes: Array<{ target: string[] }>;
}

async function violations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ content: AXE_SOURCE });
  const found = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<{ violations: Violation[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({ id: v.id, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
  });
  return found.map(
    (v) =>
      `${v.id}: ${v.help} — ${v.nodes
        .slice(0, 3)
        .map((n) => n.target.join(' '))
        .join(' | ')}`,
  );
}

/** The network emulation that slows the import down (until it is cancelled). */
let throttle: CDPSession | undefined;

/** The page states a user meets: each opens itself and waits for its content. */
const STATES: Array<{ name: string; open(page: Page): Promise<void> }> = [
  {
    name: 'home',
    open: async (page) =>
      void (
        await page.goto(dashboard.origin),
        await page
          .locator('.tree-node')
          .first()
          .waitFor({ state: 'attached', ...TIMEOUT })
      ),
  },
  {
    name: 'a recording import in progress',
    open: async (page) => {
      // Throttled (Chromium's network emulation) so the upload lasts while axe looks.
      const cdp = (throttle = await page.context().newCDPSession(page));
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 32 * 1024 });
      // On a phone the sidebar is a drawer: opened to show the import.
      const drawer = page.getByRole('button', { name: 'Sessions', exact: true });
      if (await drawer.isVisible()) await drawer.click();
      const lines = longRecordingLines(5_000, 'axe');
      await page.getByTestId('import-file').setInputFiles({ name: 'axe.jsonl', mimeType: 'application/x-ndjson', buffer: Buffer.from(lines.join('\n')) });
      await page.getByTestId('import-progress').waitFor(TIMEOUT);
    },
  },
  {
    name: 'a recording import cancelled',
    open: async (page) => {
      await page.getByRole('button', { name: 'Cancel import' }).click();
      await page.getByTestId('import-cancelled').waitFor(TIMEOUT);
      await throttle?.detach(); // the next states' requests at full speed
    },
  },
  {
    name: 'session',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}`);
      await page.locator('li.turn-end').first().waitFor(TIMEOUT);
    },
  },
  {
    name: 'session with every detail open',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}`);
      await page.locator('li.turn-end').first().waitFor(TIMEOUT);
      await showDetails(page);
      for (const id of ['session-tools', 'session-instructions', 'turn-chart-details', 'workspace-viewer'])
        await page.getByTestId(id).evaluate((d) => ((d as HTMLDetailsElement).open = true));
      await page.getByTestId('turn-chart').waitFor(TIMEOUT);
      await page.locator('table.timeline tr[data-seq] td.type button').last().click();
    },
  },
  {
    name: 'the Compact question',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}`);
      // Loaded first: showDetails opens the phone's drawer only if its button is there already.
      await page.locator('li.turn-end').first().waitFor(TIMEOUT);
      await showDetails(page);
      await page.getByRole('button', { name: 'Compact…' }).click(TIMEOUT);
      await page.getByRole('dialog', { name: 'Compact this session?' }).waitFor(TIMEOUT);
    },
  },
  {
    name: 'a call awaiting approval',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${waiting}`);
      await page.getByTestId('approval-prompt').waitFor(TIMEOUT);
    },
  },
  {
    name: 'a call awaiting approval, its denial reason open',
    open: async (page) => {
      await page.getByRole('button', { name: 'Deny…' }).click();
      await page.getByLabel('Reason (optional, the model is told)').waitFor(TIMEOUT);
    },
  },
  {
    name: 'files tab',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}`);
      await page.getByRole('tab', { name: 'Files' }).click();
      await page.getByTestId('files-pane').waitFor(TIMEOUT);
    },
  },
  {
    name: 'compare',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/compare/${parent}/${child}`);
      await page.locator('main h1, main h2').first().waitFor(TIMEOUT);
      // The diff's rows are placed after the first measure: the table is checked once it holds them.
      await page.locator('main [role="table"] [role="row"]').first().waitFor(TIMEOUT);
    },
  },
  {
    name: 'fork point',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}/forks/20`);
      await page.getByTestId('variant-card').first().waitFor(TIMEOUT);
    },
  },
  {
    name: 'fork tree',
    open: async (page) => {
      await page.goto(`${dashboard.origin}/sessions/${parent}/family`);
      await page.locator('li.family-node').first().waitFor(TIMEOUT);
    },
  },
];

describe('dashboard: axe finds nothing', () => {
  for (const viewport of [
    { width: 1280, height: 720 },
    { width: 390, height: 844 },
  ])
    for (const scheme of ['light', 'dark'] as const)
      it(`every page state at ${viewport.width}x${viewport.height}, ${scheme}`, async () => {
        // axe is injected as a script: the dashboard's CSP would refuse it (only for the test).
        const context = await (await dashboard.browser).newContext({ viewport, bypassCSP: true });
        const { page, errors } = await openPage(context);
        await page.emulateMedia({ colorScheme: scheme });
        const found: string[] = [];
        for (const state of STATES) {
          await state.open(page);
          for (const v of await violations(page)) found.push(`${state.name}: ${v}`);
        }
        expect(found).toEqual([]);
        expect(errors).toEqual([]);
        await context.close();
      }, 120_000);
});
