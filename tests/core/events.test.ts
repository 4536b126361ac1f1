import { describe, expect, it } from 'vitest';
import { CORE_EVENT_TYPES, decodeEvent } from '../../src/core/events.ts';
import { ForklineError } from '../../src/core/errors.ts';

// A valid payload and a wrong one (with the field its error must name) per core type.
const cases: Record<string, { valid: unknown; wrong: unknown; field: string }> = {
  'session/title': { valid: { title: 'x' }, wrong: { title: 3 }, field: 'data.title' },
  'session/model': { valid: { provider: 'scripted', model: 'echo', settings: { t: 1 } }, wrong: { provider: 'scripted' }, field: 'data.model' },
  'session/tools': { valid: { tools: ['clock', 'fs__*'] }, wrong: { tools: 'clock' }, field: 'data.tools' },
  'session/instructions': { valid: { text: 'Answer in French.' }, wrong: { text: 7 }, field: 'data.text' },
  'session/runner-tools': {
    valid: {
      tools: [
        { name: 'send_email', description: 'Sends', inputSchema: { type: 'object' }, effect: 'side-effects' },
        { name: 'lookup', effect: 'read-only' },
      ],
    },
    wrong: { tools: [{ name: 'send_email', effect: 'dangerous' }] },
    field: 'data.tools.0.effect',
  },
  'inbox/add': { valid: { inputId: 'in_1', text: 'hi' }, wrong: { inputId: 'in_1', text: null }, field: 'data.text' },
  'inbox/remove': { valid: { inputId: 'in_1', reason: 'taken' }, wrong: { inputId: 'in_1', reason: 'lost' }, field: 'data.reason' },
  'turn/start': { valid: { turn: 1, inputId: 'in_1' }, wrong: { turn: 0, inputId: 'in_1' }, field: 'data.turn' },
  'step/start': { valid: { turn: 1, step: 1 }, wrong: { turn: 1, step: 1.5 }, field: 'data.step' },
  'model/message': {
    valid: { turn: 1, step: 1, text: 'ok', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}' }] },
    wrong: { turn: 1, step: 1, text: 'ok', toolCalls: [{ id: 'c1', arguments: '{}' }] },
    field: 'data.toolCalls.0.name',
  },
  'tool/result': {
    valid: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: '12:00' },
    wrong: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'done', content: '' },
    field: 'data.status',
  },
  'step/end': { valid: { turn: 1, step: 1, reason: 'completed' }, wrong: { turn: 1, step: 1, reason: 'stopped' }, field: 'data.reason' },
  'turn/end': { valid: { turn: 1, reason: 'cancelled' }, wrong: { turn: '1', reason: 'completed' }, field: 'data.turn' },
  'surface/replace': { valid: { fromSeq: 0, toSeq: 4, content: 'summary' }, wrong: { fromSeq: -1, toSeq: 4, content: 's' }, field: 'data.fromSeq' },
  'tool/approval-request': { valid: { turn: 1, step: 1, callId: 'c1' }, wrong: { turn: 1, step: 1 }, field: 'data.callId' },
  'tool/approval': {
    valid: { callId: 'c1', decision: 'denied', reason: 'not today', by: 'local' },
    wrong: { callId: 'c1', decision: 'later', reason: '', by: 'local' },
    field: 'data.decision',
  },
  'session/tool-approval': { valid: { tools: ['mail__*'] }, wrong: { tools: [''] }, field: 'data.tools.0' },
  'session/end-seed': {
    valid: { parentSessionId: 'ses_1', cutSeq: 3, inheritedEventCount: 4 },
    wrong: { parentSessionId: 'ses_1', cutSeq: 3 },
    field: 'data.inheritedEventCount',
  },
};

describe('event codec (V4)', () => {
  it('covers every core event type of docs/contract.md#log', () => {
    expect(Object.keys(cases).sort()).toEqual([...CORE_EVENT_TYPES].sort());
  });

  for (const [type, { valid, wrong, field }] of Object.entries(cases)) {
    it(`${type}: accepts a valid payload, rejects a wrong one naming ${field}`, () => {
      expect(decodeEvent(type, valid)).toEqual(valid);
      let err: unknown;
      try {
        decodeEvent(type, wrong);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ForklineError);
      expect((err as ForklineError).code).toBe('BAD_USER_INPUT');
      expect((err as Error).message).toContain(field);
    });
  }

  it('rejects unknown fields instead of silently dropping them', () => {
    expect(() => decodeEvent('session/title', { title: 'x', colour: 'red' })).toThrow(/colour/);
  });

  it('accepts plugin events with free-form data and rejects malformed plugin types', () => {
    expect(decodeEvent('plugin/compaction/start', { reason: 'size', n: [1, 2] })).toEqual({ reason: 'size', n: [1, 2] });
    expect(() => decodeEvent('plugin/compaction/start', 'text')).toThrow(/plugin\/compaction\/start/);
    expect(() => decodeEvent('plugin//start', {})).toThrow(/unknown event type/);
    expect(() => decodeEvent('turn/pause', { turn: 1 })).toThrow(/unknown event type "turn\/pause"/);
  });

  it('V3 rejects the fork variants that V4 admits', () => {
    const notStarted = { turn: 1, step: 1, callId: 'c1', resultId: 'r', status: 'not-started', content: 'missing' };
    expect(decodeEvent('tool/result', notStarted, 4)).toEqual(notStarted);
    expect(() => decodeEvent('tool/result', notStarted, 3)).toThrow(/data.status/);
    expect(() => decodeEvent('turn/end', { turn: 1, reason: 'forked' }, 3)).toThrow(/data.reason/);
    expect(() => decodeEvent('step/end', { turn: 1, step: 1, reason: 'forked' }, 3)).toThrow(/data.reason/);
    expect(() => decodeEvent('session/end-seed', { parentSessionId: 's', cutSeq: 0, inheritedEventCount: 1 }, 3)).toThrow(/unknown event type/);
  });
});
