// Holding imports at their COMMIT, to see them queued, running or done without timing them: a deferred trigger makes
// every new session's COMMIT take an advisory lock (shared) that the test holds on a connection of its own. Locks
// are read for this database's backends only: pg_locks is the whole server's, and other files' tests run beside.
import type pg from 'pg';

const OURS = `pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())`;

/** New sessions' COMMITs wait on the advisory lock `lockSql` names (an SQL expression: NEW is the session's row). */
export async function holdCommits(pool: pg.Pool, lockSql: string): Promise<void> {
  await pool.query(`CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${lockSql}); RETURN NULL; END $$`);
  await pool.query(`CREATE CONSTRAINT TRIGGER test_hold_commit AFTER INSERT ON "Session" DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION test_hold_commit()`);
}

/** Transactions of this database waiting for advisory lock `lock` (imports at their COMMIT: each holds a pool connection). */
export const commitsWaiting = async (db: pg.ClientBase, lock: number) =>
  (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted AND ${OURS}`, [lock]))
    .rows[0].n;

/** The kinds of lock this database's backends wait for, sorted. */
export const locksWaitedFor = async (db: pg.ClientBase) =>
  (await db.query<{ locktype: string }>(`SELECT locktype FROM pg_locks WHERE NOT granted AND ${OURS} ORDER BY locktype`)).rows.map((r) => r.locktype);

/** A recording of one event, its session titled `title`. */
export const oneEventRecording = (title: string, id = 'ses_held') =>
  [
    { format: 'forkline.recording', version: 4, session: { id, title } },
    { seq: 0, type: 'session/title', data: { title } },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';
