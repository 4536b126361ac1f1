// The dashboard with an MCP server configured as an operator would (the
// reference server-everything over stdio): the session's tools with their
// server and effect, and each tool call in the conversation with its server,
// its recorded effect and its duration (from its start, its model/message or
// the step's previous result, to its tool/result, as stored).
// At 1440x900 and 390x844.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { loadMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import type { TestApp } from '../helpers/app.ts';
import { formatDuration } from '../../client/dashboard/src/format.ts';
import { screenshot } from './chromium.ts';
import { noHorizontalOverflow, openPage, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';

const require = createRequire(import.meta.url);
const TIMEOUT = { timeout: 10_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let dir: string;
let sessionId: string;
/** Each call's duration as the log says it: its tool/result's createdAt less its model/message's. */
const durations = new Map<string, number>();

const CALLS = [
  { name: 'everything__trigger-long-running-operation', args: '{"duration": 1, "steps": 2}', server: 'everything', effect: 'read-only' },
  { name: 'everything__toggle-simulated-logging', args: '{}', server: 'everything', effect: 'side-effects' },
  { name: 'clock', args: '{}', server: undefined, effect: 'read-only' },
];

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-dashboard-tools-'));
  const config = path.join(dir, 'mcp.json');
  const everything = require.resolve('@modelcontextprotocol/server-everything/dist/index.js');
  fs.writeFileSync(config, JSON.stringify({ mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'] } } }));
  ({ app, browser, origin } = dashboard = await startDashboard({ mcp: loadMcpConfig(config) }));
  sessionId = (await app.ok('mutation { createSession(input: {title: "MCP tools", tools: ["everything__*", "clock"]}) { id } }')).createSession.id;
  const text = CALLS.map((c) => `!call ${c.name} ${c.args}`).join('\n');
  await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
  await app.services.host.idle();
  const { session } = await app.ok('query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { type data createdAt } } } } }', { id: sessionId });
  const events = session.events.edges.map((e: any) => e.node);
  // The step runs its calls one after another: each starts when the message, then the previous result, is stored.
  let startedAt = '';
  for (const e of events) {
    if (e.type === 'model/message') startedAt = e.createdAt;
    if (e.type === 'tool/result') {
      expect(e.data.status, JSON.stringify(e.data)).toBe('ok');
      durations.set(e.data.callId, Date.parse(e.createdAt) - Date.parse(startedAt));
      startedAt = e.createdAt;
    }
  }
  expect(durations.size).toBe(CALLS.length);
}, 60_000);

afterAll(async () => {
  await dashboard?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Each tool call the conversation shows: name, server, effect and duration as displayed. */
async function shownCalls(page: Page) {
  const calls = page.locator('.conversation .tool-call');
  await expect.poll(() => calls.count(), TIMEOUT).toBe(CALLS.length);
  return calls.evaluateAll((els) =>
    els.map((el) => ({
      id: el.getAttribute('data-call-id'),
      name: el.querySelector('.tool-head code')!.textContent!.replace(/\(.*$/s, ''),
      serverBadge: el.querySelector('.badge.tool-server')?.textContent ?? undefined,
      effectBadge: el.querySelector('.badge.effect')?.textContent,
      duration: el.querySelector('.tool-duration')?.textContent,
    })),
  );
}

describe('dashboard: tools', () => {
  for (const viewport of [
    { width: 1440, height: 900 },
    { width: 390, height: 844 },
  ]) {
    it(`shows each call's server, effect and duration, and the session's tools (${viewport.width}x${viewport.height})`, async () => {
      const { page, errors } = await openPage(browser, { viewport });
      await page.goto(`${origin}/sessions/${sessionId}`);

      const shown = await shownCalls(page);
      expect(shown.map(({ id, ...rest }) => rest)).toEqual(
        CALLS.map((c) => ({ name: c.name, serverBadge: c.server, effectBadge: c.effect, duration: expect.any(String) })),
      );
      for (const s of shown) expect(s.duration).toBe(formatDuration(durations.get(s.id!)!));
      expect(await page.locator('.tool-call[data-server="everything"]').count()).toBe(2);
      expect(await page.locator('.tool-call .badge.effect-side-effects').getAttribute('title')).toContain('check before repeating it');

      // The session's tools: closed until asked for, then each with its server and effect.
      const panel = page.getByTestId('session-tools');
      await expect.poll(() => panel.locator('summary').textContent(), TIMEOUT).toMatch(/^Tools \(\d+\) · MCP servers: everything$/);
      await showDetails(page);
      await panel.locator('summary').click();
      const row = (name: string) => panel.locator(`tr[data-tool="${name}"] td`).allTextContents();
      expect(await row('clock')).toEqual(['clock', 'built-in', 'read-only']);
      expect(await row('everything__echo')).toEqual(['everything__echo', 'everything', 'read-only']);
      expect(await row('everything__toggle-simulated-logging')).toEqual(['everything__toggle-simulated-logging', 'everything', 'side-effects']);
      expect(await panel.locator('tr[data-tool="note_read"]').count()).toBe(0); // not in the session's set
      await screenshot(page, `dashboard-tools-${viewport.width}.png`);
      expect(await noHorizontalOverflow(page)).toBe(true);
      expect(errors).toEqual([]);
      await page.close();
    });
  }

  it('reads the set again when a session/tools event arrives', async () => {
    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${sessionId}`);
    const summary = page.getByTestId('session-tools').locator('summary');
    await expect.poll(() => summary.textContent(), TIMEOUT).toMatch(/^Tools \(\d+\) · MCP servers: everything$/);
    await app.ok('mutation($i: SetSessionToolsInput!) { setSessionTools(input: $i) { id } }', { i: { sessionId, tools: ['clock'] } });
    await expect.poll(() => summary.textContent(), TIMEOUT).toBe('Tools (1)');
    expect(errors).toEqual([]);
    await page.close();
  });
});
