import { describe, expect, it } from 'vitest';
import { childRanges, commonPrefix, ownFromSeq, segmentsOf, type Lineage } from '../../src/store/lineage.ts';

const root: Lineage = { sessionId: 'ses_a', treeId: 'ses_a', ranges: [], inheritedEventCount: 0 };
// b forked a at 9; c forked b at 14 (inside b's own part); d forked c at 4 (inside c's range from a).
const b: Lineage = { sessionId: 'ses_b', treeId: 'ses_a', ranges: childRanges(root, 9), inheritedEventCount: 10 };
const c: Lineage = { sessionId: 'ses_c', treeId: 'ses_a', ranges: childRanges(b, 14), inheritedEventCount: 15 };
const d: Lineage = { sessionId: 'ses_d', treeId: 'ses_a', ranges: childRanges(c, 4), inheritedEventCount: 5 };

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
    expect(childRanges(c, 10)).toEqual([
      { sessionId: 'ses_a', fromSeq: 0, toSeq: 9 },
      { sessionId: 'ses_b', fromSeq: 10, toSeq: 10 },
    ]);
    expect(childRanges(c, 20)).toEqual([...c.ranges, { sessionId: 'ses_c', fromSeq: 15, toSeq: 20 }]);
  });

  it('own rows start after the last range', () => {
    expect([root, b, c, d].map(ownFromSeq)).toEqual([0, 10, 15, 5]);
    // An imported fork has no ranges: it owns its whole log, inherited prefix included.
    expect(ownFromSeq({ sessionId: 'ses_i', treeId: 'ses_i', ranges: [], inheritedEventCount: 12 })).toBe(0);
  });

  it('maps any seq window to exact segments, at and around every boundary', () => {
    // Every segment lies in the lineage's tree (a read of it names the tree: one shard).
    expect(segmentsOf(c, 0, 99)).toEqual([
      { sessionId: 'ses_a', treeId: 'ses_a', fromSeq: 0, toSeq: 9 },
      { sessionId: 'ses_b', treeId: 'ses_a', fromSeq: 10, toSeq: 14 },
      { sessionId: 'ses_c', treeId: 'ses_a', fromSeq: 15, toSeq: 99 },
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

describe('commonPrefix: the last seq two sessions of one tree share', () => {
  // Tree: root a; b forked a at 9; c forked b at 14; d forked c at 4; e forked a at 6 (b's sibling);
  // f forked b at 12 (c's sibling); g forked e at 20 (a cousin of c, one level deeper).
  const e: Lineage = { sessionId: 'ses_e', treeId: 'ses_a', ranges: childRanges(root, 6), inheritedEventCount: 7 };
  const f: Lineage = { sessionId: 'ses_f', treeId: 'ses_a', ranges: childRanges(b, 12), inheritedEventCount: 13 };
  const g: Lineage = { sessionId: 'ses_g', treeId: 'ses_a', ranges: childRanges(e, 20), inheritedEventCount: 21 };
  const other: Lineage = { sessionId: 'ses_x', treeId: 'ses_x', ranges: [], inheritedEventCount: 0 };
  const long = 1_000;

  it('siblings share the parent through the lower of their cuts', () => {
    expect(commonPrefix(b, long, e, long)).toBe(6);
    expect(commonPrefix(e, long, b, long)).toBe(6);
    expect(commonPrefix(c, long, f, long)).toBe(12);
    // Siblings forked at the same event share exactly the parent's prefix through it.
    const b2: Lineage = { sessionId: 'ses_b2', treeId: 'ses_a', ranges: childRanges(root, 9), inheritedEventCount: 10 };
    expect(commonPrefix(b, long, b2, long)).toBe(9);
  });

  it('a parent and its child share the child through the cut, at any depth', () => {
    expect(commonPrefix(root, long, b, long)).toBe(9);
    expect(commonPrefix(b, long, c, long)).toBe(14);
    expect(commonPrefix(c, long, b, long)).toBe(14);
    expect(commonPrefix(root, long, c, long)).toBe(9); // c reads 10..14 from b's own rows, not a's
    expect(commonPrefix(c, long, d, long)).toBe(4);
    expect(commonPrefix(root, long, d, long)).toBe(4);
  });

  it('cousins at different depths share what both inherited from one writer', () => {
    expect(commonPrefix(c, long, g, long)).toBe(6); // c via b (0..9 from a), g via e (0..6 from a)
    expect(commonPrefix(d, long, g, long)).toBe(4);
    expect(commonPrefix(f, long, d, long)).toBe(4);
    expect(commonPrefix(c, long, e, long)).toBe(6);
  });

  it('stops at the shorter log, and a session shares its whole log with itself', () => {
    expect(commonPrefix(root, 5, b, long)).toBe(4); // the parent was shorter then (never, but bounded)
    expect(commonPrefix(b, long, b, 30)).toBe(29);
    expect(commonPrefix(b, 0, e, long)).toBe(-1);
  });

  it('unrelated sessions and forks with nothing inherited share nothing (-1)', () => {
    expect(commonPrefix(root, long, other, long)).toBe(-1);
    expect(commonPrefix(d, long, other, long)).toBe(-1);
    const empty: Lineage = { sessionId: 'ses_empty', treeId: 'ses_a', ranges: childRanges(root, -1), inheritedEventCount: 0 };
    expect(commonPrefix(root, long, empty, long)).toBe(-1);
    // An imported fork owns its rows: nothing is stored in common with the tree.
    const imported: Lineage = { sessionId: 'ses_i', treeId: 'ses_i', ranges: [], inheritedEventCount: 12 };
    expect(commonPrefix(root, long, imported, long)).toBe(-1);
  });
});
