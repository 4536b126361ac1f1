// Turn-level branch selection (docs/contract.md#branch): a branch copies the
// prefix through a closing turn/end and nothing after it.

/** The two questions branch selection asks of a log's turn/end events (the store answers them by index). */
export interface TurnEnds {
  /** Seq of the first turn/end at or after `seq`. */
  atOrAfter(seq: number): Promise<number | undefined> | number | undefined;
  /** Seq of the last turn/end. */
  last(): Promise<number | undefined> | number | undefined;
  /**
   * Seq of the last completed standalone work after `seq` (a turn/end) — the
   * end of a compaction (COMPLETED_STANDALONE_TYPES) — written before any
   * turn or queued input begins; undefined: none.
   */
  standaloneAfter?(seq: number): Promise<number | undefined> | number | undefined;
}

/**
 * What ends completed standalone work an omitted cut keeps (docs/contract.md#exact-fork: "omitted
 * cuts retain completed standalone work, including manual compaction
 * replacements, until a core-owned turn or queued-input event begins"): the
 * end of the agent's compaction bracket. Work it brackets that never ended is
 * not kept.
 */
export const COMPLETED_STANDALONE_TYPES = ['plugin/compaction/end'] as const;
/** Core-owned events that begin a turn or queue input: standalone work after them is not kept. */
export const BEGINS_WORK_TYPES = ['turn/start', 'inbox/add'] as const;

/**
 * Picks the closing `turn/end` seq for a branch: the first one at or after the
 * anchor; the last one when the anchor is omitted or past every turn/end.
 * Returns -1 when the log has no turn/end (the child holds only its marker).
 */
export async function selectBranchCut(ends: TurnEnds, anchorSeq?: number | null): Promise<number> {
  const omitted = anchorSeq === undefined || anchorSeq === null;
  const atAnchor = omitted ? undefined : await ends.atOrAfter(anchorSeq);
  if (atAnchor !== undefined) return atAnchor;
  const last = (await ends.last()) ?? -1;
  // Without an anchor, completed standalone work after the last turn (a compaction) is kept.
  if (omitted && ends.standaloneAfter) return (await ends.standaloneAfter(last)) ?? last;
  return last;
}

/** TurnEnds over a whole log (tests, small logs), standalone work included. */
export function turnEndsOfLog(log: ReadonlyArray<{ seq: number; type: string }>): TurnEnds {
  const ends = turnEndsOf(log.filter((e) => e.type === 'turn/end').map((e) => e.seq));
  return {
    ...ends,
    standaloneAfter(seq) {
      let found: number | undefined;
      for (const e of log) {
        if (e.seq <= seq) continue;
        if ((BEGINS_WORK_TYPES as readonly string[]).includes(e.type)) break;
        if ((COMPLETED_STANDALONE_TYPES as readonly string[]).includes(e.type)) found = e.seq;
      }
      return found;
    },
  };
}

/** TurnEnds over an ascending list of seqs (tests, small logs). */
export function turnEndsOf(seqs: readonly number[]): TurnEnds {
  return { atOrAfter: (seq) => seqs.find((s) => s >= seq), last: () => seqs.at(-1) };
}
