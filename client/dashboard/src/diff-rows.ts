// What one row of the two-session diff shows (pure, for compare.tsx): row i is
// seq i on both sides, so a seq never moves between columns. Seqs up to the
// common prefix are one stored event read once (from the left log); the first
// seq after it is the first divergence; past a log's end its side is empty.
import type { LogEvent } from './conversation.ts';

export type DiffRowKind = 'shared' | 'first-divergent' | 'divergent';

export interface DiffRow {
  seq: number;
  kind: DiffRowKind;
  /** undefined: not fetched yet; null: past that log's end. */
  left: LogEvent | null | undefined;
  right: LogEvent | null | undefined;
}

export interface DiffSide {
  length: number;
  get(seq: number): LogEvent | undefined;
}

export const rowKind = (seq: number, prefix: number): DiffRowKind => (seq <= prefix ? 'shared' : seq === prefix + 1 ? 'first-divergent' : 'divergent');

export function diffRow(seq: number, prefix: number, left: DiffSide, right: DiffSide): DiffRow {
  const kind = rowKind(seq, prefix);
  const at = (side: DiffSide) => (seq >= side.length ? null : side.get(seq));
  // A shared seq is the same stored event in both logs: the left side's copy serves both.
  return { seq, kind, left: at(left), right: kind === 'shared' ? at(left) : at(right) };
}

/** The seq range of `right`'s log the page must fetch for rows first..last (shared seqs come from the left). */
export function rightRange(first: number, last: number, prefix: number): [number, number] | null {
  const from = Math.max(first, prefix + 1);
  return from <= last ? [from, last] : null;
}

/** The seq to open at: the first divergence, clamped to the rows there are. */
export function openingSeq(prefix: number, rows: number): number {
  return Math.max(0, Math.min(prefix + 1, rows - 1));
}
