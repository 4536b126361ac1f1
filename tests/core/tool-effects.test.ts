// Effects from MCP annotations (docs/contract.md#agent-loop), and repair's advice read from the
// effect recorded with the call rather than looked up at repair time.
import { describe, expect, it } from 'vitest';
import { effectFromAnnotations } from '../../src/core/tools.ts';
import { closeOpenTail } from '../../src/core/repair.ts';
import { decodeEvent } from '../../src/core/events.ts';

describe('effectFromAnnotations', () => {
  const trusted = { trusted: true };
  it.each([
    [{ readOnlyHint: true }, 'read-only'],
    [{ readOnlyHint: true, idempotentHint: false, destructiveHint: true }, 'read-only'],
    [{ readOnlyHint: false, destructiveHint: true, idempotentHint: true }, 'idempotent'], // server-filesystem's write_file
    [{ readOnlyHint: false, destructiveHint: true, idempotentHint: false }, 'side-effects'], // its edit_file
    [{ destructiveHint: false }, 'side-effects'], // the spec's defaults assume the worst
    [undefined, 'side-effects'],
  ] as const)('trusted %j → %s', (annotations, effect) => {
    expect(effectFromAnnotations(annotations, trusted)).toBe(effect);
  });

  it("never lets an untrusted server's hints weaken an effect, and lets the operator's override win", () => {
    expect(effectFromAnnotations({ readOnlyHint: true }, { trusted: false })).toBe('side-effects');
    expect(effectFromAnnotations({ readOnlyHint: true }, { trusted: false, override: 'read-only' })).toBe('read-only');
    expect(effectFromAnnotations({ readOnlyHint: true }, { trusted: true, override: 'side-effects' })).toBe('side-effects');
  });
});

describe('repair reads the effect recorded with the call', () => {
  const log = [
    { seq: 0, type: 'turn/start', data: { turn: 1, inputId: 'in' } },
    { seq: 1, type: 'step/start', data: { turn: 1, step: 1 } },
    {
      seq: 2,
      type: 'model/message',
      data: {
        turn: 1,
        step: 1,
        text: '',
        toolCalls: [
          { id: 'a', name: 'fs__write_file', arguments: '{}', effect: 'idempotent' },
          { id: 'b', name: 'note_read', arguments: '{}', effect: 'side-effects' },
          { id: 'c', name: 'note_read', arguments: '{}' },
        ],
      },
    },
  ];
  const lookup = (name: string) => (name === 'note_read' ? ('idempotent' as const) : undefined);

  it('the recorded effect wins over what the tool says now; a call without one falls back to the lookup', () => {
    const results = closeOpenTail(log, { kind: 'forked', parentSessionId: 'p', cutSeq: 2 }, lookup).filter((e) => e.type === 'tool/result');
    const content = results.map((r) => (r.data as { content: string }).content);
    expect(content[0]).toContain('"fs__write_file" is idempotent, so it is safe to call it again');
    expect(content[1]).toContain('"note_read" has side effects');
    expect(content[2]).toContain('"note_read" is idempotent');
  });

  it('V4 admits an effect on a call, and only one of the three', () => {
    expect(() => decodeEvent('model/message', log[2].data)).not.toThrow();
    expect(() => decodeEvent('model/message', { ...log[2].data, toolCalls: [{ id: 'x', name: 'n', arguments: '{}', effect: 'harmless' }] })).toThrow(/effect/);
    expect(() => decodeEvent('model/message', log[2].data, 3)).toThrow(); // V3 is frozen
  });
});
