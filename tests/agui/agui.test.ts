// POST /agui driven by the official AG-UI client, HttpAgent; every
// event is validated against @ag-ui/core's schemas.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent, type RunAgentInput } from '@ag-ui/core';
import { EventSchemas, MessageSchema } from '@ag-ui/core/schemas';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
let url: string;

beforeAll(async () => {
  app = await startTestApp();
  url = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(async () => {
  await app?.close();
});

/** HttpAgent with the protocol's parentRunId (runAgent's parameters do not carry it). */
class BranchingAgent extends HttpAgent {
  parentRunId?: string;
  protected requestInit(input: RunAgentInput): RequestInit {
    return super.requestInit(this.parentRunId ? { ...input, parentRunId: this.parentRunId } : input);
  }
}

let messageCounter = 0;
/** One run: the user's message added to the agent, every event collected and schema-checked. */
async function run(agent: HttpAgent, text: string, runId: string): Promise<{ events: BaseEvent[]; error?: unknown }> {
  agent.addMessage({ id: `user-${++messageCounter}`, role: 'user', content: text });
  const events: BaseEvent[] = [];
  let error: unknown;
  await agent.runAgent({ runId }, { onEvent: ({ event }) => void events.push(event) }).catch((err) => (error = err));
  for (const e of events) expect(() => EventSchemas.parse(e), `${e.type} ${JSON.stringify(e)}`).not.toThrow();
  return { events, error };
}

/** Event types with runs of TEXT_MESSAGE_CONTENT collapsed (how many deltas arrive depends on timing). */
const shape = (events: BaseEvent[]) =>
  events.map((e) => e.type).filter((t, i, all) => !(t === EventType.TEXT_MESSAGE_CONTENT && all[i - 1] === EventType.TEXT_MESSAGE_CONTENT));
const textOf = (events: BaseEvent[]) =>
  events
    .filter((e) => e.type === EventType.TEXT_MESSAGE_CONTENT)
    .map((e) => e.delta)
    .join('');
const log = async (id: string) => app.services.store.log.page(id, -1, 10_000);

describe('AG-UI endpoint', () => {
  let threadId: string;

  it('runs a turn in a new thread and streams its events in order', async () => {
    const agent = new HttpAgent({ url, threadId: 'my-thread' });
    const { events, error } = await run(agent, 'what time is it\n!call clock', 'run-1');
    expect(error).toBeUndefined();
    expect(shape(events)).toEqual([
      EventType.RUN_STARTED,
      EventType.MESSAGES_SNAPSHOT,
      EventType.STEP_STARTED,
      EventType.TOOL_CALL_START,
      EventType.TOOL_CALL_ARGS,
      EventType.TOOL_CALL_END,
      EventType.TOOL_CALL_RESULT,
      EventType.STEP_FINISHED,
      EventType.STEP_STARTED,
      EventType.TEXT_MESSAGE_START,
      EventType.TEXT_MESSAGE_CONTENT,
      EventType.TEXT_MESSAGE_END,
      EventType.STEP_FINISHED,
      EventType.RUN_FINISHED,
    ]);
    const started = events[0] as BaseEvent & { threadId: string; runId: string };
    expect(started.runId).toBe('run-1');
    expect(started.threadId).toMatch(/^ses_/);
    threadId = started.threadId;
    const snapshot = events[1] as BaseEvent & { messages: unknown[] };
    expect(snapshot.messages).toEqual([expect.objectContaining({ role: 'user', content: 'what time is it\n!call clock' })]);
    expect(events.find((e) => e.type === EventType.TOOL_CALL_START)).toMatchObject({ toolCallId: 'call_1_1_1', toolCallName: 'clock' });
    expect(events.find((e) => e.type === EventType.TOOL_CALL_RESULT)).toMatchObject({ toolCallId: 'call_1_1_1', content: expect.stringMatching(/^\d{4}-/) });

    // The text is the stored answer; the client's messages hold the whole exchange.
    const stored = (await log(threadId)).filter((e) => e.type === 'model/message').at(-1)!;
    expect(textOf(events)).toBe(anyData(stored).text);
    expect(anyData(stored).text).toMatch(/^Done \(what time is it\)\. Tool results:/);
    for (const m of agent.messages) expect(() => MessageSchema.parse(m)).not.toThrow();
    expect(agent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant']);
    expect((await log(threadId)).some((e) => e.type === 'plugin/agui/run' && anyData(e).runId === 'run-1')).toBe(true);
  });

  it('a second run in the same thread continues the session, its snapshot holding the history', async () => {
    const agent = new HttpAgent({ url, threadId });
    const { events } = await run(agent, 'and again', 'run-2');
    expect(events[0]).toMatchObject({ type: EventType.RUN_STARTED, threadId, runId: 'run-2' });
    const snapshot = events[1] as BaseEvent & { messages: Array<{ role: string }> };
    expect(snapshot.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(textOf(events)).toBe('Echo: and again');
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, threadId, runId: 'run-2', result: { sessionId: threadId, turn: 2 } });
  });

  it('parentRunId forks the thread at the end of that run: the new run answers in the child', async () => {
    const agent = new BranchingAgent({ url, threadId });
    agent.parentRunId = 'run-1';
    const { events, error } = await run(agent, 'instead of run 2', 'run-3');
    expect(error).toBeUndefined();
    const started = events[0] as BaseEvent & { threadId: string; parentRunId?: string };
    expect(started).toMatchObject({ type: EventType.RUN_STARTED, runId: 'run-3', parentRunId: 'run-1' });
    const child = started.threadId;
    expect(child).not.toBe(threadId);
    // The snapshot is run 1's exchange and the new message: run 2 is not in this branch.
    const snapshot = events[1] as BaseEvent & { messages: Array<{ role: string; content?: unknown }> };
    expect(snapshot.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'tool', 'assistant', 'user']);
    expect(snapshot.messages.at(-1)!.content).toBe('instead of run 2');
    expect(textOf(events)).toBe('Echo: instead of run 2');
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, threadId: child });

    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { parent { id } turns { turn input } } }`, { id: child });
    expect(session.parent.id).toBe(threadId);
    expect(session.turns.map((t: any) => t.input)).toEqual(['what time is it\n!call clock', 'instead of run 2']);
    // The parent is untouched.
    expect((await log(threadId)).filter((e) => e.type === 'turn/start')).toHaveLength(2);
  });

  it('errors become RUN_ERROR and the stream ends: a failing model, an unknown parent run, an unknown thread', async () => {
    const failing = await run(new HttpAgent({ url, threadId }), '!fail the model broke', 'run-4');
    expect(shape(failing.events)).toEqual([
      EventType.RUN_STARTED,
      EventType.MESSAGES_SNAPSHOT,
      EventType.STEP_STARTED,
      EventType.STEP_FINISHED,
      EventType.RUN_ERROR,
    ]);
    expect(failing.events.at(-1)).toMatchObject({ type: EventType.RUN_ERROR, message: 'the model broke', code: 'FAILED' });

    const branching = new BranchingAgent({ url, threadId });
    branching.parentRunId = 'no-such-run';
    const unknownRun = await run(branching, 'hello', 'run-5');
    expect(shape(unknownRun.events)).toEqual([EventType.RUN_STARTED, EventType.RUN_ERROR]);
    expect(unknownRun.events.at(-1)).toMatchObject({ message: expect.stringContaining('no run no-such-run'), code: 'BAD_USER_INPUT' });

    const unknownThread = await run(new HttpAgent({ url, threadId: 'ses_00000000000000000000000000000000' }), 'hello', 'run-6');
    expect(unknownThread.events.at(-1)).toMatchObject({ type: EventType.RUN_ERROR, code: 'SESSION_NOT_FOUND' });

    const noUser = new HttpAgent({ url, threadId });
    const events: BaseEvent[] = [];
    await noUser.runAgent({ runId: 'run-7' }, { onEvent: ({ event }) => void events.push(event) }).catch(() => {});
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_ERROR, code: 'BAD_USER_INPUT' });
  });

  it('streams the answer as it is generated (several deltas), the concatenation being the stored text', async () => {
    const { events } = await run(new HttpAgent({ url, threadId }), '!slow 40\nstream these five words please', 'run-slow');
    expect(events.filter((e) => e.type === EventType.TEXT_MESSAGE_CONTENT).length).toBeGreaterThan(1);
    expect(textOf(events)).toBe('Echo: stream these five words please');
  });

  it('same tokens and tenants as GraphQL: no token is 401, another tenant cannot see the thread', async () => {
    const tokenA = 'agui-token-aaaaaaaaaaaa';
    const tokenB = 'agui-token-bbbbbbbbbbbb';
    const secured = await startTestApp({
      security: {
        apiTokens: new Map([
          [tokenA, 'tenant-a'],
          [tokenB, 'tenant-b'],
        ]),
      },
    });
    try {
      const securedUrl = secured.url.replace(/\/graphql$/, '/agui');
      const anonymous = await run(new HttpAgent({ url: securedUrl, threadId: 't' }), 'hi', 'sec-1');
      expect(anonymous.events).toEqual([]);
      expect(String(anonymous.error)).toMatch(/401/);
      const a = await run(new HttpAgent({ url: securedUrl, threadId: 't', headers: { authorization: `Bearer ${tokenA}` } }), 'hi', 'sec-2');
      expect(a.events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED });
      const thread = (a.events[0] as BaseEvent & { threadId: string }).threadId;
      const b = await run(new HttpAgent({ url: securedUrl, threadId: thread, headers: { authorization: `Bearer ${tokenB}` } }), 'hi', 'sec-3');
      expect(b.events.at(-1)).toMatchObject({ type: EventType.RUN_ERROR, code: 'SESSION_NOT_FOUND' });
    } finally {
      await secured.close();
    }
  });

  it('speaks HTTP errors before the stream: a body that is not a RunAgentInput, a wrong method', async () => {
    const bad = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ threadId: 1 }) });
    expect(bad.status).toBe(400);
    expect((await bad.json()).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect((await fetch(url)).status).toBe(405);
    const notJson = await fetch(url, { method: 'POST', headers: { 'content-type': 'text/plain' }, body: 'hi' });
    expect(notJson.status).toBe(415);
  });
});

describe('MESSAGES_SNAPSHOT on a long thread', () => {
  it('is the latest turns, from a turn start, with their inputs, whatever the log length', async () => {
    const { snapshotHistory } = await import('../../src/agui/agui-handler.ts');
    const { messagesOf } = await import('../../src/agui/agui-events.ts');
    const id = (await app.services.store.createSession({ tenant: 'local' }, {})).id;
    // Inputs queued up front: every turn's inbox/add lies far before the turn.
    const turns = 40;
    await app.services.store.append(
      id,
      Array.from({ length: turns }, (_, i) => ({ type: 'inbox/add', data: { inputId: `in_${i + 1}`, text: `question ${i + 1}` } })),
    );
    for (let t = 1; t <= turns; t++) {
      await app.services.store.append(id, [
        { type: 'inbox/remove', data: { inputId: `in_${t}`, reason: 'taken' } },
        { type: 'turn/start', data: { turn: t, inputId: `in_${t}` } },
        { type: 'step/start', data: { turn: t, step: 1 } },
        { type: 'model/message', data: { turn: t, step: 1, text: `answer ${t}`, toolCalls: [] } },
        { type: 'step/end', data: { turn: t, step: 1, reason: 'completed' } },
        { type: 'turn/end', data: { turn: t, reason: 'completed' } },
      ]);
    }
    const whole = messagesOf(await snapshotHistory(app.services.store.forTenant({ tenant: 'local' }).log, id, 10_000));
    expect(whole.length).toBe(2 * turns);
    // A window of 25 events: the latest ~12 turns, starting at a turn, each with its question.
    const windowed = messagesOf(await snapshotHistory(app.services.store.forTenant({ tenant: 'local' }).log, id, 25));
    expect(windowed[0]).toMatchObject({ role: 'user' });
    expect(windowed).toEqual(whole.slice(whole.length - windowed.length));
    expect(windowed.length).toBeLessThan(30);
    expect(windowed.filter((m) => m.role === 'user').every((m) => /^question \d+$/.test(String(m.content)))).toBe(true);
  });
});
