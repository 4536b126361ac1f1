import { parse } from 'pg-connection-string';
import type { PoolConfig } from 'pg';

/** How the service's connections show in pg_stat_activity, unless the URL names them (`?application_name=`). */
export const APPLICATION_NAME = 'forkline';

/** Discrete pg fields from a connection URL (the Prisma adapter needs them discrete). */
export function pgConfigFromUrl(url: string): PoolConfig {
  const c = parse(url);
  return {
    host: c.host ?? '127.0.0.1',
    port: c.port ? Number(c.port) : 5432,
    user: c.user ?? undefined,
    password: c.password ?? undefined,
    database: c.database ?? undefined,
    application_name: c.application_name ?? APPLICATION_NAME,
  };
}
