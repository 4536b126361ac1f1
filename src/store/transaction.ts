// One transaction on one pooled connection: what createSession, forks,
// deletion and a contended append run in (retries.ts runs them again).
import type pg from 'pg';
import { holdStatements } from '../db/statement-deadlines.ts';

/** Runs inside a mutation's transaction, before it commits (idempotency keys are written here). */
export type BeforeCommit<T> = (client: pg.PoolClient, result: T) => Promise<void>;

/**
 * Runs `fn` in a transaction on one pooled connection. A checked-out client
 * has no error listener of the pool's: a connection lost between statements
 * would be an unhandled 'error' and kill the process. Ours records it; the
 * failed statement rejects, and the broken client is discarded.
 * Each statement is bounded by the mutation bound, or, for `long` work (a
 * fork, a deletion, an import), by the long one (db/statement-deadlines.ts).
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
  isolation = 'READ COMMITTED',
  work: 'short' | 'long' = 'short',
): Promise<T> {
  const client = await pool.connect();
  const unhold = holdStatements(client, work === 'long' ? 'long' : 'transaction');
  let lost: Error | undefined;
  const onError = (err: Error) => (lost = err);
  client.on('error', onError);
  try {
    await client.query(`BEGIN ISOLATION LEVEL ${isolation}`);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    if (!lost) await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.off('error', onError);
    unhold();
    client.release(lost ?? undefined);
  }
}
