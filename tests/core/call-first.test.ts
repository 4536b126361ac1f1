// The rule `call first` (core/call-first.ts, docs/runners.md "Why the call goes
// first"): a runner's batch may not hold a call's tool/result together with the
// model/message making the call, whatever the result's status.
import { describe, expect, it } from 'vitest';
import { checkCallFirst } from '../../src/core/call-first.ts';
import { ForklineError } from '../../src/core/errors.ts';
import type { NewEvent } from '../../src/core/events.ts';

const call = (...ids: string[]): NewEvent => ({
  type: 'model/message',
  data: { turn: 1, step: 1, text: '', toolCalls: ids.map((id) => ({ id, name: 'clock', arguments: '{}' })) },
});
const result = (callId: string, status = 'ok'): NewEvent => ({
  type: 'tool/result',
  data: { turn: 1, step: 1, callId, resultId: `r-${callId}`, status, content: 'x' },
});
const stepEnd: NewEvent = { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } };

function refusal(events: NewEvent[], firstSeq: number): { code: string; details?: Record<string, unknown>; message: string } | undefined {
  try {
    checkCallFirst(events, firstSeq);
    return undefined;
  } catch (err) {
    if (!(err instanceof ForklineError)) throw err;
    return { code: err.code, details: err.details, message: err.message };
  }
}

describe('checkCallFirst', () => {
  for (const status of ['ok', 'error', 'denied', 'interrupted']) {
    it(`refuses a ${status} result in the batch of its call, naming its seq`, () => {
      const r = refusal([{ type: 'step/start', data: { turn: 1, step: 1 } }, call('c1', 'c2'), result('c2', status)], 40);
      expect(r).toMatchObject({ code: 'BAD_USER_INPUT', details: { rule: 'call first', seq: 42 } });
      expect(r?.message).toContain('event 42 (tool/result): the result of call c2 comes in the batch that makes the call');
    });
  }

  it('names the first such result, past other events and other calls', () => {
    expect(refusal([call('a'), call('b'), result('x'), result('b'), result('a')], 0)?.details).toEqual({ rule: 'call first', seq: 3 });
  });

  it('passes a call alone, results of calls stored before the batch, and a result before a call of the same id', () => {
    expect(refusal([call('c1')], 5)).toBeUndefined();
    expect(refusal([result('c1'), stepEnd], 6)).toBeUndefined();
    expect(refusal([call('c2'), result('c1')], 6)).toBeUndefined();
    expect(refusal([result('c1'), call('c1')], 6)).toBeUndefined();
    expect(refusal([], 0)).toBeUndefined();
  });

  it('reads what is there in a batch no codec checked yet: no calls array, calls that are not objects, a callId that is no string', () => {
    expect(refusal([{ type: 'model/message', data: null }, result('c1')], 0)).toBeUndefined();
    expect(refusal([{ type: 'model/message', data: { toolCalls: [null, 7, 'c1'] } }, result('c1')], 0)).toBeUndefined();
    expect(
      refusal(
        [
          { type: 'model/message', data: { toolCalls: [{ id: 3 }] } },
          { type: 'tool/result', data: { callId: 3 } },
        ],
        0,
      ),
    ).toBeUndefined();
  });
});
