// A workspace MCP server (docs/mcp.md) is held to the workspace's limits while
// a call runs, as a shell command is (docs/files.md "Limits"): each file it
// writes stops at the per-file cap, and a call whose workspace comes to hold
// more than the quota is stopped (the server killed, started again on the next
// call) and its file changes undone. A real MCP SDK server over stdio
// (tests/fixtures/mcp/disk-server.mjs), sandboxed and not; real turns, the
// scripted model calling.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { workspaceServer } from '../helpers/probe-mcp.ts';

const DISK = fileURLToPath(new URL('../fixtures/mcp/disk-server.mjs', import.meta.url));
const call = (tool: string, args: object = {}) => `!call ${tool} ${JSON.stringify(args)}`;
let root: string;
let app: TestApp;
let turns: ReturnType<typeof agentTurns>;
beforeAll(async () => {
  root = fs.mkdtempSync('/var/tmp/forkline-mcp-disk-');
  const workspacesDir = path.join(root, 'workspaces');
  fs.mkdirSync(workspacesDir);
  app = await startTestApp({
    workspacesDir,
    mcp: {
      mcpServers: {
        open: workspaceServer(DISK, false),
        boxed: workspaceServer(DISK, true), // Its 5 s bound holds the server's start as well as the call: a second's bound was too short for a node
        // process to start on a loaded host. The slow tool writes late.txt 8 s in, well past it.
        slow: { ...workspaceServer(DISK, false), timeoutMs: 5000 },
      },
    },
  });
  turns = agentTurns(() => app, 'mcp disk');
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const paths = async (id: string) =>
  ((await app.ok(`query($id: ID!) { session(id: $id) { files { path } } }`, { id })).session.files as Array<{ path: string }>).map((f) => f.path).sort();

describe.each(['open', 'boxed'] as const)('a workspace MCP server (%s)', (server) => {
  it('writes no file past the per-file cap while a call runs: no `fallocate` takes the disk', async () => {
    const id = await turns.create();
    await turns.turn(id, call(`${server}__big`));
    const [[, status, content]] = await turns.results(id);
    // Before: "write ok 20000000, fallocate ok 1073741824" (1 GiB of the disk held while the call ran), refused only once it was over.
    expect(content).toMatch(/^write EFBIG 10485760, fallocate (SIGXFSZ|\d+) 0$/);
    expect(status).toBe('ok');
    expect(await paths(id)).toEqual(['big.bin']);
  });

  it('filling its workspace past the quota is stopped while the call runs, its files undone; the next call starts it again', async () => {
    const id = await turns.create();
    const started = Date.now();
    await turns.turn(id, call(`${server}__fill`, { files: 40 }));
    console.log(`a workspace MCP server filling the disk with 10 MiB files (${server}): stopped after ${Date.now() - started} ms`);
    const [[, status, content]] = await turns.results(id);
    // Before: the call ran to its end (400 MiB of the disk held), refused only once it was over ("wrote 40 files … undone").
    expect(status).toBe('error');
    expect(content).toMatch(/^stopped: it came to hold \d+ bytes of the disk while it ran, past what the workspace quota allows \(104857600 bytes/);
    expect(content).not.toContain('wrote 40 files');
    expect(content).toMatch(/the call's file changes were undone\)$/);

    await turns.turn(id, call(`${server}__hello`));
    expect((await turns.results(id)).at(-1)!.slice(1)).toEqual(['ok', 'wrote hello.txt']);
    expect(await paths(id)).toEqual(['hello.txt']);
    expect(fs.readdirSync(path.join(root, 'workspaces', id))).toEqual(['hello.txt']);
  });
});

describe('a workspace MCP call that runs out of time', () => {
  it('stops its server: what it wrote before is recorded with the error result, nothing it would write later lands in the files', async () => {
    const id = await turns.create();
    await turns.turn(id, call('slow__slow'));
    const [[, status, content]] = await turns.results(id);
    expect(status).toBe('error');
    expect(content).toMatch(/timed out/i);
    const change = (await turns.log(id)).find((e) => e.type === 'plugin/files/change');
    expect(JSON.stringify(change?.data)).toContain('early.txt');
    // Past when the server would have written late.txt (8 s after the call began, 5 s of it the timeout), had it not been
    // stopped (before: it was, and the next call's change set took it).
    await new Promise((r) => setTimeout(r, 3500));
    await turns.turn(id, call('slow__hello'));
    expect((await turns.results(id)).at(-1)!.slice(1)).toEqual(['ok', 'wrote hello.txt']);
    expect(await paths(id)).toEqual(['early.txt', 'hello.txt']);
    expect(fs.readdirSync(path.join(root, 'workspaces', id)).sort()).toEqual(['early.txt', 'hello.txt']);
  });
});
