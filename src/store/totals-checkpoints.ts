// A log's totals (store/session-totals.ts) through a seq, so Session.totals
// sums only the events after the nearest one instead of the whole log
// (docs/long-sessions.md "Session totals").
//
// A checkpoint at seq s holds the sums over events 0..s. It is kept under the
// session that stores event s: every log that reads that event inherits 0..s
// with the same seqs (forks share their parent's prefix), so it holds for all
// of them, as the fold's checkpoints do (fold-checkpoints.ts). The log is
// append-only, so a checkpoint never goes stale. A few numbers each, so all
// are kept: a fork cut anywhere finds one near its cut.
import type pg from 'pg';
import { nearestCheckpoint } from './nearest-checkpoint.ts';
import { MAX_SEQ, type Db, type LogRef, type SessionLog } from './session-log.ts';

/** Sums over a log's events 0..seq (session-totals.ts explains each). */
export interface TotalsSums {
  turns: number;
  /** Turns with a turn/end (the others: the one running now). */
  endedTurns: number;
  steps: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars over the answers whose model had a price when they were written; null when none had. */
  costUsd: number | null;
  /** The turn/ends' times less the turn/starts' (ms), each closer a fork or a repair wrote timed when its turn stopped. */
  spanMs: number;
  /** When the last turn started (ms; 0: no turn yet). */
  lastStartMs: number;
}

export interface TotalsCheckpoint {
  seq: number;
  sums: TotalsSums;
}

/**
 * Turn brackets and answers one read sums before it keeps a checkpoint where it stopped: a read after it sums
 * at most about this many, what a log of a few hundred events costs.
 */
export const TOTALS_CHECKPOINT_EVERY = 256;

const COLUMNS = `seq, turns, "endedTurns", steps, "toolCalls", "inputTokens", "outputTokens", "costUsd", "spanMs", "lastStartMs"`;

export class TotalsCheckpoints {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: Pick<SessionLog, 'segments'>,
    /** TOTALS_CHECKPOINT_EVERY (tests keep them closer). */
    private readonly every = TOTALS_CHECKPOINT_EVERY,
  ) {}

  /** The checkpoint with the highest seq at or before `atSeq` that the log reads (one index probe per segment). */
  async nearest(ref: LogRef, atSeq = MAX_SEQ, db: Db = this.pool): Promise<TotalsCheckpoint | undefined> {
    const segments = await this.log.segments(ref, 0, atSeq, db);
    if (segments.length === 0) return undefined;
    const { rows } = await db.query<TotalsSums & { seq: number }>(nearestCheckpoint('TotalsCheckpoint', COLUMNS, segments));
    if (!rows[0]) return undefined;
    const { seq, ...sums } = rows[0];
    return { seq, sums };
  }

  /**
   * Keeps the sums over events 0..`seq` under the session that stores event `seq`, when the read that made them
   * summed `summed` brackets and answers, at least TOTALS_CHECKPOINT_EVERY. A session deleted meanwhile simply gets none.
   */
  async keep(ref: LogRef, { seq, sums: s }: TotalsCheckpoint, summed: number): Promise<void> {
    if (summed < this.every) return;
    const at = (await this.log.segments(ref, seq, seq))[0];
    if (!at) return;
    try {
      await this.pool.query(
        `INSERT INTO "TotalsCheckpoint" ("sessionId", "treeId", ${COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
         ON CONFLICT DO NOTHING`,
        [at.sessionId, at.treeId, seq, s.turns, s.endedTurns, s.steps, s.toolCalls, s.inputTokens, s.outputTokens, s.costUsd, s.spanMs, s.lastStartMs],
      );
    } catch (err) {
      if ((err as { code?: string }).code !== '23503') throw err; // the session was deleted meanwhile
    }
  }
}
