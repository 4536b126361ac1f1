// A completed turn with text on both sides (an input, then the model's
// answer), as the events an agent writes: for tests of search and filters.
import type { NewEvent } from '../../src/core/events.ts';

/** Turn `n`'s seven events; its input is `inputId` (default `in_<n>`). */
export function textTurn(n: number, input: string, answer: string, inputId = `in_${n}`): NewEvent[] {
  return [
    { type: 'inbox/add', data: { inputId, text: input } },
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn: n, inputId } },
    { type: 'step/start', data: { turn: n, step: 1 } },
    { type: 'model/message', data: { turn: n, step: 1, text: answer, toolCalls: [] } },
    { type: 'step/end', data: { turn: n, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: n, reason: 'completed' } },
  ];
}
