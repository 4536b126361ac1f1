// MCP tools with the real reference servers from the npm registry, configured
// as a user would (FORKLINE_MCP_CONFIG's shape), driven through GraphQL: the
// scripted model calls `<server>__<tool>` on cue (`!call`).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from '../../src/db/embedded.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

const require = createRequire(import.meta.url);
const serverScript = (pkg: string) => require.resolve(`@modelcontextprotocol/${pkg}/dist/index.js`);

let app: TestApp;
let dir: string;
let root: string;
/** server-everything over Streamable HTTP, as a separate process on loopback. */
let httpServer: ChildProcess;
/** Marks the `everything` server's process, so the test can find and kill it. */
const marker = randomUUID();

const SEND = 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }';
const EVENTS = 'query($id: ID!) { session(id: $id) { status pendingInputs { inputId } events(first: 200) { edges { node { seq type data synthetic } } } } }';
const FORK = 'mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } syntheticEvents { type data } } }';

async function newSession(): Promise<string> {
  return (await app.ok('mutation { createSession(input: {title: "mcp"}) { id } }')).createSession.id;
}

/** Sends a message and waits for the end of the turn that takes it; returns that turn's events. */
async function turn(id: string, text: string) {
  const { sendMessage } = await app.ok(SEND, { i: { sessionId: id, text } });
  let events: any[] = [];
  await waitFor(
    async () => {
      const { session } = await app.ok(EVENTS, { id });
      events = session.events.edges.map((e: any) => e.node);
      const start = events.find((e) => e.type === 'turn/start' && e.data.inputId === sendMessage.inputId);
      if (!start) return false;
      events = events.filter((e) => e.seq >= start.seq);
      return events.some((e) => e.type === 'turn/end' && e.data.turn === start.data.turn);
    },
    { what: 'the turn to end', timeoutMs: 30_000 },
  );
  return events;
}

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-'));
  root = path.join(dir, 'root');
  fs.mkdirSync(root);
  const configFile = path.join(dir, 'mcp.json');
  const node = process.execPath;
  const port = await freePort();
  httpServer = spawn(node, [serverScript('server-everything'), 'streamableHttp'], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  await new Promise<void>((resolve, reject) => {
    let said = '';
    httpServer.stderr!.on('data', (b: Buffer) => void ((said += b) && said.includes('listening') && resolve()));
    httpServer.once('exit', (code) => reject(new Error(`server-everything (HTTP) exited ${code}: ${said}`)));
  });
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      mcpServers: {
        fs: { command: node, args: [serverScript('server-filesystem'), root] },
        everything: { command: node, args: [serverScript('server-everything'), 'stdio'], env: { FORKLINE_MCP_TEST_MARKER: marker } },
        memory: { command: node, args: [serverScript('server-memory')], env: { MEMORY_FILE_PATH: path.join(dir, 'memory.jsonl') } },
        web: { type: 'http', url: `http://127.0.0.1:${port}/mcp` },
        // The same server, not trusted: its read-only hints count for nothing.
        stranger: { type: 'stdio', command: node, args: [serverScript('server-everything'), 'stdio'], trusted: false },
        // The operator's word beats the annotations.
        pinned: {
          command: node,
          args: [serverScript('server-memory')],
          env: { MEMORY_FILE_PATH: path.join(dir, 'pinned.jsonl') },
          tools: { read_graph: { effect: 'side-effects' }, search_nodes: { approval: true } },
        },
      },
    }),
  );
  process.env.FORKLINE_MCP_TEST_SECRET = 'not-for-tool-servers';
  app = await startTestApp({ mcp: loadMcpConfig(configFile) });
});

afterAll(async () => {
  await app?.close();
  httpServer?.kill();
  delete process.env.FORKLINE_MCP_TEST_SECRET;
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('MCP tools from the reference servers', () => {
  it('a turn calls an MCP tool, keeps its result and its effect in the log, and sends the result in the next model request', async () => {
    const id = await newSession();
    const events = await turn(id, '!call everything__get-sum {"a": 2, "b": 3}');
    const call = events.find((e) => e.type === 'model/message' && e.data.toolCalls.length);
    expect(call.data.toolCalls[0]).toMatchObject({ name: 'everything__get-sum', effect: 'read-only' });
    const result = events.find((e) => e.type === 'tool/result');
    expect(result.data).toMatchObject({ status: 'ok', name: 'everything__get-sum' });
    expect(result.data.content).toContain('5');
    // The whole MCP result is kept for clients, beside the text the model reads.
    expect(events.find((e) => e.type === 'plugin/mcp/result')?.data).toMatchObject({
      callId: call.data.toolCalls[0].id,
      server: 'everything',
      tool: 'get-sum',
    });
    // The next step's request carried the tool's answer to the model.
    const sent = app.models.scripted.lastRequest!.messages;
    expect(sent.find((m) => m.role === 'tool')).toMatchObject({ tool_call_id: call.data.toolCalls[0].id, content: result.data.content });
    expect(app.models.scripted.lastRequest!.tools.map((t) => t.name)).toEqual(
      expect.arrayContaining(['clock', 'everything__get-sum', 'fs__edit_file', 'memory__create_entities']),
    );
  });

  it("a tool the config marks `approval` waits for a decision before it runs; the server's other tools do not", async () => {
    const id = await newSession();
    await app.ok(SEND, { i: { sessionId: id, text: '!call pinned__search_nodes {"query": "x"}' } });
    await app.services.host.idle();
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { status pendingApprovals { name arguments } } }`, { id });
    expect(session).toEqual({ status: 'WAITING', pendingApprovals: [{ name: 'pinned__search_nodes', arguments: '{"query": "x"}' }] });
    const other = await turn(await newSession(), '!call pinned__read_graph {}');
    expect(other.find((e) => e.type === 'tool/result')?.data.status).toBe('ok');
  });

  it('a server over Streamable HTTP serves calls the same way', async () => {
    const id = await newSession();
    const events = await turn(id, '!call web__echo {"message": "over http"}');
    expect(events.find((e) => e.type === 'model/message').data.toolCalls[0]).toMatchObject({ name: 'web__echo', effect: 'read-only' });
    expect(events.find((e) => e.type === 'tool/result').data).toMatchObject({ status: 'ok', content: 'Echo: over http' });
  });

  it('a fork before an MCP result words its retry advice from the annotations recorded with the call', async () => {
    const id = await newSession();
    const file = path.join(root, 'notes.txt');
    const events = await turn(
      id,
      [
        `!call fs__write_file ${JSON.stringify({ path: file, content: 'one\n' })}`,
        '!then',
        `!call fs__edit_file ${JSON.stringify({ path: file, edits: [{ oldText: 'one', newText: 'two' }] })}`,
        '!then',
        `!call fs__read_text_file ${JSON.stringify({ path: file })}`,
      ].join('\n'),
    );
    expect(fs.readFileSync(file, 'utf8')).toBe('two\n');
    const calls = events.filter((e) => e.type === 'model/message' && e.data.toolCalls.length);
    expect(calls.map((e) => e.data.toolCalls[0].effect)).toEqual(['idempotent', 'side-effects', 'read-only']);
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data.status)).toEqual(['ok', 'ok', 'ok']);

    const advice = async (callEvent: any) => {
      const { forkSession } = await app.ok(FORK, { i: { sessionId: id, atSeq: callEvent.seq } });
      const [synthetic] = forkSession.syntheticEvents.filter((e: any) => e.type === 'tool/result');
      expect(synthetic.data.status).toBe('not-started');
      return synthetic.data.content as string;
    };
    // write_file: destructive but idempotent (writing the same content again changes nothing more).
    expect(await advice(calls[0])).toContain('"fs__write_file" is idempotent, so it is safe to call it again');
    // edit_file: destructive and not idempotent.
    expect(await advice(calls[1])).toContain(
      '"fs__edit_file" has side effects: it may already have changed the world, so check its effect before repeating it',
    );
    expect(await advice(calls[2])).toContain('"fs__read_text_file" is read-only, so it is safe to call it again');
  });

  it("an untrusted server's hints make nothing weaker than side-effects; the config's effect beats annotations", async () => {
    const id = await newSession();
    const events = await turn(id, '!call stranger__echo {"message": "hi"}\n!call pinned__read_graph {}\n!call memory__read_graph {}');
    const [call] = events.filter((e) => e.type === 'model/message' && e.data.toolCalls.length);
    expect(call.data.toolCalls.map((c: any) => [c.name, c.effect])).toEqual([
      ['stranger__echo', 'side-effects'],
      ['pinned__read_graph', 'side-effects'],
      ['memory__read_graph', 'read-only'],
    ]);
  });

  it("a server's stdio child gets the env the config gives it, and none of forkline's", async () => {
    const id = await newSession();
    const events = await turn(id, '!call everything__get-env {}');
    const content = events.find((e) => e.type === 'tool/result').data.content as string;
    expect(content).toContain(marker);
    expect(content).not.toContain('not-for-tool-servers');
  });

  it('arguments are checked against the tool input schema before the call', async () => {
    const id = await newSession();
    const events = await turn(id, '!call everything__get-sum {"a": "two", "b": 3}');
    expect(events.find((e) => e.type === 'tool/result').data).toMatchObject({ status: 'error' });
    expect(events.find((e) => e.type === 'tool/result').data.content).toMatch(/invalid arguments for everything__get-sum/);
    expect(events.some((e) => e.type === 'plugin/mcp/result')).toBe(false); // never sent
  });

  it('an MCP error result is an error result', async () => {
    const id = await newSession();
    const events = await turn(id, `!call fs__read_text_file ${JSON.stringify({ path: path.join(root, 'missing.txt') })}`);
    expect(events.find((e) => e.type === 'tool/result').data.status).toBe('error');
  });

  it('progress streams on sessionTurns; a server that dies mid-call gives an error result, and the next call works', async () => {
    const id = await newSession();
    const open = await openSubscriptions(app.url);
    const updates = subscribeWs(app.url, 'subscription($id: ID!) { sessionTurns(sessionId: $id) { kind callId progress total } }', { id });
    await subscriptionsOpened(app.url, open, 1); // live only: it listens before the call reports progress
    const { sendMessage } = await app.ok(SEND, {
      i: { sessionId: id, text: '!call everything__trigger-long-running-operation {"duration": 30, "steps": 30}' },
    });
    await updates.until((items) => items.some((u) => u.sessionTurns.kind === 'TOOL_PROGRESS'), 'a TOOL_PROGRESS update', 20_000);
    const progress = updates.items.find((u) => u.sessionTurns.kind === 'TOOL_PROGRESS').sessionTurns;
    expect(progress).toMatchObject({ total: 30 });
    // Kill the server mid-call (the process whose environment carries our marker).
    const pids = fs.readdirSync('/proc').filter(
      (p) =>
        /^\d+$/.test(p) &&
        (() => {
          try {
            return fs.readFileSync(`/proc/${p}/environ`, 'utf8').includes(`FORKLINE_MCP_TEST_MARKER=${marker}`);
          } catch {
            return false;
          }
        })(),
    );
    expect(pids.length).toBeGreaterThan(0);
    for (const pid of pids) process.kill(Number(pid), 'SIGKILL');
    await updates.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'the turn to end', 20_000);
    await updates.close();
    const { session } = await app.ok(EVENTS, { id });
    const events = session.events.edges.map((e: any) => e.node);
    expect(events.some((e: any) => e.type === 'turn/start' && e.data.inputId === sendMessage.inputId)).toBe(true);
    expect(events.find((e: any) => e.type === 'tool/result').data.status).toBe('error');
    // The next call starts the server again.
    const again = await turn(id, '!call everything__echo {"message": "back"}');
    expect(again.filter((e) => e.type === 'tool/result').at(-1).data).toMatchObject({ status: 'ok', content: 'Echo: back' });
  });
});

describe('tool sets in the log', () => {
  const SET = 'mutation($i: SetSessionToolsInput!) { setSessionTools(input: $i) { id tools { name } } }';
  const TOOLS = 'query($id: ID!) { session(id: $id) { eventCount tools { name server effect } } }';

  it('the catalog lists built-ins and MCP tools with their server, effect and input schema', async () => {
    const { tools } = await app.ok('{ tools { name server description effect inputSchema } }');
    expect(tools.find((t: any) => t.name === 'clock')).toMatchObject({ server: null, effect: 'READ_ONLY' });
    expect(tools.find((t: any) => t.name === 'fs__edit_file')).toMatchObject({ server: 'fs', effect: 'SIDE_EFFECTS' });
    expect(tools.find((t: any) => t.name === 'fs__write_file')).toMatchObject({ server: 'fs', effect: 'IDEMPOTENT' });
    expect(tools.find((t: any) => t.name === 'everything__get-sum').inputSchema).toMatchObject({ type: 'object', properties: { a: {}, b: {} } });
  });

  it('a session offers only its set; a fork offers the set of its cut and may change its own', async () => {
    const id = await newSession();
    expect((await app.ok(TOOLS, { id })).session.tools.length).toBeGreaterThan(20); // no set: every tool
    const { setSessionTools } = await app.ok(SET, { i: { sessionId: id, tools: ['clock', 'everything__*'] } });
    expect(setSessionTools.tools.map((t: any) => t.name)).toContain('everything__echo');
    expect(setSessionTools.tools.map((t: any) => t.name)).not.toContain('fs__write_file');
    const setAt = (await app.ok(TOOLS, { id })).session.eventCount - 1;

    let events = await turn(id, '!call fs__write_file {"path": "/tmp/x", "content": "x"}\n!call everything__echo {"message": "in set"}');
    const results = events.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content]);
    expect(results).toEqual([
      ['fs__write_file', 'error', 'the model was offered no tool named "fs__write_file": the call did not run'],
      ['everything__echo', 'ok', 'Echo: in set'],
    ]);
    expect(app.models.scripted.lastRequest!.tools.map((t) => t.name)).not.toContain('fs__write_file');

    // Cut before the set: every tool; after it: the set; the child can change its own.
    const before = (await app.ok(FORK, { i: { sessionId: id, atSeq: setAt - 1 } })).forkSession.session.id;
    const after = (await app.ok(FORK, { i: { sessionId: id, atSeq: setAt } })).forkSession.session.id;
    expect((await app.ok(TOOLS, { id: before })).session.tools.map((t: any) => t.name)).toContain('fs__write_file');
    expect((await app.ok(TOOLS, { id: after })).session.tools.map((t: any) => t.name)).not.toContain('fs__write_file');
    events = await turn(after, '!call fs__write_file {"path": "/tmp/x", "content": "x"}');
    expect(events.find((e) => e.type === 'tool/result').data.content).toBe('the model was offered no tool named "fs__write_file": the call did not run');
    await app.ok(SET, { i: { sessionId: after, tools: [] } });
    await turn(after, 'no tools at all');
    expect(app.models.scripted.lastRequest!.tools).toEqual([]);
    expect((await app.ok(TOOLS, { id })).session.tools.map((t: any) => t.name)).toContain('clock'); // the parent keeps its set
  });

  it('createSession takes a set; a set naming what is not there is refused', async () => {
    const { createSession } = await app.ok('mutation { createSession(input: {tools: ["memory__*"]}) { id tools { name } } }');
    expect(createSession.tools.map((t: any) => t.name).every((n: string) => n.startsWith('memory__'))).toBe(true);
    for (const bad of [['nosuch__*'], ['shell'], ['fs__']]) {
      const r = await app.gql(SET, { i: { sessionId: createSession.id, tools: bad } });
      expect(r.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' } });
    }
  });
});

describe("a tenant's servers", () => {
  let tenantApp: TestApp;
  beforeAll(async () => {
    const config = path.join(dir, 'tenants.json');
    fs.writeFileSync(
      config,
      JSON.stringify({ mcpServers: { alphaonly: { command: process.execPath, args: [serverScript('server-everything'), 'stdio'], tenants: ['alpha'] } } }),
    );
    tenantApp = await startTwoTenantApp({ mcp: loadMcpConfig(config) });
  });
  afterAll(() => tenantApp?.close());

  it("are offered to that tenant's sessions only", async () => {
    const names = async (who: typeof A) => (await tenantApp.gql('{ tools { name } }', {}, who)).data.tools.map((t: any) => t.name);
    expect(await names(A)).toContain('alphaonly__echo');
    expect(await names(B)).not.toContain('alphaonly__echo');
    const r = await tenantApp.gql('mutation { createSession(input: {tools: ["alphaonly__*"]}) { id } }', {}, B);
    expect(r.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    // B's model asking for it anyway is answered that it was offered no such tool, and the server is never called for B.
    const { createSession } = (await tenantApp.gql('mutation { createSession(input: {}) { id } }', {}, B)).data;
    await tenantApp.gql(SEND, { i: { sessionId: createSession.id, text: '!call alphaonly__echo {"message": "b"}' } }, B);
    await tenantApp.services.host.idle();
    const { data } = await tenantApp.gql(EVENTS, { id: createSession.id }, B);
    const result = data.session.events.edges.map((e: any) => e.node).find((e: any) => e.type === 'tool/result');
    expect(result.data).toMatchObject({ status: 'error', content: 'the model was offered no tool named "alphaonly__echo": the call did not run' });
  });
});
