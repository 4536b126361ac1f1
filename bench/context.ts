// Shared set-up for `npm run bench`: a database (embedded unless
// BENCH_DATABASE_URL is set), a store on it, and helpers for raw baselines.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { ensureDatabase, migrate } from '../src/db/migrate.ts';
import { openDatabase, type Database } from '../src/db/database.ts';
import { SessionStore } from '../src/store/session-store.ts';
import { toolEffectOf } from '../src/agent/tools.ts';

export const QUICK = process.env.BENCH_QUICK === '1';

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
    const pg = await startEmbeddedPostgres(path.join(dir, 'pg'));
    databaseUrl = `${pg.serverUrl}/forkline_bench`;
    stopEmbedded = async () => {
      await pg.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    };
  }
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
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
