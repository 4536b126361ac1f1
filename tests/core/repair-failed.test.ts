// Repair with cause `failed` (docs/contract.md#repair): an agent that failed unexpectedly gets the same closers as a
// crash, ending `failed`, with its error report before the turn's end; the closers are a valid suffix of the log.
import { describe, expect, it } from 'vitest';
import { closeOpenTail } from '../../src/core/repair.ts';
import { foldLog } from '../../src/core/log-state.ts';
import type { LogEvent } from '../../src/core/events.ts';

const cause = { kind: 'failed', sessionId: 's1', message: 'the agent failed: boom' } as const;
const start: LogEvent[] = [
  { seq: 0, type: 'inbox/add', data: { inputId: 'in', text: 'hi' } },
  { seq: 1, type: 'inbox/remove', data: { inputId: 'in', reason: 'taken' } },
  { seq: 2, type: 'turn/start', data: { turn: 1, inputId: 'in' } },
] as LogEvent[];

function valid(log: LogEvent[], closers: ReturnType<typeof closeOpenTail>) {
  const state = foldLog(log);
  // Each closer against the log as the ones before it left it: they are appended in order.
  closers.forEach((c, i) => {
    const e = { ...c, seq: log.length + i } as LogEvent;
    expect(state.violation(e)).toBeUndefined();
    state.apply(e);
  });
}

describe('repair with cause failed', () => {
  it('answers the open call interrupted, ends its step and the turn failed, with the error report before the end', () => {
    const log = [
      ...start,
      { seq: 3, type: 'step/start', data: { turn: 1, step: 1 } },
      { seq: 4, type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'mcp__deep', arguments: '{}' }] } },
    ] as LogEvent[];
    const closers = closeOpenTail(log, cause, () => 'read-only');
    expect(closers.map((c) => [c.type, c.synthetic])).toEqual([
      ['tool/result', true],
      ['step/end', true],
      ['plugin/agent/error', true],
      ['turn/end', true],
    ]);
    expect(closers[0].data).toMatchObject({ status: 'interrupted', resultId: 'failed:s1:c1' });
    expect(closers[0].data).toHaveProperty('content', expect.stringMatching(/the agent failed while the call was in flight.*safe to call it again/));
    expect(closers[1].data).toEqual({ turn: 1, step: 1, reason: 'failed' });
    expect(closers[2].data).toEqual({ turn: 1, step: 1, message: cause.message });
    expect(closers[3].data).toEqual({ turn: 1, reason: 'failed' });
    valid(log, closers);
  });

  it('closes a turn with no open step with the report and the end only; nothing open gives nothing', () => {
    const closers = closeOpenTail(start, cause, () => undefined);
    expect(closers.map((c) => c.type)).toEqual(['plugin/agent/error', 'turn/end']);
    valid(start, closers);
    expect(closeOpenTail([...start, { seq: 3, type: 'turn/end', data: { turn: 1, reason: 'completed' } }] as LogEvent[], cause, () => undefined)).toEqual([]);
  });
});
