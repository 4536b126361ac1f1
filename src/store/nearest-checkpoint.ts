// The checkpoint nearest before a seq that a log reads, in any of the tables
// of checkpoints kept under the session that stores their seq (fold, file
// tree, totals): one index probe per lineage segment, then the one row's
// columns, in one statement.
import type { Segment } from './lineage.ts';

/** The statement reading `columns` (of `table`, as `c`) of the row with the highest seq within `segments`. */
export function nearestCheckpoint(table: string, columns: string, segments: readonly Segment[]): { text: string; values: unknown[] } {
  const values: unknown[] = [];
  const p = (v: unknown) => `$${values.push(v)}`;
  const probes = segments.map(
    (g) =>
      `(SELECT "sessionId", seq, "treeId" FROM "${table}" WHERE "treeId" = ${p(g.treeId)} AND "sessionId" = ${p(g.sessionId)} AND seq BETWEEN ${p(g.fromSeq)} AND ${p(g.toSeq)} ORDER BY seq DESC LIMIT 1)`,
  );
  return {
    text: `WITH best AS (SELECT * FROM (${probes.join(' UNION ALL ')}) b ORDER BY seq DESC LIMIT 1)
       SELECT ${columns} FROM "${table}" c JOIN best USING ("sessionId", seq, "treeId")`,
    values,
  };
}
