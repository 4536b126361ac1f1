// A conversation whose log holds call ids from outside (docs/contract.md#append-rules,
// docs/agents.md "Ids and names on the wire"): spaces, 150 characters, 38
// characters reused in the next step, one crafted to be another's wire form.
// Every call is sent once, under an id every provider takes, and each result
// follows its own call.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Conversation } from '../../src/core/model-request.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { withSeqs } from '../spec/reference-log.ts';

/** Chat Completions takes ids of at most 40 characters, Responses 64, Anthropic only `^[a-zA-Z0-9_-]+$` (tests/helpers/provider-rules.ts). */
const idTaken = (id: string) => id.length <= 40 && /^[a-zA-Z0-9_-]+$/.test(id);

describe('a conversation of hostile ids and names', () => {
  it('sends every call once, under a wire id, each result after its own call', () => {
    const step = (n: number, calls: Array<[string, string]>): NewEvent[] => [
      { type: 'step/start', data: { turn: 1, step: n } },
      { type: 'model/message', data: { turn: 1, step: n, text: '', toolCalls: calls.map(([id, name]) => ({ id, name, arguments: '{}' })) } },
      ...calls.map(([id], i): NewEvent => ({
        type: 'tool/result',
        data: { turn: 1, step: n, callId: id, resultId: `r_${n}_${i}`, status: 'ok', content: `${id} of ${n}` },
      })),
      { type: 'step/end', data: { turn: 1, step: n, reason: 'completed' } },
    ];
    const a = 'a b';
    // Exactly the wire form of `a b` (docs/agents.md "Ids and names on the wire"): crafted to meet it.
    const crafted = `a_b_${createHash('sha256').update(a).digest('base64url').slice(0, 16)}`;
    const log: NewEvent[] = [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'go' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      ...step(1, [
        [a, 'fs__files.read'],
        ['k'.repeat(150), 'mystery tool'],
        [crafted, 'clock'],
      ]),
      ...step(2, [['x'.repeat(38), 'clock']]),
      ...step(3, [['x'.repeat(38), 'clock']]),
      ...step(4, [[a, 'clock']]),
    ];
    const messages = new Conversation().applyAll(withSeqs(log)).messages();
    const sent = messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : []));
    expect(sent).toHaveLength(6);
    expect(new Set(sent).size).toBe(6);
    for (const id of sent) expect(idTaken(id)).toBe(true);
    // Each result follows its call, under its id, with its own text.
    const results = messages.flatMap((m) => (m.role === 'tool' ? [[m.tool_call_id, m.content]] : []));
    expect(results.map(([id]) => id)).toEqual(sent);
    expect(results.map(([, content]) => content)).toEqual(
      [a, 'k'.repeat(150), crafted, 'x'.repeat(38), 'x'.repeat(38), a].map((id, i) => `${id} of ${[1, 1, 1, 2, 3, 4][i]}`),
    );
    // The conversation keeps the names as the log has them: a request sends their wire forms (agent/models/prompt.ts).
    expect(messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.function.name) : []))).toContain('fs__files.read');
  });
});
