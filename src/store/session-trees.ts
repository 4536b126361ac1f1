// The directory of fork trees (table SessionTree): which tree each session
// lies in. It is the one statement that finds a session by its id alone; every
// other statement on a session's rows names the tree it read here, so a
// distributed Postgres (tables distributed by treeId, this one a reference
// table: docs/operations.md) sends each to one shard. A session never changes
// trees, so what was read once is kept (bounded): a session this process
// created, forked, claimed or read costs no lookup at all.
import { LRUCache } from 'lru-cache';
import type pg from 'pg';
import { sessionNotFound } from '../core/errors.ts';
import { statement } from './statements.ts';

/** A connection or the pool: a lookup inside a transaction sees its snapshot. */
type Db = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

/** Sessions whose tree is kept: an entry is two short strings. */
const MAX_SESSIONS = 100_000;

/** SQL: a session's entry in the directory, written in the statement or transaction that creates its row. */
export const SESSION_TREE_INSERT = 'INSERT INTO "SessionTree" (id, "treeId") VALUES ($1, $2)';

export class SessionTrees {
  private readonly trees: LRUCache<string, string>;
  private readonly lookup: ReturnType<typeof statement>;
  private readonly lookupMany: ReturnType<typeof statement>;

  constructor(
    private readonly pool: pg.Pool,
    opts: { prepare?: boolean; max?: number } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.trees = new LRUCache({ max: opts.max ?? MAX_SESSIONS });
    this.lookup = statement(prepare, 'session_tree', 'SELECT "treeId" FROM "SessionTree" WHERE id = $1');
    this.lookupMany = statement(prepare, 'session_trees', 'SELECT id, "treeId" FROM "SessionTree" WHERE id = ANY($1::text[])');
  }

  /** The session's tree, or undefined when no such session exists. */
  async of(id: string, db: Db = this.pool): Promise<string | undefined> {
    const known = this.trees.get(id);
    if (known !== undefined) return known;
    const { rows } = await db.query<{ treeId: string }>(this.lookup([id]));
    if (rows[0]) this.trees.set(id, rows[0].treeId);
    return rows[0]?.treeId;
  }

  /** The session's tree; SESSION_NOT_FOUND when no such session exists. */
  async require(id: string, db: Db = this.pool): Promise<string> {
    const tree = await this.of(id, db);
    if (tree === undefined) throw sessionNotFound(id);
    return tree;
  }

  /** The trees of the sessions that exist among `ids` (one lookup for those not kept). */
  async ofMany(ids: readonly string[], db: Db = this.pool): Promise<Map<string, string>> {
    const found = new Map<string, string>();
    const missing: string[] = [];
    for (const id of ids) {
      const known = this.trees.get(id);
      if (known !== undefined) found.set(id, known);
      else missing.push(id);
    }
    if (missing.length) {
      const { rows } = await db.query<{ id: string; treeId: string }>(this.lookupMany([missing]));
      for (const r of rows) {
        this.remember(r.id, r.treeId);
        found.set(r.id, r.treeId);
      }
    }
    return found;
  }

  /** The session's tree when it is kept here (no lookup). */
  known(id: string): string | undefined {
    return this.trees.get(id);
  }

  /** Keeps a tree the caller read or wrote with the session's row. */
  remember(id: string, treeId: string): void {
    this.trees.set(id, treeId);
  }

  forget(ids: Iterable<string>): void {
    for (const id of ids) this.trees.delete(id);
  }
}
