// The child-owned part of a fork (docs/contract.md#exact-fork): the inherited marker first, then
// the closers for the open tail of the copied prefix.
import type { NewEvent } from './events.ts';
import type { OpenTail } from './log-state.ts';
import { closersFor } from './repair.ts';
import type { ToolEffectLookup } from './tools.ts';

export interface ForkSeedInput {
  parentSessionId: string;
  /** Last copied parent seq; -1 when nothing is copied (a branch with no turn/end). */
  cutSeq: number;
  /**
   * What is open at the cut (the fold of the parent's events from the last
   * `turn/start` at or before it through the cut; undefined when nothing is).
   * The prefix is copied by the store and never needs to be in memory.
   */
  openTail: OpenTail | undefined;
  effectOf: ToolEffectLookup;
}

export interface ForkSeed {
  /** Marker then closers, with the seqs they take in the child. */
  events: Array<NewEvent & { seq: number }>;
  /** Copied parent events: cutSeq + 1 (marker and closers are not counted). */
  inheritedEventCount: number;
  /** Length of the complete seed: the first seq the child's own agent writes. */
  firstLiveSeq: number;
}

export function buildForkSeed({ parentSessionId, cutSeq, openTail, effectOf }: ForkSeedInput): ForkSeed {
  const inheritedEventCount = cutSeq + 1;
  const marker: NewEvent = {
    type: 'session/end-seed',
    data: { parentSessionId, cutSeq, inheritedEventCount },
  };
  const closers = closersFor(openTail, { kind: 'forked', parentSessionId, cutSeq }, effectOf);
  const events = [marker, ...closers].map((e, i) => ({ ...e, seq: inheritedEventCount + i }));
  return { events, inheritedEventCount, firstLiveSeq: inheritedEventCount + events.length };
}
