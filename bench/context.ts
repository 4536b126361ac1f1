// Shared set-up for `npm run bench`: a database (embedded unless
// BENCH_DATABASE_URL is set), a store on it, and helpers for raw baselines.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { ensureDatabase, migrate } from '../src/db/migrate.ts';
import { openDatabase, type Database } from '../src/db/database.ts';
import { SessionStore } from '../src/store/session-store.ts';
import { toolEffectOf } from '../src/agent/tools.ts';

export const QUICK = process.env.BENCH_QUICK === '1';

/**
 * BENCH_COUNTS=1: the embedded Postgres loads pg_stat_statements, and the
 * `turns` runs report per turn what the database did (statements, WAL,
 * row updates and how many were HOT) from counters that do not depend on the
 * machine's load. Off by default: the extension's own work per statement is
 * then not in the timed figures.
 */
export const COUNTS = process.env.BENCH_COUNTS === '1';

export interface BenchContext {
  databaseUrl: string;
  db: Database;
  store: SessionStore;
  close(): Promise<void>;
}

export async function openBenchContext(): Promise<BenchContext> {
  let databaseUrl = process.env.BENCH_DATABASE_URL;
  let stopEmbedded = async () => {};
  if (!databaseUrl) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-bench-'));
    fs.chmodSync(dir, 0o755);
    const embedded = await startEmbeddedPostgres(path.join(dir, 'pg'), () => {}, {
      settings: COUNTS ? ['shared_preload_libraries=pg_stat_statements', 'pg_stat_statements.track=all'] : [],
    });
    databaseUrl = `${embedded.serverUrl}/forkline_bench`;
    stopEmbedded = async () => {
      await embedded.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  }
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  if (COUNTS) {
    const admin = new pg.Pool({ ...pgConfigFromUrl(databaseUrl), max: 1 });
    // Elsewhere (BENCH_DATABASE_URL) only where that server loads it and lets this user create it: else no statement figures.
    await admin
      .query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
      .catch(() => {})
      .finally(() => admin.end());
  }
  // Named apart from the servers the benches start, so counts of their connections leave it out.
  const db = openDatabase(`${databaseUrl}${databaseUrl.includes('?') ? '&' : '?'}application_name=forkline-bench`, { max: 40 });
  return {
    databaseUrl,
    db,
    store: new SessionStore(db.pool, toolEffectOf),
    async close() {
      await db.close();
      await stopEmbedded();
    },
  };
}

export const rssMB = () => process.memoryUsage().rss / 2 ** 20;
export const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}
