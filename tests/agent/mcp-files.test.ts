// An MCP server that works in each session's file workspace (mcp-config.ts
// `workspace`; docs/files.md): the reference server-filesystem, started once
// per session with `${workspace}` as its root. What its calls change is found
// by a walk of the tree and recorded with their results, so forks rewind it
// like the built-in file tools' changes.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { anyData } from '../helpers/event-data.ts';

const require = createRequire(import.meta.url);
let app: TestApp;
let dir: string;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mcp-files-'));
  const config = path.join(dir, 'mcp.json');
  fs.writeFileSync(
    config,
    JSON.stringify({
      mcpServers: {
        fs: {
          command: process.execPath,
          args: [require.resolve('@modelcontextprotocol/server-filesystem/dist/index.js'), '${workspace}'],
          cwd: '${workspace}',
          workspace: 'only',
        },
      },
    }),
  );
  app = await startTestApp({ mcp: loadMcpConfig(config) });
});
afterAll(async () => {
  await app.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const { create, turn, log, results } = agentTurns(() => app, 'mcp files');
const files = async (id: string) =>
  Object.fromEntries(
    await Promise.all(
      ((await app.ok(`query($id: ID!) { session(id: $id) { files { path } } }`, { id })).session.files as Array<{ path: string }>).map(async ({ path: p }) => [
        p,
        (await app.ok(`query($id: ID!, $p: String!) { session(id: $id) { file(path: $p) { text } } }`, { id, p })).session.file.text,
      ]),
    ),
  );

describe('server-filesystem in the session workspace', () => {
  it("records its writes and edits; a fork before a call's result has the files as before it; each session's server sees its own files", async () => {
    const p = await create();
    await turn(p, '!call fs__write_file {"path":"notes.md","content":"one\\n"}\n!then\n!call write_file {"path":"built-in.txt","content":"b"}');
    expect(await files(p)).toEqual({ 'notes.md': 'one\n', 'built-in.txt': 'b' });
    await turn(p, '!call fs__edit_file {"path":"notes.md","edits":[{"oldText":"one","newText":"two"}]}');
    expect((await results(p)).at(-1)![1]).toBe('ok');
    expect(await files(p)).toEqual({ 'notes.md': 'two\n', 'built-in.txt': 'b' });
    const call = (await log(p)).findLast((e) => e.type === 'model/message' && anyData(e).toolCalls.length)!;
    expect(anyData(call).toolCalls[0]).toMatchObject({ name: 'fs__edit_file', files: 'only' });

    const child = (
      await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } syntheticEvents { data } } }`, {
        i: { sessionId: p, atSeq: call.seq },
      })
    ).forkSession;
    expect(child.syntheticEvents[0].data.content).toContain('The files were restored to before this call');
    expect(await files(child.session.id)).toEqual({ 'notes.md': 'one\n', 'built-in.txt': 'b' });
    await turn(child.session.id, '!call fs__read_text_file {"path":"notes.md"}\n!call fs__list_directory {"path":"."}');
    const [read, listed] = (await results(child.session.id)).slice(-2);
    expect(read).toEqual(['fs__read_text_file', 'ok', 'one\n']);
    expect(listed[2]).toContain('built-in.txt');
    // A path outside the session's directory is the server's error.
    await turn(child.session.id, '!call fs__read_text_file {"path":"/etc/hostname"}');
    expect((await results(child.session.id)).at(-1)![1]).toBe('error');
  });
});
