import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import type { ToolCall } from '../../src/core/events.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
const toolRuns: Array<{ sessionId: string; call: ToolCall }> = [];

beforeAll(async () => {
  app = await startTestApp({ toolTimeoutMs: 1500, onToolRun: (sessionId, call) => toolRuns.push({ sessionId, call }) });
});
afterAll(async () => {
  await app.close();
});

const create = async (title = 'agent') => (await app.ok(`mutation { createSession(input: { title: "${title}" }) { id } }`)).createSession.id as string;
const send = async (sessionId: string, text: string) =>
  (
    await app.ok(
      `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId event { seq type data } session { id pendingInputs { inputId text } } } }`,
      { i: { sessionId, text } },
    )
  ).sendMessage;
const log = async (id: string) =>
  (await app.services.store.log.page(id, -1, 10_000)).map((e) => ({ seq: e.seq, type: e.type, data: e.data, synthetic: e.synthetic, inherited: e.inherited }));
const types = async (id: string) => (await log(id)).map((e) => e.type);
const idle = () => app.services.host.idle();
const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq session { id firstLiveSeq } syntheticEvents { seq type data } } }`;

describe('agent loop with the scripted model', () => {
  it('sendMessage queues an input; the agent answers it in one turn and streams deltas', async () => {
    const id = await create();
    const updates: TurnUpdate[] = [];
    app.turnUpdates.on(id, (u: TurnUpdate) => updates.push(u));
    const r = await send(id, 'hello there');
    expect(r.inputId).toMatch(/^in_/);
    expect(r.event).toEqual({ seq: 1, type: 'inbox/add', data: { inputId: r.inputId, text: 'hello there' } });
    await idle();
    expect(await types(id)).toEqual(['session/title', 'inbox/add', 'inbox/remove', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end']);
    const events = await log(id);
    // Usage as the scripted model reports it: words in, words out.
    expect(events[5].data).toEqual({ turn: 1, step: 1, text: 'Echo: hello there', toolCalls: [], usage: { inputTokens: 2, outputTokens: 3 } });
    expect(events[7].data).toEqual({ turn: 1, reason: 'completed' });
    expect(
      updates
        .filter((u) => u.kind === 'TEXT_DELTA')
        .map((u) => u.text)
        .join(''),
    ).toBe('Echo: hello there');
    expect(updates.map((u) => u.kind)).toEqual(['TURN_STARTED', 'STEP_STARTED', 'TEXT_DELTA', 'TEXT_DELTA', 'TEXT_DELTA', 'STEP_ENDED', 'TURN_ENDED']);
    const { session } = await app.ok(
      `query($id: ID!) { session(id: $id) { status turnCount pendingInputs { inputId } turns { turn input reason startSeq endSeq } } }`,
      { id },
    );
    expect(session).toEqual({
      status: 'IDLE',
      turnCount: 1,
      pendingInputs: [],
      turns: [{ turn: 1, input: 'hello there', reason: 'completed', startSeq: 3, endSeq: 7 }],
    });
  });

  it('runs multi-step turns with tools, in call order, one step per group of calls', async () => {
    const id = await create();
    await send(id, 'remember this\n!call note_write {"key":"k","value":"v1"}\n!call clock\n!then\n!call note_read {"key":"k"}');
    await idle();
    const events = await log(id);
    const results = events.filter((e) => e.type === 'tool/result').map((e: any) => [e.data.step, e.data.name, e.data.status, e.data.content]);
    expect(results[0]).toEqual([1, 'note_write', 'ok', 'wrote note "k"']);
    expect(results[1].slice(0, 3)).toEqual([1, 'clock', 'ok']);
    expect(results[2]).toEqual([2, 'note_read', 'ok', 'v1']);
    expect(events.filter((e) => e.type === 'step/end').map((e: any) => e.data.step)).toEqual([1, 2, 3]);
    expect(events.at(-2)).toMatchObject({ type: 'step/end', data: { step: 3, reason: 'completed' } });
    expect((events.at(-3) as any).data.text).toMatch(
      /^Done \(remember this\)\. Tool results:\n- call_1_1_1: wrote note "k"\n- call_1_1_2: \d{4}-.*\n- call_1_2_1: v1$/,
    );
  });

  it('Session.turns gives each turn and step its duration and token usage, from the stored events', async () => {
    const id = await create();
    await send(id, 'time it\n!call sleep {"ms": 120}\n!then\n!call clock');
    await idle();
    const { session } = await app.ok(
      `query($id: ID!) { session(id: $id) { turns { turn startedAt endedAt durationMs usage { inputTokens outputTokens }
         steps { step startSeq endSeq reason durationMs toolCallCount usage { inputTokens outputTokens } } } } }`,
      { id },
    );
    const [turn] = session.turns;
    const events = await log(id);
    const messages = events.filter((e) => e.type === 'model/message').map((e: any) => e.data);
    expect(turn.steps.map((s: any) => [s.step, s.reason, s.toolCallCount])).toEqual([
      [1, 'completed', 1],
      [2, 'completed', 1],
      [3, 'completed', 0],
    ]);
    expect(turn.steps.map((s: any) => s.usage)).toEqual(messages.map((m: any) => m.usage));
    expect(turn.usage).toEqual({
      inputTokens: messages.reduce((n: number, m: any) => n + m.usage.inputTokens, 0),
      outputTokens: messages.reduce((n: number, m: any) => n + m.usage.outputTokens, 0),
    });
    for (const s of turn.steps) {
      expect(events[s.startSeq].type).toBe('step/start');
      expect(events[s.endSeq].type).toBe('step/end');
    }
    expect(turn.steps[0].durationMs).toBeGreaterThanOrEqual(100); // the step that slept
    expect(turn.durationMs).toBe(new Date(turn.endedAt).getTime() - new Date(turn.startedAt).getTime());
    expect(turn.durationMs).toBeGreaterThanOrEqual(turn.steps[0].durationMs);
    // turnAt finds the same turn from any of its events, and nothing outside turns.
    const TURN_AT = `query($id: ID!, $seq: Int!) { session(id: $id) { turnAt(seq: $seq) { turn input startSeq endSeq durationMs usage { inputTokens outputTokens } steps { step } } } }`;
    const inside = events.find((e) => e.type === 'tool/result')!.seq;
    for (const seq of [turn.steps[0].startSeq - 1, inside, turn.steps[2].endSeq + 1]) {
      const { session: at } = await app.ok(TURN_AT, { id, seq });
      expect(at.turnAt).toMatchObject({
        turn: 1,
        input: expect.stringMatching(/^time it/),
        durationMs: turn.durationMs,
        usage: turn.usage,
        steps: [{ step: 1 }, { step: 2 }, { step: 3 }],
      });
    }
    for (const seq of [-1, 0, events.length + 5]) expect((await app.ok(TURN_AT, { id, seq })).session.turnAt, `seq ${seq}`).toBeNull();
  });

  it("a turn a fork cut mid-way lasts, in the child, until the cut, not until the fork was made (its closers' time)", async () => {
    const id = await create();
    await send(id, 'quick\n!call clock');
    await idle();
    const events = await app.services.store.log.page(id, -1, 100);
    const cut = events.find((e) => e.type === 'tool/result')!; // inside step 1 of turn 1
    // The fork is made after the turn ended (the idle wait, a read and a request later): its closers' time is later than the cut's, which the exact durations below tell apart.
    const { forkSession } = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: id, atSeq: cut.seq },
    });
    const Q = `query($id: ID!, $seq: Int!) { session(id: $id) {
      turns { turn reason durationMs steps { step reason durationMs } }
      turnAt(seq: $seq) { turn reason durationMs steps { step reason durationMs } } } }`;
    const { session: parent } = await app.ok(Q, { id, seq: cut.seq });
    const { session: child } = await app.ok(Q, { id: forkSession.session.id, seq: cut.seq });
    const start = events.find((e) => e.type === 'turn/start')!;
    const stepStart = events.find((e) => e.type === 'step/start')!;
    const toCut = (from: { createdAt: Date }) => cut.createdAt.getTime() - from.createdAt.getTime();
    expect(child.turns).toEqual([
      { turn: 1, reason: 'forked', durationMs: toCut(start), steps: [{ step: 1, reason: 'forked', durationMs: toCut(stepStart) }] },
    ]);
    expect(child.turnAt).toEqual(child.turns[0]);
    expect(child.turns[0].durationMs).toBeLessThanOrEqual(parent.turns[0].durationMs);
    expect(parent.turnAt.reason).toBe('completed');
  });

  it('input sent during a turn waits in the inbox for the next turn', async () => {
    const id = await create();
    await send(id, '!call sleep {"ms": 1000}');
    await waitFor(async () => (await log(id)).at(-1)?.type === 'model/message', { what: 'the call in flight' });
    const second = await send(id, 'second');
    expect(second.session.pendingInputs.map((p: any) => p.text)).toContain('second');
    await idle();
    const events = await log(id);
    const at = (pred: (e: any) => boolean) => events.findIndex(pred);
    const end1 = at((e) => e.type === 'turn/end' && e.data.turn === 1);
    const add2 = at((e) => e.type === 'inbox/add' && e.data.text === 'second');
    const start2 = at((e) => e.type === 'turn/start' && e.data.turn === 2);
    expect(add2).toBeLessThan(end1);
    expect(start2).toBeGreaterThan(end1);
    expect(anyData(events[start2]).inputId).toBe(second.inputId);
  });

  it('cancelTurn ends the running turn with cancelled', async () => {
    const id = await create();
    const updates: TurnUpdate[] = [];
    app.turnUpdates.on(id, (u: TurnUpdate) => updates.push(u));
    await send(id, '!call sleep {"ms": 10000}');
    await waitFor(() => updates.some((u) => u.kind === 'TOOL_RUNNING'), { what: 'the tool to run' }); // recorded since before the message went out
    await app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id });
    await idle();
    const events = await log(id);
    // The call was stopped, not waited for: its result is not the sleep's own answer (after 10 s).
    expect(events.map((e: any) => e.data.content)).not.toContain('slept 10000 ms');
    expect(events.slice(-2).map((e: any) => [e.type, e.data.reason])).toEqual([
      ['step/end', 'interrupted'],
      ['turn/end', 'cancelled'],
    ]);
    expect(updates.at(-1)).toMatchObject({ kind: 'TURN_ENDED', reason: 'cancelled' });
    const again = await app.gql(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id });
    expect(again.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });

  it("cancelTurn while the answer streams keeps the text already streamed as the step's model/message; the next turn sees it", async () => {
    const id = await create();
    const deltas: string[] = [];
    app.turnUpdates.on(id, (u: TurnUpdate) => u.kind === 'TEXT_DELTA' && deltas.push(u.text ?? ''));
    await send(id, 'one two three four five six seven eight nine ten\n!slow 60');
    await waitFor(() => deltas.length >= 3, { what: 'a few words to stream' });
    await app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id });
    await idle();
    const events = await log(id);
    const [message, stepEnd, turnEnd] = events.slice(-3) as any[];
    expect([message.type, stepEnd.type, stepEnd.data.reason, turnEnd.type, turnEnd.data.reason]).toEqual([
      'model/message',
      'step/end',
      'interrupted',
      'turn/end',
      'cancelled',
    ]);
    expect(message.data).toEqual({ turn: 1, step: 1, text: deltas.join(''), toolCalls: [] });
    expect(message.data.text).toMatch(/^Echo: one/);
    expect(message.data.text.length).toBeLessThan('Echo: one two three four five six seven eight nine ten'.length);
    await send(id, 'go on');
    await idle();
    expect(app.models.scripted.lastRequest!.messages.some((m) => m.role === 'assistant' && m.content === message.data.text)).toBe(true);
  });

  it('tool failures become error results and the loop keeps serving', async () => {
    const id = await create();
    await send(id, '!call note_read {"key":"missing"}\n!call teleport {}\n!call sleep {"ms": 5000}\n!call clock not-json');
    await idle();
    const results = (await log(id)).filter((e) => e.type === 'tool/result').map((e: any) => [e.data.status, e.data.content]);
    // A call of no offered tool is answered with the answer; the others as they ran.
    expect(results).toEqual([
      ['error', 'the model was offered no tool named "teleport": the call did not run'],
      ['error', 'no note named "missing"'],
      ['error', 'timed out after 1500 ms'],
      ['error', 'arguments are not valid JSON: not-json'],
    ]);
    await send(id, 'still there?');
    await idle();
    expect((await log(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });

  it('a model error ends the turn failed and records why', async () => {
    const id = await create();
    await send(id, '!fail the model is down');
    await idle();
    const events = await log(id);
    expect(events.slice(-3).map((e: any) => [e.type, e.data.reason ?? e.data.message])).toEqual([
      ['plugin/agent/error', 'the model is down'],
      ['step/end', 'failed'],
      ['turn/end', 'failed'],
    ]);
  });

  it('setSessionModel and setSessionTitle record events; unknown providers are rejected', async () => {
    const id = await create();
    const s = await app.ok(`mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "renamed") { title } }`, { id });
    expect(s.setSessionTitle.title).toBe('renamed');
    await app.ok(`mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "scripted", model: "v2", settings: { temperature: 0 } }) { id } }`, {
      id,
    });
    expect((await log(id)).slice(-2).map((e) => [e.type, e.data])).toEqual([
      ['session/title', { title: 'renamed' }],
      ['session/model', { provider: 'scripted', model: 'v2', settings: { temperature: 0 } }],
    ]);
    await send(id, 'which model?');
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ provider: 'scripted', model: 'v2', settings: { temperature: 0 } });
    const bad = await app.gql(`mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "nope", model: "x" }) { id } }`, { id });
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    // The input shape (the plain arguments above are the deprecated one); not both at once.
    await app.ok(`mutation($i: SetSessionModelInput!) { setSessionModel(input: $i) { id } }`, {
      i: { sessionId: id, model: { provider: 'scripted', model: 'v3' } },
    });
    expect((await log(id)).at(-1)).toMatchObject({ type: 'session/model', data: { provider: 'scripted', model: 'v3' } });
    const both = await app.gql(
      `mutation($id: ID!) { setSessionModel(input: { sessionId: $id, model: { provider: "scripted", model: "v4" } }, sessionId: $id) { id } }`,
      { id },
    );
    expect(both.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const badInput = await app.gql(`mutation($id: ID!) { setSessionModel(input: { sessionId: $id, model: { provider: "nope", model: "x" } }) { id } }`, { id });
    expect(badInput.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const neither = await app.gql(`mutation { setSessionModel { id } }`);
    expect(neither.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const missing = await app.gql(`mutation { sendMessage(input: { sessionId: "ses_missing", text: "x" }) { inputId } }`);
    expect(missing.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
    const empty = await app.gql(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "" }) { inputId } }`, { id });
    expect(empty.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('continuing a fork taken mid-step (docs/contract.md#continuing-a-child)', () => {
  it('sends exactly the expected next model request, numbers the turn on, never re-runs inherited calls', async () => {
    const parent = await create('parent');
    await send(parent, 'look things up\n!call clock\n!call note_write {"key":"a","value":"1"}');
    await idle();
    const parentLog = await log(parent);
    const callMsg = parentLog.find((e) => e.type === 'model/message' && anyData(e).toolCalls.length)!;
    const firstResult = parentLog.find((e) => e.type === 'tool/result')!;
    // Fork right after the first tool result: call 1 answered, call 2 missing in the branch.
    const { forkSession: f } = await app.ok(FORK, { i: { sessionId: parent, atSeq: firstResult.seq } });
    expect(f.syntheticEvents.map((e: any) => [e.type, e.data.status ?? e.data.reason])).toEqual([
      ['tool/result', 'not-started'],
      ['step/end', 'forked'],
      ['turn/end', 'forked'],
    ]);
    const child = f.session.id;
    const runsBefore = toolRuns.length;
    const requestsBefore = app.models.scripted.requestCount;
    await send(child, 'continue please');
    await idle();

    expect(app.models.scripted.requestCount - requestsBefore).toBe(1);
    const request = app.models.scripted.lastRequest!;
    const [c1, c2] = anyData(callMsg).toolCalls;
    expect(request.messages).toEqual([
      { role: 'user', content: 'look things up\n!call clock\n!call note_write {"key":"a","value":"1"}' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: c1.id, type: 'function', function: { name: 'clock', arguments: '{}' } },
          { id: c2.id, type: 'function', function: { name: 'note_write', arguments: '{"key":"a","value":"1"}' } },
        ],
      },
      { role: 'tool', tool_call_id: c1.id, content: anyData(firstResult).content },
      { role: 'tool', tool_call_id: c2.id, content: f.syntheticEvents[0].data.content },
      { role: 'user', content: 'continue please' },
    ]);
    expect(f.syntheticEvents[0].data.content).toContain(`forked at event ${firstResult.seq} of session ${parent}`);
    expect(f.syntheticEvents[0].data.content).toContain('may already have changed the world');
    expect(toolRuns.length).toBe(runsBefore); // nothing inherited ran again
    const childLog = await log(child);
    expect(childLog.filter((e) => e.type === 'turn/start').map((e) => anyData(e).turn)).toEqual([1, 2]);
    const own = childLog.slice(f.session.firstLiveSeq);
    expect(own.every((e) => !e.inherited)).toBe(true);
    // The parent's later events (its step 2 answer) never reach the child.
    const parentAnswer = parentLog.filter((e) => e.type === 'model/message').at(-1)!;
    expect(childLog.some((e) => e.type === 'model/message' && anyData(e).text === anyData(parentAnswer).text)).toBe(false);
    expect((await log(parent)).length).toBe(parentLog.length);
  });

  it('keyless cold scenario: import a recording, fork between a tool call and its result, continue', async () => {
    const recording = fs.readFileSync(new URL('../fixtures/recordings/v4-completed-tools.jsonl', import.meta.url), 'utf8');
    const { importRecording: imported } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording });
    const source = await log(imported.id);
    expect(source[6]).toMatchObject({ type: 'model/message' });
    expect(source[7]).toMatchObject({ type: 'tool/result' });
    const { forkSession: f } = await app.ok(FORK, { i: { sessionId: imported.id, atSeq: 6 } });
    await send(f.session.id, 'and now?');
    await idle();
    const request = app.models.scripted.lastRequest!;
    const toolMessages = request.messages.filter((m) => m.role === 'tool');
    expect(toolMessages).toHaveLength(1);
    expect((toolMessages[0] as any).content).toContain(`forked at event 6 of session ${imported.id} before the result was recorded`);
    expect((toolMessages[0] as any).content).toContain('"clock" is read-only, so it is safe to call it again');
    expect(request.messages.at(-1)).toEqual({ role: 'user', content: 'and now?' });
    expect((await log(f.session.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });
});

describe('stopping the host (graceful shutdown)', () => {
  it('closes a running turn with the shared repair, cause interrupted, and reports the turn ended', async () => {
    const own = await startTestApp();
    try {
      const { createSession: s } = await own.ok(`mutation { createSession(input: { title: "stop" }) { id } }`);
      const updates: TurnUpdate[] = [];
      own.turnUpdates.on(s.id, (u: TurnUpdate) => updates.push(u));
      const running = new Promise<void>((resolve) => own.turnUpdates.on(s.id, (u: TurnUpdate) => u.kind === 'TOOL_RUNNING' && resolve()));
      await own.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: s.id, text: '!call sleep {"ms": 20000}' } });
      await running;
      await own.services.host.stop();
      const events = await own.services.store.log.page(s.id, -1, 100);
      expect(events.slice(-3).map((e) => [e.type, anyData(e).status ?? anyData(e).reason, e.synthetic])).toEqual([
        ['tool/result', 'interrupted', true],
        ['step/end', 'interrupted', true],
        ['turn/end', 'interrupted', true],
      ]);
      expect(updates.at(-1)).toMatchObject({ kind: 'TURN_ENDED', turn: 1, reason: 'interrupted' });
    } finally {
      await own.close();
    }
  });

  it("keeps the text the user saw stream as the step's model/message, as a cancel does, then closes the tail as interrupted", async () => {
    const own = await startTestApp();
    try {
      const { createSession: s } = await own.ok(`mutation { createSession(input: { title: "stop while streaming" }) { id } }`);
      const deltas: string[] = [];
      own.turnUpdates.on(s.id, (u: TurnUpdate) => u.kind === 'TEXT_DELTA' && deltas.push(u.text ?? ''));
      await own.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, {
        i: { sessionId: s.id, text: 'one two three four five six seven eight nine ten\n!slow 60' },
      });
      await waitFor(() => deltas.length >= 3, { what: 'a few words to stream' });
      await own.services.host.stop();
      const events = await own.services.store.log.page(s.id, -1, 100);
      const [message, stepEnd, turnEnd] = events.slice(-3);
      expect([message.type, stepEnd.type, anyData(stepEnd).reason, turnEnd.type, anyData(turnEnd).reason]).toEqual([
        'model/message',
        'step/end',
        'interrupted',
        'turn/end',
        'interrupted',
      ]);
      expect(message.data).toEqual({ turn: 1, step: 1, text: deltas.join(''), toolCalls: [] });
      expect(anyData(message).text).toMatch(/^Echo: one/);
      expect((anyData(message).text as string).length).toBeLessThan('Echo: one two three four five six seven eight nine ten'.length);
    } finally {
      await own.close();
    }
  });
});
