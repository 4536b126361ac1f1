// Deletion: a session, or its whole subtree, in one transaction — rows,
// events (the immutability trigger lets only this path through) and lineage —
// announced on DELETED_CHANNEL at its commit.
import type pg from 'pg';
import { ForklineError, sessionNotFound } from '../core/errors.ts';
import type { SessionLog } from './session-log.ts';
import type { TailStates } from './tail-states.ts';
import type { FileBlobs } from './file-blobs.ts';
import { DELETED_CHANNEL, encodeSessionsDeleted, notify } from './channels.ts';
import { isTransactionConflict, retried, sqlStateOf } from './retries.ts';
import { inTransaction, type BeforeCommit } from './transaction.ts';
import type { Scope } from './scope.ts';
import { isFork } from './session-rows.ts';

/** Deletions run again after a conflict with a concurrent transaction (retries.ts). */
const MAX_DELETE_ATTEMPTS = 6;

export class SessionDeletion {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    private readonly tails: TailStates,
    private readonly files: FileBlobs,
    private readonly report: (msg: string, err?: unknown) => void,
  ) {}

  /**
   * Deletes a session, and with `withDescendants` its whole subtree, in one
   * transaction: rows, events (the immutability trigger lets only this path
   * through) and lineage. A session with children is refused otherwise
   * (SESSION_HAS_CHILDREN): a child shares its ancestors' events, so no
   * surviving session ever loses an inherited event. Returns the deleted ids,
   * the session first.
   */
  async delete(
    scope: Scope,
    id: string,
    opts: { withDescendants?: boolean; beforeCommit?: BeforeCommit<{ deletedSessionIds: string[] }> } = {},
  ): Promise<string[]> {
    // A child forked while we collected the subtree (the parentId key refuses
    // the delete at the end of the statement), or a deadlock with a batch of
    // appends (append-batcher.ts) to the same sessions: again.
    const again = (err: unknown) => isTransactionConflict(err) || (opts.withDescendants === true && sqlStateOf(err) === '23503');
    return retried(MAX_DELETE_ATTEMPTS, again, () => this.deleteOnce(scope, id, opts.withDescendants ?? false, opts.beforeCommit));
  }

  private async deleteOnce(
    scope: Scope,
    id: string,
    withDescendants: boolean,
    beforeCommit?: BeforeCommit<{ deletedSessionIds: string[] }>,
  ): Promise<string[]> {
    let blobs: string[] = [];
    const ids = await inTransaction(
      this.pool,
      async (client) => {
        // A subtree lies in one fork tree: every statement names it (a distributed Postgres runs each on one shard).
        const treeId = await this.log.treeOf(id, client);
        // The row lock makes a concurrent fork of this session wait, then fail on its parent key.
        const { rowCount } = await client.query('SELECT 1 FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2 FOR UPDATE', [
          id,
          scope.tenant,
          treeId,
        ]);
        if (!rowCount) throw sessionNotFound(id);
        const { rows } = await client.query<{ id: string }>(
          `WITH RECURSIVE subtree AS (
           SELECT id FROM "Session" WHERE "parentId" = $1 AND "treeId" = $2 AND ${isFork()}
           UNION ALL
           SELECT s.id FROM "Session" s JOIN subtree ON s."parentId" = subtree.id WHERE s."treeId" = $2 AND ${isFork('s.')}
         ) SELECT id FROM subtree`,
          [id, treeId],
        );
        if (rows.length && !withDescendants) {
          throw new ForklineError(
            'SESSION_HAS_CHILDREN',
            `session ${id} has ${rows.length} descendant session(s) sharing its events; delete them first or pass withDescendants: true`,
            { sessionId: id, descendants: rows.length },
          );
        }
        const all = [id, ...rows.map((r) => r.id)];
        blobs = await this.files.storedBy(all, treeId, client);
        await client.query(`SET LOCAL forkline.deleting_sessions = 'on'`);
        // Events have no foreign key to their session: deleted here, after the rows. A descendant's append in flight
        // holds its row (only the root is locked above): deleting the row waits for it to commit, and the events'
        // delete, a later statement, sees what it wrote. Events first would miss them.
        await client.query('DELETE FROM "Session" WHERE id = ANY($1::text[]) AND "treeId" = $2', [all, treeId]);
        await this.log.deleteWrittenBy(all, treeId, client);
        await client.query('DELETE FROM "SessionTree" WHERE id = ANY($1::text[])', [all]); // their entries in the directory, after the rows that name them
        for (const payload of encodeSessionsDeleted(scope.tenant, all)) await notify(client, DELETED_CHANNEL, payload);
        await beforeCommit?.(client, { deletedSessionIds: all });
        return all;
      },
      undefined,
      'long',
    ); // a tree's events: its DELETE may take longer than a mutation
    this.log.forget(ids);
    this.tails.forget(ids);
    // File contents no remaining session stored (after the commit: a failure here leaves blobs, never a log without its files).
    if (blobs.length)
      await this.files.deleteUnreferenced(blobs).catch((err) => this.report('deleting file blobs failed (they stay until a later deletion)', err));
    return ids;
  }
}
