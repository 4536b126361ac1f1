// Where a session's children were forked (Session.forkPoints: seq → how many)
// placed among its conversation's items, and the label of a child next to the
// seq it was forked at. Pure (fork-markers.tsx reads and draws them).
import type { ConversationItem } from './conversation.ts';

/** seq → children forked there. */
export type ForkPoints = ReadonlyMap<number, number>;

export const NO_FORK_POINTS: ForkPoints = new Map();

/** A conversation row for the children forked at `seq` (placed after the items at or before it). */
export type ForkPointItem = { kind: 'fork-point'; seq: number; childCount: number; seqs: number[]; inherited: boolean };

/**
 * `items` with a fork-point row after the last item that starts at or before
 * each fork seq in from..to (the window the items were folded from: a seq
 * outside it belongs to items not loaded).
 */
export function withForkPoints<T extends ConversationItem>(items: readonly T[], points: ForkPoints, from: number, to: number): Array<T | ForkPointItem> {
  const seqs = [...points.keys()].filter((s) => s >= from && s <= to).sort((a, b) => a - b);
  if (!seqs.length) return [...items];
  const out: Array<T | ForkPointItem> = [];
  let next = 0;
  const flushThrough = (limit: number) => {
    for (; next < seqs.length && seqs[next] < limit; next++)
      out.push({ kind: 'fork-point', seq: seqs[next], childCount: points.get(seqs[next])!, seqs: [seqs[next]], inherited: false });
  };
  for (const item of items) {
    flushThrough(item.seqs[0]);
    out.push(item);
  }
  flushThrough(Infinity);
  return out;
}

/** A child's name with the seq it was forked at, without repeating a seq its title already ends with ("… · fork @13"). */
export function withForkSeq(title: string, seq: number | null | undefined): string {
  if (seq == null) return title;
  return new RegExp(`@${seq}$`).test(title) ? title : `${title} @${seq}`;
}
