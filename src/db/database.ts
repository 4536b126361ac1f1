// One pg pool per process: the store's SQL (every read and write) runs on it.
import pg from 'pg';
import { pgConfigFromUrl } from './pg-config.ts';
import { storeTypes } from './pg-types.ts';
import { boundStatements, type StatementTimeouts } from './statement-deadlines.ts';

export interface Database {
  pool: pg.Pool;
  url: string;
  close(): Promise<void>;
}

/** Called after every statement the pool runs: its SQL, the rows it returned and its parameters. */
export type QueryObserver = (sql: string, rows: number, params: unknown[]) => void;

/** Connections per process (DATABASE_POOL_MAX), whatever the number of sessions it runs. */
export const DEFAULT_POOL_MAX = 10;

/**
 * `statementTimeouts`: every statement the pool runs is bounded in time
 * (statement-deadlines.ts); unset: none (tools and benchmarks that open the store).
 */
export function openDatabase(url: string, opts: { max?: number; onQuery?: QueryObserver; statementTimeouts?: StatementTimeouts } = {}): Database {
  // A request waits at most 10 s for a connection, then fails as SERVICE_UNAVAILABLE.
  const pool = createPool(url, { max: opts.max ?? DEFAULT_POOL_MAX, connectionTimeoutMillis: 10_000 }, opts.statementTimeouts);
  if (opts.onQuery) observeQueries(pool, opts.onQuery);
  return {
    pool,
    url,
    async close() {
      await pool.end().catch(() => {});
    },
  };
}

/** A pool of the store's connections to `url` (the primary's, or a hot standby's: read-replicas.ts). */
export function createPool(
  url: string,
  opts: Pick<pg.PoolConfig, 'max' | 'connectionTimeoutMillis' | 'query_timeout'>,
  statementTimeouts?: StatementTimeouts,
): pg.Pool {
  // Idle connections stay open (idleTimeoutMillis 0): pg-pool counts a closed one
  // out at once, while its backend may still be exiting, so closing an idle one
  // and opening another could briefly hold one more than `max`.
  const pool = new pg.Pool({ ...pgConfigFromUrl(url), ...opts, idleTimeoutMillis: 0, types: storeTypes });
  pool.on('error', () => {}); // idle client errors (e.g. server restart) are retried by the next checkout
  // A checked-out client has no listener of the pool's: a connection lost between
  // its holder's statements (Prisma's adapter, a transaction) would be an
  // unhandled 'error' and kill the process (seen on Node 22 with backends
  // terminated under load). Its holder's next statement fails instead, and
  // pg-pool discards the broken client when it is released.
  pool.on('connect', (client) => client.on('error', () => {}));
  if (statementTimeouts) boundStatements(pool, statementTimeouts);
  return pool;
}

type Result = pg.QueryResult | pg.QueryResult[] | undefined;
const rowsOf = (r: Result) => (Array.isArray(r) ? r.reduce((n, x) => n + (x.rows?.length ?? 0), 0) : (r?.rows?.length ?? 0));

/** Tests and benchmarks count statements and rows: every pooled client reports what it ran. */
function observeQueries(pool: pg.Pool, observe: QueryObserver) {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string; values?: unknown[] };
      const sql = typeof first === 'string' ? first : (first?.text ?? '');
      const params = (Array.isArray(args[1]) ? args[1] : typeof first === 'object' ? first?.values : undefined) ?? [];
      const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as (err: unknown, r: Result) => void) : undefined;
      if (cb) return query(...args, (err: unknown, r: Result) => (err || observe(sql, rowsOf(r), params), cb(err, r)));
      const out = query(...args) as Promise<Result> | undefined;
      out?.then?.(
        (r) => observe(sql, rowsOf(r), params),
        () => {},
      );
      return out;
    };
  });
}
