import { describe, expect, it } from 'vitest';
import { runnerToolsDiffer, withDeclaredEffects } from '../../src/core/runner-tools.ts';
import { closeOpenTail } from '../../src/core/repair.ts';
import { ForklineError } from '../../src/core/errors.ts';

const declared = [
  { name: 'send_email', effect: 'side-effects' as const },
  { name: 'lookup', effect: 'read-only' as const, description: 'Looks up' },
];
const message = (calls: Array<Record<string, unknown>>) => ({ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls } });

describe('runner tools', () => {
  it('fills each call of a declared tool with its declared effect, and repair words the call by it', () => {
    const [out] = withDeclaredEffects(
      [
        message([
          { id: 'c1', name: 'send_email', arguments: '{}' },
          { id: 'c2', name: 'other', arguments: '{}' },
        ]),
      ],
      declared,
      5,
    );
    expect((out.data as any).toolCalls).toEqual([
      { id: 'c1', name: 'send_email', arguments: '{}', effect: 'side-effects' },
      { id: 'c2', name: 'other', arguments: '{}' },
    ]);
    const log = [
      { seq: 0, type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      { seq: 1, type: 'step/start', data: { turn: 1, step: 1 } },
      { seq: 2, ...out },
    ];
    const [closer, closer2] = closeOpenTail(log, { kind: 'interrupted', sessionId: 's' }, () => undefined);
    expect((closer.data as any).content).toContain('"send_email" has side effects');
    expect((closer2.data as any).content).toContain('"other" is not a known tool');
  });

  it('refuses a call whose effect is not the declared one, naming the event', () => {
    try {
      withDeclaredEffects([message([{ id: 'c1', name: 'send_email', arguments: '{}', effect: 'read-only' }])], declared, 7);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ForklineError);
      expect((err as ForklineError).details).toMatchObject({ rule: 'call effect', seq: 7 });
    }
  });

  it('a declaration inside the batch applies to the calls after it', () => {
    const out = withDeclaredEffects(
      [
        { type: 'session/runner-tools', data: { tools: [{ name: 'send_email', effect: 'idempotent' }] } },
        message([{ id: 'c1', name: 'send_email', arguments: '{}' }]),
      ],
      declared,
      0,
    );
    expect((out[1].data as any).toolCalls[0].effect).toBe('idempotent');
  });

  it('tells a changed set from the same set in another order', () => {
    expect(runnerToolsDiffer(undefined, [])).toBe(true);
    expect(runnerToolsDiffer(declared, [...declared].reverse())).toBe(false);
    expect(runnerToolsDiffer(declared, [{ ...declared[0], effect: 'idempotent' }, declared[1]])).toBe(true);
  });
});
