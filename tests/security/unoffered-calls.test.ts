// Forkline's own agent runs a call only of a tool it offered (docs/contract.md#agent-loop,
// docs/agents.md#wire-names), with a hostile model behind a fake provider speaking each
// real wire format (tests/helpers/provider-rules.ts, read by the AI SDK's own provider
// packages) and real MCP servers over stdio whose lists make two tools meet on the wire
// (tests/fixtures/mcp/odd-names-server.mjs: `flip` lists the crafted name first, so
// `flip__files.read` is the tool left out; `odd` lists it last). The model answers the
// left tool's own name, an offered tool's own name instead of the form it went by, a
// name in another case, and the form of a tool outside the turn's tools; an imported
// recording leaves a call awaiting approval that names a tool the session does not
// allow, and a person approves it. Each is answered as the runner SDKs answer such a
// call — "the model was offered no tool named …: the call did not run" — and no tool runs.
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { TOOL_ERROR_PREFIX } from '../../src/core/chat.ts';
import type { ToolCall } from '../../src/core/events.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { answers, refusingProviders, toolsOffered, type Provider } from '../helpers/provider-rules.ts';

type Body = any;
const SERVER = fileURLToPath(new URL('../fixtures/mcp/odd-names-server.mjs', import.meta.url));
const digest = (s: string) => createHash('sha256').update(s).digest('base64url').slice(0, 16);
/** The tool of `server` whose own name is exactly the wire form of its `files.read`. */
const crafted = (server: string) => `${server}__files_read_${digest(`${server}__files.read`)}`;
/** What a call of a tool the model was not offered is answered with (the runner SDKs' words). */
const notOffered = (name: string) => `the model was offered no tool named ${JSON.stringify(name)}: the call did not run`;

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
/** What the tools were asked to run. */
const runs: ToolCall[] = [];
/** The model's next answers, in order: the tool calls it makes, one step each; then it answers "done". */
let calls: Array<{ id: string; name: string; arguments: string }> = [];

beforeAll(async () => {
  fake = await refusingProviders((provider) => {
    const call = calls.shift();
    return call ? answers[provider].call(call) : answers[provider].text('done');
  });
  const server = (name: string, craftedFirst = false) => ({
    command: process.execPath,
    args: [SERVER],
    env: { ODD_SERVER: name, ...(craftedFirst ? { ODD_CRAFTED_FIRST: '1' } : {}) },
  });
  app = await startTestApp({
    providers: {
      openai: { baseUrl: `${fake.base}/openai/v1`, apiKey: 'sk-openai' },
      anthropic: { baseUrl: `${fake.base}/anthropic/v1`, apiKey: 'sk-anthropic' },
      google: { baseUrl: `${fake.base}/google/v1beta`, apiKey: 'sk-google' },
    },
    modelRetries: { maxRetries: 0, initialDelayMs: 1, maxDelayMs: 1 },
    mcp: parseMcpConfig(JSON.stringify({ mcpServers: { odd: server('odd'), flip: server('flip', true) } })),
    onToolRun: (_s, call) => void runs.push(call),
  });
}, 60_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
});

async function session(provider: Provider, tools?: string[]): Promise<string> {
  const { createSession } = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
    i: { model: { provider, model: 'fake-model' }, ...(tools ? { tools } : {}) },
  });
  return createSession.id;
}

async function send(id: string, text: string) {
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
  await app.services.host.idle();
}

const eventsOf = (id: string) => app.services.store.log.range(id, 0, 10_000);

/** Each step of the last turn: the call its model/message made ([name], or none) and the results that answered it ([status, content]). */
async function steps(id: string) {
  const events = await eventsOf(id);
  const turn = Math.max(...events.filter((e) => e.type === 'turn/start').map((e) => anyData(e).turn));
  const of = (type: string) => events.filter((e) => e.type === type && anyData(e).turn === turn).map(anyData);
  return of('model/message').map((m) => ({
    calls: m.toolCalls.map((c: ToolCall) => c.name),
    results: of('tool/result')
      .filter((r) => r.step === m.step)
      .map((r) => [r.status, r.content]),
  }));
}

describe.each(['openai', 'openai-responses', 'anthropic', 'google'] as Provider[])('%s: a call of the tool left out because its form is taken', (provider) => {
  it('never runs it; the tool that form was offered for runs when the model names the form', async () => {
    const id = await session(provider, ['flip__*']);
    calls = [
      { id: 'call_left', name: 'flip__files.read', arguments: '{"q":"x"}' },
      { id: 'call_form', name: crafted('flip'), arguments: '{"q":"y"}' },
    ];
    const from = fake.received.length;
    const before = runs.length;
    await send(id, 'read it');
    const offered = toolsOffered[provider](fake.received[from].body as Body);
    expect(fake.received.slice(from).map((r) => r.refusal)).toEqual([undefined, undefined, undefined]);
    // Offered: the crafted tool, under its own name (it came first); files.read is not.
    expect(offered.filter(([n]) => n === crafted('flip')).map(([, d]) => d)).toEqual([`the tool ${crafted('flip').slice('flip__'.length)} of flip`]);
    expect(offered.map(([, d]) => d)).not.toContain('the tool files.read of flip');

    expect(await steps(id)).toEqual([
      { calls: ['flip__files.read'], results: [['error', notOffered('flip__files.read')]] },
      { calls: [crafted('flip')], results: [['ok', `${crafted('flip').slice('flip__'.length)} ran`]] },
      { calls: [], results: [] },
    ]);
    expect(runs.slice(before).map((c) => c.name)).toEqual([crafted('flip')]);
    expect((await eventsOf(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});

describe('a name that is no form the turn offered', () => {
  it("an offered tool's own name instead of the form it went by does not run it; the form does", async () => {
    const id = await session('anthropic', ['odd__*']);
    calls = [
      { id: 'toolu_own', name: 'odd__files.read', arguments: '{"q":"x"}' },
      { id: 'toolu_form', name: crafted('odd'), arguments: '{"q":"y"}' },
    ];
    const before = runs.length;
    await send(id, 'read it');
    expect(await steps(id)).toEqual([
      { calls: ['odd__files.read'], results: [['error', notOffered('odd__files.read')]] },
      // The form is odd's files.read's (listed first): recorded and run under the tool's own name.
      { calls: ['odd__files.read'], results: [['ok', 'files.read ran']] },
      { calls: [], results: [] },
    ]);
    expect(runs.slice(before).map((c) => [c.id, c.name])).toEqual([['toolu_form', 'odd__files.read']]);
  }, 60_000);

  it("a name in another case, and the form of a tool outside the turn's tools, are answered as not offered; nothing runs", async () => {
    const id = await session('openai-responses', ['note_read', 'read_file']);
    const names = ['NOTE_READ', 'Read_File', crafted('odd'), 'odd__files.read'];
    calls = names.map((name, i) => ({ id: `call_${i}`, name, arguments: '{"key":"k","path":"a"}' }));
    const before = runs.length;
    await send(id, 'go');
    expect(await steps(id)).toEqual([...names.map((n) => ({ calls: [n], results: [['error', notOffered(n)]] })), { calls: [], results: [] }]);
    expect(runs.slice(before)).toEqual([]);
  }, 60_000);
});

const at = (seq: number) => new Date(Date.UTC(2026, 11, 6, 10, 0, seq)).toISOString();

/** A recording of a session on `provider` with the tool set `tools`, whose open turn's call `name` awaits approval. */
function awaitingRecording(o: { provider: Provider; tools?: string[]; name: string; arguments: string }): string {
  const events: Array<[string, unknown]> = [
    ['session/model', { provider: o.provider, model: 'fake-model' }],
    ...(o.tools ? [['session/tools', { tools: o.tools }] as [string, unknown]] : []),
    ['inbox/add', { inputId: 'in_1', text: 'do it' }],
    ['inbox/remove', { inputId: 'in_1', reason: 'taken' }],
    ['turn/start', { turn: 1, inputId: 'in_1' }],
    ['step/start', { turn: 1, step: 1 }],
    ['model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'call_1', name: o.name, arguments: o.arguments }] }],
    ['tool/approval-request', { turn: 1, step: 1, callId: 'call_1' }],
  ];
  const header = { format: 'forkline.recording', version: 4, session: { id: 'ses_outside', title: 'from outside' } };
  return [header, ...events.map(([type, data], seq) => ({ seq, type, data, createdAt: at(seq) }))].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

describe('a call taken up again after its approval (the resume path), from a log forkline did not write', () => {
  it.each([
    { case: "a tool outside the session's set", tools: ['note_read'], name: 'note_write', arguments: '{"key":"k","value":"pwned"}' },
    { case: 'the tool left out because its form is taken', tools: ['flip__*'], name: 'flip__files.read', arguments: '{"q":"x"}' },
    { case: 'a tool of the set in another case', tools: ['note_read'], name: 'NOTE_READ', arguments: '{"key":"k"}' },
  ])(
    '$case: approved, it is answered as not offered and never runs; the turn goes on',
    async (c) => {
      const { importRecording } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, {
        r: awaitingRecording({ provider: 'openai', ...c }),
      });
      const id = importRecording.id as string;
      await app.services.host.idle();
      const { session } = await app.ok(`query($id: ID!) { session(id: $id) { status pendingApprovals { callId name } } }`, { id });
      expect(session).toEqual({ status: 'WAITING', pendingApprovals: [{ callId: 'call_1', name: c.name }] });

      const before = runs.length;
      const from = fake.received.length;
      await app.ok(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }`, { i: { sessionId: id, callId: 'call_1' } });
      await app.services.host.idle();

      expect(runs.slice(before)).toEqual([]);
      const events = await eventsOf(id);
      const result = events.find((e) => e.type === 'tool/result' && anyData(e).callId === 'call_1')!;
      expect(anyData(result)).toMatchObject({ status: 'error', content: notOffered(c.name) });
      // Not started: no approved call's start before its result.
      expect(events.some((e) => e.type === 'plugin/agent/approved-call-start')).toBe(false);
      // The model heard it (as an error result), and the turn completed.
      const sent = fake.received.slice(from).map((r) => r.body.messages as Body[]);
      expect(sent).toHaveLength(1);
      expect(sent[0].find((m) => m.role === 'tool')?.content).toBe(`${TOOL_ERROR_PREFIX}${notOffered(c.name)}`);
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      const { session: after } = await app.ok(`query($id: ID!) { session(id: $id) { status workspace { key value } } }`, { id });
      expect(after).toEqual({ status: 'IDLE', workspace: [] });
    },
    60_000,
  );
});
