import { parse } from 'pg-connection-string';
import type { PoolConfig } from 'pg';

/** Discrete pg fields from a connection URL (the Prisma adapter needs them discrete). */
export function pgConfigFromUrl(url: string): PoolConfig {
  const c = parse(url);
  return {
    host: c.host ?? '127.0.0.1',
    port: c.port ? Number(c.port) : 5432,
    user: c.user ?? undefined,
    password: c.password ?? undefined,
    database: c.database ?? undefined,
  };
}
