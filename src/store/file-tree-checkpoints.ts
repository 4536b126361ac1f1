// The file tree of a log as of a seq without folding its whole history:
// the tree is kept every CHECKPOINT_EVERY change sets (a
// FileTreeCheckpoint row), and a read folds only the change sets after the
// nearest one at or before its seq. Checkpoints are written by the reads
// themselves, as they fold past them: a log's first read pays the fold once,
// every later read at any seq folds fewer than CHECKPOINT_EVERY change sets
// (plus the ones appended since).
//
// A checkpoint at seq s of session X (s: a change set's result) is the fold of
// the change sets whose result lies at or before s. Every session that reads
// X's event s inherits X's events 0..s (forks share their parent's prefix and
// keep its seqs), so it holds for all of them: a fork's read uses, and writes,
// the checkpoints of the ancestor that stores those seqs.
import type pg from 'pg';
import { foldFileTree, type FileEntry, type FileTree } from '../core/file-tree.ts';
import type { Segment } from './lineage.ts';
import { nearestCheckpoint } from './nearest-checkpoint.ts';
import { CHANGE_SET_PAGE, MAX_SEQ, type ChangeSetPage, type Db, type LogRef, type SessionLog } from './session-log.ts';

/**
 * Change sets folded between checkpoints. A checkpoint stores the whole tree
 * (about 100 bytes a file), so this spacing bounds what they add to the log's
 * storage to a 64th of the tree per file-changing call, while a read folds at
 * most 64 change sets of a few rows each.
 */
export const CHECKPOINT_EVERY = 64;

type Encoded = Array<[path: string, size: number, hash: string, seq: number]>;

const encode = (tree: FileTree): Encoded => [...tree.values()].map((e) => [e.path, e.size, e.hash, e.seq]);
const decode = (rows: Encoded): FileTree => new Map(rows.map(([path, size, hash, seq]): [string, FileEntry] => [path, { path, size, hash, seq }]));

/** The session (and its tree) that stores seq `seq` of a log read through these segments. */
function storedAt(segments: readonly Segment[], seq: number): { sessionId: string; treeId: string } {
  const s = segments.find((g) => g.fromSeq <= seq && seq <= g.toSeq);
  if (!s) throw new Error(`seq ${seq} lies outside the segments read`);
  return { sessionId: s.sessionId, treeId: s.treeId };
}

type Kept = { sessionId: string; treeId: string; seq: number; tree: Encoded };

export class FileTreeCheckpoints {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    /** Change sets read per page when a read folds a history (default CHANGE_SET_PAGE). */
    private readonly page: ChangeSetPage = CHANGE_SET_PAGE,
  ) {}

  /** The tree as of `atSeq` (default: the end of the log): the nearest checkpoint and the change sets after it. */
  async tree(ref: LogRef, atSeq = MAX_SEQ, db: Db = this.pool): Promise<FileTree> {
    const segments = await this.log.segments(ref, 0, atSeq, db);
    if (segments.length === 0) return new Map();
    const at = segments[segments.length - 1].toSeq;
    const base = await this.nearest(segments, db);
    const tree = base ? decode(base.tree) : new Map<string, FileEntry>();
    // A page at a time, its checkpoints stored as it ends: the first read of a long history (an imported one of
    // thousands of change sets) holds one page of it and the trees folded in that page, not the history and a
    // tree per CHECKPOINT_EVERY change sets of it.
    let folded = 0;
    for await (const page of this.log.fileChangeSetPages(ref, at, this.page, db, base?.seq ?? 0)) {
      const kept: Kept[] = [];
      for (const c of page) {
        foldFileTree([c], tree);
        if (++folded % CHECKPOINT_EVERY === 0) kept.push({ ...storedAt(segments, c.seq + 1), seq: c.seq + 1, tree: encode(tree) });
      }
      if (kept.length) await this.keep(kept);
    }
    return tree;
  }

  /** The checkpoint with the highest seq that the log reads (one index probe per segment). */
  private async nearest(segments: readonly Segment[], db: Db): Promise<{ seq: number; tree: Encoded } | undefined> {
    const { rows } = await db.query<{ seq: number; tree: Encoded }>(nearestCheckpoint('FileTreeCheckpoint', 'c.seq, c.tree', segments));
    return rows[0];
  }

  /**
   * Stores checkpoints a read folded past. Outside the reader's transaction:
   * one that is not committed yet (an import) or a session deleted meanwhile
   * simply gets none, and the read does not fail for it.
   */
  private async keep(rows: Kept[]): Promise<void> {
    try {
      await this.pool.query(
        `INSERT INTO "FileTreeCheckpoint" ("sessionId", "treeId", seq, tree)
         SELECT k.s, k.r, k.q, k.t FROM unnest($1::text[], $2::text[], $3::int[], $4::jsonb[]) k(s, r, q, t)
         WHERE EXISTS (SELECT 1 FROM "Session" x WHERE x.id = k.s AND x."treeId" = k.r) ON CONFLICT DO NOTHING`,
        [rows.map((r) => r.sessionId), rows.map((r) => r.treeId), rows.map((r) => r.seq), rows.map((r) => JSON.stringify(r.tree))],
      );
    } catch (err) {
      if ((err as { code?: string }).code !== '23503') throw err;
    }
  }
}
