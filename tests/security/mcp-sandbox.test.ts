// An MCP server the operator marks `sandbox` runs in bubblewrap, as the shell
// does (docs/mcp.md, docs/operations.md "Threat model"): a server that turns
// hostile (or is tricked by what the model sends it) reads no other session's
// files and none of the host's beyond the system's programs and what the
// config names, sees no forkline process, reaches no port, and still works
// in its own workspace. The same probe without `sandbox` shows each of these
// is otherwise possible. Real turns, the scripted model calling.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { anyData } from '../helpers/event-data.ts';
import { probeServer } from '../helpers/probe-mcp.ts';

const call = (tool: string, args: object) => `!call ${tool} ${JSON.stringify(args)}`;

let root: string;
let workspacesDir: string;
let app: TestApp;
const logged: string[] = [];
let turns: ReturnType<typeof agentTurns>;

beforeAll(async () => {
  root = fs.mkdtempSync('/var/tmp/forkline-mcp-sandbox-');
  workspacesDir = path.join(root, 'workspaces');
  fs.mkdirSync(workspacesDir);
  fs.writeFileSync(path.join(root, 'host-secret.txt'), 'host secret');
  app = await startTestApp({
    workspacesDir,
    log: (m) => logged.push(m),
    // The probe's own code and its modules: the one host path the operator names.
    mcp: { mcpServers: { boxed: probeServer(true), open: probeServer(false) } },
  });
  turns = agentTurns(() => app, 'mcp sandbox');
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(root, { recursive: true, force: true });
});

describe('a sandboxed MCP server', () => {
  it("reads nothing of another session's or the host's, sees no forkline process, reaches no port; the same server unsandboxed could", async () => {
    const other = await turns.create();
    await turns.turn(other, call('boxed__write', { name: 'secret.txt', text: 'the other session secret' }));
    const [[, wrote, where]] = await turns.results(other);
    expect(wrote).toBe('ok');
    const otherSecret = path.join(workspacesDir, other, 'secret.txt');
    expect(where).toBe(`wrote ${otherSecret}`);
    expect(fs.readFileSync(otherSecret, 'utf8')).toBe('the other session secret');

    const port = Number(new URL(app.url).port);
    const probes = (tool: 'boxed' | 'open') => [
      call(`${tool}__read`, { path: otherSecret }),
      call(`${tool}__list`, { path: workspacesDir }),
      call(`${tool}__read`, { path: path.join(root, 'host-secret.txt') }),
      call(`${tool}__read`, { path: `/proc/${process.pid}/environ` }),
      call(`${tool}__connect`, { port }),
      call(`${tool}__processes`, {}),
    ];
    const id = await turns.create();
    await turns.turn(id, [...probes('boxed'), ...probes('open')].join('\n'));
    const answers = (await turns.results(id)).map(([, , content]) => String(content));
    const [boxed, open] = [answers.slice(0, 6), answers.slice(6)];

    expect(boxed[0]).toBe('error ENOENT');
    expect(boxed[1]).toBe(`list ${id}`); // its own directory only: bwrap makes the parents, empty
    expect(boxed[2]).toBe('error ENOENT');
    expect(boxed[3]).toBe('error ENOENT');
    expect(boxed[4]).toMatch(/^error (ECONNREFUSED|ENETUNREACH|EACCES)/);
    expect(boxed[5]).not.toContain(String(process.pid));

    expect(open[0]).toBe('read the other session secret');
    expect(open[1]).toContain(other);
    expect(open[2]).toBe('read host secret');
    expect(open[3]).toMatch(/^read /);
    expect(open[4]).toBe('connected');
    expect(open[5]).toContain(String(process.pid));
  });

  it('writes in its own workspace, and the change is recorded with the call', async () => {
    const id = await turns.create();
    await turns.turn(id, call('boxed__write', { name: 'notes.txt', text: 'kept' }));
    const [[name, status]] = await turns.results(id);
    expect([name, status]).toEqual(['boxed__write', 'ok']);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { file(path: "notes.txt") { text } } }`, { id });
    expect(session.file.text).toBe('kept');
  });
});

describe('what a server answers', () => {
  it('text Postgres cannot hold and JSON nested 500 deep are made storable: the call is recorded and the turn ends', async () => {
    const id = await turns.create();
    await turns.turn(id, call('open__hostile', {}));
    const [[name, status, content]] = await turns.results(id);
    // NUL shown as its escape (as in the shell's output: core/visible-text.ts), a lone surrogate made U+FFFD.
    expect([name, status, content]).toEqual(['open__hostile', 'ok', 'nul\\x00 and \uFFFD lone']);
    const log = await turns.log(id);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    const kept = anyData(log.find((e) => e.type === 'plugin/mcp/result')!).result.structuredContent;
    expect(Object.keys(kept).sort()).toEqual(['deep', 'key\uFFFD']);
    let depth = 0;
    let at = kept.deep;
    while (typeof at === 'object') [at, depth] = [at.down, depth + 1];
    expect(depth).toBeGreaterThan(50); // kept as JSON as deep as the log allows, the rest as its text
    expect(at).toMatch(/^\{"down":\{"down":/);
    expect(at).toContain('{"end":"bottom\\u0000"}'); // JSON text: the NUL written as its escape
  });
});

describe('an answer of 3 MB', () => {
  it('reaches the model cut to 100,000 characters with a note, and the turn ends', async () => {
    const id = await turns.create();
    await turns.turn(id, call('open__flood', {}));
    const [[, status, content]] = await turns.results(id);
    expect(status).toBe('ok');
    expect(content).toMatch(/^x{100000}\n\[cut: the result was 3,000,000 characters; the first 100,000 are shown\]$/);
    expect((await turns.log(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });
});

describe('where no sandbox can be made', () => {
  it('the server is not started, and toolServers and the start-up log say why', async () => {
    const log: string[] = [];
    const bare = await startTestApp({
      workspacesDir: path.join(root, 'bare'),
      bwrap: '/nonexistent/bwrap',
      log: (m) => log.push(m),
      mcp: { mcpServers: { boxed: probeServer(true) } },
    });
    try {
      expect(log.join('\n')).toMatch(/MCP servers "boxed" ask for a sandbox, but .*\/nonexistent\/bwrap.*not started/);
      const { toolServers } = await bare.ok(`{ toolServers { name status error } }`);
      expect(toolServers).toEqual([{ name: 'boxed', status: 'FAILED', error: expect.stringMatching(/asks for a sandbox.*not started/) }]);
    } finally {
      await bare.close();
    }
  });
});
