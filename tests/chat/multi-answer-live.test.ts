// A step of several answers streamed live by an external runner (a model
// called again within its step): each answer's deltas name it
// (publishTurnUpdate's `answer`), and every later answer streams as the first
// does, before it is stored, to sessionTurns(afterSeq) over the real
// graphql-ws client, to POST /chat read by the `ai` package's own client, and
// to POST /agui read by @ag-ui/client's HttpAgent (then replayed from the log
// by a retry of its run): each answer's text once, in order, each answer's
// calls before their results and the next answer's text after them. Before,
// a step's later answers reached these clients only whole, once stored.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultChatTransport, type UIMessage } from 'ai';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { EventSchemas } from '@ag-ui/core/schemas';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { claimSession } from '../helpers/claimed-session.ts';
import { followChat } from '../helpers/chat-replay.ts';
import { answerEvents, externalSession, publishDelta, queueInput, toldByAgui, toldByUpdates, turnEnding, turnOpening } from '../helpers/step-answers.ts';
import { turnsFromLog } from '../../src/host/live/turn-stream.ts';
import { readOpenTail, type TurnUpdate } from '../../src/agent/turn-updates.ts';
import type { LogEvent } from '../../src/core/events.ts';
import { RunTranslator } from '../../src/agui/agui-events.ts';

let app: TestApp;
let base: string;
beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
});
afterAll(() => app?.close());

/** Each answer's deltas, what it stores, and its call (the last answer has none: the step ends with it). */
const ANSWERS = [
  { deltas: ['Let me ', 'look. '], call: 'c1' },
  { deltas: ['It is ', '12:00, ', 'I think. '], call: 'c2' },
  { deltas: ['Checked: ', 'noon.'], call: undefined },
];
const textOf = (a: (typeof ANSWERS)[number]) => a.deltas.join('');
/** The step as a client should tell it: each answer's text, then its call's result. */
const TOLD = ANSWERS.map((a) => textOf(a) + (a.call ? `[${a.call}]` : '')).join('');

/**
 * An external runner's turn of one step of three answers, on a session whose input waits: each answer streams
 * (its deltas naming it) and is shown by `shown` (what the client was told so far) before it is stored.
 */
async function runStep(sid: string, shown: () => string) {
  const { token, append } = await claimSession(app, sid, { startTurn: true });
  let said = '';
  for (const [i, a] of ANSWERS.entries()) {
    for (const text of a.deltas) await publishDelta(app, sid, token, text, i + 1);
    said += textOf(a);
    // Live: the client shows the answer before it is stored (the old code showed a later answer only once stored).
    await waitFor(() => shown().replace(/\[c\d\]/g, '') === said, { what: `answer ${i + 1} streamed before it is stored (shown: ${shown()})` });
    await append([...answerEvents(textOf(a), a.call), ...(a.call ? [] : turnEnding())]);
  }
}

const pendingInput = (sid: string) =>
  waitFor(async () => (await app.ok(`query($id: ID!) { session(id: $id) { pendingInputs { inputId } } }`, { id: sid })).session.pendingInputs.length > 0, {
    what: 'the input queued',
  });

describe('a live step of several answers, each streamed as it is made', () => {
  it('sessionTurns(afterSeq) over graphql-ws: every answer streams, once, in order, after the results before it', async () => {
    await waitFor(() => app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    const sid = await externalSession(app, 'turns');
    const input = await queueInput(app, sid);
    type U = { sessionTurns: { kind: string; answer: number | null; text: string | null; callId: string | null } };
    const sub = subscribeWs<U>(app.url, `subscription($id: ID!, $after: Int!) { sessionTurns(sessionId: $id, afterSeq: $after) { kind answer text callId } }`, {
      id: sid,
      after: input.seq,
    });
    await waitFor(() => app.services.live.stats().turns >= 1, { what: 'the subscriber registered' });
    const told = () => toldByUpdates(sub.items.map((i) => i.sessionTurns));
    await runStep(sid, told);
    await sub.until((items) => items.some((i) => i.sessionTurns.kind === 'TURN_ENDED'), 'the turn’s end');
    await sub.close();
    expect(told()).toBe(TOLD);
    // Each delta names its answer.
    const answers = sub.items.flatMap(({ sessionTurns: u }) => (u.kind === 'TEXT_DELTA' ? [u.answer] : []));
    expect([...new Set(answers)]).toEqual([1, 2, 3]);
  });

  it('POST /chat read by the ai package’s client: a text part per answer, streamed, each before its call', async () => {
    const sid = await externalSession(app, 'chat');
    const transport = new DefaultChatTransport({ api: `${base}/chat` });
    const user: UIMessage = { id: 'u-live', role: 'user', parts: [{ type: 'text', text: 'time?' }] };
    const stream = await transport.sendMessages({ chatId: sid, messages: [user], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });
    const { chunks, errors, done } = followChat(stream);
    const told = () => chunks.map((c) => (c.type === 'text-delta' ? c.delta : c.type === 'tool-output-available' ? `[${c.toolCallId}]` : '')).join('');
    await pendingInput(sid);
    await runStep(sid, told);
    const message = await done;
    expect(errors).toEqual([]);
    expect(told()).toBe(TOLD);
    const parts = message!.parts.flatMap((p) =>
      p.type === 'text' ? [`text ${p.text}`] : p.type === 'dynamic-tool' ? [`call ${p.toolCallId} ${p.state}`] : [],
    );
    expect(parts).toEqual([
      `text ${textOf(ANSWERS[0])}`,
      'call c1 output-available',
      `text ${textOf(ANSWERS[1])}`,
      'call c2 output-available',
      `text ${textOf(ANSWERS[2])}`,
    ]);
  });

  it('POST /agui read by HttpAgent, live and replayed: each answer a message of its own, its text once, its calls before their results', async () => {
    const sid = await externalSession(app, 'agui');
    const agent = new HttpAgent({ url: `${base}/agui`, threadId: sid });
    agent.addMessage({ id: 'u-agui', role: 'user', content: 'time?' });
    const events: BaseEvent[] = [];
    const running = agent.runAgent({ runId: 'run-answers' }, { onEvent: ({ event }) => void events.push(event) });
    const told = toldByAgui;
    // The run's record is stored once it has started: the runner claims after it.
    await waitFor(() => events.some((e) => e.type === EventType.RUN_STARTED), { what: 'the run started' });
    await pendingInput(sid);
    await runStep(sid, () => told(events));
    await running;

    const check = (list: BaseEvent[]) => {
      for (const e of list) expect(() => EventSchemas.parse(e), `${e.type} ${JSON.stringify(e)}`).not.toThrow();
      expect(list.at(-1)?.type).toBe(EventType.RUN_FINISHED);
      expect(told(list)).toBe(TOLD);
      // Each answer is a message of its own: started, its text, ended; its calls name it and come before their results.
      const byMessage = new Map<string, string>();
      for (const e of list) {
        const m = e as BaseEvent & { messageId?: string; delta?: string };
        if (e.type === EventType.TEXT_MESSAGE_START) {
          expect(byMessage.has(m.messageId!), `${m.messageId} started twice`).toBe(false);
          byMessage.set(m.messageId!, '');
        }
        if (e.type === EventType.TEXT_MESSAGE_CONTENT) byMessage.set(m.messageId!, byMessage.get(m.messageId!)! + m.delta);
      }
      expect([...byMessage.values()]).toEqual(ANSWERS.map(textOf));
      const position = (type: EventType, callId: string) =>
        list.findIndex((e) => e.type === type && (e as BaseEvent & { toolCallId: string }).toolCallId === callId);
      for (const call of ['c1', 'c2']) {
        expect(position(EventType.TOOL_CALL_END, call)).toBeGreaterThan(-1);
        expect(position(EventType.TOOL_CALL_END, call)).toBeLessThan(position(EventType.TOOL_CALL_RESULT, call));
      }
      const parents = list.filter((e) => e.type === EventType.TOOL_CALL_START).map((e) => (e as BaseEvent & { parentMessageId: string }).parentMessageId);
      expect(parents).toEqual([...byMessage.keys()].slice(0, 2));
    };
    check(events);
    // The agent applied them: an assistant message per answer, each with its text, in order.
    const assistants = agent.messages.filter((m) => m.role === 'assistant');
    expect(assistants.map((m) => m.content)).toEqual(ANSWERS.map(textOf));
    expect(new Set(agent.messages.map((m) => m.id)).size).toBe(agent.messages.length);

    // Replayed: the run again (its retry) after the turn ended: from the log only, the same messages.
    const again = new HttpAgent({ url: `${base}/agui`, threadId: sid });
    again.addMessage({ id: 'u-agui', role: 'user', content: 'time?' });
    const replayed: BaseEvent[] = [];
    await again.runAgent({ runId: 'run-answers' }, { onEvent: ({ event }) => void replayed.push(event) });
    check(replayed);
    expect(again.messages.filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual(ANSWERS.map(textOf));

    // A later run's snapshot holds the step's answers as messages of their own (ids unique).
    const next = new HttpAgent({ url: `${base}/agui`, threadId: sid });
    next.addMessage({ id: 'u-next', role: 'user', content: 'and now?' });
    const later: BaseEvent[] = [];
    const nextRun = next.runAgent({ runId: 'run-next' }, { onEvent: ({ event }) => void later.push(event) }).catch(() => {});
    await waitFor(() => later.some((e) => e.type === EventType.MESSAGES_SNAPSHOT), { what: 'the next run’s snapshot' });
    const snapshot = later.find((e) => e.type === EventType.MESSAGES_SNAPSHOT) as BaseEvent & {
      messages: Array<{ id: string; role: string; content?: string }>;
    };
    expect(snapshot.messages.filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual(ANSWERS.map(textOf));
    expect(new Set(snapshot.messages.map((m) => m.id)).size).toBe(snapshot.messages.length);
    next.abortRun();
    await nextRun;
  });
});

/** How a stream of updates tells the step: its text, and each call's result where it came. */

/** The step's three answers as stored, with the turn around them. */
const storedStep = () => [...turnOpening(), ...ANSWERS.flatMap((a) => answerEvents(textOf(a), a.call)), ...turnEnding()];

describe('the log and the relay in either order: each answer’s text once, in order, after the results before it', () => {
  /**
   * Merges a stored step's log (from after `afterSeq`) with a scripted relay: `gates` hold the log before the event
   * of a type and answer (`model/message` 3: the third answer) until `ready` says so; the last answer's message waits
   * until its streamed text was given (or 5 s: the old code never streamed it).
   */
  async function merged(opts: {
    afterSeq: (log: LogEvent[]) => number;
    liveFrom: (log: LogEvent[]) => number;
    relay: (delta: (answer: number, text: string) => TurnUpdate, logAt: (n: number) => Promise<void>) => AsyncGenerator<TurnUpdate>;
    holdBefore?: { answer: number; until: Promise<void> };
  }) {
    const sid = (await app.services.store.createSession({ tenant: 'local' }, {})).id;
    await app.services.store.append(sid, storedStep());
    const stored = await app.services.store.log.page(sid, -1, 100);
    const updates: TurnUpdate[] = [];
    /** Resolves waits of the relay for the log having given its reader `n` events. */
    const reads: Array<{ n: number; go: () => void }> = [];
    let given = 0;
    let lastStreamedEarly = false;
    const lastText = textOf(ANSWERS[2]);
    const log = (async function* () {
      for (const e of stored.slice(opts.afterSeq(stored) + 1)) {
        if (e.type === 'model/message') {
          const answers = stored.filter((x) => x.type === 'model/message' && x.seq <= e.seq).length;
          if (opts.holdBefore?.answer === answers) await opts.holdBefore.until;
          if (answers === 3)
            lastStreamedEarly = await waitFor(() => toldByUpdates(updates).endsWith(lastText), { timeoutMs: 5000, what: 'the last answer streamed' }).then(
              () => true,
              () => false,
            );
        }
        yield e;
        given++;
        for (const r of reads.filter((w) => w.n <= given)) r.go();
      }
    })();
    const logAt = (n: number) => new Promise<void>((go) => (given >= n ? go() : reads.push({ n, go })));
    const delta = (answer: number, text: string): TurnUpdate => ({ sessionId: sid, kind: 'TEXT_DELTA', turn: 1, step: 1, answer, text });
    const live = (async function* () {
      yield* opts.relay(delta, logAt);
      await new Promise(() => {}); // the relay stays open
    })();
    for await (const u of turnsFromLog(sid, log, live, opts.liveFrom(stored), readOpenTail(app.services.store.log))) updates.push(u);
    expect(updates.at(-1)?.kind).toBe('TURN_ENDED');
    return { told: toldByUpdates(updates), lastStreamedEarly, stored };
  }

  it('the relay ahead: the next answers’ deltas before the log shows the first: held until its result, then streamed', async () => {
    let relayAhead!: () => void;
    const ahead = new Promise<void>((r) => (relayAhead = r));
    const { told, lastStreamedEarly } = await merged({
      afterSeq: () => -1,
      liveFrom: () => 0,
      holdBefore: { answer: 1, until: ahead },
      relay: async function* (delta, logAt) {
        for (const [i, a] of ANSWERS.slice(0, 2).entries()) for (const t of a.deltas) yield delta(i + 1, t);
        relayAhead(); // all of the first two answers' deltas came before the log showed the first answer
        await logAt(8); // the second answer and its result are read
        for (const t of ANSWERS[2].deltas) yield delta(3, t);
      },
    });
    // The old code (deltas not told apart by answer): "Let me look. It is 12:00, I think. [c1][c2]…" (the second answer before the first's result).
    expect(told).toBe(TOLD);
    expect(lastStreamedEarly).toBe(true);
  });

  it('the relay behind, joined inside the step: late deltas of stored answers dropped, the next answer streams', async () => {
    const { told, lastStreamedEarly } = await merged({
      // From after the first answer: the reader learns from the log that the step holds one answer.
      afterSeq: (log) => log.findIndex((e) => e.type === 'model/message'),
      // The relay was registered before the second answer was stored: the third is seen whole.
      liveFrom: (log) => log.filter((e) => e.type === 'model/message')[1].seq,
      relay: async function* (delta, logAt) {
        await logAt(3); // the first's result, the second answer and its result are read
        for (const [i, a] of ANSWERS.slice(0, 2).entries()) for (const t of a.deltas) yield delta(i + 1, t); // late copies
        for (const t of ANSWERS[2].deltas) yield delta(3, t);
      },
    });
    // The old code: the third answer only once stored (a step begun before the subscription streamed nothing).
    expect(told).toBe(`[c1]${textOf(ANSWERS[1])}[c2]${textOf(ANSWERS[2])}`);
    expect(lastStreamedEarly).toBe(true);
  });
});

describe('a hostile runner’s deltas (publishTurnUpdate)', () => {
  it('of a step or turn not open, of a stored answer, of an answer that never comes, thousands of tiny ones, after the turn: never shown', async () => {
    // The runs before have let go of their relay subscriptions: the count below is this test's.
    await waitFor(() => app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    const sid = await externalSession(app, 'hostile');
    const bystander = await externalSession(app, 'bystander');
    type U = { sessionTurns: { kind: string; text: string | null; callId: string | null } };
    const fields = `{ kind text callId }`;
    const merged = subscribeWs<U>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id, afterSeq: -1) ${fields} }`, { id: sid });
    const raw = subscribeWs<U>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) ${fields} }`, { id: sid });
    const otherRaw = subscribeWs<U>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) ${fields} }`, { id: bystander });
    const otherMerged = subscribeWs<U>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id, afterSeq: -1) ${fields} }`, { id: bystander });
    await waitFor(() => app.services.live.stats().turns >= 4, { what: 'the subscribers registered' });
    // An AG-UI run sends the input and follows the turn.
    const agent = new HttpAgent({ url: `${base}/agui`, threadId: sid });
    agent.addMessage({ id: 'u-hostile', role: 'user', content: 'time?' });
    const events: BaseEvent[] = [];
    const running = agent.runAgent({ runId: 'run-hostile' }, { onEvent: ({ event }) => void events.push(event) });
    await waitFor(() => events.some((e) => e.type === EventType.RUN_STARTED), { what: 'the run started' });
    await pendingInput(sid);

    const { token, append } = await claimSession(app, sid, { startTurn: true });
    type Delta = { turn?: number; step?: number; answer?: number; text: string; sessionId?: string };
    /** Deltas in one request (aliased mutations), in order. */
    const deltas = (list: Delta[]) =>
      app.gql(
        `mutation(${list.map((_, i) => `$d${i}: PublishTurnUpdateInput!`).join(', ')}) { ${list.map((_, i) => `d${i}: publishTurnUpdate(input: $d${i})`).join(' ')} }`,
        Object.fromEntries(
          list.map((d, i) => [
            `d${i}`,
            { sessionId: d.sessionId ?? sid, leaseToken: token, turn: d.turn ?? 1, step: d.step ?? 1, text: d.text, ...(d.answer ? { answer: d.answer } : {}) },
          ]),
        ),
      );
    const ok = async (list: Delta[]) => expect((await deltas(list)).errors).toBeUndefined();
    const mergedText = () => toldByUpdates(merged.items.map((i) => i.sessionTurns));
    const aguiText = () => toldByAgui(events);

    // Another session's subscribers: its lease is not this runner's.
    expect((await deltas([{ sessionId: bystander, text: 'NOT YOURS' }])).errors?.[0]?.extensions?.code).toBe('LEASE_LOST');
    // Steps and turns that are not open.
    await ok([
      { step: 7, text: 'NOT OPEN' },
      { turn: 4, text: 'NOT OPEN' },
      { turn: 2, answer: 2, text: 'NOT OPEN' },
    ]);
    await ok([{ text: 'Let me ' }, { text: 'look. ' }]);
    await waitFor(() => mergedText() === 'Let me look. ' && aguiText() === 'Let me look. ', { what: `the first answer streamed (${mergedText()})` });
    await append(answerEvents('Let me look. ', 'c1'));
    // Once the subscribers have read the first answer stored (its call's result came after it): that answer again, and
    // thousands of tiny deltas of an answer that never comes. (A delta of an answer the log has not shown a subscriber
    // yet is the answer streaming, to it: a copy the runner sends as the answer is stored may reach one that lags.)
    await waitFor(() => mergedText().endsWith('[c1]') && aguiText().endsWith('[c1]'), { what: 'the first answer’s result read' });
    await ok([{ text: 'LATE COPY' }, { answer: 1, text: 'LATE COPY' }]);
    for (let batch = 0; batch < 60; batch++) await ok(Array.from({ length: 30 }, () => ({ answer: 9, text: 'x' })));
    await ok([
      { answer: 2, text: 'It is ' },
      { answer: 2, text: '12:00.' },
    ]);
    await waitFor(() => mergedText() === 'Let me look. [c1]It is 12:00.' && aguiText() === 'Let me look. [c1]It is 12:00.', {
      what: `the second answer streamed (${mergedText()} / ${aguiText()})`,
    });
    await append([...answerEvents('It is 12:00.'), ...turnEnding()]);
    await running;
    // After the step and the turn ended: the relay-only subscriber hears it (it hears the runner, not the log)…
    await ok([
      { answer: 2, text: 'AFTER' },
      { answer: 3, text: 'AFTER' },
    ]);
    await raw.until((items) => items.filter((i) => i.sessionTurns.text === 'AFTER').length === 2, 'the late deltas relayed');
    await merged.until((items) => items.some((i) => i.sessionTurns.kind === 'TURN_ENDED'), 'the turn’s end');
    await new Promise((r) => setTimeout(r, 200)); // what the relay gave the merged subscriber was routed meanwhile
    // …the subscribers that follow the log show the turn as stored, once, and were not cut.
    expect(mergedText()).toBe('Let me look. [c1]It is 12:00.');
    expect(merged.errors).toEqual([]);
    expect(aguiText()).toBe('Let me look. [c1]It is 12:00.');
    for (const e of events) expect(() => EventSchemas.parse(e), `${e.type} ${JSON.stringify(e)}`).not.toThrow();
    expect(events.at(-1)?.type).toBe(EventType.RUN_FINISHED);
    // Nothing reached the other session's subscribers.
    expect([...otherRaw.items, ...otherMerged.items]).toEqual([]);
    await Promise.all([merged.close(), raw.close(), otherRaw.close(), otherMerged.close()]);
  });

  it('an AG-UI run with the relay ahead of the log and behind it: each answer a message, its text once, after the results before it', () => {
    const emitted: BaseEvent[] = [];
    const t = new RunTranslator({ threadId: 'ses_x', runId: 'run', inputId: 'in_1' }, (e) => void emitted.push(e));
    let seq = 0;
    const log = (events: Array<{ type: string; data: unknown }>) => events.forEach((e) => t.event({ seq: seq++, ...e }));
    const delta = (answer: number, text: string) => t.update({ sessionId: 'ses_x', kind: 'TEXT_DELTA', turn: 1, step: 1, answer, text });
    const step = storedStep().slice(2); // from turn/start
    const at = (type: string, n = 1) => step.findIndex((e, i) => e.type === type && step.slice(0, i + 1).filter((x) => x.type === type).length === n);
    // Ahead: the first two answers' deltas before the log shows the step's start.
    for (const [i, a] of ANSWERS.slice(0, 2).entries()) for (const text of a.deltas) delta(i + 1, text);
    log(step.slice(0, at('model/message', 2) + 2)); // through the second answer's result
    // Behind: copies of the stored answers' deltas, then the third answer's as it streams.
    for (const [i, a] of ANSWERS.slice(0, 2).entries()) for (const text of a.deltas) delta(i + 1, text);
    for (const text of ANSWERS[2].deltas) delta(3, text);
    log(step.slice(at('model/message', 2) + 2));
    for (const e of emitted) expect(() => EventSchemas.parse(e), `${e.type} ${JSON.stringify(e)}`).not.toThrow();
    const told = toldByAgui(emitted);
    // The old code: the second answer's deltas as the step's text before the first's call, and its stored text again.
    expect(told).toBe(TOLD);
    const starts = emitted.filter((e) => e.type === EventType.TEXT_MESSAGE_START).map((e) => (e as BaseEvent & { messageId: string }).messageId);
    expect(starts).toEqual(['msg_1_1', 'msg_1_1_2', 'msg_1_1_3']);
    expect(emitted.at(-1)?.type).toBe(EventType.RUN_FINISHED);
  });

  it('an AG-UI run holds at most MAX_HELD_CHARS of deltas it cannot show yet: past them their answer’s stored text is shown whole', () => {
    const emitted: BaseEvent[] = [];
    const t = new RunTranslator({ threadId: 'ses_x', runId: 'run', inputId: 'in_1' }, (e) => void emitted.push(e));
    let seq = 0;
    const event = (type: string, data: unknown) => t.event({ seq: seq++, type, data });
    event('turn/start', { turn: 1, inputId: 'in_1' });
    event('step/start', { turn: 1, step: 1 });
    // 3 MiB of tiny deltas of a step not started yet (and of an answer never to come): none shown, none kept past the bound.
    const piece = 'y'.repeat(1024);
    for (let i = 0; i < 3 * 1024; i++) {
      t.update({ sessionId: 'ses_x', kind: 'TEXT_DELTA', turn: 1, step: 2, text: piece });
      t.update({ sessionId: 'ses_x', kind: 'TEXT_DELTA', turn: 1, step: 1, answer: 5, text: piece });
    }
    event('step/end', { turn: 1, step: 1, reason: 'completed' });
    event('step/start', { turn: 1, step: 2 });
    event('model/message', { turn: 1, step: 2, text: 'the stored answer', toolCalls: [] });
    const text = emitted
      .filter((e) => e.type === EventType.TEXT_MESSAGE_CONTENT)
      .map((e) => (e as BaseEvent & { delta: string }).delta)
      .join('');
    // The old code kept all of step 2's deltas and showed them (3 MiB) when it started, then not the stored answer.
    expect(text).toBe('the stored answer');
  });
});
