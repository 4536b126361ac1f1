// What a read costs Postgres: the statements a piece of work runs, recorded
// from the service's pool (AppOptions.onQuery), run again under EXPLAIN
// ANALYZE, and the rows their plans read from a table — those a scan passed
// on and those it read and dropped (a filter, a recheck), over all its loops:
// a join or a filter can read far more rows than the statement returns.
import type pg from 'pg';

/** A statement as the pool ran it, with the rows it returned. */
export interface RecordedStatement {
  sql: string;
  params: unknown[];
  rows: number;
}

/** A node of a plan as EXPLAIN (FORMAT JSON) gives it (the fields the tests read). */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Subplan Name'?: string;
  Filter?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Shared Hit Blocks'?: number;
  'Shared Read Blocks'?: number;
  Plans?: PlanNode[];
}

/** Records the statements whose SQL matches `pattern` while `during` runs: pass `onQuery` to the app or pool. */
export function statementRecorder(pattern: RegExp) {
  let recording = false;
  const statements: RecordedStatement[] = [];
  return {
    onQuery: (sql: string, rows: number, params: unknown[]) => {
      if (recording && pattern.test(sql)) statements.push({ sql, params, rows });
    },
    /** The statements `work` ran, in order. */
    async during(work: () => Promise<unknown>): Promise<RecordedStatement[]> {
      statements.length = 0;
      recording = true;
      try {
        await work();
      } finally {
        recording = false;
      }
      return statements.splice(0);
    },
  };
}

/** A statement that only reads (a SELECT, or a WITH ahead of one): one that may be run again to be explained. */
export const isSelect = (sql: string) => /^\s*(SELECT|WITH)\b/i.test(sql);

/**
 * The plan Postgres runs the statement with, running it again (ANALYZE: actual
 * rows and loops). `rolledBack`: in a transaction rolled back after, for a
 * statement that writes (a claim's UPDATE).
 */
export async function analyzed(pool: pg.Pool, sql: string, params: unknown[], opts: { rolledBack?: boolean } = {}): Promise<PlanNode> {
  const explain = `EXPLAIN (ANALYZE, FORMAT JSON) ${sql}`;
  if (!opts.rolledBack) return planOf(await pool.query(explain, params));
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    return planOf(await client.query(explain, params));
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
}

/** The plan's root in an EXPLAIN (FORMAT JSON) result. */
export const planOf = (result: pg.QueryResult): PlanNode => result.rows[0]['QUERY PLAN'][0].Plan;

/** The nodes of a plan, depth first from `root`. */
export function planNodes(root: PlanNode): PlanNode[] {
  const out: PlanNode[] = [];
  const walk = (n: PlanNode) => {
    out.push(n);
    for (const c of n.Plans ?? []) walk(c);
  };
  walk(root);
  return out;
}

/** The rows one scan node read over all its loops: those it passed on and those its filter or recheck dropped (EXPLAIN gives them per loop). */
export const rowsReadBy = (n: PlanNode): number =>
  ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * (n['Actual Loops'] ?? 1);

/** The rows the plan's scans of `table` read below `root` (a bitmap index scan names no table: the heap scan over it counts). */
export function tableRowsRead(root: PlanNode, table: string): number {
  return planNodes(root)
    .filter((n) => n['Relation Name'] === table)
    .reduce((sum, n) => sum + rowsReadBy(n), 0);
}
