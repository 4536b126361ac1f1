// MCP servers that fail to start are reported, not silent (the toolServers
// query, the log of a turn whose tool set names them); `${workspace}` stands
// for the session's directory in a workspace server's env too. Real reference
// servers from the npm registry, driven through GraphQL.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const require = createRequire(import.meta.url);
const serverScript = (pkg: string) => require.resolve(`@modelcontextprotocol/${pkg}/dist/index.js`);

let app: TestApp;
const marker = randomUUID();

beforeAll(async () => {
  const node = process.execPath;
  app = await startTestApp({
    mcp: parseMcpConfig(
      JSON.stringify({
        mcpServers: {
          everything: { command: node, args: [serverScript('server-everything'), 'stdio'] },
          // Exits at once: it never answers initialize.
          broken: { command: node, args: ['-e', 'process.exit(3)'] },
          // A workspace server told its directory through its environment.
          ws: { command: node, args: [serverScript('server-everything'), 'stdio'], env: { WS_MARKER: marker, WS_DIR: '${workspace}' }, workspace: 'also' },
        },
      }),
    ),
  });
});
afterAll(async () => {
  await app?.close();
});

const turn = async (sessionId: string, text: string) => {
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
  await app.services.host.idle();
  return app.services.store.log.page(sessionId, -1, 1000);
};

describe('MCP servers that fail to start', () => {
  it('toolServers says which failed and why; the others are READY with their tools', async () => {
    const { toolServers } = await app.ok('{ toolServers { name status error toolCount } }');
    const byName = Object.fromEntries(toolServers.map((s: any) => [s.name, s]));
    expect(byName.broken).toMatchObject({ status: 'FAILED', toolCount: 0, error: expect.any(String) });
    expect(byName.broken.error.length).toBeGreaterThan(0);
    expect(byName.everything).toMatchObject({ status: 'READY', error: null });
    expect(byName.everything.toolCount).toBeGreaterThan(5);
  });

  it('a turn whose tool set names the failed server says so in its log; one whose set leaves it out does not', async () => {
    const all = (await app.ok(`mutation { createSession(input: { title: "all" }) { id } }`)).createSession.id;
    let events = await turn(all, 'hello');
    const down = events.filter((e) => e.type === 'plugin/agent/tool-server-down');
    expect(down.map((e) => e.data)).toEqual([{ turn: 1, step: 1, server: 'broken', error: expect.any(String) }]);
    expect(down[0].seq).toBe(events.find((e) => e.type === 'step/start')!.seq + 1);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });

    const some = (await app.ok(`mutation { createSession(input: { title: "some", tools: ["clock", "everything__*"] }) { id } }`)).createSession.id;
    events = await turn(some, 'hello');
    expect(events.filter((e) => e.type === 'plugin/agent/tool-server-down')).toEqual([]);
  });
});

describe('${workspace} in a workspace server', () => {
  it("stands for the session's directory in its env values", async () => {
    const id = (await app.ok(`mutation { createSession(input: { title: "ws" }) { id } }`)).createSession.id;
    const events = await turn(id, '!call ws__echo {"message": "hi"}');
    expect(events.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'ok', content: 'Echo: hi' });
    const environs = fs
      .readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .flatMap((p) => {
        try {
          const env = fs.readFileSync(`/proc/${p}/environ`, 'utf8').split('\0');
          return env.includes(`WS_MARKER=${marker}`) ? [env] : [];
        } catch {
          return [];
        }
      });
    // The listing instance (no session's directory) and the session's own.
    const dirs = environs.map((env) => env.find((v) => v.startsWith('WS_DIR='))!.slice('WS_DIR='.length));
    expect(dirs.length).toBeGreaterThan(0);
    expect(dirs.every((d) => !d.includes('${workspace}'))).toBe(true);
    const sessionDir = dirs.find((d) => d.includes(id));
    expect(sessionDir).toBeDefined();
    expect(fs.statSync(sessionDir!).isDirectory()).toBe(true);
  });
});

describe('the default tool set', () => {
  let marked: TestApp;
  beforeAll(async () => {
    const node = process.execPath;
    marked = await startTestApp({
      mcp: parseMcpConfig(
        JSON.stringify({
          mcpServers: {
            everything: { command: node, args: [serverScript('server-everything'), 'stdio'], default: true },
            extra: { command: node, args: [serverScript('server-everything'), 'stdio'] },
          },
        }),
      ),
    });
  });
  afterAll(async () => {
    await marked?.close();
  });
  const names = (tools: Array<{ name: string }>) => tools.map((t) => t.name);

  it('a session that names no tools is offered the built-ins and the servers marked default; createSession(tools) and setSessionTools choose more; the catalog lists all', async () => {
    const q = `query($id: ID!) { session(id: $id) { tools { name } } }`;
    const plain = (await marked.ok(`mutation { createSession(input: { title: "default" }) { id } }`)).createSession.id;
    const offered = names((await marked.ok(q, { id: plain })).session.tools);
    expect(offered).toEqual(expect.arrayContaining(['clock', 'note_write', 'everything__echo']));
    expect(offered.some((n) => n.startsWith('extra__'))).toBe(false);
    // The model is offered the same.
    await marked.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: plain, text: 'hi' } });
    await marked.services.host.idle();
    expect(names(marked.models.scripted.lastRequest!.tools)).toEqual(offered);

    const chosen = (await marked.ok(`mutation { createSession(input: { title: "more", tools: ["*"] }) { id } }`)).createSession.id;
    expect(names((await marked.ok(q, { id: chosen })).session.tools)).toEqual(expect.arrayContaining(['everything__echo', 'extra__echo']));
    const set = await marked.ok(`mutation($i: SetSessionToolsInput!) { setSessionTools(input: $i) { tools { name } } }`, {
      i: { sessionId: plain, tools: ['clock', 'extra__echo'] },
    });
    expect(names(set.setSessionTools.tools)).toEqual(['clock', 'extra__echo']);
    expect(names((await marked.ok('{ tools { name } }')).tools)).toEqual(expect.arrayContaining(['everything__echo', 'extra__echo']));
  });
});
