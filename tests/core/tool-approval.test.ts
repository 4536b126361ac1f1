// Tool approval in the pure core (docs/contract.md#tool-approval): the reducer's pairing
// rule and waiting state, the shared repair's wording for a call that never ran,
// crash recovery keeping a pending approval, and what a cancel of a waiting turn writes.
import { describe, expect, it } from 'vitest';
import { foldLog, type LogState } from '../../src/core/log-state.ts';
import { closeOpenTail } from '../../src/core/repair.ts';
import { cancelWaitingTurn, deniedContent, needsApproval } from '../../src/core/tool-approval.ts';
import { decodeEvent, type LogEvent, type NewEvent } from '../../src/core/events.ts';
import { checkedAppend } from '../../src/store/append.ts';

const call = (id: string, name = 'send_email') => ({ id, name, arguments: '{"to":"a@b"}', effect: 'side-effects' as const });
const head = (calls = [call('c1')]): LogEvent[] => [
  { seq: 0, type: 'inbox/add', data: { inputId: 'in_1', text: 'mail them' } },
  { seq: 1, type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
  { seq: 2, type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
  { seq: 3, type: 'step/start', data: { turn: 1, step: 1 } },
  { seq: 4, type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls } },
];
const request = (seq: number, callId = 'c1'): LogEvent => ({ seq, type: 'tool/approval-request', data: { turn: 1, step: 1, callId } });
const decision = (seq: number, d: 'approved' | 'denied', callId = 'c1'): LogEvent => ({
  seq,
  type: 'tool/approval',
  data: { callId, decision: d, reason: d === 'denied' ? 'not to customers' : '', by: 'local' },
});
const content = (e: NewEvent) => (e.data as { content: string }).content;
const broken = (state: LogState, e: Omit<LogEvent, 'seq'> & { synthetic?: boolean }) => state.violation({ ...e, seq: state.nextSeq })?.rule;

describe('tool approval events', () => {
  it('validates both events and the session setting', () => {
    expect(decodeEvent('tool/approval-request', { turn: 1, step: 1, callId: 'c1' })).toEqual({ turn: 1, step: 1, callId: 'c1' });
    expect(() => decodeEvent('tool/approval', { callId: 'c1', decision: 'maybe', reason: '', by: 'x' })).toThrow(/decision/);
    expect(() => decodeEvent('tool/approval', { callId: 'c1', decision: 'approved', reason: '' })).toThrow(/by/);
    expect(decodeEvent('session/tool-approval', { tools: ['mail__*'] })).toEqual({ tools: ['mail__*'] });
  });

  it('a request makes the turn wait; a decision lets it go on', () => {
    const asked = foldLog([...head(), request(5)]);
    expect(asked.waiting).toBe(true);
    expect(asked.openTail()?.step?.approvals?.get('c1')).toEqual({ state: 'pending', seq: 5 });
    const decided = foldLog([...head(), request(5), decision(6, 'approved')]);
    expect(decided.waiting).toBe(false);
    expect(decided.openTail()?.step?.approvals?.get('c1')).toMatchObject({ state: 'approved', seq: 6, requestSeq: 5, by: 'local' });
    // A turn nobody asked about keeps no approvals at all.
    expect(foldLog(head()).openTail()?.step?.approvals).toBeUndefined();
  });

  it('pairs requests and decisions (approval pairing)', () => {
    const plain = foldLog(head());
    expect(broken(plain, { type: 'tool/approval', data: decision(0, 'approved').data })).toBe('approval pairing'); // nothing asked
    expect(broken(plain, { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'nope' } })).toBe('approval pairing');
    const asked = foldLog([...head(), request(5)]);
    expect(broken(asked, { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } })).toBe('approval pairing'); // twice
    const result = { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r', status: 'ok', content: 'sent' } };
    expect(broken(asked, result)).toBe('approval pairing'); // it cannot have run
    expect(broken(asked, { type: 'tool/approval', data: decision(0, 'denied').data })).toBeUndefined();
    const decided = foldLog([...head(), request(5), decision(6, 'denied')]);
    expect(broken(decided, { type: 'tool/approval', data: decision(0, 'approved').data })).toBe('approval pairing'); // decided twice
    expect(broken(decided, result)).toBeUndefined();
  });

  it('a fork cut at a pending approval says the call never ran', () => {
    const [result, stepEnd, turnEnd] = closeOpenTail([...head(), request(5)], { kind: 'forked', parentSessionId: 'p', cutSeq: 5 }, () => undefined);
    expect(result).toMatchObject({ type: 'tool/result', synthetic: true, data: { callId: 'c1', status: 'not-started' } });
    expect(content(result)).toMatch(/never ran: it was awaiting approval when this branch was forked at event 5 of session p/);
    expect(content(result)).not.toMatch(/may have executed|check its effect/);
    expect(stepEnd.data).toMatchObject({ reason: 'forked' });
    expect(turnEnd.data).toMatchObject({ reason: 'forked' });
  });

  it('a denied call with no result yet never ran; an approved one follows the unknown-effect rule', () => {
    const denied = closeOpenTail([...head(), request(5), decision(6, 'denied')], { kind: 'forked', parentSessionId: 'p', cutSeq: 6 }, () => undefined);
    expect(content(denied[0])).toMatch(/never ran: it was denied \(not to customers\)/);
    const approved = closeOpenTail([...head(), request(5), decision(6, 'approved')], { kind: 'forked', parentSessionId: 'p', cutSeq: 6 }, () => undefined);
    expect(content(approved[0])).toMatch(/parent session may have executed the call after the cut/);
    expect(content(approved[0])).toMatch(/check its effect before repeating it/);
    const crashed = closeOpenTail([...head(), request(5), decision(6, 'approved')], { kind: 'interrupted', sessionId: 's' }, () => undefined);
    expect(crashed.map((e) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
    expect(content(crashed[0])).toMatch(/was interrupted/);
  });

  it('crash recovery keeps a pending approval pending, closing only calls cut off while they ran', () => {
    expect(closeOpenTail([...head(), request(5)], { kind: 'interrupted', sessionId: 's' }, () => undefined)).toEqual([]);
    const log = [...head([call('c0', 'lookup'), call('c1')]), request(5, 'c1')];
    const closers = closeOpenTail(log, { kind: 'interrupted', sessionId: 's' }, () => undefined);
    expect(closers).toHaveLength(1);
    expect(closers[0]).toMatchObject({ type: 'tool/result', data: { callId: 'c0', status: 'interrupted' } });
    const after = foldLog([...log, { seq: 6, ...closers[0] }]);
    expect(after.waiting).toBe(true);
    expect(after.openTurn).toBe(1);
  });

  it("a cancel of a waiting turn denies the call, answers it as not run and ends the turn cancelled, within the log's rules", () => {
    const state = foldLog([...head(), request(5)]);
    const events = cancelWaitingTurn(state.openTail()!, 'local');
    expect(events.map((e) => e.type)).toEqual(['tool/approval', 'tool/result', 'step/end', 'turn/end']);
    expect(content(events[1])).toBe(deniedContent(call('c1'), 'the turn was cancelled while the call awaited approval'));
    const { after } = checkedAppend('s', state, events);
    expect(after.openTurn).toBeUndefined();
    expect(after.waiting).toBe(false);
  });

  it('needs approval by configuration or by the session set, and costs one check otherwise', () => {
    expect(needsApproval('shell', undefined, undefined)).toBe(false);
    expect(needsApproval('shell', true, undefined)).toBe(true);
    expect(needsApproval('mail__send', undefined, ['mail__*'])).toBe(true);
    expect(needsApproval('calc', undefined, ['mail__*'])).toBe(false);
  });
});
