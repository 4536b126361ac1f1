// What a resolver hands the store to read a session's log: the log as a
// session row saw it. Whether its prefix is shared with an ancestor, and where
// those events are stored, is the store's business (lineage.ts): callers above
// the store pass the row and never look inside what they get back.
import { lineageOf, snapshotOf, type Lineage, type LineageRow } from './lineage.ts';
import type { LogRef } from './session-log.ts';

/**
 * The log as of a session row: read no further than the row's eventCount (a
 * session read is one snapshot), or than `endSeq` when given (the log as it
 * was after event endSeq - 1).
 */
export function logAsOf(row: LineageRow & { eventCount: number }, endSeq?: number): Lineage {
  const snapshot = snapshotOf(row);
  if (endSeq !== undefined) snapshot.endSeq = endSeq;
  return snapshot;
}

/** The session's log through its row's lineage when the row was read with it, else by its id (the store looks the lineage up). */
export const logOfRow = (row: LineageRow): LogRef => (row.inheritedRanges !== undefined ? lineageOf(row) : row.id);
