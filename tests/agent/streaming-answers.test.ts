// The one owner of "which answer of a step may stream now" (src/agent/streaming-answers.ts), which sessionTurns,
// /chat and /agui all follow: fed the log and the relay in each ordering that matters, it shows each answer's text
// once, in order, after the results of the calls before it.
import { describe, expect, it } from 'vitest';
import { StreamingAnswers } from '../../src/agent/streaming-answers.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';

const BOUNDS = { updates: 1000, chars: 64 * 1024 };

/** A reader of a session's log (from seq 0) and relay, and what it was shown: deltas as their text, stored rests as `{rest}`, results as `[callId]`. */
function reader(opts: { liveFrom?: number; afterSeq?: number; bounds?: { updates: number; chars: number } } = {}) {
  const answers = new StreamingAnswers({ liveFrom: opts.liveFrom ?? 0, afterSeq: opts.afterSeq ?? -1, bounds: opts.bounds ?? BOUNDS });
  let seq = (opts.afterSeq ?? -1) + 1;
  let told = '';
  const show = (list: TurnUpdate[]) => list.forEach((u) => (told += u.kind === 'TEXT_DELTA' ? u.text : `<${u.kind} ${u.callId}>`));
  const log = (type: string, data: Record<string, unknown>) => {
    const { stored, shown } = answers.read({ seq: seq++, type, data });
    if (stored?.rest) told += `{${stored.rest}}`;
    if (type === 'tool/result') told += `[${data.callId as string}]`;
    show(shown);
    return stored;
  };
  return {
    answers,
    told: () => told,
    delta: (answer: number | undefined, text: string, extra: Partial<TurnUpdate> = {}) =>
      show(answers.relay({ sessionId: 's', kind: 'TEXT_DELTA', turn: 1, step: 1, ...(answer ? { answer } : {}), text, ...extra })),
    relay: (u: Partial<TurnUpdate>) => show(answers.relay({ sessionId: 's', kind: 'TOOL_RUNNING', turn: 1, step: 1, ...u })),
    turnStart: () => log('turn/start', { turn: 1, inputId: 'in_1' }),
    stepStart: (step = 1) => log('step/start', { turn: 1, step }),
    answer: (text: string, calls: string | string[] = [], step = 1) =>
      log('model/message', { turn: 1, step, text, toolCalls: [calls].flat().map((id) => ({ id, name: 'clock', arguments: '{}', effect: 'read-only' })) }),
    result: (call: string, step = 1) =>
      log('tool/result', { turn: 1, step, callId: call, resultId: `r-${call}`, status: 'ok', content: '12:00', name: 'clock' }),
    stepEnd: (step = 1) => log('step/end', { turn: 1, step, reason: 'completed' }),
    turnEnd: () => log('turn/end', { turn: 1, reason: 'completed' }),
  };
}

/** A reader that has read turn 1's start and its step 1's. */
function inStep() {
  const r = reader();
  r.turnStart();
  r.stepStart();
  return r;
}

describe('which answer of a step may stream now', () => {
  it('the relay ahead of the log: the answers’ deltas wait for their step, then for the answer before them and its results', () => {
    const r = reader();
    r.turnStart();
    r.delta(1, 'Let me ');
    r.delta(1, 'look. ');
    r.delta(2, 'It is noon.');
    expect(r.told()).toBe(''); // the step's start not read yet
    r.stepStart();
    expect(r.told()).toBe('Let me look. ');
    expect(r.answer('Let me look. ', 'c1')).toEqual({ turn: 1, step: 1, answer: 1, rest: '' });
    expect(r.told()).toBe('Let me look. '); // answer 2 waits for c1's result
    r.result('c1');
    expect(r.told()).toBe('Let me look. [c1]It is noon.');
    expect(r.answer('It is noon.')).toEqual({ turn: 1, step: 1, answer: 2, rest: '' });
    r.stepEnd();
    r.turnEnd();
    expect(r.told()).toBe('Let me look. [c1]It is noon.');
  });

  it('the relay behind the log: deltas of stored answers are dropped; a reader joined inside a step streams from the answer stored after it came', () => {
    // The reader starts after the first answer (seq 2: turn/start, step/start, the answer): its open tail says so.
    const r = reader({ afterSeq: 2, liveFrom: 4 });
    r.answers.join(1, 1, 1, ['c1']);
    r.delta(1, 'Let me look. '); // a late copy of the stored answer
    r.delta(2, 'It is '); // the second answer was streaming before the reader came: it comes whole
    r.result('c1'); // seq 3
    r.delta(2, '12:00.');
    expect(r.told()).toBe('[c1]');
    expect(r.answer('It is 12:00.', 'c2')).toMatchObject({ answer: 2, rest: 'It is 12:00.' }); // seq 4: from liveFrom
    expect(r.told()).toBe('[c1]{It is 12:00.}');
    r.result('c2');
    r.delta(3, 'Checked.');
    r.delta(2, 'It is 12:00.'); // late
    expect(r.told()).toBe('[c1]{It is 12:00.}[c2]Checked.');
    expect(r.answer('Checked. Noon.')).toMatchObject({ answer: 3, rest: ' Noon.' });
    r.delta(3, 'Checked. Noon.'); // late
    r.stepEnd();
    r.delta(4, 'After the step.');
    expect(r.told()).toBe('[c1]{It is 12:00.}[c2]Checked.{ Noon.}');
  });

  it('a late delta after its answer was stored: dropped; the stored answer brings what the deltas did not', () => {
    const r = inStep();
    r.delta(undefined, 'Hello');
    expect(r.answer('Hello there.', 'c1')).toMatchObject({ answer: 1, rest: ' there.' });
    r.delta(undefined, ' there.'); // late: its answer is stored
    r.delta(1, 'Hello there.');
    expect(r.told()).toBe('Hello{ there.}');
  });

  it('a call’s result before the next answer’s deltas, or after them: the next answer streams after it either way', () => {
    const before = inStep();
    before.answer('', 'c1');
    before.result('c1');
    before.delta(2, 'Done.');
    expect(before.told()).toBe('[c1]Done.');

    const after = inStep();
    after.answer('', 'c1');
    after.delta(2, 'Do');
    after.delta(2, 'ne.');
    expect(after.told()).toBe('');
    after.result('c1');
    expect(after.told()).toBe('[c1]Done.');
    // Two calls: the next answer waits for both results.
    const two = inStep();
    two.answer('', ['a', 'b']);
    two.delta(2, 'Both.');
    two.result('a');
    expect(two.told()).toBe('[a]');
    two.result('b');
    expect(two.told()).toBe('[a][b]Both.');
  });

  it('deltas that do not name their answer and run past the stored one: the next answer’s beginning, its stored text sent less it', () => {
    const r = inStep();
    r.delta(undefined, 'One. Two');
    r.answer('One. ');
    expect(r.answer('Two.')).toMatchObject({ answer: 2, rest: '.' });
    expect(r.told()).toBe('One. Two{.}');
  });

  it('holds what it cannot show yet within its bounds: past them an answer’s held deltas go all at once and its stored text comes whole', () => {
    const r = reader({ bounds: { updates: 100, chars: 10_000 } });
    r.turnStart();
    const piece = 'y'.repeat(1000);
    for (let i = 0; i < 30; i++) r.delta(1, piece, { step: 2 }); // a step not started: 30,000 characters held at most 10,000
    for (let i = 0; i < 300; i++) r.relay({ step: 3, callId: `t${i}` }); // updates of a step not started: at most 100
    r.stepStart(2);
    expect(r.told()).toBe(''); // the first deltas were dropped: none of that answer's shows
    expect(r.answer('the stored answer', undefined, 2)).toMatchObject({ rest: 'the stored answer' });
    r.stepEnd(2);
    r.stepStart(3);
    expect(r.told().match(/TOOL_RUNNING/g)?.length).toBeLessThanOrEqual(100);
    // A tool's updates after its result are dropped.
    r.answer('', 'c9', 3);
    r.result('c9', 3);
    r.relay({ step: 3, callId: 'c9' });
    expect(r.told()).not.toContain('c9>');
  });

  it('a delta stamped with the log’s length waits until the reader has read that far: a late copy is dropped even by a reader that lags', () => {
    const r = reader();
    r.turnStart(); // 0
    r.stepStart(); // 1
    r.delta(1, 'Let me ', { eventCount: 2 });
    r.delta(1, 'look. ', { eventCount: 2 });
    expect(r.told()).toBe('Let me look. ');
    // The runner stored the answer (seq 2) and its result (seq 3), then sent a copy of the answer and the next one.
    r.delta(1, 'Let me look. ', { eventCount: 4 });
    r.delta(2, 'It is noon.', { eventCount: 4 });
    r.delta(2, ' Really.'); // not stamped: it keeps its place behind them
    expect(r.told()).toBe('Let me look. '); // the reader has read through seq 1 only
    r.answer('Let me look. ', 'c1');
    expect(r.told()).toBe('Let me look. ');
    r.result('c1');
    expect(r.told()).toBe('Let me look. [c1]It is noon. Really.');
    // A stamp the reader has read past is routed at once.
    r.answer('It is noon. Really. Yes.');
    expect(r.told()).toBe('Let me look. [c1]It is noon. Really.{ Yes.}');
  });
});
