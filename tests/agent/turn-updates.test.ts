// The turn updates stored events stand for (agent/turn-updates.ts), pure: the
// approval updates name their call's turn, step, tool and arguments, from the
// events themselves or from the open tail a reader starting mid-turn is seeded with.
import { describe, expect, it } from 'vitest';
import type { LogEvent } from '../../src/core/events.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { OpenStepCalls, turnUpdatesOf, turnUpdatesRead } from '../../src/agent/turn-updates.ts';

const S = 'ses_t';
const CALL = { id: 'call_1', name: 'write_file', arguments: '{"path":"a.txt","text":"hi"}' };
const log = [
  { type: 'inbox/add', data: { inputId: 'in_1', text: 'write it' } },
  { type: 'inbox/remove', data: { inputId: 'in_1' } },
  { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
  { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [CALL] } },
  { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: CALL.id } },
  { type: 'tool/approval', data: { callId: CALL.id, decision: 'denied', reason: 'not that file', by: 'token:tok_1' } },
  { type: 'tool/result', data: { turn: 1, step: 1, callId: CALL.id, resultId: 'r1', status: 'error', content: 'denied', name: CALL.name } },
  { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
  { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
].map((e, seq) => ({ ...e, seq, sessionId: S, createdAt: new Date(0) })) as unknown as LogEvent[];

const REQUESTED = { sessionId: S, kind: 'APPROVAL_REQUESTED', seq: 5, turn: 1, step: 1, callId: CALL.id, toolName: CALL.name, arguments: CALL.arguments };
const DECIDED = { ...REQUESTED, kind: 'APPROVAL_DECIDED', seq: 6, decision: 'denied', reason: 'not that file', by: 'token:tok_1' };

describe('turnUpdatesOf', () => {
  it('announces a waiting call and its decision, in log order, with the call they name', () => {
    const updates = turnUpdatesOf(S, log);
    expect(updates.map((u) => u.kind)).toEqual([
      'TURN_STARTED',
      'STEP_STARTED',
      'APPROVAL_REQUESTED',
      'APPROVAL_DECIDED',
      'TOOL_FINISHED',
      'STEP_ENDED',
      'TURN_ENDED',
    ]);
    expect(updates[2]).toEqual(REQUESTED);
    expect(updates[3]).toEqual(DECIDED);
  });

  it('one event at a time (a live reader) keeps the calls between events', () => {
    const calls = new OpenStepCalls();
    const updates = log.flatMap((e) => turnUpdatesOf(S, [e], calls));
    expect(updates.filter((u) => u.kind.startsWith('APPROVAL_'))).toEqual([REQUESTED, DECIDED]);
  });

  it('a reader starting after the call was stored is seeded from the open tail before its first event', async () => {
    const reads: number[] = [];
    const readOpenTail = async (_id: string, throughSeq: number) => (reads.push(throughSeq), foldLog(log.slice(0, throughSeq + 1)).openTail());
    const calls = new OpenStepCalls();
    const got = [];
    for (const e of log.slice(6)) got.push(...(await turnUpdatesRead(S, [e], calls, readOpenTail)));
    expect(got[0]).toEqual(DECIDED);
    expect(reads).toEqual([5]); // read once, for the event whose call it did not know
    // Without the seed a decision cannot be placed: no update rather than a wrong one.
    expect(turnUpdatesOf(S, [log[6]])).toEqual([]);
    expect(turnUpdatesOf(S, [log[5]])).toEqual([{ sessionId: S, kind: 'APPROVAL_REQUESTED', seq: 5, turn: 1, step: 1, callId: CALL.id }]);
  });
});
