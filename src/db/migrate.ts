// Applies prisma/migrations with the Prisma CLI (`migrate deploy`, offline-safe
// through prisma.config.ts: JS engine + pg adapter).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { pgConfigFromUrl } from './pg-config.ts';

const require = createRequire(import.meta.url);
const root = fileURLToPath(new URL('../../', import.meta.url));

const DONE = /All migrations have been successfully applied|No pending migrations to apply/;

/**
 * Runs `prisma migrate deploy`. The CLI's adapter pool keeps the process alive
 * for ~10 s after it has finished, so it is stopped once it reports success.
 */
export async function migrate(databaseUrl: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const cli = require.resolve('prisma/build/index.js');
    const child = spawn(process.execPath, [cli, 'migrate', 'deploy'], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let succeeded = false;
    const collect = (chunk: Buffer) => {
      output += chunk.toString();
      if (!succeeded && DONE.test(output)) {
        succeeded = true;
        child.kill('SIGTERM');
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) =>
      succeeded || code === 0 ? resolve() : reject(new Error(`migrations failed:\n${output}`)),
    );
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
export async function pendingMigrations(pool: pg.Pool, expected: string[]): Promise<string[]> {
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
