// migrate() applies prisma/migrations without the CLI, recording them in
// Prisma's own bookkeeping (`_prisma_migrations`) as `prisma migrate deploy`
// does, so that `prisma migrate status` agrees with it.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ensureDatabase, expectedMigrations, migrate, pendingMigrations } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { pgServerUrl } from '../helpers/db.ts';

const MIGRATIONS = path.resolve('prisma/migrations');
const opened: pg.Client[] = [];

/** An empty database (no tables at all) and a client on it. */
async function emptyDatabase() {
  const url = `${pgServerUrl()}/forkline_migrate_${crypto.randomBytes(4).toString('hex')}`;
  await ensureDatabase(url);
  const db = new pg.Client(pgConfigFromUrl(url));
  await db.connect();
  opened.push(db);
  return { url, db };
}

/** A migrations folder: this build's first `keep` migrations and the extra ones given. */
function migrationsDir(keep: number, extra: Record<string, string>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-migrations-'));
  for (const name of expectedMigrations().slice(0, keep)) fs.cpSync(path.join(MIGRATIONS, name), path.join(dir, name), { recursive: true });
  for (const [name, sql] of Object.entries(extra)) {
    fs.mkdirSync(path.join(dir, name));
    fs.writeFileSync(path.join(dir, name, 'migration.sql'), sql);
  }
  return dir;
}

const recorded = async (db: pg.Client) =>
  (
    await db.query<{ migration_name: string; checksum: string; finished_at: Date | null; applied_steps_count: number }>(
      'SELECT migration_name, checksum, finished_at, applied_steps_count FROM _prisma_migrations ORDER BY migration_name',
    )
  ).rows;

let main: { url: string; db: pg.Client };
beforeAll(async () => {
  main = await emptyDatabase();
});
afterAll(() => Promise.all(opened.map((c) => c.end())));

it('applies every migration of this build to an empty database and records each as Prisma does (name, checksum, finished)', async () => {
  await migrate(main.url);
  expect(await pendingMigrations(main.db, expectedMigrations())).toEqual([]);
  const rows = await recorded(main.db);
  expect(rows.map((r) => r.migration_name)).toEqual(expectedMigrations());
  for (const r of rows) {
    expect(r.checksum).toBe(
      crypto
        .createHash('sha256')
        .update(fs.readFileSync(path.join(MIGRATIONS, r.migration_name, 'migration.sql')))
        .digest('hex'),
    );
    expect(r.finished_at).toBeInstanceOf(Date);
    expect(r.applied_steps_count).toBe(1);
  }
  const { rows: tables } = await main.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_tables WHERE tablename IN ('Session', 'Event')`);
  expect(tables[0].n).toBe(2);
});

it('has nothing to do when all are applied', async () => {
  await migrate(main.url);
  expect((await recorded(main.db)).length).toBe(expectedMigrations().length);
});

it('is what `prisma migrate status` reads: up to date', () => {
  const r = spawnSync(process.execPath, ['scripts/prisma.mjs', 'migrate', 'status'], { env: { ...process.env, DATABASE_URL: main.url }, encoding: 'utf8' });
  expect(r.stdout + r.stderr).toContain('Database schema is up to date!');
  expect(r.status).toBe(0);
}, 120_000);

it('a failing migration leaves neither its changes nor its row, names itself, and the ones before it stay applied', async () => {
  const { url, db } = await emptyDatabase();
  const dir = migrationsDir(2, {
    '29990101000000_half_done': 'CREATE TABLE "HalfDone" (id int);\nSELECT no_such_function();',
    '29990102000000_after': 'CREATE TABLE "After" (id int);',
  });
  await expect(migrate(url, dir)).rejects.toThrow(/29990101000000_half_done: function no_such_function\(\) does not exist/);
  expect((await recorded(db)).map((r) => r.migration_name)).toEqual(expectedMigrations().slice(0, 2));
  const { rows } = await db.query(`SELECT tablename FROM pg_tables WHERE tablename IN ('HalfDone', 'After')`);
  expect(rows).toEqual([]);
  // Fixed, it applies, with the one after it.
  fs.writeFileSync(path.join(dir, '29990101000000_half_done', 'migration.sql'), 'CREATE TABLE "HalfDone" (id int);');
  await migrate(url, dir);
  expect((await recorded(db)).map((r) => r.migration_name)).toEqual([...expectedMigrations().slice(0, 2), '29990101000000_half_done', '29990102000000_after']);
});

it('refuses while a migration is recorded as started and never finished (a failed `prisma migrate deploy`), naming it', async () => {
  const { url, db } = await emptyDatabase();
  const dir = migrationsDir(1, { '29990101000000_next': 'CREATE TABLE "Next" (id int);' });
  await migrate(url, migrationsDir(1, {}));
  await db.query(`INSERT INTO _prisma_migrations (id, checksum, migration_name) VALUES ($1, 'x', '29990101000000_next')`, [crypto.randomUUID()]);
  await expect(migrate(url, dir)).rejects.toThrow(/29990101000000_next was started and never finished.*prisma migrate resolve/);
  const { rows } = await db.query(`SELECT 1 FROM pg_tables WHERE tablename = 'Next'`);
  expect(rows).toEqual([]);
});

it('processes migrating one database at once take turns: each migration is applied and recorded once', async () => {
  const { url, db } = await emptyDatabase();
  await Promise.all([migrate(url), migrate(url), migrate(url)]);
  expect((await recorded(db)).map((r) => r.migration_name)).toEqual(expectedMigrations());
});
