// Call ids are unique only within a step (docs/contract.md#append-rules): a log
// may reuse one in a later step. AG-UI clients key tool calls by id, so
// POST /agui gives each reused id a client id of its own (docs/agui.md), read
// here with @ag-ui/client's own event application (HttpAgent's messages).
// A resume long after its interrupt, once the thread has grown (messages
// queued behind the waiting turn) past what the interrupted run's snapshot
// window showed, still maps the interrupt's id back to its call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import type { Message } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { callFirstBatches } from '../helpers/runner-batches.ts';
import { SNAPSHOT_EVENTS } from '../../src/agui/agui-handler.ts';

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

/**
 * A session its external runner (pool `ext`; `note` asks for approval) has
 * answered one turn in, which called `c1`: its id, `append` writing as that
 * runner, and `callC1Again`.
 */
async function runnerThreadWithC1() {
  const { createSession } = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
    i: { title: 'ext', runner: 'ext', approvalRequired: ['note'] },
  });
  const id = createSession.id as string;
  const count = async () => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;
  const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "first"}) { inputId } }`, { id });
  const token = (await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r1"}) { lease { token } } }`, { id })).claimSession.lease
    .token as number;
  /** Appends as the runner does, each call before its result (callFirstBatches). */
  const append = async (evs: Array<[string, unknown]>) => {
    for (const events of callFirstBatches(evs.map(([type, data]) => ({ type, data })))) {
      const r = await app.gql(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { session { eventCount } } }`, {
        i: { sessionId: id, leaseToken: token, expectedEventCount: await count(), events },
      });
      expect(r.errors).toBeUndefined();
    }
  };
  await append([
    ['inbox/remove', { inputId: sendMessage.inputId, reason: 'taken' }],
    ['turn/start', { turn: 1, inputId: sendMessage.inputId }],
    ['step/start', { turn: 1, step: 1 }],
    ['model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{"n":1}', effect: 'read-only' }] }],
    ['tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'one', name: 'clock' }],
    ['step/end', { turn: 1, step: 1, reason: 'completed' }],
    ['turn/end', { turn: 1, reason: 'completed' }],
  ]);
  /** Turn 2 takes `inputId` and calls `c1` again, a tool that asks for approval: the turn waits. */
  const callC1Again = (inputId: string) =>
    append([
      ['inbox/remove', { inputId, reason: 'taken' }],
      ['turn/start', { turn: 2, inputId }],
      ['step/start', { turn: 2, step: 1 }],
      ['model/message', { turn: 2, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'note', arguments: '{"n":2}', effect: 'read-only' }] }],
      ['tool/approval-request', { turn: 2, step: 1, callId: 'c1' }],
    ]);
  return { id, append, callC1Again };
}

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
    const { id, append, callC1Again } = await runnerThreadWithC1();

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
    await callC1Again(input.inputId);
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

describe('an AG-UI resume after the snapshot window moved', () => {
  // Turn 1 holds 4 snapshot events (input, start, answer, result), turn 2 (the interrupted one) 3 so far.
  it.each([
    ['the interrupted turn still in the window, the earlier call that took its id out of it', SNAPSHOT_EVENTS - 3],
    ['no turn left in the window at all', SNAPSHOT_EVENTS + 100],
  ])(
    '%s: the interrupt’s id maps back to its call, whose result reaches the client under that id',
    async (_, queued) => {
      const { id, append, callC1Again } = await runnerThreadWithC1();
      const last = (type: string) => app.services.store.log.lastOfType(id, type);
      const waitFor = (type: string) => expect.poll(async () => (await last(type)) !== undefined, { timeout: 15_000 }).toBe(true);

      // The AG-UI run's turn calls `c1` again, a tool that needs approval: the run ends with the interrupt.
      const agent = new HttpAgent({ url, threadId: id });
      agent.addMessage({ id: 'm2', role: 'user', content: 'second' });
      const first = agent.runAgent({ runId: `window-1-${queued}` });
      await waitFor('plugin/agui/run');
      const input = (await last('inbox/add'))!.data as { inputId: string };
      await callC1Again(input.inputId);
      await first;
      expect(agent.pendingInterrupts.map((i) => i.id)).toEqual(['c1_t2s1']);
      const shown = agent.messages.find((m): m is Assistant => m.role === 'assistant' && m.id === 'msg_2_1');
      expect(shown?.toolCalls?.map((c) => c.id)).toEqual(['c1_t2s1']);

      // Messages queued while the turn waits move the latest-events window past what the run showed.
      const store = app.services.store.forTenant({ tenant: 'local' });
      for (let i = 0; i < queued; i += 1000)
        await store.append(
          id,
          Array.from({ length: Math.min(1000, queued - i) }, (_, j) => ({ type: 'inbox/add', data: { inputId: `q${i + j}`, text: `later ${i + j}` } })),
        );

      let failure: string | undefined;
      const resumed = agent.runAgent(
        { runId: `window-2-${queued}`, resume: [{ interruptId: 'c1_t2s1', status: 'resolved', payload: { approved: true } }] },
        { onRunErrorEvent: ({ event }) => void (failure = `${event.code}: ${event.message}`) },
      );
      void resumed.catch((err: Error) => (failure ??= err.message));
      for (let i = 0; i < 600 && failure === undefined && !(await last('tool/approval')); i++) await new Promise((r) => setTimeout(r, 25));
      expect(failure).toBeUndefined();
      expect((await last('tool/approval'))!.data).toMatchObject({ callId: 'c1', decision: 'approved' });
      await append([
        ['tool/result', { turn: 2, step: 1, callId: 'c1', resultId: 'r2', status: 'ok', content: 'two', name: 'note' }],
        ['step/end', { turn: 2, step: 1, reason: 'completed' }],
        ['turn/end', { turn: 2, reason: 'completed' }],
      ]);
      await resumed;
      // The client attached each result to the call it was shown under.
      const resultsOf = (callId: string) => agent.messages.filter((m): m is Tool => m.role === 'tool' && m.toolCallId === callId).map((m) => m.content);
      expect(resultsOf('c1_t2s1')).toEqual(['two']);
      expect(resultsOf('c1')).toEqual(['one']);
      expect(agent.pendingInterrupts).toEqual([]);
    },
    60_000,
  );
});
