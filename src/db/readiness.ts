// /readyz: the database answers and every migration this build ships is applied.
import type pg from 'pg';
import { pendingMigrations } from './migrate.ts';

export interface DatabaseReadiness {
  ready: boolean;
  checks: Record<string, string>;
}

export async function databaseReadiness(pool: pg.Pool, expected: string[], timeoutMs = 2000): Promise<DatabaseReadiness> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    const pending = await Promise.race([pendingMigrations(pool, expected), timeout]);
    return pending.length
      ? { ready: false, checks: { database: 'ok', migrations: `pending: ${pending.join(', ')}` } }
      : { ready: true, checks: { database: 'ok', migrations: 'ok' } };
  } catch (err) {
    // No driver message here: /readyz is unauthenticated.
    if ((err as { code?: string }).code === '42P01') return { ready: false, checks: { database: 'ok', migrations: 'none applied' } };
    return { ready: false, checks: { database: 'unreachable' } };
  } finally {
    clearTimeout(timer);
  }
}
