// The timeline's spans (start/end pairs with their durations, from whichever
// pages are held) and the row map that hides collapsed spans.
import { describe, expect, it } from 'vitest';
import { EventPages, PAGE_SIZE } from '../../client/dashboard/src/event-pages.ts';
import { formatDuration } from '../../client/dashboard/src/format.ts';
import { formatSpan, RowMap, TimelineSpans } from '../../client/dashboard/src/timeline-spans.ts';
import type { LogEvent } from '../../client/dashboard/src/conversation.ts';
import { dashboardEvent as ev } from '../helpers/dashboard-events.ts';

/** A turn with two calls in one step, starting at `seq`: 9 events. */
const turn = (seq: number, n: number) => [
  ev(seq, 'turn/start', { turn: n, inputId: `in_${n}` }),
  ev(seq + 1, 'step/start', { turn: n, step: 1 }),
  ev(seq + 2, 'model/message', {
    turn: n,
    step: 1,
    text: '',
    toolCalls: [
      { id: `a${n}`, name: 'clock', arguments: '{}' },
      { id: `b${n}`, name: 'clock', arguments: '{}' },
    ],
  }),
  ev(seq + 3, 'tool/result', { turn: n, step: 1, callId: `a${n}`, resultId: 'r', status: 'ok', content: '' }, { ms: seq * 100 + 750 }),
  ev(seq + 4, 'tool/result', { turn: n, step: 1, callId: `b${n}`, resultId: 'r', status: 'ok', content: '' }, { ms: seq * 100 + 1_000 }),
  ev(seq + 5, 'step/end', { turn: n, step: 1, reason: 'completed' }, { ms: seq * 100 + 1_100 }),
  ev(seq + 6, 'step/start', { turn: n, step: 2 }, { ms: seq * 100 + 1_200 }),
  ev(seq + 7, 'step/end', { turn: n, step: 2, reason: 'completed' }, { ms: seq * 100 + 3_700 }),
  ev(seq + 8, 'turn/end', { turn: n, reason: 'completed' }, { ms: seq * 100 + 3_800 }),
];

describe('TimelineSpans', () => {
  it('pairs turns, steps and calls and times them from their events', () => {
    const spans = new TimelineSpans();
    for (const e of turn(10, 1)) spans.add(e);
    const all = () => 18;
    const at = () => undefined;
    const text = (seq: number) => {
      const s = spans.startingAt(seq)!;
      return formatSpan(s, spans.extent(s, all, 18, at), formatDuration);
    };
    expect(text(10)).toBe('turn 1 · 3.8 s');
    expect(text(11)).toBe('step 1.1 · 1.0 s');
    expect(text(16)).toBe('step 1.2 · 2.5 s');
    // The calls run one after another: the second from the first's result.
    expect(text(12)).toBe('2 calls · 800 ms');
    expect(spans.callAt(13)).toEqual({ name: 'a1', durationMs: 550 });
    expect(spans.callAt(14)).toEqual({ name: 'b1', durationMs: 250 });
    expect(spans.startingAt(12)!.end!.seq).toBe(14);
    expect(spans.endingAt(18)!.label).toBe('turn 1');
  });

  it('pairs events whichever page arrives first', () => {
    const spans = new TimelineSpans();
    for (const e of turn(0, 4).reverse()) spans.add(e);
    expect(spans.startingAt(0)!.end!.seq).toBe(8);
    expect(spans.startingAt(2)!.end!.seq).toBe(4);
    expect(spans.callAt(4)).toEqual({ name: 'b4', durationMs: 250 });
  });

  it('an end in a page not loaded: open until the last event held; no end in the log: running', async () => {
    // Turn 1 runs from seq 150 to 250; pages 0 and 2 are held, page 1 is not.
    const log = [ev(0, 'session/title', { title: 't' })];
    for (let s = 1; s < 150; s++) log.push(ev(s, 'plugin/x', {}));
    log.push(ev(150, 'turn/start', { turn: 1, inputId: 'i' }));
    for (let s = 151; s < 250; s++) log.push(ev(s, 'plugin/x', {}));
    log.push(ev(250, 'turn/end', { turn: 1, reason: 'completed' }));
    for (let s = 251; s < 451; s++) log.push(ev(s, 'plugin/x', {}));
    log.push(ev(451, 'turn/start', { turn: 2, inputId: 'j' }));
    const pages = new EventPages(async (afterSeq, first) => ({ events: log.slice(afterSeq + 1, afterSeq + 1 + first), eventCount: log.length }), log.length);
    await pages.loadPage(0);
    await pages.loadPage(2);
    const extent = (seq: number) =>
      pages.spans.extent(
        pages.spans.startingAt(seq)!,
        (s) => pages.heldThrough(s),
        pages.length - 1,
        (s) => pages.get(s),
      );
    expect(pages.heldThrough(150)).toBe(PAGE_SIZE - 1);
    expect(extent(150)).toEqual({ state: 'until', seq: 199, durationMs: (199 - 150) * 100 });
    expect(formatSpan(pages.spans.startingAt(150)!, extent(150), formatDuration)).toBe('turn 1 · ≥ 4.9 s, until #199+');
    expect(extent(451)).toEqual({ state: 'running' });
    // Its end, seen from the end's row before its start's page is there.
    expect(pages.spans.endingAt(250)).toBeUndefined();
    await pages.loadPage(1);
    expect(extent(150)).toEqual({ state: 'ended', durationMs: 10_000 });
    expect(pages.spans.endingAt(250)!.label).toBe('turn 1');
  });
});

describe('TimelineSpans of what repair closed', () => {
  const DAY = 86_400_000;
  const closer = (seq: number, type: string, data: Record<string, unknown>, ms: number): LogEvent => ev(seq, type, data, { ms, synthetic: true });
  const described = (events: LogEvent[], seq: number, held = events) => {
    const spans = new TimelineSpans();
    for (const e of held) spans.add(e);
    const bySeq = new Map(held.map((e) => [e.seq, e]));
    const heldThrough = (s: number) => {
      while (bySeq.has(s + 1)) s++;
      return s;
    };
    const span = spans.startingAt(seq) ?? spans.endingAt(seq)!;
    return formatSpan(
      span,
      spans.extent(span, heldThrough, events.length - 1, (s) => bySeq.get(s)),
      formatDuration,
    );
  };

  // A turn whose process died 1.5 s in, during a call; the recording was imported (and repaired) two days later.
  const crashed = [
    ev(0, 'turn/start', { turn: 1, inputId: 'i' }, { ms: 0 }),
    ev(1, 'step/start', { turn: 1, step: 1 }, { ms: 100 }),
    ev(2, 'model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'write_file', arguments: '{}' }] }, { ms: 1_000 }),
    ev(3, 'plugin/files/change', { callId: 'c1', changes: [] }, { ms: 1_500 }),
    closer(4, 'tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r', status: 'interrupted', content: '' }, 2 * DAY),
    closer(5, 'step/end', { turn: 1, step: 1, reason: 'interrupted' }, 2 * DAY),
    closer(6, 'turn/end', { turn: 1, reason: 'interrupted' }, 2 * DAY),
  ];

  it('a turn a crash interrupted lasts until the last event written before the closers, not until its recovery', () => {
    expect(described(crashed, 0)).toBe('turn 1 · 1.5 s');
    expect(described(crashed, 1)).toBe('step 1.1 · 1.4 s');
    expect(described(crashed, 2)).toBe('1 call · 500 ms');
    expect(described(crashed, 6)).toBe('turn 1 · 1.5 s');
    // The cut-off call has no duration of its own (as in the conversation).
    const spans = new TimelineSpans();
    for (const e of crashed) spans.add(e);
    expect(spans.callAt(4)).toEqual({ name: 'c1' });
  });

  it('a turn a fork cut lasts until the cut, the event before its marker', () => {
    const forked = [
      ...crashed.slice(0, 3),
      ev(3, 'session/end-seed', { parentSessionId: 'p', cutSeq: 2 }, { ms: 30 * DAY }),
      closer(4, 'tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r', status: 'not-started', content: '' }, 30 * DAY),
      closer(5, 'step/end', { turn: 1, step: 1, reason: 'forked' }, 30 * DAY),
      closer(6, 'turn/end', { turn: 1, reason: 'forked' }, 30 * DAY),
    ];
    expect(described(forked, 0)).toBe('turn 1 · 1.0 s');
    expect(described(forked, 1)).toBe('step 1.1 · 900 ms');
  });

  it('when an event before the closers is not held yet, it says only how long the held ones show', () => {
    const held = [crashed[0], crashed[1], ...crashed.slice(4)];
    expect(described(crashed, 0, held)).toBe('turn 1 · ≥ 100 ms, until #1+');
  });
});

describe('RowMap', () => {
  it('maps rows to seqs around hidden ranges, nested and adjacent ones merged', () => {
    const map = new RowMap(100, [
      [11, 20],
      [50, 59],
      [13, 15],
      [60, 61],
    ]);
    expect(map.count).toBe(100 - 10 - 12);
    expect([0, 10, 11, 39, 40, 77].map((i) => map.seqAt(i))).toEqual([0, 10, 21, 49, 62, 99]);
    for (let i = 0; i < map.count; i++) expect(map.indexOf(map.seqAt(i))).toBe(i);
    // A hidden seq: the row of the span that hides it.
    expect(map.indexOf(15)).toBe(10);
    expect(map.indexOf(61)).toBe(39);
    // Runs of shown seqs, never a hidden one.
    expect(map.seqRuns(5, 45)).toEqual([
      [5, 10],
      [21, 49],
      [62, 67],
    ]);
  });

  it('hides nothing: row = seq', () => {
    const map = new RowMap(1_000_000);
    expect(map.count).toBe(1_000_000);
    expect(map.seqAt(123_456)).toBe(123_456);
    expect(map.seqRuns(-5, 3)).toEqual([[0, 3]]);
  });
});
