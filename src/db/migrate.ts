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

/** Creates the database named in the URL when it does not exist yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const cfg = pgConfigFromUrl(databaseUrl);
  const client = new pg.Client({ ...cfg, database: 'postgres' });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [cfg.database]);
    if (!rowCount) await client.query(`CREATE DATABASE "${String(cfg.database).replace(/"/g, '""')}"`);
  } finally {
    await client.end();
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
