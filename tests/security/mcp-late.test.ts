// A server that answers after its call timed out (docs/mcp.md: a call past
// `timeoutMs` is an `error` result): real SDK servers
// (tests/fixtures/mcp/late-server.mjs, deaf to the cancellation) over stdio
// and Streamable HTTP, answering 1.5 s after the call's 1 s, and a workspace
// one, stopped when its call times out (its bound is 4 s: it holds the start
// of the server again for the next call, which a loaded machine may take). The late answer writes nothing: the log
// holds the call and its one `error` result, no `plugin/mcp/result`, no second
// result; the server's next call is answered as its own.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { workspaceServer } from '../helpers/probe-mcp.ts';
import { waitFor } from '../helpers/wait.ts';

const LATE = fileURLToPath(new URL('../fixtures/mcp/late-server.mjs', import.meta.url));
const call = (tool: string, args: object = {}) => `!call ${tool} ${JSON.stringify(args)}`;
let root: string;
let app: TestApp;
let web: ChildProcess;
let turns: ReturnType<typeof agentTurns>;
const stats = (server: string) => path.join(root, `${server}.stats`);

beforeAll(async () => {
  root = fs.mkdtempSync('/var/tmp/forkline-mcp-late-');
  fs.mkdirSync(path.join(root, 'workspaces'));
  web = spawn(process.execPath, [LATE, 'http'], { env: { PATH: process.env.PATH, LATE_STATS: stats('web') }, cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve) =>
    web.stdout!.on('data', (b: Buffer) => {
      const m = /listening (\d+)/.exec(String(b));
      if (m) resolve(`http://127.0.0.1:${m[1]}/mcp`);
    }),
  );
  app = await startTestApp({
    workspacesDir: path.join(root, 'workspaces'),
    mcp: {
      mcpServers: {
        stdio: { command: process.execPath, args: [LATE], cwd: root, env: { LATE_STATS: stats('stdio') }, timeoutMs: 1000, trusted: true, tools: {} },
        web: { type: 'http', url, headers: {}, timeoutMs: 1000, trusted: true, tools: {} },
        files: { ...workspaceServer(LATE, false), env: { LATE_STATS: stats('files') }, timeoutMs: 4000 },
      },
    },
  });
  turns = agentTurns(() => app, 'mcp late');
}, 60_000);
afterAll(async () => {
  await app?.close();
  web?.kill();
  fs.rmSync(root, { recursive: true, force: true });
});

describe.each(['stdio', 'web', 'files'] as const)('a server (%s) that answers after its call timed out', (server) => {
  it('writes nothing with its late answer: one error result, no kept MCP result; the next call is answered as its own', async () => {
    const id = await turns.create();
    // Started first (its start is held to the call's timeout, which a loaded machine may take).
    await waitFor(
      async () => {
        await turns.turn(id, call(`${server}__pid`));
        return (await turns.results(id)).at(-1)![1] === 'ok';
      },
      { what: 'the server to start', timeoutMs: 30_000 },
    );
    const started = (await turns.results(id)).length;
    // 1.5 s past the call's timeout.
    await turns.turn(id, call(`${server}__late`, { ms: server === 'files' ? 5500 : 2500 }));
    expect((await turns.results(id)).slice(started).map((r) => r.slice(0, 2))).toEqual([[`${server}__late`, 'error']]);
    const before = (await turns.log(id)).length;
    if (server === 'files') {
      // A workspace server whose call ran out of time is stopped with it (docs/mcp.md), as the shell's command is:
      // it never answers, nor writes anything after the call's result. Past when it would have answered:
      await new Promise((r) => setTimeout(r, 3000));
      expect(fs.existsSync(stats(server))).toBe(false);
    } else {
      // The server answers 1.5 s after the call gave up (over HTTP, on a request forkline closed: it may not reach it).
      await waitFor(() => fs.existsSync(stats(server)), { what: 'the late answer', timeoutMs: 10_000 });
      await new Promise((r) => setTimeout(r, 500));
    }
    const log = await turns.log(id);
    expect(log.length).toBe(before);
    expect(log.filter((e) => e.type === 'plugin/mcp/result').map((e) => (e.data as { tool: string }).tool)).not.toContain('late');

    await turns.turn(id, call(`${server}__pid`));
    const results = (await turns.results(id)).slice(started);
    expect(results.map((r) => r.slice(0, 2))).toEqual([
      [`${server}__late`, 'error'],
      [`${server}__pid`, 'ok'],
    ]);
    expect(results[1][2]).toMatch(/^pid \d+$/);
    // The workspace server was started again for it; the others went on as they were.
    const firstPid = (await turns.results(id))[started - 1][2];
    if (server === 'files') expect(results[1][2]).not.toBe(firstPid);
    else expect(results[1][2]).toBe(firstPid);
    const kept = (await turns.log(id)).filter((e) => e.type === 'plugin/mcp/result');
    expect(kept.map((e) => (e.data as { tool: string }).tool)).not.toContain('late');
    // A workspace server stopped with its timed-out call wrote nothing after it: no change with either call.
    const changes = (await turns.log(id)).filter((e) => e.type === 'plugin/files/change').map((e) => e.data as { callId: string; changes: { path: string }[] });
    expect(changes.map((c) => [c.callId, c.changes.map((x) => x.path)])).toEqual([]);
  });
});
