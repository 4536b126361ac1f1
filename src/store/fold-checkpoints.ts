// The agent's folded state of a log through a seq (agent/session-fold.ts), so
// a cold start reads the nearest checkpoint and the events after it instead of
// the whole log (docs/long-sessions.md "Cold starts").
//
// A checkpoint at seq s is the fold of events 0..s. It is kept under the
// session that stores event s: every session that reads that event inherits
// 0..s with the same seqs (forks share their parent's prefix), so it holds for
// all of them, as the file tree's checkpoints do (file-tree-checkpoints.ts).
// A fold holds its conversation, so a checkpoint is about as large as the
// log's text: only the last KEPT_PER_SESSION of each session are kept, each
// gzipped (in the thread pool, off the event loop): a cold start reads a tenth
// of the bytes, and the database sends them without decompressing its own.
// A checkpoint's history is decompressed only if the fold renders history again.
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import type { Segment } from './lineage.ts';
import { nearestCheckpoint } from './nearest-checkpoint.ts';
import { MAX_SEQ, type Db, type LogRef, type SessionLog } from './session-log.ts';

/** A session's newest checkpoints kept (a fork cut a little before the newest can still use the one before it). */
const KEPT_PER_SESSION = 2;

/**
 * The most a checkpoint's state or history may hold decompressed. A column
 * that says more (a decompression bomb), or that is not whole gzip (truncated,
 * corrupted), is not restored: the fold replays the log instead.
 */
export const MAX_FOLD_CHECKPOINT_TEXT_BYTES = 256 * 2 ** 20;

const gzip = promisify(zlib.gzip);
const gunzip = promisify(zlib.gunzip);

/** A checkpoint as a cold fold restores it: the state's text, and the history's, decompressed only when asked for. */
export interface FoldCheckpoint {
  seq: number;
  /** The session that stores it (its row's key). */
  sessionId: string;
  state: string;
  history(): string;
}

export class FoldCheckpoints {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    private readonly opts: { maxTextBytes?: number; warn?: (msg: string, err?: unknown) => void } = {},
  ) {}

  /** The checkpoint with the highest seq at or before `atSeq` that the log reads (one index probe per segment), with its state. */
  async nearest(ref: LogRef, atSeq = MAX_SEQ, db: Db = this.pool): Promise<FoldCheckpoint | undefined> {
    const segments = await this.log.segments(ref, 0, atSeq, db);
    if (segments.length === 0) return undefined;
    const { rows } = await db.query<{ sessionId: string; seq: number; state: Buffer; history: Buffer }>(
      nearestCheckpoint('FoldCheckpoint', 'c."sessionId", c.seq, c.state, c.history', segments),
    );
    if (!rows[0]) return undefined;
    const { sessionId, seq, state, history } = rows[0];
    const maxOutputLength = this.opts.maxTextBytes ?? MAX_FOLD_CHECKPOINT_TEXT_BYTES;
    try {
      // The history is read later, when history is rendered again: checked whole and within the bound now (streamed, nothing kept,
      // beside the state's decompression), so a restore that succeeds never fails then.
      const [stateText] = await Promise.all([gunzip(state, { maxOutputLength }), checkGzip(history, maxOutputLength)]);
      const text = stateText.toString('utf8');
      return { sessionId, seq, state: text, history: () => zlib.gunzipSync(history, { maxOutputLength }).toString('utf8') };
    } catch (err) {
      this.opts.warn?.(`fold checkpoint ${sessionId}@${seq} is not whole gzip within ${maxOutputLength} bytes: the log is replayed instead`, err);
      return undefined;
    }
  }

  /**
   * Keeps the fold of the log through `seq` under the session that stores that
   * event, and drops that session's older ones beyond KEPT_PER_SESSION. A
   * session deleted meanwhile simply gets none.
   */
  async keep(ref: LogRef, seq: number, fold: { state: string; history: string }): Promise<void> {
    const segments = await this.log.segments(ref, 0, seq);
    const at = storedAt(segments, seq);
    if (!at) return;
    // The fastest level: most of the gain for a fraction of the time.
    const [state, history] = await Promise.all([gzip(fold.state, { level: 1 }), gzip(fold.history, { level: 1 })]);
    try {
      await this.pool.query(
        `WITH kept AS (
           INSERT INTO "FoldCheckpoint" ("sessionId", "treeId", seq, state, history)
           SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM "Session" x WHERE x.id = $1 AND x."treeId" = $2)
           ON CONFLICT DO NOTHING RETURNING seq)
         DELETE FROM "FoldCheckpoint" c WHERE c."treeId" = $2 AND c."sessionId" = $1 AND EXISTS (SELECT 1 FROM kept) AND c.seq NOT IN (
           SELECT seq FROM "FoldCheckpoint" WHERE "treeId" = $2 AND "sessionId" = $1 AND seq <> $3 ORDER BY seq DESC LIMIT ${KEPT_PER_SESSION - 1}) AND c.seq <> $3`,
        [at.sessionId, at.treeId, seq, state, history],
      );
    } catch (err) {
      if ((err as { code?: string }).code !== '23503') throw err;
    }
  }
}

/** The session (and its tree) that stores seq `seq` of a log read through these segments. */
function storedAt(segments: readonly Segment[], seq: number): { sessionId: string; treeId: string } | undefined {
  const s = segments.find((g) => g.fromSeq <= seq && seq <= g.toSeq);
  return s && { sessionId: s.sessionId, treeId: s.treeId };
}

/** Rejects unless `bytes` are whole gzip (its checksum and length hold) of at most `max` bytes; holds one chunk at a time. */
async function checkGzip(bytes: Buffer, max: number): Promise<void> {
  let seen = 0;
  const count = new Writable({
    write(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      done(seen > max ? new RangeError(`more than ${max} bytes decompressed`) : null);
    },
  });
  await pipeline(Readable.from([bytes]), zlib.createGunzip({ chunkSize: 2 ** 20 }), count); // 1 MiB chunks: few callbacks on the event loop
}
