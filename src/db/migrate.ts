// Applies prisma/migrations as `prisma migrate deploy` does, without the CLI
// (ARCHITECTURE.md, Database tooling): Prisma owns the migrations and their
// bookkeeping, the `_prisma_migrations` table, and `prisma migrate status`
// reads what this records. Each migration runs in its own transaction with its
// row, so a failed one leaves neither a change nor a row behind.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgConfigFromUrl } from './pg-config.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const MIGRATIONS_DIR = path.join(root, 'prisma', 'migrations');

/** The advisory lock Prisma's schema engine holds while it migrates: processes starting together, and a `prisma migrate deploy`, take turns. */
const PRISMA_MIGRATE_LOCK = 72707369;

/** The table as Prisma's schema engine creates it. */
const CREATE_MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
  "id" VARCHAR(36) PRIMARY KEY NOT NULL,
  "checksum" VARCHAR(64) NOT NULL,
  "finished_at" TIMESTAMPTZ,
  "migration_name" VARCHAR(255) NOT NULL,
  "logs" TEXT,
  "rolled_back_at" TIMESTAMPTZ,
  "started_at" TIMESTAMPTZ NOT NULL DEFAULT now(),
  "applied_steps_count" INTEGER NOT NULL DEFAULT 0
)`;

/**
 * Applies the migrations of `dir` (default: this build's) that the database
 * lacks, oldest first. Refuses, as Prisma does, while a migration is recorded
 * as started and never finished (a failed `prisma migrate deploy`): `prisma
 * migrate resolve` settles it.
 */
export async function migrate(databaseUrl: string, dir = MIGRATIONS_DIR): Promise<void> {
  const client = new pg.Client(pgConfigFromUrl(databaseUrl));
  await client.connect();
  try {
    // The lock is taken per transaction, never per session: behind a transaction-mode pooler a session lock
    // stays with the server connection it was taken on, held for whoever gets that connection next.
    await locked(client, async () => {
      await client.query(CREATE_MIGRATIONS_TABLE);
      const { rows: failed } = await client.query<{ migration_name: string }>(
        'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NULL AND rolled_back_at IS NULL ORDER BY started_at',
      );
      if (failed.length)
        throw new Error(
          `migrations failed: ${failed[0].migration_name} was started and never finished; settle it with \`prisma migrate resolve\` (--applied or --rolled-back), then start again`,
        );
    });
    for (const name of await pendingMigrations(client, expectedMigrations(dir))) {
      const sql = fs.readFileSync(path.join(dir, name, 'migration.sql'));
      try {
        await locked(client, async () => {
          // Another process may have applied it while this one waited for the lock.
          if (!(await pendingMigrations(client, [name])).length) return;
          const id = crypto.randomUUID();
          // Prisma's checksum: the SHA-256 of the file's bytes.
          const checksum = crypto.createHash('sha256').update(sql).digest('hex');
          await client.query('INSERT INTO _prisma_migrations (id, checksum, migration_name, started_at) VALUES ($1, $2, $3, now())', [id, checksum, name]);
          await client.query(sql.toString('utf8'));
          await client.query('UPDATE _prisma_migrations SET finished_at = clock_timestamp(), applied_steps_count = 1 WHERE id = $1', [id]);
        });
      } catch (err) {
        throw new Error(`migrations failed: ${name}: ${err instanceof Error ? err.message : String(err)} (nothing of it was applied)`, { cause: err });
      }
    }
  } finally {
    await client.end();
  }
}

/** Runs `work` in a transaction holding Prisma's migration lock (released at its end, whatever happens). */
async function locked(client: pg.Client, work: () => Promise<void>): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1)', [PRISMA_MIGRATE_LOCK]);
    await work();
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  }
}

const INVALID_CATALOG_NAME = '3D000';
/** Postgres' "database … does not exist", or the same as PgBouncer relays it (as a protocol error, 08P01). */
const isMissingDatabase = (err: unknown) => {
  const { code, message } = err as { code?: string; message?: string };
  return code === INVALID_CATALOG_NAME || (code === '08P01' && /^database ".*" does not exist$/.test(message ?? ''));
};
/** The database a server always has, through which a missing one is created. */
const MAINTENANCE_DATABASE = 'postgres';

/**
 * Makes sure the database named in the URL exists: a connection to it says so
 * (behind a pooler or on a managed Postgres, that is often the only database
 * we may reach). Only when Postgres answers that it does not exist is it
 * created through the maintenance database.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const cfg = pgConfigFromUrl(databaseUrl);
  const own = new pg.Client(cfg);
  try {
    await own.connect();
    return;
  } catch (err) {
    if (!isMissingDatabase(err)) throw err;
  } finally {
    await own.end().catch(() => {});
  }
  const name = String(cfg.database);
  const client = new pg.Client({ ...cfg, database: MAINTENANCE_DATABASE });
  try {
    await client.connect();
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) await client.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    if ((err as { code?: string }).code === '42P04') return; // created meanwhile by another process
    throw new Error(
      `database "${name}" does not exist, and it could not be created through the "${MAINTENANCE_DATABASE}" database ` +
        `(${err instanceof Error ? err.message : String(err)}): create it (CREATE DATABASE ${pg.escapeIdentifier(name)}) ` +
        `or let this role connect to "${MAINTENANCE_DATABASE}" with CREATEDB; behind a pooler, DATABASE_DIRECT_URL must reach Postgres itself`,
      { cause: err },
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/** True when every migration in prisma/migrations is applied (for /readyz). */
export async function pendingMigrations(pool: pg.Pool | pg.ClientBase, expected: readonly string[]): Promise<string[]> {
  const { rows } = await pool.query<{ migration_name: string }>(
    'SELECT migration_name FROM _prisma_migrations WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL',
  );
  const applied = new Set(rows.map((r) => r.migration_name));
  return expected.filter((m) => !applied.has(m));
}

/** The migrations this build expects: the folders of prisma/migrations. */
export function expectedMigrations(dir = MIGRATIONS_DIR): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
    .map((d) => d.name)
    .sort();
}
