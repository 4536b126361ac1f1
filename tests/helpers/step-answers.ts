// What the tests of a step's answers streamed live share (tests/chat/multi-answer-*.test.ts, late-copy.test.ts): an
// external runner's session with an input waiting, its deltas through publishTurnUpdate, the events of an answer
// and of a turn's opening, and what a stream told of a step — its text, and each call's result where it came.
import { EventType, type BaseEvent } from '@ag-ui/core';
import type { TestApp } from './app.ts';

/** A session run by an external runner (runner "ext"); its id. */
export const externalSession = async (app: TestApp, title: string) =>
  (await app.ok(`mutation($title: String!) { createSession(input: {title: $title, runner: "ext"}) { id } }`, { title })).createSession.id as string;

/** Queues "time?" on the session: its input's id and the seq of its inbox/add. */
export async function queueInput(app: TestApp, sessionId: string): Promise<{ inputId: string; seq: number }> {
  const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "time?"}) { inputId event { seq } } }`, {
    id: sessionId,
  });
  return { inputId: sendMessage.inputId, seq: sendMessage.event.seq };
}

/** The lease holder's text delta of turn 1, step 1 (its answer named when given), through publishTurnUpdate. */
export const publishDelta = (app: TestApp, sessionId: string, leaseToken: number, text: string, answer?: number) =>
  app.ok(`mutation($input: PublishTurnUpdateInput!) { publishTurnUpdate(input: $input) }`, {
    input: { sessionId, leaseToken, turn: 1, step: 1, text, ...(answer ? { answer } : {}) },
  });

/** An answer of turn 1's step 1 as stored: its model/message (with its call, `clock`, when it has one), then that call's result. */
export const answerEvents = (text: string, call?: string) => [
  { type: 'model/message', data: { turn: 1, step: 1, text, toolCalls: call ? [{ id: call, name: 'clock', arguments: '{}', effect: 'read-only' }] : [] } },
  ...(call ? [{ type: 'tool/result', data: { turn: 1, step: 1, callId: call, resultId: `r-${call}`, status: 'ok', content: '12:00', name: 'clock' } }] : []),
];

/** Turn 1 taking input `in_1` ("time?"), its step 1 open. */
export const turnOpening = () => [
  { type: 'inbox/add', data: { inputId: 'in_1', text: 'time?' } },
  { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
  { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
];

/** Step 1's and turn 1's ends. */
export const turnEnding = () => [
  { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
];

/** What sessionTurns updates told: each text delta, and each finished tool as `[callId]`. */
export const toldByUpdates = (updates: ReadonlyArray<{ kind: string; text?: string | null; callId?: string | null }>) =>
  updates.map((u) => (u.kind === 'TEXT_DELTA' ? u.text : u.kind === 'TOOL_FINISHED' ? `[${u.callId}]` : '')).join('');

/** What AG-UI events told: each text delta, and each tool result as `[callId]`. */
export const toldByAgui = (events: readonly BaseEvent[]) =>
  events
    .map((e) =>
      e.type === EventType.TEXT_MESSAGE_CONTENT
        ? (e as BaseEvent & { delta: string }).delta
        : e.type === EventType.TOOL_CALL_RESULT
          ? `[${(e as BaseEvent & { toolCallId: string }).toolCallId}]`
          : '',
    )
    .join('');
