// Where a session's events are stored (docs/contract.md#exact-fork: the prefix is shared, not
// copied). A fork records the ancestor ranges it inherits as a flat list, like
// Temporal's history branches: (session, fromSeq, toSeq) per ancestor, copied
// from the parent's list plus one range at fork time, so no read walks a chain.
// Inherited events keep their seqs, so seq s of a session is row (source, s) of
// the one range or own part that covers s. Pure.

export interface InheritedRange {
  sessionId: string;
  fromSeq: number;
  toSeq: number;
}

export interface Lineage {
  sessionId: string;
  /** The fork tree (Session.treeId): every row the lineage reads lies in it, and each read says so (a shard's key). */
  treeId: string;
  /** Contiguous from seq 0, in seq order (empty: the session stores all its rows). */
  ranges: readonly InheritedRange[];
  /** Seqs below this were inherited by a fork (Event.inherited). */
  inheritedEventCount: number;
  /**
   * Reads see only seqs below this: the log as of that length (a snapshot,
   * docs/contract.md#log). Absent: the whole log, as it grows. Never cached.
   */
  endSeq?: number;
}

/** One stretch of seqs stored under one session id, in the lineage's tree. */
export interface Segment {
  sessionId: string;
  treeId: string;
  fromSeq: number;
  toSeq: number;
}

/** The first seq stored under the session's own id. */
export const ownFromSeq = (l: Lineage): number => (l.ranges.length ? l.ranges[l.ranges.length - 1].toSeq + 1 : 0);

/** The columns of a session row a lineage is made of. */
export type LineageRow = { id: string; treeId: string; inheritedRanges: unknown; inheritedEventCount: number };

export function lineageOf(row: LineageRow): Lineage {
  if (row.treeId === undefined) throw new Error(`session ${row.id} was read without its treeId`);
  return { sessionId: row.id, treeId: row.treeId, ranges: (row.inheritedRanges ?? []) as InheritedRange[], inheritedEventCount: row.inheritedEventCount };
}

/**
 * The log as of a session row: its lineage, read no further than the row's
 * eventCount. The row's counters and status were written with its events, so
 * every read through this agrees with them (docs/contract.md#log: a session read is one
 * snapshot), whatever was appended since the row was read.
 */
export function snapshotOf(row: LineageRow & { eventCount: number }): Lineage {
  if (row.eventCount === undefined || row.inheritedRanges === undefined) throw new Error(`session ${row.id} was read without the columns of its log`);
  return { ...lineageOf(row), endSeq: row.eventCount };
}

/** Where seqs lo..hi (inclusive) are stored, in seq order. `hi` may lie past the end of the log. */
export function segmentsOf(l: Lineage, lo: number, hi: number): Segment[] {
  const out: Segment[] = [];
  if (l.endSeq !== undefined) hi = Math.min(hi, l.endSeq - 1);
  if (hi < lo) return out;
  for (const r of l.ranges) {
    if (r.toSeq < lo) continue;
    if (r.fromSeq > hi) return out;
    out.push({ sessionId: r.sessionId, treeId: l.treeId, fromSeq: Math.max(lo, r.fromSeq), toSeq: Math.min(hi, r.toSeq) });
  }
  const own = ownFromSeq(l);
  if (hi >= own) out.push({ sessionId: l.sessionId, treeId: l.treeId, fromSeq: Math.max(lo, own), toSeq: hi });
  return out;
}

/** The ranges of a child forked from `parent` at `cut` (its events 0..cut), -1: none. */
export function childRanges(parent: Lineage, cut: number): InheritedRange[] {
  return segmentsOf(parent, 0, cut).map(({ sessionId, fromSeq, toSeq }) => ({ sessionId, fromSeq, toSeq }));
}

/**
 * The last seq two logs share (-1: none): with copy-free forks, seq s of both
 * is the same event exactly when both read it from the same stored row, i.e.
 * the same (owner, s). Walks both lineages' segments side by side up to the
 * shorter log's end: siblings share their parent's rows through the lower cut,
 * a parent and its child through the cut, cousins through the deepest range
 * both inherited from one writer; unrelated sessions share nothing (-1).
 * `length`: each log's eventCount.
 */
export function commonPrefix(a: Lineage, aLength: number, b: Lineage, bLength: number): number {
  const end = Math.min(aLength, bLength) - 1;
  if (a.sessionId === b.sessionId) return end;
  const sa = segmentsOf(a, 0, end);
  const sb = segmentsOf(b, 0, end);
  let i = 0;
  let j = 0;
  let seq = 0; // the first seq not yet known to be shared
  while (seq <= end && i < sa.length && j < sb.length) {
    if (sa[i].sessionId !== sb[j].sessionId) return seq - 1;
    const to = Math.min(sa[i].toSeq, sb[j].toSeq);
    seq = to + 1;
    if (sa[i].toSeq === to) i++;
    if (sb[j].toSeq === to) j++;
  }
  return Math.min(seq - 1, end);
}
