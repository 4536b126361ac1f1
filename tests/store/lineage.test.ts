import { describe, expect, it } from 'vitest';
import { childRanges, ownFromSeq, segmentsOf, type Lineage } from '../../src/store/lineage.ts';

const root: Lineage = { sessionId: 'ses_a', ranges: [], inheritedEventCount: 0 };
// b forked a at 9; c forked b at 14 (inside b's own part); d forked c at 4 (inside c's range from a).
const b: Lineage = { sessionId: 'ses_b', ranges: childRanges(root, 9), inheritedEventCount: 10 };
const c: Lineage = { sessionId: 'ses_c', ranges: childRanges(b, 14), inheritedEventCount: 15 };
const d: Lineage = { sessionId: 'ses_d', ranges: childRanges(c, 4), inheritedEventCount: 5 };

describe('lineage ranges', () => {
  it('a fork records the parent ranges through the cut plus the parent own part', () => {
    expect(b.ranges).toEqual([{ sessionId: 'ses_a', fromSeq: 0, toSeq: 9 }]);
    expect(c.ranges).toEqual([
      { sessionId: 'ses_a', fromSeq: 0, toSeq: 9 },
      { sessionId: 'ses_b', fromSeq: 10, toSeq: 14 },
    ]);
    // A cut inside an inherited range of an inherited range points at the row's owner, not the chain.
    expect(d.ranges).toEqual([{ sessionId: 'ses_a', fromSeq: 0, toSeq: 4 }]);
    expect(childRanges(c, -1)).toEqual([]);
    expect(childRanges(c, 9)).toEqual([{ sessionId: 'ses_a', fromSeq: 0, toSeq: 9 }]);
    expect(childRanges(c, 10)).toEqual([{ sessionId: 'ses_a', fromSeq: 0, toSeq: 9 }, { sessionId: 'ses_b', fromSeq: 10, toSeq: 10 }]);
    expect(childRanges(c, 20)).toEqual([...c.ranges, { sessionId: 'ses_c', fromSeq: 15, toSeq: 20 }]);
  });

  it('own rows start after the last range', () => {
    expect([root, b, c, d].map(ownFromSeq)).toEqual([0, 10, 15, 5]);
    // An imported fork has no ranges: it owns its whole log, inherited prefix included.
    expect(ownFromSeq({ sessionId: 'ses_i', ranges: [], inheritedEventCount: 12 })).toBe(0);
  });

  it('maps any seq window to exact segments, at and around every boundary', () => {
    expect(segmentsOf(c, 0, 99)).toEqual([
      { sessionId: 'ses_a', fromSeq: 0, toSeq: 9 },
      { sessionId: 'ses_b', fromSeq: 10, toSeq: 14 },
      { sessionId: 'ses_c', fromSeq: 15, toSeq: 99 },
    ]);
    for (const boundary of [9, 10, 14, 15]) {
      for (const lo of [boundary - 1, boundary, boundary + 1]) {
        for (const size of [1, 2, 7]) {
          const segs = segmentsOf(c, lo, lo + size - 1);
          // Contiguous, in order, covering exactly lo..hi, each within its owner's range.
          const seqs = segs.flatMap((s) => Array.from({ length: s.toSeq - s.fromSeq + 1 }, (_, i) => [s.sessionId, s.fromSeq + i] as const));
          expect(seqs.map(([, q]) => q)).toEqual(Array.from({ length: size }, (_, i) => lo + i));
          for (const [owner, q] of seqs) expect(owner).toBe(q <= 9 ? 'ses_a' : q <= 14 ? 'ses_b' : 'ses_c');
        }
      }
    }
    expect(segmentsOf(c, 5, 4)).toEqual([]);
  });
});
