// Tool approval through GraphQL (docs/contract.md#tool-approval), with a model
// served by a fake OpenAI-compatible server speaking the chat completions wire
// format: an approval pauses the turn (WAITING), approve runs the tool exactly
// once, deny tells the model why, a cancel ends a waiting turn, a fork at the
// pending approval says the call never ran, and a restart keeps it pending.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { anyData } from '../helpers/event-data.ts';
import type { ToolCall } from '../../src/core/events.ts';

const data = (d: unknown) => `data: ${typeof d === 'string' ? d : JSON.stringify(d)}\n\n`;
const chunk = (delta: unknown, finish: string | null = null) =>
  data({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'fake', choices: [{ index: 0, delta, finish_reason: finish }] });

/** What the fake provider received: each request's messages. */
const requests: Array<Array<{ role: string; content: unknown; tool_calls?: unknown }>> = [];
let fake: http.Server;
let base: string;
let callNo = 0;

/** Asked anything, the model writes a note; given a tool result, it answers with what the result said. */
function answer(messages: Array<{ role: string; content: unknown }>): string[] {
  const last = messages.at(-1)!;
  if (last.role === 'tool') return [chunk({ role: 'assistant', content: `the tool said: ${String(last.content)}` }), chunk({}, 'stop'), data('[DONE]')];
  const id = `call_${++callNo}`;
  return [
    chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id, type: 'function', function: { name: 'note_write', arguments: '' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: JSON.stringify({ key: 'greeting', value: 'hello' }) } }] }),
    chunk({}, 'tool_calls'),
    data('[DONE]'),
  ];
}

const runs: ToolCall[] = [];
const apps: TestApp[] = [];
let databaseUrl: string;

async function start(): Promise<TestApp> {
  const app = await startTestApp({
    databaseUrl,
    providers: { openaiCompatible: { baseUrl: `${base}/v1`, apiKey: 'sk-fake' } },
    onToolRun: (_s, call) => void runs.push(call),
  });
  apps.push(app);
  return app;
}

beforeAll(async () => {
  fake = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const body = JSON.parse(raw);
    requests.push(body.messages);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const line of answer(body.messages)) res.write(line);
    res.end();
  });
  await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
  databaseUrl = await createTestDatabase();
}, 60_000);

afterAll(async () => {
  for (const app of apps) await app.close().catch(() => {});
  await new Promise((r) => fake?.close(r));
});

const SESSION = `id status eventCount pendingApprovals { callId name arguments seq }`;

async function waitingSession(app: TestApp): Promise<{ id: string; pending: { callId: string; name: string; arguments: string; seq: number } }> {
  const created = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
    i: { model: { provider: 'openai-compatible', model: 'fake-model' }, approvalRequired: ['note_write'] },
  });
  const id = created.createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'greet' } });
  await app.services.host.idle();
  const { session } = await app.ok(`query($id: ID!) { session(id: $id) { ${SESSION} } }`, { id });
  expect(session.status).toBe('WAITING');
  expect(session.pendingApprovals).toHaveLength(1);
  return { id, pending: session.pendingApprovals[0] };
}

const eventsOf = async (app: TestApp, id: string) => app.services.store.log.range(id, 0, 10_000);
const runsOf = (callId: string) => runs.filter((c) => c.id === callId).length;

describe('tool approval', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await start();
  });

  it('pauses the turn after the call and its request; approve runs the tool exactly once and the turn completes', async () => {
    const { id, pending } = await waitingSession(app);
    expect(pending).toMatchObject({ name: 'note_write', arguments: JSON.stringify({ key: 'greeting', value: 'hello' }) });
    const before = await eventsOf(app, id);
    expect(before.slice(-2).map((e) => e.type)).toEqual(['model/message', 'tool/approval-request']);
    expect(before.at(-1)!.seq).toBe(pending.seq);
    expect(runsOf(pending.callId)).toBe(0);

    const approved = await app.ok(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id status pendingApprovals { callId } } }`, {
      i: { sessionId: id, callId: pending.callId, reason: 'fine' },
    });
    expect(approved.approveToolCall.pendingApprovals).toEqual([]);
    await app.services.host.idle();

    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { status workspace { key value } } }`, { id });
    expect(session.status).toBe('IDLE');
    expect(session.workspace).toEqual([{ key: 'greeting', value: 'hello' }]);
    expect(runsOf(pending.callId)).toBe(1);
    const after = await eventsOf(app, id);
    const decision = after.find((e) => e.type === 'tool/approval')!;
    expect(anyData(decision)).toEqual({ callId: pending.callId, decision: 'approved', reason: 'fine', by: 'local' });
    const result = after.find((e) => e.type === 'tool/result')!;
    expect(anyData(result)).toMatchObject({ callId: pending.callId, status: 'ok' });
    expect(after.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });

    // Deciding it again is refused, naming the rule.
    const twice = await app.gql(`mutation($i: ToolDecisionInput!) { denyToolCall(input: $i) { id } }`, { i: { sessionId: id, callId: pending.callId } });
    expect(twice.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'approval pairing' });
    const unknown = await app.gql(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }`, { i: { sessionId: id, callId: 'nope' } });
    expect(unknown.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('deny: the tool never runs and the model hears that it was denied, and why', async () => {
    const { id, pending } = await waitingSession(app);
    await app.ok(`mutation($i: ToolDecisionInput!) { denyToolCall(input: $i) { id } }`, {
      i: { sessionId: id, callId: pending.callId, reason: 'no greetings today' },
    });
    await app.services.host.idle();
    expect(runsOf(pending.callId)).toBe(0);
    const events = await eventsOf(app, id);
    const result = anyData(events.find((e) => e.type === 'tool/result')!);
    expect(result).toMatchObject({ callId: pending.callId, status: 'error' });
    expect(result.content).toMatch(/denied: no greetings today\. It did not run/);
    // The next request carried the denial as the call's result.
    const toolMessage = requests.at(-1)!.find((m) => m.role === 'tool')!;
    expect(String(toolMessage.content)).toMatch(/denied: no greetings today/);
    const final = anyData(events.filter((e) => e.type === 'model/message').at(-1)!);
    expect(final.text).toMatch(/the tool said: .*denied/);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('cancelTurn ends a waiting turn: the call is denied and never runs', async () => {
    const { id, pending } = await waitingSession(app);
    const cancelled = await app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { status } }`, { id });
    expect(cancelled.cancelTurn.status).toBe('IDLE');
    const events = await eventsOf(app, id);
    expect(events.slice(-4).map((e) => e.type)).toEqual(['tool/approval', 'tool/result', 'step/end', 'turn/end']);
    expect(events.at(-1)).toMatchObject({ data: { reason: 'cancelled' } });
    expect(runsOf(pending.callId)).toBe(0);
  });

  it('a fork cut at the pending approval closes the call saying it never ran; the parent still waits', async () => {
    const { id, pending } = await waitingSession(app);
    const fork = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id status } syntheticEvents { type data } } }`, {
      i: { sessionId: id, atSeq: pending.seq },
    });
    const [result, stepEnd, turnEnd] = fork.forkSession.syntheticEvents;
    expect(result).toMatchObject({ type: 'tool/result', data: { callId: pending.callId, status: 'not-started' } });
    expect(result.data.content).toMatch(/never ran: it was awaiting approval when this branch was forked/);
    expect(stepEnd.data.reason).toBe('forked');
    expect(turnEnd.data.reason).toBe('forked');
    expect(fork.forkSession.session.status).toBe('IDLE');
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { status pendingApprovals { callId } } }`, { id });
    expect(session).toEqual({ status: 'WAITING', pendingApprovals: [{ callId: pending.callId }] });
    expect(runsOf(pending.callId)).toBe(0);
    // A WAITING filter finds it.
    const listed = await app.ok(`{ sessions(status: WAITING, first: 50) { edges { node { id } } } }`);
    expect(listed.sessions.edges.map((e: any) => e.node.id)).toContain(id);
  });

  it('AG-UI: the run ends with an interrupt for the call; a run with `resume` approves it and follows the turn to its end', async () => {
    const created = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
      i: { model: { provider: 'openai-compatible', model: 'fake-model' }, approvalRequired: ['note_write'] },
    });
    const threadId = created.createSession.id as string;
    const agui = app.url.replace(/\/graphql$/, '/agui');
    const post = async (body: Record<string, unknown>) => {
      const res = await fetch(agui, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ threadId, state: {}, tools: [], context: [], forwardedProps: {}, messages: [], ...body }),
      });
      const text = await res.text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)));
    };
    const first = await post({ runId: 'run_a1', messages: [{ id: 'm1', role: 'user', content: 'greet' }] });
    const finished = first.at(-1);
    expect(finished.type).toBe('RUN_FINISHED');
    expect(finished.outcome.type).toBe('interrupt');
    const [interrupt] = finished.outcome.interrupts;
    expect(interrupt).toMatchObject({ reason: 'tool_approval' });
    expect(interrupt.toolCallId).toBe(interrupt.id);
    expect(runsOf(interrupt.id)).toBe(0);

    const second = await post({ runId: 'run_a2', resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true, reason: 'go' } }] });
    expect(second[0].type).toBe('RUN_STARTED');
    expect(second.find((e) => e.type === 'TOOL_CALL_RESULT')).toMatchObject({ toolCallId: interrupt.id });
    expect(second.at(-1).type).toBe('RUN_FINISHED');
    expect(second.at(-1).outcome?.type ?? 'success').toBe('success');
    expect(runsOf(interrupt.id)).toBe(1);
  });

  it('AG-UI: a resume whose payload is not an answer (a reason of 1 MB, no `approved`) is refused with a 400, deciding nothing', async () => {
    const { id, pending } = await waitingSession(app);
    const agui = app.url.replace(/\/graphql$/, '/agui');
    const post = (runId: string, resume: readonly unknown[]) =>
      fetch(agui, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ threadId: id, runId, state: {}, tools: [], context: [], forwardedProps: {}, messages: [], resume }),
      });
    const entry = (payload: unknown, status = 'resolved') => ({ interruptId: pending.callId, status, payload });
    const countBefore = (await eventsOf(app, id)).length;
    // An approval with a reason past the limit was taken as a denial without reason (the payload did not parse).
    for (const [resume, why] of [
      [[entry({ approved: true, reason: 'r'.repeat(1_000_000) })], /^resume\.0\.payload\.reason: .*10000/],
      [[entry({ reason: 'no decision' })], /^resume\.0\.payload\.approved: /],
      [[entry({ reason: 'r'.repeat(10_001) }, 'cancelled')], /^resume\.0\.payload\.reason: /],
      [[{ ...entry({ approved: true }), interruptId: 'c'.repeat(201) }], /^resume\.0\.interruptId: /],
    ] as const) {
      const res = await post('run_long', resume);
      expect(res.status).toBe(400);
      const body = await res.json();
      expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(body.errors[0].message).toMatch(why);
    }
    expect((await eventsOf(app, id)).length).toBe(countBefore);
    expect(runsOf(pending.callId)).toBe(0);
    // One at the limit approves the call.
    const ok = await post('run_ok', [entry({ approved: true, reason: 'r'.repeat(10_000) })]);
    expect(ok.status).toBe(200);
    await ok.text();
    const decision = (await eventsOf(app, id)).find((e) => e.type === 'tool/approval')!;
    expect(decision.data).toMatchObject({ callId: pending.callId, decision: 'approved', reason: 'r'.repeat(10_000) });
  });

  it('a restart keeps the approval pending (nothing closed, nothing run); an approval after it completes the turn', async () => {
    const { id, pending } = await waitingSession(app);
    const countBefore = (await eventsOf(app, id)).length;
    await app.close();
    apps.splice(apps.indexOf(app), 1);
    app = await start();
    await app.services.host.idle();
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { ${SESSION} } }`, { id });
    expect(session.status).toBe('WAITING');
    expect(session.eventCount).toBe(countBefore);
    expect(session.pendingApprovals).toEqual([pending]);
    await app.ok(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }`, { i: { sessionId: id, callId: pending.callId } });
    await app.services.host.idle();
    const events = await eventsOf(app, id);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    expect(runsOf(pending.callId)).toBe(1);
  });
});
