import { describe, expect, it } from 'vitest';
import { diffRow, openingSeq, rightRange, rowKind, type DiffSide } from '../../client/dashboard/src/diff-rows.ts';
import type { LogEvent } from '../../client/dashboard/src/conversation.ts';

const ev = (seq: number, who: string) =>
  ({ id: `${who}${seq}`, seq, type: 'user/message', data: { text: who }, createdAt: '', inherited: false, synthetic: false }) as unknown as LogEvent;
const side = (who: string, length: number, loaded: number[]): DiffSide => ({
  length,
  get: (seq) => (loaded.includes(seq) ? ev(seq, who) : undefined),
});

describe('diff rows', () => {
  it('keeps one seq per row: shared up to the prefix, the next one first divergent', () => {
    expect([3, 4, 5, 6].map((s) => rowKind(s, 4))).toEqual(['shared', 'shared', 'first-divergent', 'divergent']);
    expect(rowKind(0, -1)).toBe('first-divergent');
  });

  it('reads shared seqs from the left log only, and marks a side past its end', () => {
    const left = side('L', 10, [3, 4, 5, 6]);
    const right = side('R', 6, [5]);
    expect(diffRow(4, 4, left, right)).toMatchObject({ seq: 4, kind: 'shared', left: { id: 'L4' }, right: { id: 'L4' } });
    expect(diffRow(5, 4, left, right)).toMatchObject({ kind: 'first-divergent', left: { id: 'L5' }, right: { id: 'R5' } });
    expect(diffRow(6, 4, left, right)).toMatchObject({ kind: 'divergent', left: { id: 'L6' }, right: null });
    expect(diffRow(7, 4, left, right).left).toBeUndefined(); // not fetched yet
  });

  it('fetches on the right only what the left does not share, and opens at the divergence', () => {
    expect(rightRange(0, 40, 100)).toBeNull();
    expect(rightRange(80, 140, 100)).toEqual([101, 140]);
    expect(rightRange(120, 140, 100)).toEqual([120, 140]);
    expect(openingSeq(100, 5000)).toBe(101);
    expect(openingSeq(99, 100)).toBe(99); // both end at the prefix: the last row
    expect(openingSeq(-1, 0)).toBe(0);
  });
});
