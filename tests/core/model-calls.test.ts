import { describe, expect, it } from 'vitest';
import { admitCalls, notOfferedContent } from '../../src/core/model-calls.ts';

const call = (id: string, name = 'clock') => ({ id, name, arguments: '{}' });
/** The tools the request offered. */
const OFFERED = new Set(['clock', 'note_read']);
const none = new Set<string>();

describe('admitCalls', () => {
  it('keeps a step of well-formed calls as they are, refusing none', () => {
    const calls = [call('a'), call('b', 'note_read')];
    expect(admitCalls(calls, none, OFFERED)).toEqual({ calls, refused: new Map() });
  });

  it('gives a repeated or unstorable id one no call of the step has, and refuses that call; the first of a repeated id runs', () => {
    const { calls, refused } = admitCalls([call('call_2'), call('call_2'), call(''), call('call_3_')], none, OFFERED);
    expect(calls.map((c) => c.id)).toEqual(['call_2', 'call_2_', 'call_3', 'call_3_']);
    // call_3 was free for the third call; the fourth keeps its own id, since the fresh ones skip it.
    expect([...refused.keys()]).toEqual(['call_2_', 'call_3']);
    expect(refused.get('call_3')).toBe('not run: the model gave it an id of 0 characters (1-200 allowed)');
  });

  it('records an unstorable name cut to what the log holds (or "unnamed"), refused', () => {
    const { calls, refused } = admitCalls([call('a', ''), call('b', 'x'.repeat(201))], none, OFFERED);
    expect(calls.map((c) => c.name)).toEqual(['unnamed', 'x'.repeat(200)]);
    expect([...refused.keys()]).toEqual(['a', 'b']);
  });

  it('refuses an id or a name holding a NUL or an unpaired surrogate, recording it as the log can hold it', () => {
    const { calls, refused } = admitCalls(
      [call('a\u0000b'), call('b', 'clo\u0000ck'), call('c', 'x\ud800'), call('d\udc00'), call('e', 'y'.repeat(199) + '\ud83d\ude00zz')],
      none,
      OFFERED,
    );
    expect(calls.map((c) => [c.id, c.name])).toEqual([
      ['call_1', 'clock'],
      ['b', 'clo\ufffdck'],
      ['c', 'x\ufffd'],
      ['call_4', 'clock'],
      ['e', 'y'.repeat(199) + '\ufffd'],
    ]);
    expect(Object.fromEntries(refused)).toEqual({
      call_1: 'not run: the model gave it an id holding a NUL character or an unpaired surrogate',
      b: 'not run: the model named a tool with a NUL character or an unpaired surrogate',
      c: 'not run: the model named a tool with a NUL character or an unpaired surrogate',
      call_4: 'not run: the model gave it an id holding a NUL character or an unpaired surrogate',
      e: 'not run: the model named a tool of 203 characters (1-200 allowed)',
    });
  });

  it("gives a call reusing an earlier call's id one neither the step nor the conversation has, and runs it", () => {
    const { calls, refused } = admitCalls([call('a'), call('call_1'), call('b')], new Set(['a', 'call_2']), OFFERED);
    expect(calls.map((c) => c.id)).toEqual(['call_1_', 'call_1', 'b']);
    expect(refused.size).toBe(0);
  });

  it('refuses a call of a name no offered tool has, or one the model wrote as no offered form (marked unoffered), as the runner SDKs do', () => {
    const { calls, refused } = admitCalls([call('a', 'Clock'), { ...call('b', 'clock'), unoffered: true }, call('c', 'note_write'), call('d')], none, OFFERED);
    expect(calls).toEqual([call('a', 'Clock'), call('b', 'clock'), call('c', 'note_write'), call('d')]);
    expect(Object.fromEntries(refused)).toEqual({
      a: 'the model was offered no tool named "Clock": the call did not run',
      b: notOfferedContent('clock'),
      c: notOfferedContent('note_write'),
    });
  });
});
