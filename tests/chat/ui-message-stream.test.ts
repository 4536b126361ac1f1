// ChatAnswer (src/chat/ui-message-stream.ts) alone: turn updates in, UI
// message chunks out, reading a log held in memory.
import { describe, expect, it } from 'vitest';
import type { LogEvent } from '../../src/core/events.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { ChatAnswer, answerMessageId, inputOfAnswer, type UIChunk } from '../../src/chat/ui-message-stream.ts';

const S = 'ses_x';
const log: LogEvent[] = [
  { seq: 0, type: 'inbox/add', data: { inputId: 'in_1', text: 'hi' } },
  { seq: 1, type: 'turn/start', data: { turn: 3, inputId: 'in_1' } },
  { seq: 2, type: 'step/start', data: { turn: 3, step: 1 } },
  {
    seq: 3,
    type: 'model/message',
    data: {
      turn: 3,
      step: 1,
      text: 'Let me look.',
      toolCalls: [
        { id: 'c1', name: 'clock', arguments: '{}' },
        { id: 'c2', name: 'sleep', arguments: 'not json' },
      ],
      usage: { inputTokens: 10, outputTokens: 4 },
    },
  },
  { seq: 4, type: 'tool/result', data: { turn: 3, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: '12:00' } },
  { seq: 5, type: 'tool/result', data: { turn: 3, step: 1, callId: 'c2', resultId: 'r2', status: 'interrupted', content: 'stopped' } },
  { seq: 6, type: 'step/end', data: { turn: 3, step: 1, reason: 'interrupted' } },
  { seq: 7, type: 'turn/end', data: { turn: 3, reason: 'interrupted' } },
] as LogEvent[];

const reader = {
  // A page of two, so the answer reads ahead across pages.
  answersAndResults: async (seq: number) => {
    const events = log.filter((e) => e.seq >= seq && (e.type === 'model/message' || e.type === 'tool/result')).slice(0, 2);
    return { events, more: events.length === 2 };
  },
  // What the store sums (store/turn-reads.ts turnTotalsOf), here over the log in memory.
  turnOutcome: async ({ startSeq, endSeq }: { startSeq: number; endSeq: number }) => {
    const usage = { inputTokens: 0, outputTokens: 0 };
    for (const e of log.filter((e) => e.seq >= startSeq && e.seq <= endSeq && e.type === 'model/message')) {
      const u = (e.data as { usage?: { inputTokens?: number; outputTokens?: number } }).usage;
      usage.inputTokens += u?.inputTokens ?? 0;
      usage.outputTokens += u?.outputTokens ?? 0;
    }
    return { usage };
  },
  awaitsApproval: async () => false,
};
const u = (kind: TurnUpdate['kind'], rest: Partial<TurnUpdate> = {}): TurnUpdate => ({ sessionId: S, kind, turn: 3, ...rest });

describe('ChatAnswer', () => {
  it('follows only its input’s turn, writes each call’s input once before its output, and ends an interrupted turn with an error', async () => {
    const out: UIChunk[] = [];
    const answer = new ChatAnswer({ chatId: 'c', sessionId: S, inputId: 'in_1' }, reader, (c) => out.push(c));
    answer.start();
    // Another turn's updates (still running when this input was queued) are not this answer's.
    await answer.update({ sessionId: S, kind: 'TEXT_DELTA', turn: 2, step: 1, text: 'other' });
    await answer.update({ sessionId: S, kind: 'TURN_ENDED', turn: 2, seq: 0, reason: 'completed' });
    await answer.update(u('TURN_STARTED', { seq: 1, inputId: 'in_1' }));
    await answer.update(u('STEP_STARTED', { seq: 2, step: 1 }));
    await answer.update(u('TEXT_DELTA', { step: 1, text: 'Let me ' }));
    await answer.update(u('TOOL_RUNNING', { step: 1, callId: 'c1' }));
    await answer.update(u('TEXT_DELTA', { step: 1, text: 'look.' }));
    await answer.update(u('TOOL_FINISHED', { seq: 4, step: 1, callId: 'c1', status: 'ok' }));
    await answer.update(u('TOOL_FINISHED', { seq: 5, step: 1, callId: 'c2', status: 'interrupted' }));
    await answer.update(u('STEP_ENDED', { seq: 6, step: 1, reason: 'interrupted' }));
    await answer.update(u('TURN_ENDED', { seq: 7, reason: 'interrupted' }));
    expect(answer.finished).toBe(true);
    const meta = { chatId: 'c', sessionId: S, inputId: 'in_1' };
    expect(out).toEqual([
      { type: 'start', messageId: 'ans_in_1', messageMetadata: meta },
      { type: 'message-metadata', messageMetadata: { ...meta, turn: 3 } },
      { type: 'start-step' },
      { type: 'text-start', id: 'txt_3_1' },
      { type: 'text-delta', id: 'txt_3_1', delta: 'Let me ' },
      { type: 'text-delta', id: 'txt_3_1', delta: 'look.' },
      { type: 'text-end', id: 'txt_3_1' },
      { type: 'tool-input-available', toolCallId: 'c1', toolName: 'clock', input: {}, dynamic: true },
      { type: 'tool-input-available', toolCallId: 'c2', toolName: 'sleep', input: 'not json', dynamic: true },
      { type: 'tool-output-available', toolCallId: 'c1', output: '12:00', dynamic: true },
      { type: 'tool-output-error', toolCallId: 'c2', errorText: 'interrupted: stopped', dynamic: true },
      { type: 'finish-step' },
      { type: 'error', errorText: expect.stringContaining('interrupted') },
      { type: 'finish', finishReason: 'error', messageMetadata: { ...meta, turn: 3, reason: 'interrupted', usage: { inputTokens: 10, outputTokens: 4 } } },
    ]);
    // Nothing after the end.
    await answer.update(u('TEXT_DELTA', { step: 2, text: 'late' }));
    expect(out).toHaveLength(14);
  });

  it('names the answer after its input, both ways', () => {
    expect(inputOfAnswer(answerMessageId('in_abc'))).toBe('in_abc');
    expect(inputOfAnswer('msg-from-the-client')).toBeUndefined();
    expect(inputOfAnswer(undefined)).toBeUndefined();
  });
});
