// Reclaim: what a deletion leaves to delete after its sessions' rows went
// (docs/contract.md#deletion). The deletion itself removes the rows in one
// short transaction and records here, in Postgres, what remains: the events
// the sessions wrote and the file blobs they stored. Chunks then delete those
// events, at most `chunkEvents` per transaction, by whichever process takes
// the deletion's row (FOR UPDATE SKIP LOCKED: one chunk of a deletion at a
// time, never the same chunk twice), and last the blobs only they stored. A
// process that stops between chunks leaves the state here: the next one
// continues where it stopped.
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { ForklineError } from '../core/errors.ts';
import type { Db, SessionLog } from './session-log.ts';
import type { FileBlobs } from './file-blobs.ts';
import type { Scope } from './scope.ts';
import { inTransaction } from './transaction.ts';

/** Events one reclaim transaction deletes at most (FORKLINE_DELETE_CHUNK_EVENTS). */
export const DEFAULT_RECLAIM_CHUNK_EVENTS = 10_000;
/** Deleted sessions one chunk visits at most (a tree of many small forks: each costs a statement). */
const SESSIONS_PER_CHUNK = 100;
/** A finished deletion's progress stays readable this long, then goes. */
export const FINISHED_DELETION_KEPT_MS = 24 * 60 * 60 * 1000;

/** A deletion's progress (Query.sessionDeletion, DeleteSessionPayload.deletion). */
export interface DeletionProgress {
  sessionId: string;
  sessionCount: number;
  eventCount: number;
  reclaimedEventCount: number;
  createdAt: Date;
  finishedAt: Date | null;
}

export class DeletionReclaim {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    private readonly files: FileBlobs,
    private readonly chunkEvents = DEFAULT_RECLAIM_CHUNK_EVENTS,
  ) {}

  /**
   * Deletes the sessions' rows (`ids`, the deleted session first, all in tree
   * `treeId`) in the deleting transaction and records what they leave: the
   * events each wrote (its eventCount less what it inherits) and the blobs
   * `blobs` they stored. The rows' delete waits for an append in flight to a
   * descendant and counts what it wrote.
   */
  async begin(client: pg.PoolClient, scope: Scope, ids: readonly string[], treeId: string, blobs: readonly string[]): Promise<void> {
    const deletionId = `del_${randomUUID().replace(/-/g, '')}`;
    await client.query(
      `INSERT INTO "Deletion" (id, "sessionId", tenant, "treeId", "sessionCount", "eventCount", "blobHashes") VALUES ($1, $2, $3, $4, 0, 0, $5)`,
      [deletionId, ids[0], scope.tenant, treeId, blobs],
    );
    await client.query(
      `WITH gone AS (DELETE FROM "Session" WHERE id = ANY($1::text[]) AND "treeId" = $2 RETURNING id, "eventCount" - "inheritedEventCount" AS own),
            listed AS (INSERT INTO "DeletedSession" ("sessionId", "deletionId", "treeId") SELECT id, $3, $2 FROM gone)
       UPDATE "Deletion" SET "sessionCount" = (SELECT count(*) FROM gone), "eventCount" = (SELECT coalesce(sum(own), 0) FROM gone) WHERE id = $3`,
      [ids, treeId, deletionId],
    );
  }

  /**
   * Refuses to make a session of a derived id again (SESSION_BUSY) while the
   * events of a deleted one of that id are being reclaimed, in the making
   * transaction: its log would start among them.
   */
  async refuseWhileReclaiming(sessionId: string, client: pg.PoolClient): Promise<void> {
    const { rowCount } = await client.query(`SELECT 1 FROM "DeletedSession" WHERE "sessionId" = $1`, [sessionId]);
    if (rowCount) throw new ForklineError('SESSION_BUSY', `session ${sessionId} was deleted and is still being reclaimed; try again shortly`, { sessionId });
  }

  /**
   * Reclaims one chunk of the oldest unfinished deletion no other process is
   * reclaiming: up to `chunkEvents` events, or, once none are left, its blobs
   * (then it is finished). False when there was nothing to take.
   */
  async reclaimChunk(): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string }>(
        `SELECT id FROM "Deletion" WHERE "finishedAt" IS NULL ORDER BY "finishedAt", "createdAt" LIMIT 1 FOR UPDATE SKIP LOCKED`,
      );
      const deletion = rows[0];
      if (!deletion) return false;
      const { rows: sessions } = await client.query<{ sessionId: string; treeId: string; nextSeq: number }>(
        `SELECT "sessionId", "treeId", "nextSeq" FROM "DeletedSession" WHERE "deletionId" = $1 ORDER BY "sessionId" LIMIT ${SESSIONS_PER_CHUNK}`,
        [deletion.id],
      );
      if (sessions.length === 0) {
        // The events are gone: the file contents no remaining session stores (a failure leaves the deletion unfinished, tried again).
        // The tenant's copies only (its sessions' blobs are its own: docs/files.md "Contents are stored once per tenant").
        const { rows: held } = await client.query<{ tenant: string; blobHashes: string[] | null }>(
          `SELECT tenant, "blobHashes" FROM "Deletion" WHERE id = $1`,
          [deletion.id],
        );
        const blobs = held[0].blobHashes ?? [];
        if (blobs.length) await this.files.deleteUnreferenced(held[0].tenant, blobs);
        await client.query(`UPDATE "Deletion" SET "finishedAt" = now(), "blobHashes" = '{}' WHERE id = $1`, [deletion.id]);
        return true;
      }
      // The events' immutability trigger lets deletions alone through (migration 20261201000000_shared_fork_prefixes).
      await client.query(`SET LOCAL forkline.deleting_sessions = 'on'`);
      let budget = this.chunkEvents;
      for (const s of sessions) {
        const { deleted, last } = await this.log.deleteChunkWrittenBy(s.sessionId, s.treeId, s.nextSeq, budget, client);
        budget -= deleted;
        if (budget > 0) {
          // Fewer than asked: the session has none left.
          await client.query(`DELETE FROM "DeletedSession" WHERE "sessionId" = $2 AND "deletionId" = $1`, [deletion.id, s.sessionId]);
          continue;
        }
        await client.query(`UPDATE "DeletedSession" SET "nextSeq" = $3 WHERE "sessionId" = $2 AND "deletionId" = $1`, [deletion.id, s.sessionId, last + 1]);
        break;
      }
      await client.query(`UPDATE "Deletion" SET "reclaimedEventCount" = "reclaimedEventCount" + $2 WHERE id = $1`, [deletion.id, this.chunkEvents - budget]);
      return true;
    });
  }

  /** The progress of the latest deletion of session `sessionId` (the one deleteSession named), if the tenant's and still kept. */
  async progress(scope: Scope, sessionId: string, db: Db = this.pool): Promise<DeletionProgress | undefined> {
    const { rows } = await db.query<DeletionProgress>(
      `SELECT "sessionId", "sessionCount", "eventCount", "reclaimedEventCount", "createdAt", "finishedAt" FROM "Deletion"
        WHERE "sessionId" = $1 AND tenant = $2 ORDER BY "createdAt" DESC LIMIT 1`,
      [sessionId, scope.tenant],
    );
    return rows[0];
  }

  /** Forgets deletions finished longer ago than `olderThanMs`. */
  async prune(olderThanMs = FINISHED_DELETION_KEPT_MS): Promise<number> {
    const { rowCount } = await this.pool.query(`DELETE FROM "Deletion" WHERE "finishedAt" < now() - $1 * interval '1 millisecond'`, [olderThanMs]);
    return rowCount ?? 0;
  }
}
