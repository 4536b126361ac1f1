// A tool-call id is unique only within a step (docs/contract.md#append-rules),
// and a step may end leaving a call without a result. The model request built
// from history must pair each call with its own step's result: a result of an
// earlier step with the same id does not answer a later call, or the request
// holds a call with no answer after it, which Chat Completions refuses, and the
// session (and every fork of it) stays broken.
import { describe, expect, it } from 'vitest';
import { Conversation, buildModelMessages } from '../../src/core/model-request.ts';
import { closeOpenTail } from '../../src/core/repair.ts';
import { LogState } from '../../src/core/log-state.ts';
import type { LogEvent, NewEvent } from '../../src/core/events.ts';
import { withSeqs } from '../spec/reference-log.ts';
import { chatMessagesRefusal } from '../helpers/chat-completions.ts';

const call = (id: string) => ({ id, name: 'clock', arguments: '{}' });
const result = (turn: number, step: number, callId: string): NewEvent => ({
  type: 'tool/result',
  data: { turn, step, callId, resultId: `r_${turn}_${step}_${callId}`, status: 'ok', content: `${callId} of step ${step}` },
});
/** A step whose model message makes `calls`; `answered` get a result; it ends `reason`. */
const step = (turn: number, n: number, calls: string[], answered: string[], reason = 'completed'): NewEvent[] => [
  { type: 'step/start', data: { turn, step: n } },
  { type: 'model/message', data: { turn, step: n, text: `step ${n}`, toolCalls: calls.map(call) } },
  ...answered.map((id) => result(turn, n, id)),
  { type: 'step/end', data: { turn, step: n, reason } },
];
const turn = (n: number, steps: NewEvent[][]): NewEvent[] => [
  { type: 'inbox/add', data: { inputId: `in_${n}`, text: `question ${n}` } },
  { type: 'inbox/remove', data: { inputId: `in_${n}`, reason: 'taken' } },
  { type: 'turn/start', data: { turn: n, inputId: `in_${n}` } },
  ...steps.flat(),
  { type: 'turn/end', data: { turn: n, reason: 'completed' } },
];

/** The log's events, checked by the append rules as every append is (the reuse is legal). */
function checkedLog(events: NewEvent[]): LogEvent[] {
  const log = withSeqs(events);
  const state = new LogState();
  for (const e of log) {
    expect(state.violation(e)).toBeUndefined();
    state.apply(e);
  }
  return log;
}

/** Restores a conversation from its snapshot (as a fold checkpoint does). */
function throughCheckpoint(conversation: Conversation): Conversation {
  const snap = JSON.parse(JSON.stringify(conversation.snapshot())) as ReturnType<Conversation['snapshot']>;
  return Conversation.restore(snap.head, snap.messages, () => snap.history, JSON.stringify(snap.messages).length);
}

/** The request one event at a time, from a checkpoint at every cut, and a full replay agree. */
function expectSameEverywhere(log: LogEvent[]) {
  const full = buildModelMessages(log);
  const incremental = new Conversation();
  for (const e of log) incremental.apply(e);
  expect(incremental.messages()).toEqual(full);
  for (let cut = 0; cut <= log.length; cut++)
    expect(
      throughCheckpoint(new Conversation().applyAll(log.slice(0, cut)))
        .applyAll(log.slice(cut))
        .messages(),
    ).toEqual(full);
}

describe('a call id reused across steps', () => {
  it("a later step's unanswered call is not answered by an earlier step's result", () => {
    // Step 1 calls c1 and gets its result; step 2 calls c1 again and ends without one.
    const log = checkedLog(turn(1, [step(1, 1, ['c1'], ['c1']), step(1, 2, ['c1'], [], 'failed')]));
    const messages = buildModelMessages(log);
    expect(messages).toEqual([
      { role: 'user', content: 'question 1' },
      { role: 'assistant', content: 'step 1', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'clock', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: 'c1 of step 1' },
      { role: 'assistant', content: 'step 2' },
    ]);
    expect(chatMessagesRefusal(messages)).toBeUndefined();
    expectSameEverywhere(log);
  });

  it('the same id in three steps, answered, unanswered and answered again, with other calls beside it', () => {
    const log = checkedLog([
      ...turn(1, [step(1, 1, ['c1'], [], 'failed')]), // unanswered
      ...turn(2, [step(2, 1, ['c1', 'c2'], ['c2', 'c1']), step(2, 2, ['c1', 'c2'], ['c2'], 'failed')]), // answered; then only c2
      ...turn(3, [step(3, 1, ['c1'], ['c1'])]), // answered again
    ]);
    const messages = buildModelMessages(log);
    const calls = messages.filter((m) => m.role === 'assistant').map((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : []));
    // Each call shown once under its id: a reused one after the first goes by an id derived from its step (Anthropic refuses repeats).
    expect(calls).toEqual([[], ['c1', 'c2'], ['c2_t2s2'], ['c1_t3s1']]);
    expect(messages.filter((m) => m.role === 'tool').map((m) => (m.role === 'tool' ? m.tool_call_id : ''))).toEqual(['c2', 'c1', 'c2_t2s2', 'c1_t3s1']);
    expect(messages.filter((m) => m.role === 'tool').map((m) => m.content)).toEqual(['c2 of step 1', 'c1 of step 1', 'c2 of step 2', 'c1 of step 1']);
    expect(chatMessagesRefusal(messages)).toBeUndefined();
    expectSameEverywhere(log);
  });

  it("repair and the request agree: the open step's reused call is answered by repair's result only", () => {
    // Step 2 calls c1 again and is cut open (a crash, a fork): before repair the request leaves its call out.
    const open = withSeqs(turn(1, [step(1, 1, ['c1'], ['c1']), step(1, 2, ['c1'], [])]).slice(0, -2));
    const before = new Conversation().applyAll(open);
    expect(before.messages().at(-1)).toEqual({ role: 'assistant', content: 'step 2' });
    const closers = closeOpenTail(open, { kind: 'forked', parentSessionId: 'ses_parent', cutSeq: open.length - 1 }, () => 'read-only');
    expect(closers.map((c) => c.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
    const repaired = withSeqs([...open, ...closers]);
    const messages = before.applyAll(repaired.slice(open.length)).messages();
    expect(messages.slice(-2)).toMatchObject([
      { role: 'assistant', content: 'step 2', tool_calls: [{ id: 'c1_t1s2' }] },
      { role: 'tool', tool_call_id: 'c1_t1s2', content: expect.stringContaining('No result for tool call "clock" (c1) is recorded in this branch') },
    ]);
    expect(chatMessagesRefusal(messages)).toBeUndefined();
    expectSameEverywhere(repaired);
  });

  it('two answered calls with one id are sent under distinct ids, a crafted id never collides, and each result follows its call', () => {
    // c1 in steps 1, 2 and 3; step 3 also makes a call whose own id is the one step 2's c1 would be given.
    const log = checkedLog(
      turn(1, [step(1, 1, ['c1'], ['c1']), step(1, 2, ['c1'], ['c1']), step(1, 3, ['c1', 'c1_t1s2', 'c1_t1s3'], ['c1_t1s3', 'c1', 'c1_t1s2'])]),
    );
    const messages = buildModelMessages(log);
    const sent = messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : []));
    expect(sent).toEqual(['c1', 'c1_t1s2', 'c1_t1s3', 'c1_t1s2_t1s3', 'c1_t1s3_t1s3']);
    expect(new Set(sent).size).toBe(sent.length);
    // Each result under its own call's sent id, with that call's content.
    const results = messages.flatMap((m) => (m.role === 'tool' ? [[m.tool_call_id, m.content]] : []));
    expect(results).toEqual([
      ['c1', 'c1 of step 1'],
      ['c1_t1s2', 'c1 of step 2'],
      ['c1_t1s3_t1s3', 'c1_t1s3 of step 3'],
      ['c1_t1s3', 'c1 of step 3'],
      ['c1_t1s2_t1s3', 'c1_t1s2 of step 3'],
    ]);
    expect(chatMessagesRefusal(messages)).toBeUndefined();
    // The same ids built again, continued one event at a time and from a checkpoint at every cut (prompt caching holds).
    expectSameEverywhere(log);
    // The log is not rewritten: its events keep their ids.
    expect(log.filter((e) => e.type === 'tool/result').map((e) => (e.data as { callId: string }).callId)).toEqual(['c1', 'c1', 'c1_t1s3', 'c1', 'c1_t1s2']);
  });
});
