// The pure parts of the dashboard's branching views: the new
// addresses, fork-point rows among conversation items, children labels that
// name their seq once, and the turn-by-turn diff of two conversations.
import { describe, expect, it } from 'vitest';
import { familyPath, forkPointPath, parseRoute } from '../../client/dashboard/src/router.ts';
import { withForkPoints, withForkSeq } from '../../client/dashboard/src/fork-points.ts';
import { alignTurns, nextDifference, rowsThrough, turnsOf, turnStartAtOrBefore } from '../../client/dashboard/src/conversation-diff.ts';
import type { LogEvent } from '../../client/dashboard/src/conversation.ts';
import { completedTurn } from '../browser/dashboard-harness.ts';

describe('addresses', () => {
  it.each([
    ['/sessions/ses_1/forks/8', { name: 'fork-point', id: 'ses_1', seq: 8 }],
    ['/sessions/ses_1/forks/8/', { name: 'fork-point', id: 'ses_1', seq: 8 }],
    ['/sessions/ses_1/forks/x', { name: 'not-found', path: '/sessions/ses_1/forks/x' }],
    ['/sessions/ses_1/family', { name: 'family', id: 'ses_1' }],
  ])('%s', (path, route) => expect(parseRoute(path)).toEqual(route));

  it('builds them', () => {
    expect(parseRoute(forkPointPath('a b', 3))).toEqual({ name: 'fork-point', id: 'a b', seq: 3 });
    expect(parseRoute(familyPath('ses_2'))).toEqual({ name: 'family', id: 'ses_2' });
  });
});

describe('withForkPoints', () => {
  const item = (seqs: number[]) => ({ kind: 'note' as const, text: '', seqs, inherited: false });
  const kinds = (list: Array<{ kind: string; seqs: number[] }>) => list.map((i) => (i.kind === 'fork-point' ? `fork@${i.seqs[0]}` : `item@${i.seqs[0]}`));

  it('puts a row after the items that start at or before each fork seq, inside the window only', () => {
    const items = [item([2, 3]), item([5]), item([9])];
    const points = new Map([
      [1, 2],
      [3, 6],
      [5, 1],
      [12, 1],
      [40, 3],
    ]);
    expect(kinds(withForkPoints(items, points, 0, 20))).toEqual(['fork@1', 'item@2', 'fork@3', 'item@5', 'fork@5', 'item@9', 'fork@12']);
    expect(kinds(withForkPoints(items, points, 2, 9))).toEqual(['item@2', 'fork@3', 'item@5', 'fork@5', 'item@9']);
    expect(withForkPoints(items, points, 2, 9).find((i) => i.kind === 'fork-point')).toMatchObject({ seq: 3, childCount: 6 });
    expect(withForkPoints(items, new Map(), 0, 20)).toEqual(items);
  });
});

describe('withForkSeq', () => {
  it('adds the seq unless the title already ends with it', () => {
    expect(withForkSeq('Plan · fork @13', 13)).toBe('Plan · fork @13');
    expect(withForkSeq('Plan', 13)).toBe('Plan @13');
    expect(withForkSeq('Plan · fork @13', 131)).toBe('Plan · fork @13 @131');
    expect(withForkSeq('Plan', null)).toBe('Plan');
  });
});

describe('the turn-by-turn diff', () => {
  const events = (list: Array<{ type: string; data: unknown }>, from = 0): LogEvent[] =>
    list.map((e, i) => ({
      id: `e${from + i}`,
      seq: from + i,
      type: e.type,
      data: e.data,
      inherited: false,
      synthetic: false,
      createdAt: '2026-12-01T00:00:00.000Z',
    }));

  it('folds turns with their input, calls, answers and end, and aligns two logs by turn number, not seq', () => {
    const left = events([...completedTurn(1, { who: 'a' }), ...completedTurn(2, { who: 'a' })]);
    // The right side wrote one event more before the same turns: every seq is one off.
    const right = events([
      { type: 'session/title', data: { title: 'renamed' } },
      ...completedTurn(1, { who: 'a' }),
      ...completedTurn(2, { who: 'b' }),
      ...completedTurn(3, { who: 'b' }),
    ]);
    const l = turnsOf(left);
    expect(l[0]).toMatchObject({
      turn: 1,
      input: 'a question 1',
      answers: ['a answer 1'],
      calls: ['clock({}) → ok'],
      end: 'completed',
      startSeq: 2,
      lastSeq: 10,
    });
    const rows = alignTurns(l, turnsOf(right));
    expect(rows.map((r) => [r.turn, r.same, !!r.left, !!r.right])).toEqual([
      [1, true, true, true],
      [2, false, true, true],
      [3, false, false, true],
    ]);
    expect(nextDifference(rows, -1, 1)).toBe(1);
    expect(nextDifference(rows, 1, 1)).toBe(2);
    expect(nextDifference(rows, 2, 1)).toBe(-1);
    expect(nextDifference(rows, 2, -1)).toBe(1);
    expect(nextDifference(rows, 1, -1)).toBe(-1);
  });

  it('keeps an open turn open, a call without result pending, and a failed turn with its error', () => {
    const open = turnsOf(events(completedTurn(1).slice(0, 5)));
    expect(open).toEqual([expect.objectContaining({ turn: 1, end: null, calls: ['clock({}) → …'] })]);
    const failed = turnsOf(
      events([
        { type: 'inbox/add', data: { inputId: 'i', text: 'q' } },
        { type: 'turn/start', data: { turn: 1, inputId: 'i' } },
        { type: 'step/start', data: { turn: 1, step: 1 } },
        { type: 'step/end', data: { turn: 1, step: 1, reason: 'failed' } },
        { type: 'plugin/agent/error', data: { turn: 1, step: 1, message: 'down' } },
        { type: 'turn/end', data: { turn: 1, reason: 'failed' } },
      ]),
    );
    expect(failed[0]).toMatchObject({ end: 'failed', error: 'down', input: 'q', answers: [] });
  });

  it('finds where a fold starts: the last turn start at or before a seq', () => {
    const log = events([...completedTurn(1), ...completedTurn(2)]);
    expect(turnStartAtOrBefore(log, 1)).toBeUndefined();
    expect(turnStartAtOrBefore(log, 2)).toBe(2);
    expect(turnStartAtOrBefore(log, 12)).toBe(2);
    expect(turnStartAtOrBefore(log, 13)).toBe(13);
  });
});

describe('rowsThrough', () => {
  it('leaves out the rows past the lowest turn a cut-short side holds whole', () => {
    const rows = [1, 2, 3, 4].map((turn) => ({ turn, left: undefined, right: undefined, same: false }));
    expect(rowsThrough(rows, [undefined, undefined]).map((r) => r.turn)).toEqual([1, 2, 3, 4]);
    expect(rowsThrough(rows, [3, undefined]).map((r) => r.turn)).toEqual([1, 2, 3]);
    expect(rowsThrough(rows, [3, 2]).map((r) => r.turn)).toEqual([1, 2]);
  });
});
