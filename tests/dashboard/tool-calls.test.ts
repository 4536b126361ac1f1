// The conversation fold's view of a tool call: its MCP server (the `<server>__`
// of its name), the effect recorded with it, and how long it ran as the log's
// createdAt say (a step's calls run one after another).
import { describe, expect, it } from 'vitest';
import { eventSummary, foldConversation, serverOf, type LogEvent } from '../../client/dashboard/src/conversation.ts';
import { dashboardEvent as ev } from '../helpers/dashboard-events.ts';

const calls = [
  { id: 'c1', name: 'fs__edit_file', arguments: '{}', effect: 'side-effects' },
  { id: 'c2', name: 'clock', arguments: '{}', effect: 'read-only' },
  { id: 'c3', name: 'memory__read_graph', arguments: '{}' }, // a V3 log: no effect recorded
];
const head = [
  ev(0, 'inbox/add', { inputId: 'in_1', text: 'go' }, { ms: 0 }),
  ev(1, 'inbox/remove', { inputId: 'in_1', reason: 'taken' }, { ms: 0 }),
  ev(2, 'turn/start', { turn: 1, inputId: 'in_1' }, { ms: 0 }),
  ev(3, 'step/start', { turn: 1, step: 1 }, { ms: 0 }),
  ev(4, 'model/message', { turn: 1, step: 1, text: '', toolCalls: calls }, { ms: 1_000 }),
];
const result = (seq: number, callId: string, ms: number, synthetic = false) =>
  ev(seq, 'tool/result', { turn: 1, step: 1, callId, resultId: `r_${callId}`, status: synthetic ? 'interrupted' : 'ok', content: 'x' }, { ms, synthetic });

const toolCallsOf = (events: LogEvent[]) => {
  const item = foldConversation(events).find((i) => i.kind === 'assistant');
  return item?.kind === 'assistant' ? item.toolCalls : [];
};

describe('tool calls in the conversation', () => {
  it("shows each call's server and recorded effect, and its duration from its start to its result", () => {
    const shown = toolCallsOf([...head, result(5, 'c1', 3_500), result(6, 'c2', 3_520), result(7, 'c3', 4_000)]);
    expect(shown.map((c) => [c.server, c.effect, c.result?.durationMs])).toEqual([
      ['fs', 'side-effects', 2_500], // from the message
      [undefined, 'read-only', 20], // from c1's result: it ran after c1
      ['memory', undefined, 480],
    ]);
  });

  it('gives a synthetic result (written by repair) no duration', () => {
    const shown = toolCallsOf([...head, result(5, 'c1', 3_500), result(6, 'c2', 9_000, true), result(7, 'c3', 9_000, true)]);
    expect(shown.map((c) => c.result?.durationMs)).toEqual([2_500, undefined, undefined]);
  });

  it('reads the server from <server>__<tool> only', () => {
    expect([serverOf('fs__edit_file'), serverOf('clock'), serverOf('__x'), serverOf('fs__'), serverOf('a_b__c__d')]).toEqual([
      'fs',
      undefined,
      undefined,
      undefined,
      'a_b',
    ]);
  });

  it('a call that changed files carries its change set (written and deleted paths), folded into the call, not shown as a note', () => {
    const change = ev(
      5,
      'plugin/files/change',
      {
        callId: 'c1',
        changes: [
          { path: 'a.txt', hash: 'h1', size: 3 },
          { path: 'old.txt', hash: null, size: 0 },
        ],
      },
      { ms: 3_000 },
    );
    const items = foldConversation([...head, change, result(6, 'c1', 3_500)]);
    expect(items.some((i) => i.kind === 'note')).toBe(false);
    const call = toolCallsOf([...head, change, result(6, 'c1', 3_500)])[0];
    expect(call.files).toEqual({
      seq: 5,
      changes: [
        { path: 'a.txt', deleted: false },
        { path: 'old.txt', deleted: true },
      ],
    });
    expect(call.result?.seq).toBe(6);
    expect(eventSummary(change)).toBe('c1 files · wrote a.txt · deleted old.txt');
  });
});
