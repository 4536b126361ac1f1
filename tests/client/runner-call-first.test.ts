// "A call is in the log before its tool runs" (docs/runners.md, "Why the call
// goes first") for agents built with the outside frameworks themselves — the
// AI SDK's streamText/generateText (@forkline/ai-sdk) and the OpenAI Agents
// SDK's run, streamed or not (@forkline/openai-agents) — on the real OpenAI
// chat model packages talking to a fake provider that speaks the Chat
// Completions wire format (arguments streamed in pieces), through the real
// server. Each tool reads, at the moment it starts, what the server's log
// holds (GraphQL): its own call must be stored, and not yet answered.
//
// Paths not proved elsewhere (runner-adapter-edges.test.ts holds parallel calls
// of one step, a lease taken and the server gone while the call is appended;
// runner-adapter-approvals.test.ts the approval-gated ones):
// - several steps, parallel calls, an AI SDK `dynamicTool`, a call whose input
//   streams in (tool-input-start/delta): nothing runs until the model's answer
//   has ended and its message is stored;
// - the app aborting mid-step (the call still streaming): nothing runs;
// - a call the AI SDK declines to run (its answer ended for `length`): its
//   result says it did not run, never that the runner lacks the tool;
// - MCP tools: the AI SDK's MCP client (@ai-sdk/mcp over stdio) and the Agents
//   SDK's MCPServerStdio, on a real MCP SDK server whose tool reads the log;
// - an agent used as a tool (`asTool`): its call is stored before the agent runs;
// - `toolUseBehavior: 'stop_on_first_tool'`;
// - a 500 answering the call's append: no tool runs.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { createMCPClient } from '@ai-sdk/mcp';
import { Experimental_StdioMCPTransport } from '@ai-sdk/mcp/mcp-stdio';
import { dynamicTool, tool as aiTool, type ToolSet } from 'ai';
import { Agent, MCPServerStdio, OpenAIProvider, setTracingDisabled, tool as agentsTool, type Tool as AgentsTool } from '@openai/agents';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns, type AiSdkRunOptions } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { sse } from '../helpers/provider-sse.ts';

let app: TestApp;

/** What the user's message asks the fake model: step i calls `steps[i]`, then it answers "done". */
interface Directive {
  steps: string[][];
  /** The finish_reason of an answer with calls (default `tool_calls`). */
  finish?: string;
  /** A hook run once the calls' arguments are sent, before the answer ends (streamed) or is sent at all. */
  hold?: string;
  /** Arguments by tool name (default `{"n":1}`). */
  args?: Record<string, string>;
}
const hooks = new Map<string, () => Promise<void>>();
let answers = 0;

const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));

/** A Chat Completions answer; streamed, each call's arguments go in 3-character deltas (tool-input-delta). */
async function answer(
  res: ServerResponse,
  stream: boolean,
  calls: Array<{ id: string; name: string; args: string }>,
  finish: string,
  hold?: () => Promise<void>,
) {
  const id = `chatcmpl_${++answers}`;
  const base = { id, created: 1, model: 'fake-model' };
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  if (!stream) {
    await hold?.();
    const message = { role: 'assistant', content: calls.length ? null : 'done', ...(calls.length ? { tool_calls: toolCalls(calls) } : {}) };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (delta: unknown, finishReason: string | null = null) =>
    res.write(sse({ ...base, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finishReason }] }));
  if (!calls.length) chunk({ role: 'assistant', content: 'done' });
  else {
    chunk({ role: 'assistant', tool_calls: calls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } })) });
    for (const [index, c] of calls.entries())
      for (let at = 0; at < c.args.length; at += 3) chunk({ tool_calls: [{ index, function: { arguments: c.args.slice(at, at + 3) } }] });
  }
  await hold?.();
  if (res.destroyed) return;
  chunk({}, finish);
  res.write(sse({ ...base, object: 'chat.completion.chunk', choices: [], usage }));
  res.end('data: [DONE]\n\n');
}
const toolCalls = (calls: Array<{ id: string; name: string; args: string }>) =>
  calls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));

/** POST /v1/chat/completions. */
const provider = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw);
    const messages = body.messages as Array<{ role: string; content: unknown }>;
    const lastUser = messages.map((m) => m.role).lastIndexOf('user');
    const directive = JSON.parse(text(messages[lastUser].content)) as Directive;
    const step = messages.slice(lastUser).filter((m) => m.role === 'assistant').length;
    const names = directive.steps[step] ?? [];
    const calls = names.map((name, i) => ({ id: `call_${answers + 1}_${i}`, name, args: directive.args?.[name] ?? '{"n":1}' }));
    const hold = calls.length && directive.hold ? hooks.get(directive.hold) : undefined;
    void answer(res, body.stream === true, calls, calls.length ? (directive.finish ?? 'tool_calls') : 'stop', hold).catch(() => res.destroy());
  });
});

/** In front of the server: answers the append that stores a call (a model/message with calls) with a 500 while `failCalls`. */
let failCalls = false;
const proxy = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', async () => {
    if (failCalls && /"model\/message"/.test(raw) && /"toolCalls":\[\{/.test(raw)) {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('internal error');
      return;
    }
    const upstream = await fetch(app.url, { method: req.method, headers: { 'content-type': 'application/json' }, body: raw });
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' });
    res.end(await upstream.text());
  });
});

let providerUrl = '';
let proxyUrl = '';
beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/graphql`;
});
afterAll(async () => {
  provider.close();
  proxy.close();
  await app.close();
});

/** The session's log as the server serves it (GraphQL). */
async function logOf(id: string): Promise<Array<{ type: string; data: any }>> {
  const data = await app.ok(`query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { type data } } } } }`, { id });
  return data.session.events.edges.map((e: { node: { type: string; data: any } }) => e.node);
}
/** What the log holds of calls: the names of those stored in model messages, and of those with a result. */
const callsIn = (log: Array<{ type: string; data: any }>) => ({
  stored: log.filter((e) => e.type === 'model/message').flatMap((e) => e.data.toolCalls.map((c: { name: string }) => c.name)) as string[],
  answered: log.filter((e) => e.type === 'tool/result').map((e) => e.data.name as string),
});
type Seen = ReturnType<typeof callsIn>;

let sessionNo = 0;
/** A session of a pool of its own with the directive as its message. */
async function sessionWith(directive: Directive) {
  const pool = `call-first-${++sessionNo}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: JSON.stringify(directive) } });
  return { id, pool };
}
/** Serves the session once (a runner of its own); `url`: the proxy's, to break an append. */
async function serve(id: string, pool: string, run: (s: RunnerSession) => Promise<unknown>, opts: { url?: string; retryForMs?: number } = {}) {
  const runner = new ForklineRunner({ url: opts.url ?? app.url, pool, retryForMs: opts.retryForMs });
  try {
    await runner.serve(id, (s) => run(s).then(() => {}));
  } finally {
    await runner.close();
  }
}
/** A probe per tool: what the log held when the tool started, by tool name. */
function probes(id: string) {
  const seen: Record<string, Seen> = {};
  const probe = (name: string) => async () => {
    seen[name] = callsIn(await logOf(id));
    return `${name} done`;
  };
  return { seen, probe };
}

/**
 * Each tool started with its step's calls stored, the earlier steps' answered, and its own not yet (the
 * calls of a step run in parallel: a sibling's result may be stored before a tool's probe reads).
 */
function expectEachStartedAfterItsCall(seen: Record<string, Seen>, steps: string[][]) {
  expect(Object.keys(seen).sort()).toEqual(steps.flat().sort());
  steps.forEach((calls, i) => {
    for (const name of calls) {
      expect(seen[name].stored, name).toEqual(steps.slice(0, i + 1).flat());
      expect(seen[name].answered, name).toEqual(expect.arrayContaining(steps.slice(0, i).flat()));
      expect(seen[name].answered, name).not.toContain(name);
    }
  });
}

/**
 * A session whose answer calling `alpha` holds before it ends (the call's arguments complete: the SDK has parsed
 * it): nothing runs and nothing is stored then, and the tool runs once its call is stored. Then one whose app aborts
 * while the answer holds: the call is never stored, never run, and the turn ends failed.
 */
async function heldThenAborted(tag: string, serveWith: (id: string, pool: string, alpha: () => Promise<string>, signal?: AbortSignal) => Promise<void>) {
  const held = await sessionWith({ steps: [['alpha']], hold: `held-${tag}` });
  let ran = 0;
  let during: { ran: number; log: Seen } | undefined;
  hooks.set(`held-${tag}`, async () => {
    await new Promise((r) => setTimeout(r, 300));
    during = { ran, log: callsIn(await logOf(held.id)) };
  });
  const { seen, probe } = probes(held.id);
  await serveWith(held.id, held.pool, () => (ran++, probe('alpha')()));
  expect(during).toEqual({ ran: 0, log: { stored: [], answered: [] } });
  expect(seen.alpha).toEqual({ stored: ['alpha'], answered: [] });
  expect(ran).toBe(1);

  const aborted = await sessionWith({ steps: [['alpha']], hold: `abort-${tag}` });
  const cancel = new AbortController();
  hooks.set(`abort-${tag}`, async () => {
    cancel.abort(new Error('the app is stopping'));
    await new Promise((r) => setTimeout(r, 100));
  });
  ran = 0;
  await serveWith(aborted.id, aborted.pool, async () => `${ran++}`, cancel.signal);
  expect(ran).toBe(0);
  const log = await logOf(aborted.id);
  expect(callsIn(log)).toEqual({ stored: [], answered: [] });
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
}

/** The MCP tool's answer, the log as it read it when it started (log-probe-server.mjs): its own call stored, unanswered. */
async function expectMcpProbeSawItsCall(id: string) {
  const result = (await logOf(id)).find((e) => e.type === 'tool/result')!;
  expect(result.data).toMatchObject({ name: 'log_probe', status: 'ok' });
  expect(JSON.parse(result.data.content)).toEqual({ stored: ['log_probe'], answered: [] });
}

const parameters = z.object({ n: z.number() });
const LOG_PROBE_SERVER = fileURLToPath(new URL('../fixtures/mcp/log-probe-server.mjs', import.meta.url));
const chatModel = () => createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
const agentsModel = () => new OpenAIProvider({ apiKey: 'test', baseURL: providerUrl, useResponses: false }).getModel('fake-model');

describe.each(['stream', 'generate'] as const)('the AI SDK adapter (%s)', (mode) => {
  const run =
    (tools: ToolSet, extra: Partial<AiSdkRunOptions> = {}) =>
    (s: RunnerSession) =>
      runAiSdkTurns(s, { model: chatModel(), tools, mode, maxSteps: 6, ...extra });
  const tools = (probe: (name: string) => () => Promise<string>, names: string[]): ToolSet =>
    Object.fromEntries(names.map((name) => [name, aiTool({ description: name, inputSchema: parameters, execute: probe(name) })]));

  it('stores each step’s calls before any of their tools runs: several steps, parallel calls, a dynamic tool, input streamed in pieces', async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha'], ['beta', 'gamma']] });
    const { seen, probe } = probes(id);
    const set: ToolSet = {
      ...tools(probe, ['alpha', 'beta']),
      gamma: dynamicTool({ description: 'gamma', inputSchema: parameters, execute: probe('gamma') }),
    };
    await serve(id, pool, run(set));
    expectEachStartedAfterItsCall(seen, [['alpha'], ['beta', 'gamma']]);
    const log = await logOf(id);
    expect(callsIn(log).answered.sort()).toEqual(['alpha', 'beta', 'gamma']);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('runs nothing while the answer with the call is still coming, and nothing when the app aborts then', () =>
    heldThenAborted(`ai-${mode}`, (id, pool, alpha, signal) =>
      serve(id, pool, run({ alpha: aiTool({ description: 'alpha', inputSchema: parameters, execute: alpha }) }, { signal })),
    ));

  it('records a stored call the SDK declined to run (its answer ended for length) as not run, not as a tool the runner lacks', async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha']], finish: 'length' });
    let ran = 0;
    await serve(id, pool, run({ alpha: aiTool({ description: 'alpha', inputSchema: parameters, execute: async () => `${ran++}` }) }));
    expect(ran).toBe(0);
    const log = await logOf(id);
    const result = log.find((e) => e.type === 'tool/result')!;
    expect(result.data).toMatchObject({ name: 'alpha', status: 'error' });
    expect(result.data.content).toMatch(/did not run/);
    expect(result.data.content).toMatch(/length/);
    expect(log.find((e) => e.type === 'plugin/agent/error')?.data.message).toMatch(/length/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });

  it("stores an MCP client's tool call (@ai-sdk/mcp over stdio, a real MCP SDK server) before the server runs the tool", async () => {
    const { id, pool } = await sessionWith({ steps: [['log_probe']] });
    const client = await createMCPClient({
      transport: new Experimental_StdioMCPTransport({
        command: process.execPath,
        args: [LOG_PROBE_SERVER],
        env: { ...(process.env as Record<string, string>), FORKLINE_URL: app.url, SESSION_ID: id },
      }),
    });
    try {
      await serve(id, pool, run((await client.tools()) as ToolSet));
    } finally {
      await client.close();
    }
    await expectMcpProbeSawItsCall(id);
  });

  it('runs no tool when the append of its call is answered with a 500', async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha']] });
    let ran = 0;
    failCalls = true;
    try {
      const tool = aiTool({ description: 'alpha', inputSchema: parameters, execute: async () => `${ran++}` });
      await expect(serve(id, pool, run({ alpha: tool }), { url: proxyUrl, retryForMs: 300 })).rejects.toThrow();
    } finally {
      failCalls = false;
    }
    expect(ran).toBe(0);
    expect(callsIn(await logOf(id)).stored).toEqual([]);
  });
});

describe.each([true, false])('the OpenAI Agents adapter (streamed: %s)', (stream) => {
  const functionTools = (probe: (name: string) => () => Promise<string>, names: string[]): AgentsTool[] =>
    names.map((name) => agentsTool({ name, description: name, parameters, execute: probe(name) }));

  it('stores each step’s calls before any of their tools runs: several steps, parallel calls', async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha'], ['beta', 'gamma']] });
    const { seen, probe } = probes(id);
    const agent = new Agent({ name: 'steps', model: await agentsModel(), tools: functionTools(probe, ['alpha', 'beta', 'gamma']) });
    await serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6 }));
    expectEachStartedAfterItsCall(seen, [['alpha'], ['beta', 'gamma']]);
    expect((await logOf(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('runs nothing while the answer with the call is still coming, and nothing when the app aborts then', () =>
    heldThenAborted(`agents-${stream}`, async (id, pool, alpha, signal) => {
      const agent = new Agent({
        name: 'held',
        model: await agentsModel(),
        tools: [agentsTool({ name: 'alpha', description: 'alpha', parameters, execute: alpha })],
      });
      await serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6, signal }));
    }));

  it('stores the call of an agent used as a tool (asTool) before that agent runs', async () => {
    const inner = JSON.stringify({ steps: [['inner_probe']] } satisfies Directive);
    const { id, pool } = await sessionWith({ steps: [['helper']], args: { helper: JSON.stringify({ input: inner }) } });
    const { seen, probe } = probes(id);
    const helper = new Agent({ name: 'helper', model: await agentsModel(), tools: functionTools(probe, ['inner_probe']) });
    const agent = new Agent({ name: 'outer', model: await agentsModel(), tools: [helper.asTool({ toolName: 'helper', toolDescription: 'asks the helper' })] });
    await serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6 }));
    // The helper's own tool ran inside the helper's run: the helper's call was stored and unanswered then.
    expect(seen.inner_probe).toEqual({ stored: ['helper'], answered: [] });
    const log = await logOf(id);
    expect(callsIn(log)).toEqual({ stored: ['helper'], answered: ['helper'] });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it("stores an MCP server's tool call (MCPServerStdio, a real MCP SDK server) before the server runs the tool", async () => {
    const { id, pool } = await sessionWith({ steps: [['log_probe']] });
    const server = new MCPServerStdio({ command: process.execPath, args: [LOG_PROBE_SERVER], env: { FORKLINE_URL: app.url, SESSION_ID: id } });
    await server.connect();
    try {
      const agent = new Agent({ name: 'mcp', model: await agentsModel(), mcpServers: [server] });
      await serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6 }));
    } finally {
      await server.close();
    }
    await expectMcpProbeSawItsCall(id);
  });

  it("stores the call before its tool runs when the agent stops at the first tool (toolUseBehavior: 'stop_on_first_tool')", async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha'], ['beta']] });
    const { seen, probe } = probes(id);
    const agent = new Agent({
      name: 'stops',
      model: await agentsModel(),
      tools: functionTools(probe, ['alpha', 'beta']),
      toolUseBehavior: 'stop_on_first_tool',
    });
    await serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6 }));
    expect(seen).toEqual({ alpha: { stored: ['alpha'], answered: [] } });
    const log = await logOf(id);
    expect(callsIn(log)).toEqual({ stored: ['alpha'], answered: ['alpha'] });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('runs no tool when the append of its call is answered with a 500', async () => {
    const { id, pool } = await sessionWith({ steps: [['alpha']] });
    let ran = 0;
    const agent = new Agent({ name: 'fails', model: await agentsModel(), tools: functionTools(() => async () => `${ran++}`, ['alpha']) });
    failCalls = true;
    try {
      await expect(serve(id, pool, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 6 }), { url: proxyUrl, retryForMs: 300 })).rejects.toThrow();
    } finally {
      failCalls = false;
    }
    expect(ran).toBe(0);
    expect(callsIn(await logOf(id)).stored).toEqual([]);
  });
});
