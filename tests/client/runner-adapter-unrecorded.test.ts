// Tools the frameworks run that the adapters' wrappers do not see
// (docs/runners.md, "Why the call goes first"): with the real packages,
// through the real server, against a fake provider speaking the Chat
// Completions wire format.
//
// - An Agents SDK agent with handoffs: the agent handed to would run with a
//   model and tools of its own, its calls never in the log. The turn fails
//   before any model call, and nothing runs.
// - Tools whose calls cannot be recorded before they run — the provider's own
//   (the AI SDK's `type: 'provider'` tools, the Agents SDK's hosted tools):
//   the turn fails before the model is called.
// - An Agents SDK agent's MCP server tools (mcpServers): declared, and each
//   call's result recorded as the tool returned it (not as a call that did not run).
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { tool as aiTool } from 'ai';
import { Agent, MCPServerStdio, OpenAIProvider, setTracingDisabled, tool as agentsTool, webSearchTool } from '@openai/agents';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
let modelCalls = 0;

/**
 * POST /v1/chat/completions (JSON answers: the tests run unstreamed): a request offering a handoff
 * (`transfer_to_…`) calls it; else one offering `send` or `echo` with no tool
 * result after the user's message calls it; else the model answers "done".
 */
const provider = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    modelCalls++;
    const body = JSON.parse(raw);
    const messages = body.messages as Array<{ role: string }>;
    const offered = ((body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name);
    const answered = messages.slice(messages.map((m) => m.role).lastIndexOf('user')).some((m) => m.role === 'tool');
    const handoff = offered.find((n) => n.startsWith('transfer_to_'));
    const name = handoff ?? (answered ? undefined : offered.find((n) => n === 'send' || n === 'echo'));
    const args = name === 'echo' ? '{"message":"hi"}' : '{}';
    const calls = name ? [{ index: 0, id: `call_${modelCalls}`, type: 'function', function: { name, arguments: args } }] : [];
    const message = { role: 'assistant', content: calls.length ? null : 'done', ...(calls.length ? { tool_calls: calls } : {}) };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: 'chatcmpl_1',
        created: 1,
        model: 'fake-model',
        object: 'chat.completion',
        choices: [{ index: 0, message, finish_reason: calls.length ? 'tool_calls' : 'stop' }],
        usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
      }),
    );
  });
});

let providerUrl = '';
beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
});
afterAll(async () => {
  provider.close();
  await app.close();
});

const events = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: anyData(e), synthetic: e.synthetic }));
let sessionNo = 0;

/** A session of a pool of its own with one message, served once by `run`. */
async function serveOnce(run: (session: RunnerSession) => Promise<unknown>) {
  const pool = `unrecorded-${++sessionNo}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'go' } });
  const runner = new ForklineRunner({ url: app.url, pool });
  try {
    await runner.serve(id, (s) => run(s).then(() => {}));
  } finally {
    await runner.close();
  }
  return events(id);
}

const agentsModel = () => new OpenAIProvider({ apiKey: 'test', baseURL: providerUrl, useResponses: false }).getModel('fake-model');

describe('an Agents SDK agent with handoffs', () => {
  it('fails the turn before any model call: the agent handed to would run its tools with no call in the log', async () => {
    let ran = 0;
    const model = await agentsModel();
    const send = agentsTool({ name: 'send', description: 'send', parameters: z.object({}), execute: async () => (ran++, 'sent') });
    const mailer = new Agent({ name: 'mailer', model, tools: [send] });
    const front = new Agent({ name: 'front', model, handoffs: [mailer] });
    const before = modelCalls;
    const log = await serveOnce((s) => runAgentsTurns(s, front, { stream: false }));
    expect(ran).toBe(0);
    expect(modelCalls).toBe(before);
    expect(log.some((e) => e.type === 'model/message')).toBe(false);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toMatch(/handoffs \(mailer\)/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });
});

describe('tools the provider runs itself', () => {
  it('an AI SDK provider tool fails the turn before the model is called', async () => {
    const openai = createOpenAI({ apiKey: 'test', baseURL: providerUrl });
    const before = modelCalls;
    const log = await serveOnce((s) =>
      runAiSdkTurns(s, { model: openai.chat('fake-model'), tools: { web_search: openai.tools.webSearch({}) as never }, mode: 'generate' }),
    );
    expect(modelCalls).toBe(before);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toMatch(/the provider runs tool "web_search" itself/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });

  it('an Agents SDK hosted tool fails the turn before the model is called', async () => {
    const agent = new Agent({ name: 'searcher', model: await agentsModel(), tools: [webSearchTool()] });
    const before = modelCalls;
    const log = await serveOnce((s) => runAgentsTurns(s, agent, { stream: false }));
    expect(modelCalls).toBe(before);
    expect(log.find((e) => e.type === 'plugin/agent/error')!.data.message).toMatch(/hosted_tool tool "web_search"/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  });

  it('an AI SDK function tool still runs (the refusal is for provider tools only)', async () => {
    const openai = createOpenAI({ apiKey: 'test', baseURL: providerUrl });
    const send = aiTool({ description: 'send', inputSchema: z.object({}), execute: async () => 'sent' });
    const log = await serveOnce((s) => runAiSdkTurns(s, { model: openai.chat('fake-model'), tools: { send }, mode: 'generate' }));
    expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ name: 'send', status: 'ok', content: 'sent' });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });
});

describe("an Agents SDK agent's MCP server tools", () => {
  it('are declared, and their results recorded as the tool returned them', async () => {
    const entry = path.join(path.dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js');
    const server = new MCPServerStdio({ command: process.execPath, args: [entry, 'stdio'], cacheToolsList: true });
    await server.connect();
    try {
      const agent = new Agent({ name: 'mcp', model: await agentsModel(), mcpServers: [server] });
      const log = await serveOnce((s) => runAgentsTurns(s, agent, { effects: { echo: 'read-only' }, stream: false }));
      const declared = log.find((e) => e.type === 'session/runner-tools')!.data.tools as Array<{ name: string; effect: string }>;
      expect(declared.find((t) => t.name === 'echo')).toMatchObject({ effect: 'read-only' });
      const message = log.find((e) => e.type === 'model/message')!;
      expect(message.data.toolCalls).toEqual([expect.objectContaining({ name: 'echo', effect: 'read-only' })]);
      const result = log.find((e) => e.type === 'tool/result')!;
      expect(result.data).toMatchObject({ name: 'echo', status: 'ok' });
      expect(result.data.content).toContain('hi');
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    } finally {
      await server.close();
    }
  });
});
