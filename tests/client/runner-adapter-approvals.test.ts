// Tool approval through the adapters (docs/runners.md, Tool approval;
// docs/contract.md#tool-approval), with the real frameworks — the AI SDK's
// streamText/generateText with a tool's `needsApproval`, the OpenAI Agents
// SDK's run with its `needsApproval` interruptions — on the real OpenAI chat
// model packages talking to a fake provider that speaks the Chat Completions
// wire format, through the real server:
//
// - the call is in the log, then its approval request; the tool has not run,
//   the session is WAITING and no runner holds it; a call of the same step
//   that needs no decision runs;
// - the decision is given through approveToolCall / denyToolCall; a runner
//   that claims the session afterwards (a new one: the first is gone) runs an
//   approved call once, after the decision and plugin/agent/approved-call-start
//   are in the log, and answers a denied one as not run; the turn goes on to
//   the model's answer;
// - a runner that dies while an approved call runs leaves it to the next
//   claim's repair, as a call in flight: it is never run a second time.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { tool as aiTool, type ToolSet } from 'ai';
import { Agent, OpenAIProvider, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { chatCompletionsAnswer } from '../helpers/provider-sse.ts';

let app: TestApp;
/** The tool messages of each request the fake provider answered (by the user message's text). */
const toolMessages = new Map<string, string[][]>();

/**
 * POST /v1/chat/completions: the user's message names the tools to call (JSON: `{"calls": [names]}`); once the
 * request holds their results, the model answers "done". JSON, or server-sent chunks when `stream` is asked.
 */
const provider = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw);
    const messages = body.messages as Array<{ role: string; content: unknown }>;
    const lastUser = messages.map((m) => m.role).lastIndexOf('user');
    const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));
    const userText = text(messages[lastUser].content);
    const tools = messages.slice(lastUser).filter((m) => m.role === 'tool');
    toolMessages.set(userText, [...(toolMessages.get(userText) ?? []), tools.map((m) => text(m.content))]);
    const names = tools.length ? [] : (JSON.parse(userText) as { calls: string[] }).calls;
    const calls = names.map((name, i) => ({ index: i, id: `call_${i}_${name}`, type: 'function', function: { name, arguments: '{"n":1}' } }));
    chatCompletionsAnswer(res, body, { id: 'chatcmpl_1', calls, text: 'done' });
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

interface TestTool {
  name: string;
  execute: () => Promise<string>;
  needsApproval?: boolean;
}

const parameters = z.object({ n: z.number() });
const VARIANTS = [
  ...(['stream', 'generate'] as const).map((mode) => ({
    name: `the AI SDK adapter (${mode === 'stream' ? 'streamText' : 'generateText'})`,
    run: (session: RunnerSession, tools: TestTool[]) => {
      const model = createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
      const set: ToolSet = Object.fromEntries(
        tools.map((t) => [
          t.name,
          aiTool<{ n: number }, string>({ description: t.name, inputSchema: parameters, needsApproval: t.needsApproval, execute: () => t.execute() }),
        ]),
      );
      return runAiSdkTurns(session, { model, tools: set, mode, maxSteps: 4 });
    },
  })),
  ...[true, false].map((stream) => ({
    name: `the OpenAI Agents adapter (${stream ? 'streamed' : 'not streamed'})`,
    run: async (session: RunnerSession, tools: TestTool[]) => {
      const model = await new OpenAIProvider({ apiKey: 'test', baseURL: providerUrl, useResponses: false }).getModel('fake-model');
      const agent = new Agent({
        name: 'approvals',
        model,
        tools: tools.map((t) => agentsTool({ name: t.name, description: t.name, parameters, needsApproval: t.needsApproval, execute: () => t.execute() })),
      });
      return runAgentsTurns(session, agent, { stream, maxTurns: 4 });
    },
  })),
];

const events = async (id: string) =>
  (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ seq: e.seq, type: e.type, data: anyData(e), synthetic: e.synthetic }));
const SESSION = `query($id: ID!) { session(id: $id) { status runnerHolder pendingApprovals { callId name } } }`;
let sessionNo = 0;

describe.each(VARIANTS)('$name', (variant) => {
  /** Serves the session once with a runner of its own (a new process each time, as after a restart). */
  const serve = async (id: string, pool: string, tools: TestTool[]) => {
    const runner = new ForklineRunner({ url: app.url, pool });
    try {
      expect(await runner.serve(id, (s) => variant.run(s, tools).then(() => {}))).toBe(true);
    } finally {
      await runner.close();
    }
  };
  const sessionCalling = async (calls: string[], approvalRequired?: string[]) => {
    const pool = `approvals-${++sessionNo}`;
    const id = (
      await app.ok(`mutation($p: String!, $a: [String!]) { createSession(input: {runner: $p, approvalRequired: $a}) { id } }`, { p: pool, a: approvalRequired })
    ).createSession.id as string;
    const text = JSON.stringify({ calls, n: sessionNo });
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
    return { id, pool, text };
  };

  it('asks in the log and waits; a runner that claims the session after the approval runs the call once, then the turn goes on', async () => {
    const { id, pool, text } = await sessionCalling(['lookup', 'wire_money']);
    const ran: string[] = [];
    /** What the log held when wire_money ran. */
    let logWhenRan: Awaited<ReturnType<typeof events>> = [];
    const tools = (): TestTool[] => [
      { name: 'lookup', execute: async () => (ran.push('lookup'), 'found') },
      {
        name: 'wire_money',
        needsApproval: true,
        execute: async () => {
          logWhenRan = await events(id);
          ran.push('wire_money');
          return 'wired';
        },
      },
    ];
    await serve(id, pool, tools());
    // The call and its request are in the log; the gated tool did not run; the other call of the step did.
    expect(ran).toEqual(['lookup']);
    let log = await events(id);
    const message = log.find((e) => e.type === 'model/message')!;
    expect(message.data.toolCalls.map((c: { name: string }) => c.name)).toEqual(['lookup', 'wire_money']);
    const request = log.find((e) => e.type === 'tool/approval-request')!;
    expect(request).toMatchObject({ synthetic: false, data: { turn: 1, step: 1, callId: 'call_1_wire_money' } });
    expect(request.seq).toBeGreaterThan(message.seq);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.content])).toEqual([['lookup', 'found']]);
    expect(log.some((e) => e.type === 'turn/end')).toBe(false);
    expect((await app.ok(SESSION, { id })).session).toEqual({
      status: 'WAITING',
      runnerHolder: null,
      pendingApprovals: [{ callId: 'call_1_wire_money', name: 'wire_money' }],
    });
    // While it waits, a runner that claims the session runs nothing.
    const idle = new ForklineRunner({ url: app.url, pool });
    expect(await idle.claimMany(4)).toEqual([]);
    await idle.close();

    await app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "call_1_wire_money", reason: "fine"}) { status } }`, { id });
    await serve(id, pool, tools());
    expect(ran).toEqual(['lookup', 'wire_money']);
    // When it ran, its approval and the approved call's start were in the log.
    const approval = logWhenRan.find((e) => e.type === 'tool/approval');
    expect(approval?.data).toMatchObject({ callId: 'call_1_wire_money', decision: 'approved', reason: 'fine' });
    expect(logWhenRan.at(-1)).toMatchObject({ type: 'plugin/agent/approved-call-start', data: { turn: 1, step: 1, callId: 'call_1_wire_money' } });
    log = await events(id);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content])).toEqual([
      ['lookup', 'ok', 'found'],
      ['wire_money', 'ok', 'wired'],
    ]);
    // The model read both results, and answered.
    expect(toolMessages.get(text)!.at(-1)).toEqual(['found', 'wired']);
    expect(log.filter((e) => e.type === 'model/message').map((e) => e.data.text)).toEqual(['', 'done']);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', synthetic: false, data: { reason: 'completed' } });
    expect((await app.ok(SESSION, { id })).session.status).toBe('IDLE');
  });

  it('answers a denied call as not run, with the reason, and the model reads it', async () => {
    const { id, pool, text } = await sessionCalling(['wire_money']);
    let ran = 0;
    const tools: TestTool[] = [{ name: 'wire_money', needsApproval: true, execute: async () => (ran++, 'wired') }];
    await serve(id, pool, tools);
    expect((await app.ok(SESSION, { id })).session.status).toBe('WAITING');
    await app.ok(`mutation($id: ID!) { denyToolCall(input: {sessionId: $id, callId: "call_0_wire_money", reason: "too much"}) { status } }`, { id });
    await serve(id, pool, tools);
    expect(ran).toBe(0);
    const log = await events(id);
    const denied = 'Tool call "wire_money" (call_0_wire_money) was denied: too much. It did not run.';
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.status, e.data.content])).toEqual([['error', denied]]);
    expect(log.some((e) => e.type === 'plugin/agent/approved-call-start')).toBe(false);
    expect(toolMessages.get(text)!.at(-1)).toEqual([`Error: ${denied}`]); // an error result, as forkline renders one for its own agent
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('leaves an approved call whose runner died while it ran to the repair: it is never run again', async () => {
    const { id, pool } = await sessionCalling(['wire_money']);
    let ran = 0;
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const tools: TestTool[] = [
      // Runs and never returns: its runner dies (gives its lease up) meanwhile.
      { name: 'wire_money', needsApproval: true, execute: () => (ran++, started(), new Promise<string>(() => {})) },
    ];
    await serve(id, pool, tools);
    await app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "call_0_wire_money"}) { status } }`, { id });
    const dying = new ForklineRunner({ url: app.url, pool });
    const session = (await dying.claim(id))!;
    void variant.run(session, tools).catch(() => undefined);
    await running;
    await app.ok(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: id, leaseToken: session.leaseToken } });
    await serve(id, pool, tools); // the next claim repairs the turn: the call was in flight
    await dying.close();
    expect(ran).toBe(1);
    const log = await events(id);
    const start = log.findIndex((e) => e.type === 'plugin/agent/approved-call-start');
    expect(start).toBeGreaterThan(log.findIndex((e) => e.type === 'tool/approval'));
    expect(log.slice(start + 1).map((e) => [e.type, e.data.status ?? e.data.reason, e.synthetic])).toEqual([
      ['tool/result', 'interrupted', true],
      ['step/end', 'interrupted', true],
      ['turn/end', 'interrupted', true],
    ]);
  });

  it("asks for a decision on a call of a tool the session's approvalRequired names, though the app's tool asks for none", async () => {
    const { id, pool } = await sessionCalling(['wire_money'], ['wire_money']);
    let ran = 0;
    const tools: TestTool[] = [{ name: 'wire_money', execute: async () => (ran++, 'wired') }];
    await serve(id, pool, tools);
    expect(ran).toBe(0);
    expect((await app.ok(SESSION, { id })).session).toMatchObject({ status: 'WAITING', pendingApprovals: [{ callId: 'call_0_wire_money' }] });
    await app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "call_0_wire_money"}) { status } }`, { id });
    await serve(id, pool, tools);
    expect(ran).toBe(1);
    expect((await events(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('asks for every gated call of a step at once, waits for both decisions, then settles them in call order', async () => {
    const { id, pool } = await sessionCalling(['wire_money', 'send_email']);
    const ran: string[] = [];
    const tools: TestTool[] = [
      { name: 'wire_money', needsApproval: true, execute: async () => (ran.push('wire_money'), 'wired') },
      { name: 'send_email', needsApproval: true, execute: async () => (ran.push('send_email'), 'sent') },
    ];
    await serve(id, pool, tools);
    expect((await app.ok(SESSION, { id })).session.pendingApprovals.map((p: { name: string }) => p.name)).toEqual(['wire_money', 'send_email']);
    await app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "call_0_wire_money"}) { status } }`, { id });
    // One call still waits: a runner that claims the session anyway runs nothing.
    const early = new ForklineRunner({ url: app.url, pool });
    await early.serve(id, (s) => variant.run(s, tools).then(() => {}));
    await early.close();
    expect(ran).toEqual([]);
    expect((await app.ok(SESSION, { id })).session.status).toBe('WAITING');
    await app.ok(`mutation($id: ID!) { denyToolCall(input: {sessionId: $id, callId: "call_1_send_email", reason: ""}) { status } }`, { id });
    await serve(id, pool, tools);
    expect(ran).toEqual(['wire_money']);
    const log = await events(id);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content])).toEqual([
      ['wire_money', 'ok', 'wired'],
      ['send_email', 'error', 'Tool call "send_email" (call_1_send_email) was denied. It did not run.'],
    ]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });
});
