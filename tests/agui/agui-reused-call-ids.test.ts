// Call ids are unique only within a step (docs/contract.md#append-rules): a log
// may reuse one in a later step. AG-UI clients key tool calls by id, so
// POST /agui gives each reused id a client id of its own (docs/agui.md), read
// here with @ag-ui/client's own event application (HttpAgent's messages).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import type { Message } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
let url: string;

beforeAll(async () => {
  app = await startTestApp();
  url = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(async () => {
  await app?.close();
});

const at = (seq: number) => new Date(Date.UTC(2026, 10, 30, 10, 0, seq)).toISOString();
/**
 * One turn of three steps: step 1 calls `call_0` and `call_1`, step 2 calls
 * `call_0` again, step 3 answers.
 */
function recording(): string {
  const events: Array<[string, unknown]> = [
    ['session/model', { provider: 'scripted', model: 'echo' }],
    ['inbox/add', { inputId: 'in_1', text: 'count' }],
    ['inbox/remove', { inputId: 'in_1', reason: 'taken' }],
    ['turn/start', { turn: 1, inputId: 'in_1' }],
    ['step/start', { turn: 1, step: 1 }],
    [
      'model/message',
      {
        turn: 1,
        step: 1,
        text: '',
        toolCalls: [
          { id: 'call_0', name: 'clock', arguments: '{"n":1}' },
          { id: 'call_1', name: 'clock', arguments: '{"n":0}' },
        ],
      },
    ],
    ['tool/result', { turn: 1, step: 1, callId: 'call_0', resultId: 'res_1', status: 'ok', content: 'one', name: 'clock' }],
    ['tool/result', { turn: 1, step: 1, callId: 'call_1', resultId: 'res_0', status: 'ok', content: 'zero', name: 'clock' }],
    ['step/end', { turn: 1, step: 1, reason: 'completed' }],
    ['step/start', { turn: 1, step: 2 }],
    ['model/message', { turn: 1, step: 2, text: '', toolCalls: [{ id: 'call_0', name: 'clock', arguments: '{"n":2}' }] }],
    ['tool/result', { turn: 1, step: 2, callId: 'call_0', resultId: 'res_2', status: 'ok', content: 'two', name: 'clock' }],
    ['step/end', { turn: 1, step: 2, reason: 'completed' }],
    ['step/start', { turn: 1, step: 3 }],
    ['model/message', { turn: 1, step: 3, text: 'done', toolCalls: [] }],
    ['step/end', { turn: 1, step: 3, reason: 'completed' }],
    ['turn/end', { turn: 1, reason: 'completed' }],
  ];
  const header = { format: 'forkline.recording', version: 4, session: { id: 'ses_aguireused', title: 'reused ids' } };
  return [header, ...events.map(([type, data], seq) => ({ seq, type, data, createdAt: at(seq) }))].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

type Assistant = Extract<Message, { role: 'assistant' }>;
type Tool = Extract<Message, { role: 'tool' }>;

describe('AG-UI with a call id reused across steps', () => {
  it('each call keeps its own arguments and result in the client, history and live run alike', async () => {
    const { importRecording } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording() });
    const agent = new HttpAgent({ url, threadId: importRecording.id });
    agent.addMessage({ id: 'user-1', role: 'user', content: 'again\n!call clock' });
    await agent.runAgent({ runId: 'reused-1' });

    const messages = agent.messages;
    const assistant = (id: string) => messages.find((m): m is Assistant => m.id === id && m.role === 'assistant');
    const calls = (id: string) => (assistant(id)?.toolCalls ?? []).map((c) => [c.id, c.function.arguments]);
    const resultOf = (callId: string) => messages.filter((m): m is Tool => m.role === 'tool' && m.toolCallId === callId).map((m) => m.content);

    const [first, zero] = calls('msg_1_1');
    const [second] = calls('msg_1_2');
    const [live] = calls('msg_2_1');
    expect(first).toEqual(['call_0', '{"n":1}']);
    expect(zero).toEqual(['call_1', '{"n":0}']);
    expect(second?.[1]).toBe('{"n":2}');
    expect(live?.[1]).toBe('{}');
    // Every call under an id of its own, answered by its own result only.
    const ids = [first, zero, second, live].map((c) => c?.[0]);
    expect(new Set(ids).size).toBe(4);
    expect(resultOf(first[0])).toEqual(['one']);
    expect(resultOf(zero[0])).toEqual(['zero']);
    expect(resultOf(second[0])).toEqual(['two']);
    expect(resultOf(live[0])).toEqual([expect.stringMatching(/^\d{4}-/)]);
    // The same rule as the model request (docs/contract.md): the derived id names its turn and step.
    expect(second[0]).toBe('call_0_t1s2');
  });

  it('an external runner reusing an id: the live call, its result and its approval interrupt go by the client id, and a resume naming it decides the call', async () => {
    const { createSession } = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
      i: { title: 'ext', runner: 'ext', approvalRequired: ['note'] },
    });
    const id = createSession.id as string;
    const count = async () => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;
    const append = async (evs: Array<[string, unknown]>) => {
      const r = await app.gql(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { session { eventCount } } }`, {
        i: { sessionId: id, leaseToken: token, expectedEventCount: await count(), events: evs.map(([type, data]) => ({ type, data })) },
      });
      expect(r.errors).toBeUndefined();
    };
    const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "first"}) { inputId } }`, { id });
    const token = (await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r1"}) { lease { token } } }`, { id })).claimSession.lease
      .token as number;
    // Turn 1 calls `c1` (answered).
    await append([
      ['inbox/remove', { inputId: sendMessage.inputId, reason: 'taken' }],
      ['turn/start', { turn: 1, inputId: sendMessage.inputId }],
      ['step/start', { turn: 1, step: 1 }],
      ['model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{"n":1}', effect: 'read-only' }] }],
      ['tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'one', name: 'clock' }],
      ['step/end', { turn: 1, step: 1, reason: 'completed' }],
      ['turn/end', { turn: 1, reason: 'completed' }],
    ]);

    const post = async (body: Record<string, unknown>) => {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify({ threadId: id, state: {}, tools: [], context: [], forwardedProps: {}, messages: [], ...body }),
      });
      return (await res.text())
        .split('\n')
        .filter((l) => l.startsWith('data: '))
        .map((l) => JSON.parse(l.slice(6)) as Record<string, any>);
    };
    const eventsOf = async () => app.services.store.log.page(id, -1, 1000);
    const waitFor = async (type: string) => {
      for (let i = 0; i < 400 && !(await eventsOf()).some((e) => e.type === type); i++) await new Promise((r) => setTimeout(r, 25));
    };

    // Turn 2 (the AG-UI run's) calls `c1` again, a tool that needs approval.
    const first = post({ runId: 'ext-1', messages: [{ id: 'm2', role: 'user', content: 'second' }] });
    await waitFor('plugin/agui/run');
    const input = (await eventsOf()).filter((e) => e.type === 'inbox/add').at(-1)!.data as { inputId: string };
    await append([
      ['inbox/remove', { inputId: input.inputId, reason: 'taken' }],
      ['turn/start', { turn: 2, inputId: input.inputId }],
      ['step/start', { turn: 2, step: 1 }],
      ['model/message', { turn: 2, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'note', arguments: '{"n":2}', effect: 'read-only' }] }],
      ['tool/approval-request', { turn: 2, step: 1, callId: 'c1' }],
    ]);
    const run1 = await first;
    const snapshot = run1.find((e) => e.type === 'MESSAGES_SNAPSHOT')!;
    expect(snapshot.messages.find((m: any) => m.role === 'tool')).toMatchObject({ toolCallId: 'c1', content: 'one' });
    expect(run1.filter((e) => e.type.startsWith('TOOL_CALL_')).map((e) => [e.type, e.toolCallId])).toEqual([
      ['TOOL_CALL_START', 'c1_t2s1'],
      ['TOOL_CALL_ARGS', 'c1_t2s1'],
      ['TOOL_CALL_END', 'c1_t2s1'],
    ]);
    const [interrupt] = run1.at(-1)!.outcome.interrupts;
    expect(interrupt).toMatchObject({ id: 'c1_t2s1', toolCallId: 'c1_t2s1' });

    // The resume names the client id; the log records the decision on the call's own id.
    const second = post({ runId: 'ext-2', resume: [{ interruptId: interrupt.id, status: 'resolved', payload: { approved: true } }] });
    await waitFor('tool/approval');
    expect((await eventsOf()).find((e) => e.type === 'tool/approval')!.data).toMatchObject({ callId: 'c1', decision: 'approved' });
    await append([
      ['tool/result', { turn: 2, step: 1, callId: 'c1', resultId: 'r2', status: 'ok', content: 'two', name: 'note' }],
      ['step/end', { turn: 2, step: 1, reason: 'completed' }],
      ['turn/end', { turn: 2, reason: 'completed' }],
    ]);
    const run2 = await second;
    expect(run2.find((e) => e.type === 'TOOL_CALL_RESULT')).toMatchObject({ toolCallId: 'c1_t2s1', content: 'two' });
    expect(run2.at(-1)!.type).toBe('RUN_FINISHED');
  });
});
