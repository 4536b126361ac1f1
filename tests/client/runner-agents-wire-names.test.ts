// The OpenAI Agents adapter (@forkline/openai-agents) offering the agent's own
// tools under the names providers take (docs/runners.md#wire-names), with the
// Agents SDK's own packages (@openai/agents: tool(), MCPServerStdio, the
// OpenAI provider's Chat Completions and Responses models) against a fake
// provider refusing what the real API refuses (tests/helpers/provider-rules.ts).
// The SDK makes a name's characters `[a-zA-Z0-9_]` itself but keeps its
// length, and keeps the name of a tool built by hand:
// - a function tool named past 64 characters, as an imported session's
//   runner declared it and its history called it: offered and shown under its
//   form, the model's call of it recorded under its own name and run by it;
//   the agent's toolChoice and stopAtToolNames naming it name its form;
// - an MCP server's tools named as servers in the wild name them (dots,
//   spaces, 100 characters), in a new session: the same;
// - two tools whose forms meet (one named as the other's form): the first is
//   offered, and a hostile model naming the other (its own name, which no
//   request offered) or a name in no map runs nothing: the call is recorded as
//   one the runner did not run.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Agent, MCPServerStdio, OpenAIProvider, setTracingDisabled, tool, type Model, type Tool } from '@openai/agents';
import { ForklineRunner } from '@forkline/runner';
import { agentsToolDeclarations, runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { answers, refusingProviders, toolsOffered, type Provider } from '../helpers/provider-rules.ts';
import { agentsResponse, agentsResponseText, recordingCalling } from '../helpers/wire-name-sessions.ts';

const digest = (name: string) => createHash('sha256').update(name).digest('base64url').slice(0, 16);
/** A name the Agents SDK keeps and providers refuse (over 64 characters), and its form (docs/agents.md#wire-names). */
const TOOL = `read_${'file_'.repeat(13)}`;
const WIRE_TOOL = `${TOOL.slice(0, 47)}_${digest(TOOL)}`;

const ran: string[] = [];
const parameters = z.object({ path: z.string() });
const reader = (name: string, description: string) =>
  tool({ name, description, parameters, execute: async ({ path: p }) => (ran.push(`${name} ${p}`), `read ${p}`) });

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
/** What the fake model answers a request with (`n`: the provider's requests so far). */
let answer: (provider: Provider, body: any) => string[];

beforeAll(async () => {
  setTracingDisabled(true);
  fake = await refusingProviders((provider, body) => answer(provider, body));
  app = await startTestApp();
}, 60_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
});

const say = (p: Provider, text: string) => (p === 'openai' ? answers.openai.text(text) : agentsResponseText(text));
const call = (p: Provider, c: { id: string; name: string; arguments: string }) =>
  p === 'openai'
    ? answers.openai.call(c)
    : agentsResponse({ type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' });

/** The fake model: first calls the tool `pick` chooses of those offered ([name, description]), then answers "done". */
function calling(c: { id: string; arguments: string }, pick: (offered: Array<[string, string]>) => string) {
  const from = fake.received.length;
  let offered: Array<[string, string]> = [];
  answer = (p, body) => {
    if (fake.received.slice(from).filter((r) => !r.refusal).length > 1) return say(p, 'done');
    offered = toolsOffered[p](body);
    return call(p, { ...c, name: pick(offered) });
  };
  return { offered: () => offered, sent: () => fake.received.slice(from) };
}
const described = (description: string) => (offered: Array<[string, string]>) => offered.find(([, d]) => d === description)?.[0] ?? 'missing';

async function modelOf(provider: Provider): Promise<Model> {
  return new OpenAIProvider({ apiKey: 'sk', baseURL: `${fake.base}/openai/v1`, useResponses: provider === 'openai-responses' }).getModel('fake-model');
}

async function serve(id: string, pool: string, agent: Agent<any, any>, model: Model) {
  const runner = new ForklineRunner({ url: app.url, pool });
  try {
    // The session's model (an imported one names it), or the agent's own (a new one names none): both the fake's.
    await runner.serve(id, (s) => runAgentsTurns(s, agent.clone({ model }), { resolveModel: () => model }).then(() => {}));
  } finally {
    await runner.close();
  }
}

/** A session of `pool` imported from a recording whose runner declared `declared` and whose turn 1 called TOOL, with a message waiting. */
async function imported(pool: string, declared: unknown[]): Promise<string> {
  const r = recordingCalling({ id: `ses_${pool}`, pool, tool: TOOL, provider: 'openai', declared });
  const id = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r })).importRecording.id as string;
  await send(id, 'read b');
  return id;
}
const send = (id: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
const fresh = async (pool: string, text: string) => {
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await send(id, text);
  return id;
};
const log = (id: string) => app.services.store.log.page(id, -1, 1000);

describe.each(['openai', 'openai-responses'] as Provider[])('%s', (provider) => {
  const tag = provider.replace(/\W/g, '');

  it("offers a function tool under its wire name, and records and runs the model's call under the tool's own", async () => {
    const agent = new Agent({ name: 'reader', tools: [reader(TOOL, 'reads a file'), reader('lookup', 'looks up')] });
    const id = await imported(`agents-wire-${tag}`, agentsToolDeclarations(agent.tools as Tool[]));
    const model = calling({ id: 'call_2', arguments: '{"path":"b"}' }, described('reads a file'));
    ran.length = 0;
    await serve(id, `agents-wire-${tag}`, agent, await modelOf(provider));

    expect(model.sent().map((r) => r.refusal)).toEqual([undefined, undefined]);
    expect(
      model
        .offered()
        .map(([n]) => n)
        .sort(),
    ).toEqual([WIRE_TOOL, 'lookup'].sort());
    for (const { body } of model.sent()) expect(JSON.stringify(body)).not.toContain(TOOL);
    expect(ran).toEqual([`${TOOL} b`]);
    const events = await log(id);
    const message = events.find((e) => e.type === 'model/message' && anyData(e).turn === 2)!;
    expect(anyData(message).toolCalls).toMatchObject([{ id: 'call_2', name: TOOL, arguments: '{"path":"b"}', effect: 'side-effects' }]);
    expect(anyData(events.find((e) => e.type === 'tool/result' && anyData(e).callId === 'call_2')!)).toMatchObject({
      name: TOOL,
      status: 'ok',
      content: 'read b',
    });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  }, 60_000);

  it('names the tool by its wire name where the agent names it by its own: its toolChoice, the tools its run stops at', async () => {
    const agent = new Agent({
      name: 'chooser',
      tools: [reader(TOOL, 'reads a file'), reader('lookup', 'looks up')],
      modelSettings: { toolChoice: TOOL },
      toolUseBehavior: { stopAtToolNames: [TOOL] },
    });
    const pool = `agents-choice-${tag}`;
    const id = await fresh(pool, 'read');
    const model = calling({ id: 'call_3', arguments: '{"path":"c"}' }, described('reads a file'));
    ran.length = 0;
    await serve(id, pool, agent, await modelOf(provider));

    // One request, choosing the tool by the name it is offered under; the run stopped at its call, as the agent asks.
    expect(model.sent().map((r) => r.refusal)).toEqual([undefined]);
    const choice = model.sent()[0].body.tool_choice;
    expect(choice.function?.name ?? choice.name).toBe(WIRE_TOOL);
    expect(ran).toEqual([`${TOOL} c`]);
    const events = await log(id);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
  }, 60_000);

  it("offers an MCP server's tools under their wire names in a new session, and runs the one the model calls", async () => {
    const server = new MCPServerStdio({
      name: 'odd',
      command: process.execPath,
      args: [path.join(PROJECT_ROOT, 'tests/fixtures/mcp/odd-names-server.mjs')],
      cacheToolsList: true,
    });
    await server.connect();
    try {
      const long = 'n'.repeat(100);
      const id = await fresh(`agents-mcp-${tag}`, 'call the long one');
      const model = calling({ id: 'call_long', arguments: '{"q":"x"}' }, described(`the tool ${long} of odd`));
      await serve(id, `agents-mcp-${tag}`, new Agent({ name: 'odd', mcpServers: [server] }), await modelOf(provider));

      expect(model.sent().map((r) => r.refusal)).toEqual([undefined, undefined]);
      const offered = model.offered().map(([n]) => n);
      expect(offered).toHaveLength(7);
      for (const name of offered) expect(name).toMatch(/^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$/);
      expect(offered).toContain(`${long.slice(0, 47)}_${digest(long)}`);
      const events = await log(id);
      expect(anyData(events.find((e) => e.type === 'model/message')!).toolCalls).toMatchObject([{ id: 'call_long', name: long }]);
      expect(anyData(events.find((e) => e.type === 'tool/result')!)).toMatchObject({ name: long, status: 'ok', content: `${long} ran` });
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
    } finally {
      await server.close();
    }
  }, 60_000);

  it.each([
    ['the other tool by its own name', TOOL],
    ['a name in no map', 'files_read_nothing'],
  ])(
    'of two tools whose forms meet, offers the first; a model naming %s runs nothing',
    async (_what, named) => {
      // Declared first, so offered: a tool (built by hand: the SDK keeps its name) named exactly as TOOL goes on the wire.
      const agent = new Agent({ name: 'twins', tools: [{ ...reader('form', 'the form'), name: WIRE_TOOL }, reader(TOOL, 'the long one')] });
      const pool = `agents-twins-${tag}-${named.length}`;
      const id = await fresh(pool, 'read');
      const model = calling({ id: 'call_twin', arguments: '{"path":"x"}' }, () => named);
      ran.length = 0;
      await serve(id, pool, agent, await modelOf(provider));

      // The SDK finds no tool of that name: the run fails after one request.
      expect(model.sent().map((r) => r.refusal)).toEqual([undefined]);
      expect(model.offered()).toEqual([[WIRE_TOOL, 'the form']]);
      expect(ran).toEqual([]);
      const events = await log(id);
      expect(anyData(events.find((e) => e.type === 'model/message')!).toolCalls).toMatchObject([{ id: 'call_twin', name: named }]);
      const result = anyData(events.find((e) => e.type === 'tool/result')!);
      expect(result).toMatchObject({ callId: 'call_twin', status: 'error' });
      expect(result.content).toMatch(/did not run/);
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'failed' } });
    },
    60_000,
  );
});
