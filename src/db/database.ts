// One pg pool per process, shared by Prisma (through the pg adapter) and by the
// store's raw-SQL hot paths (append, fork copy).
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from '@prisma/client';
import { pgConfigFromUrl } from './pg-config.ts';

export interface Database {
  pool: pg.Pool;
  prisma: PrismaClient;
  url: string;
  close(): Promise<void>;
}

export function openDatabase(url: string, opts: { max?: number; onQuery?: (sql: string) => void } = {}): Database {
  const pool = new pg.Pool({ ...pgConfigFromUrl(url), max: opts.max ?? 20 });
  pool.on('error', () => {}); // idle client errors (e.g. server restart) are retried by the next checkout
  const prisma = new PrismaClient({
    adapter: new PrismaPg(pool),
    log: opts.onQuery ? [{ emit: 'event', level: 'query' }] : [],
  });
  if (opts.onQuery) (prisma as any).$on('query', (e: { query: string }) => opts.onQuery!(e.query));
  return {
    pool,
    prisma,
    url,
    async close() {
      await prisma.$disconnect();
      await pool.end().catch(() => {});
    },
  };
}
