// Ids made from a call's id (docs/contract.md#repair): a call id may be as long as an id may be (200
// characters), and every id made from it — repair's results for each cause, a cancel's answer to a call
// awaiting approval — is still one an event holds, so a crash, a fork or a cancel there can be closed.
import { describe, expect, it } from 'vitest';
import { boundedId, MAX_ID_CHARS } from '../../src/core/derived-ids.ts';
import { decodeEvent, type LogEvent } from '../../src/core/events.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { closeOpenTail, type RepairCause } from '../../src/core/repair.ts';
import { cancelWaitingTurn } from '../../src/core/tool-approval.ts';

const longId = 'c'.repeat(MAX_ID_CHARS);
const log: LogEvent[] = [
  { seq: 0, type: 'inbox/add', data: { inputId: 'in', text: 'hi' } },
  { seq: 1, type: 'inbox/remove', data: { inputId: 'in', reason: 'taken' } },
  { seq: 2, type: 'turn/start', data: { turn: 1, inputId: 'in' } },
  { seq: 3, type: 'step/start', data: { turn: 1, step: 1 } },
  { seq: 4, type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: longId, name: 'clock', arguments: '{}' }] } },
];

/** Each closer decoded by the codec and checked by the rules, in order. */
function accepted(prefix: LogEvent[], closers: Array<{ type: string; data: unknown; synthetic?: boolean }>) {
  const state = foldLog(prefix);
  for (const c of closers) {
    const e = { ...c, data: decodeEvent(c.type, c.data), seq: state.nextSeq };
    expect(state.violation(e)).toBeUndefined();
    state.apply(e);
  }
}

describe('ids made from a call id of 200 characters', () => {
  it.each<RepairCause>([
    { kind: 'interrupted', sessionId: 'ses_0123456789abcdef0123456789abcdef' },
    { kind: 'failed', sessionId: 'ses_0123456789abcdef0123456789abcdef', message: 'bug' },
    { kind: 'forked', parentSessionId: 'ses_0123456789abcdef0123456789abcdef', cutSeq: 4 },
  ])('repair ($kind) writes closers an event holds', (cause) => {
    accepted(
      log,
      closeOpenTail(log, cause, () => 'read-only'),
    );
  });

  it("a cancel's answer to a call awaiting approval is one an event holds", () => {
    const waiting = [...log, { seq: 5, type: 'tool/approval-request', data: { turn: 1, step: 1, callId: longId } }];
    accepted(waiting, cancelWaitingTurn(foldLog(waiting).openTail()!, 'tok_1'));
  });

  it('keeps an id that fits, and cuts one that does not to the same id each time, apart from others cut alike', () => {
    expect(boundedId('interrupted:s:c1')).toBe('interrupted:s:c1');
    const a = boundedId(`res_ses_1_${longId}`);
    expect(a).toHaveLength(MAX_ID_CHARS);
    expect(boundedId(`res_ses_1_${longId}`)).toBe(a);
    expect(boundedId(`res_ses_2_${longId}`)).not.toBe(a);
    // A cut never splits a surrogate pair (the log holds no lone one).
    expect(boundedId('\ud83d\ude00'.repeat(150)).isWellFormed()).toBe(true);
  });
});
