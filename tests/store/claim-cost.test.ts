// A claim of runnable sessions reads about the rows it takes, however many
// wait (migration 20261212020001_session_runnable_index): with 1,000 messages
// queued and a few free slots, a claim that read and sorted every runnable
// session cost Postgres more than the turns it started. The claim's statement
// is run again under EXPLAIN ANALYZE (rolled back): the Session rows it
// scans stay within the slots it fills plus the sessions this process holds.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { analyzed, planNodes, statementRecorder, tableRowsRead } from '../helpers/explain.ts';

const WAITING = 600;
const SLOTS = 5;
let db: Database;
const onClaim = statementRecorder(/WITH runnable AS/);

beforeAll(async () => {
  const url = await createTestDatabase();
  await migrate(url);
  db = openDatabase(url, { max: 2, onQuery: onClaim.onQuery });
  // Sessions with a queued input (runnable), and many idle ones beside them.
  await db.pool.query(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title, "pendingInputCount", "updatedAt")
       SELECT v, v, 'local', 'waiting', CASE WHEN n <= $1 THEN 1 ELSE 0 END, now() - n * interval '1 millisecond'
         FROM (SELECT n, 'ses_claim_' || n AS v FROM generate_series(1, $1 * 3) n) x
       RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s`,
    [WAITING],
  );
  await db.pool.query('ANALYZE "Session"');
});
afterAll(() => db?.close());

/** The Session rows the claim's CTE `runnable` reads (its UPDATE rolled back). */
async function sessionRowsScanned(sql: string, params: unknown[]): Promise<number> {
  const runnable = planNodes(await analyzed(db.pool, sql, params, { rolledBack: true })).find((n) => n['Subplan Name'] === 'CTE runnable');
  return tableRowsRead(runnable!, 'Session');
}

it('a claim of a few sessions among hundreds waiting reads about the rows it takes', async () => {
  const leases = new LeaseStore(db.pool, 'a-process', 60_000);
  // This process runs some already: they are runnable too, and excluded by the claim.
  const running = await leases.claimRunnable(SLOTS);
  expect(running).toHaveLength(SLOTS);
  let taken: Awaited<ReturnType<LeaseStore['claimRunnable']>> = [];
  const claims = await onClaim.during(
    async () =>
      (taken = await leases.claimRunnable(
        SLOTS,
        running.map((l) => l.sessionId),
      )),
  );
  expect(taken).toHaveLength(SLOTS);
  // The oldest waiting first, as before.
  expect(taken.map((l) => l.sessionId)).toEqual(Array.from({ length: SLOTS }, (_, i) => `ses_claim_${WAITING - SLOTS - i}`));
  expect(claims).toHaveLength(1);
  const scanned = await sessionRowsScanned(claims[0].sql, claims[0].params);
  expect(scanned).toBeGreaterThanOrEqual(SLOTS);
  // Run again, it passes over the sessions held before and those just taken, then takes as many more.
  expect(scanned).toBeLessThanOrEqual(4 * SLOTS);
});
