// A workspace MCP server is held to the workspace's limits for as long as its
// process lives, not only while a call runs (docs/mcp.md, docs/files.md
// "Limits"): a real MCP SDK server (tests/fixtures/mcp/idle-server.mjs) whose
// call starts a timer that fills its workspace after the call returned is
// stopped between calls, what it wrote since undone, and its next call says
// why; the instance started to list its tools is held to the same limits.
// Real turns, the scripted model calling; sandboxed and not.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { workspaceServer } from '../helpers/probe-mcp.ts';
import { waitFor } from '../helpers/wait.ts';

const IDLE = fileURLToPath(new URL('../fixtures/mcp/idle-server.mjs', import.meta.url));
const MiB = 1024 * 1024;
const LIMITS = { maxBytes: 20 * MiB, maxFiles: 1000, maxFileBytes: 10 * MiB };
const call = (tool: string, args: object = {}) => `!call ${tool} ${JSON.stringify(args)}`;
const logs: string[] = [];
let root: string;
let app: TestApp;
let turns: ReturnType<typeof agentTurns>;
beforeAll(async () => {
  root = fs.mkdtempSync('/var/tmp/forkline-mcp-idle-');
  const workspacesDir = path.join(root, 'workspaces');
  fs.mkdirSync(workspacesDir);
  app = await startTestApp({
    workspacesDir,
    workspaceLimits: LIMITS,
    log: (msg) => logs.push(msg),
    mcp: {
      mcpServers: {
        open: workspaceServer(IDLE, false),
        boxed: workspaceServer(IDLE, true),
        lister: { ...workspaceServer(IDLE, false), env: { FILL_AT_START: '30', FILL_NOTE: path.join(root, 'lister-dir') } },
      },
    },
  });
  turns = agentTurns(() => app, 'mcp idle');
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

/** What the directory holds of the disk (du), 0 when it is not there. */
const held = (dir: string) => {
  try {
    return Number(execFileSync('du', ['-sk', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\t')[0]) * 1024;
  } catch {
    return 0;
  }
};

describe.each(['open', 'boxed'] as const)('a workspace MCP server (%s) writing once its call has returned', (server) => {
  it('is stopped past the quota between calls, what it wrote since undone; its next call says why, the one after starts it again', async () => {
    const id = await turns.create();
    const dir = path.join(root, 'workspaces', id);
    await turns.turn(id, call(`${server}__later`, { files: 30, everyMs: 100 }));
    expect((await turns.results(id)).at(-1)!.slice(1)).toEqual(['ok', 'writing later']);
    // No call runs now: the server's timer writes 10 MiB every 100 ms, 300 MiB in all unless it is stopped.
    let most = 0;
    for (const until = Date.now() + 4500; Date.now() < until;) {
      most = Math.max(most, held(dir));
      await new Promise((r) => setTimeout(r, 50));
    }
    const stopped = logs.find((l) => l.includes(`MCP server "${server}" of session ${id} was stopped between its calls`));
    console.log(`a workspace MCP server (${server}) filling its workspace between calls: held at most ${most} bytes; ${stopped}`);
    // Before: never stopped (no call ran to watch it): it held all 300 MiB until the next call's end refused them.
    expect(most).toBeLessThan(LIMITS.maxBytes + 160 * MiB);
    expect(stopped).toMatch(/it came to hold \d+ bytes of the disk between its calls/);
    await waitFor(() => held(dir) === 0, { what: 'what it wrote to be removed', timeoutMs: 10_000 });

    await turns.turn(id, call(`${server}__pid`));
    const [, status, content] = (await turns.results(id)).at(-1)!;
    expect(status).toBe('error');
    expect(content).toMatch(
      /^stopped between calls: it came to hold \d+ bytes of the disk between its calls, past what the workspace quota allows \(20971520 bytes, and a block for each of 1000 files and directories\); what it wrote since its last call was undone, and the next call starts it again$/,
    );
    await turns.turn(id, call(`${server}__pid`));
    expect((await turns.results(id)).at(-1)!.slice(1, 2)).toEqual(['ok']);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { files { path } } }`, { id })).session.files).toEqual([]);
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

describe('a workspace server stopped between calls whose instance is then evicted (more sessions than the catalog keeps running)', () => {
  it('still has its next call say why: the reason outlives the instance', async () => {
    const id = await turns.create();
    const dir = path.join(root, 'workspaces', id);
    await turns.turn(id, call('open__later', { files: 30, everyMs: 100 }));
    await waitFor(() => logs.some((l) => l.includes(`MCP server "open" of session ${id} was stopped between its calls`)), {
      what: 'the server to be stopped between calls',
      timeoutMs: 15_000,
    });
    await waitFor(() => held(dir) === 0, { what: 'what it wrote to be removed', timeoutMs: 10_000 });
    // 16 other sessions call the server: 16 instances start, and this session's (the oldest) is closed past the catalog's cap.
    const others = await Promise.all(Array.from({ length: 16 }, () => turns.create()));
    await Promise.all(others.map((other) => turns.turn(other, call('open__pid'))));
    for (const other of others) expect((await turns.results(other)).at(-1)!.slice(1, 2)).toEqual(['ok']);

    await turns.turn(id, call('open__pid'));
    const [, status, content] = (await turns.results(id)).at(-1)!;
    // Before: the reason was dropped with the evicted instance, and this call silently started a new one ('ok').
    expect([status, content]).toEqual(['error', expect.stringMatching(/^stopped between calls: it came to hold \d+ bytes of the disk between its calls/)]);
    await turns.turn(id, call('open__pid'));
    expect((await turns.results(id)).at(-1)!.slice(1, 2)).toEqual(['ok']);
  });
});

describe('the instance of a workspace server started to list its tools', () => {
  it('is held to the same limits in its directory: stopped past the quota, what it wrote removed, FAILED in toolServers saying why', async () => {
    const statuses = async () =>
      (await app.ok('{ toolServers { name status error } }')).toolServers.find((s: { name: string }) => s.name === 'lister') as {
        status: string;
        error: string | null;
      };
    await statuses(); // started to list its tools (if no turn has yet)
    const note = path.join(root, 'lister-dir');
    const dir = await waitFor(() => (fs.existsSync(note) ? fs.readFileSync(note, 'utf8') : undefined), { what: 'the listing instance to start' });
    // Its timer writes 10 MiB every 100 ms, 300 MiB in all unless it is stopped; no call of it ever runs.
    let most = 0;
    for (const until = Date.now() + 4500; Date.now() < until;) {
      most = Math.max(most, held(dir));
      await new Promise((r) => setTimeout(r, 50));
    }
    console.log(`a workspace server's listing instance filling its directory: held at most ${most} bytes`);
    // Before: neither capped nor watched, it held all 300 MiB (and a file of any size) on the disk Postgres may share.
    expect(most).toBeLessThan(LIMITS.maxBytes + 160 * MiB);
    await waitFor(() => held(dir) < 1 * MiB, { what: 'what it wrote to be removed' });
    expect(await statuses()).toMatchObject({
      status: 'FAILED',
      error: expect.stringMatching(
        /^stopped: it came to hold \d+ bytes of the disk between its calls, past what the workspace quota allows \(20971520 bytes, and a block for each of 1000 files and directories\) \(in the directory it lists its tools in\)$/,
      ),
    });
  });
});
