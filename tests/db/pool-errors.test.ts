// A connection lost while a client is checked out (between its holder's
// statements) must not be an unhandled 'error': that kills the process.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { createTestDatabase } from '../helpers/db.ts';

let db: Database;
beforeAll(async () => {
  db = openDatabase(await createTestDatabase(), { max: 4 });
});
afterAll(() => db.close());

it('a checked-out client whose backend is terminated fails its next statement and is discarded on release', async () => {
  const held = await db.pool.connect();
  const { rows } = await held.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  // Without a listener on the held client, this emits an unhandled 'error' (vitest fails the run).
  await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
  await new Promise((r) => setTimeout(r, 200));
  await expect(held.query('SELECT 1')).rejects.toThrow();
  held.release();
  const again = await db.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  expect(again.rows[0].pid).not.toBe(rows[0].pid);
});
