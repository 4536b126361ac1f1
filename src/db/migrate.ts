// Applies prisma/migrations with the Prisma CLI (`migrate deploy`, offline-safe
// through prisma.config.ts: JS engine + pg adapter). Prisma owns the migrations
// and their bookkeeping; what was applied is read from that bookkeeping (the
// `_prisma_migrations` table), never from the CLI's wording.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgConfigFromUrl } from './pg-config.ts';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('../../', import.meta.url));

/** How often the table is read while the CLI runs. */
const POLL_MS = 100;
const UNDEFINED_TABLE = '42P01';

/**
 * Applies the migrations of this build that the database lacks. The CLI's
 * adapter pool keeps its process alive for seconds after the work is done, so
 * it is stopped as soon as `_prisma_migrations` records every migration as
 * finished; its exit code and output matter only when it ends first.
 */
export async function migrate(databaseUrl: string, expected = expectedMigrations()): Promise<void> {
  const client = new pg.Client(pgConfigFromUrl(databaseUrl));
  await client.connect();
  const pending = async () => {
    try {
      return await pendingMigrations(client, expected);
    } catch (err) {
      if ((err as { code?: string }).code === UNDEFINED_TABLE) return expected; // a new database: Prisma creates the table
      throw err;
    }
  };
  try {
    if ((await pending()).length === 0) return;
    await deploy(databaseUrl, pending);
  } finally {
    await client.end();
  }
}

function deploy(databaseUrl: string, pending: () => Promise<string[]>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const cli = require.resolve('prisma/build/index.js');
    const child = spawn(process.execPath, [cli, 'migrate', 'deploy'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = ''; // for the error only
    let applied = false;
    let exited = false;
    const collect = (chunk: Buffer) => void (output += chunk.toString());
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    const poll = setInterval(() => {
      pending().then(
        (left) => {
          if (left.length > 0 || applied || exited) return;
          applied = true;
          child.kill('SIGTERM');
        },
        () => {}, // the CLI's own result decides then
      );
    }, POLL_MS);
    const fail = (why: string) => reject(new Error(`migrations failed: ${why}\n${output}`));
    child.on('error', (err) => {
      clearInterval(poll);
      reject(err);
    });
    child.on('close', (code) => {
      exited = true;
      clearInterval(poll);
      if (applied) return resolve();
      // Ended by itself: the table says whether the migrations are in.
      pending().then(
        (left) => (left.length === 0 ? resolve() : fail(`exit code ${code}, not applied: ${left.join(', ')}`)),
        (err: unknown) => fail(`exit code ${code}, ${err instanceof Error ? err.message : String(err)}`),
      );
    });
  });
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
export function expectedMigrations(dir = path.join(root, 'prisma', 'migrations')): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(path.join(dir, d.name, 'migration.sql')))
    .map((d) => d.name)
    .sort();
}
