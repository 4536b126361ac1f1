// Turn-level branch selection (seed 003, DESIGN §3.2): a branch copies the
// prefix through a closing turn/end and nothing after it.

/** The two questions branch selection asks of a log's turn/end events (the store answers them by index). */
export interface TurnEnds {
  /** Seq of the first turn/end at or after `seq`. */
  atOrAfter(seq: number): Promise<number | undefined> | number | undefined;
  /** Seq of the last turn/end. */
  last(): Promise<number | undefined> | number | undefined;
}

/**
 * Picks the closing `turn/end` seq for a branch: the first one at or after the
 * anchor; the last one when the anchor is omitted or past every turn/end.
 * Returns -1 when the log has no turn/end (the child holds only its marker).
 */
export async function selectBranchCut(ends: TurnEnds, anchorSeq?: number | null): Promise<number> {
  const atAnchor = anchorSeq === undefined || anchorSeq === null ? undefined : await ends.atOrAfter(anchorSeq);
  return atAnchor ?? (await ends.last()) ?? -1;
}

/** TurnEnds over an ascending list of seqs (tests, small logs). */
export function turnEndsOf(seqs: readonly number[]): TurnEnds {
  return { atOrAfter: (seq) => seqs.find((s) => s >= seq), last: () => seqs.at(-1) };
}
