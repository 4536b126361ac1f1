// The dashboard and the CLI on sessions external runners run: the
// AI SDK adapter and the OpenAI Agents adapter run as separate processes for
// pools `ext` and `agents`; their turns, tool calls included, show in the
// conversation, live; each session shows its runner pool and, while a runner
// holds it, which runner (session page, sessions list, `forkline sessions`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';
import { killRunners, startRunnerProcess, type RunnerProcess } from '../helpers/runner-process.ts';
import { waitFor } from '../helpers/wait.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 20_000 };
let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-dashboard-runners-'));
const runners: RunnerProcess[] = [];

const create = async (runner: string, title: string) =>
  (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: { runner, title } })).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
const typesOf = async (id: string) =>
  (await app.ok('query($id: ID!) { session(id: $id) { events(first: 200) { edges { node { type } } } } }', { id })).session.events.edges.map(
    (e: any) => e.node.type,
  ) as string[];
const turnsEnded = async (id: string) => (await typesOf(id)).filter((t) => t === 'turn/end').length;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard());
  runners.push(startRunnerProcess(app.url, { name: 'dash-ai', dir, env: { HANG: '1' } }));
  runners.push(startRunnerProcess(app.url, { name: 'dash-agents', dir, script: 'agents-runner.ts', env: { POOL: 'agents' } }));
}, 60_000);

afterAll(async () => {
  killRunners();
  await dashboard?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('dashboard and CLI: externally run sessions', () => {
  for (const [pool, runner] of [
    ['ext', 'AI SDK'],
    ['agents', 'OpenAI Agents'],
  ] as const) {
    it(`shows the ${runner} runner's turns with their tool calls, live, and the session's pool`, async () => {
      const id = await create(pool, `${runner} session`);
      const { page, errors } = await openPage(browser);
      await page.goto(`${origin}/sessions/${id}`);
      await expect.poll(() => page.locator('.session-head .runner-pool').textContent(), TIMEOUT).toBe(`runner pool ${pool}`);
      // Sent while the page is open: the turn arrives over the page's subscription.
      await send(id, 'weather in Oslo');
      const call = page.locator('.conversation .tool-call');
      await expect.poll(() => call.count(), TIMEOUT).toBe(1);
      expect(await call.locator('.tool-head code').textContent()).toMatch(/^lookup/);
      await expect.poll(() => page.locator('.conversation .msg.assistant .msg-text').allTextContents(), TIMEOUT).toContain('Found: result for weather in Oslo');
      await expect.poll(() => page.locator('.conversation .turn-end.reason-completed').count(), TIMEOUT).toBe(1);
      expect(errors).toEqual([]);
      await page.close();
    });
  }

  it('shows which runner holds a session while it runs, on its page, in the list and in `forkline sessions`', async () => {
    const held = await create('ext', 'held');
    const idle = await create('ext', 'idle');
    await send(idle, 'quick question');
    await waitFor(async () => (await turnsEnded(idle)) === 1, { what: 'the idle session to be answered', timeoutMs: 20_000 });
    // "hang": the runner's second model call never answers, so it holds the session mid-turn.
    await send(held, 'please hang');
    await waitFor(async () => (await typesOf(held)).includes('step/end'), { what: 'the first step', timeoutMs: 20_000 });

    const { page, errors } = await openPage(browser);
    await page.goto(`${origin}/sessions/${held}`);
    await expect.poll(() => page.locator('.session-head .runner-pool').textContent(), TIMEOUT).toBe('runner pool ext · held by dash-ai');
    await page.goto(`${origin}/`);
    const badge = (id: string) => page.locator(`a[href="/sessions/${id}"] .runner-pool`);
    await expect.poll(() => badge(held).getAttribute('title'), TIMEOUT).toBe('external runner pool; held by dash-ai');
    expect(await badge(held).textContent()).toBe('ext');
    expect(await badge(idle).getAttribute('title')).toBe('external runner pool');
    expect(errors).toEqual([]);
    await page.close();

    const cli = await runCli(app.url, ['sessions']);
    expect(cli.code, cli.stderr).toBe(0);
    const line = (id: string) => cli.stdout.split('\n').find((l) => l.startsWith(id));
    expect(line(held)).toMatch(/ held +runner pool ext \(held by dash-ai\)$/);
    expect(line(idle)).toMatch(/ idle +runner pool ext$/);
  });
});
