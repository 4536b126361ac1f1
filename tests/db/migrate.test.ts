// migrate() knows what was applied from Prisma's own bookkeeping
// (`_prisma_migrations`), not from the CLI's output.
import crypto from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureDatabase, expectedMigrations, migrate, pendingMigrations } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { pgServerUrl } from '../helpers/db.ts';

let databaseUrl: string;
let db: pg.Client;
beforeAll(async () => {
  databaseUrl = `${pgServerUrl()}/forkline_migrate_${crypto.randomBytes(4).toString('hex')}`;
  await ensureDatabase(databaseUrl); // empty: no tables at all
  db = new pg.Client(pgConfigFromUrl(databaseUrl));
  await db.connect();
});
afterAll(() => db?.end());

it('applies every migration of this build to an empty database and records each as finished', async () => {
  await migrate(databaseUrl);
  expect(await pendingMigrations(db, expectedMigrations())).toEqual([]);
  const { rows } = await db.query<{ migration_name: string }>('SELECT migration_name FROM _prisma_migrations ORDER BY migration_name');
  expect(rows.map((r) => r.migration_name)).toEqual(expectedMigrations());
});

it('has nothing to do when all are applied', async () => {
  await migrate(databaseUrl);
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM _prisma_migrations');
  expect(rows[0].n).toBe(expectedMigrations().length);
});

it('fails, naming it, when a migration it expects is still not recorded once the CLI is done', async () => {
  const missing = '29991231000000_not_in_prisma_migrations';
  await expect(migrate(databaseUrl, [...expectedMigrations(), missing])).rejects.toThrow(`not applied: ${missing}`);
}, 90_000);
