// Deletions reclaim their events and file contents after the sessions vanish
// (docs/contract.md#deletion): a test that counts those rows waits for it.
import type pg from 'pg';
import { waitFor } from './wait.ts';

/** Resolves once every deletion recorded in the database has finished reclaiming. */
export const reclaimed = (app: { db: { pool: pg.Pool } }) =>
  waitFor(async () => (await app.db.pool.query(`SELECT count(*)::int AS n FROM "Deletion" WHERE "finishedAt" IS NULL`)).rows[0].n === 0, {
    what: 'deletions reclaimed',
  });
