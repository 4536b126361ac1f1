// Turn-level branch selection (seed 003, DESIGN §3.2): a branch copies the
// prefix through a closing turn/end and nothing after it.

/**
 * Picks the closing `turn/end` seq for a branch: the first one at or after the
 * anchor; the last one when the anchor is omitted or past every turn/end.
 * Returns -1 when the log has no turn/end (the child holds only its marker).
 * `turnEndSeqs` must be ascending.
 */
export function selectBranchCut(turnEndSeqs: readonly number[], anchorSeq?: number | null): number {
  if (turnEndSeqs.length === 0) return -1;
  const last = turnEndSeqs[turnEndSeqs.length - 1];
  if (anchorSeq === undefined || anchorSeq === null) return last;
  return turnEndSeqs.find((s) => s >= anchorSeq) ?? last;
}
