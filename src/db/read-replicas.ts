// Hot standbys for reads (DATABASE_READ_URL): one pool each, and what each
// replays, polled. Two ways to read there without a stale answer. Events never
// change once written, so a standby's copy of one is the primary's: a reader
// that knows how far a log goes reads what the standby has and the rest from
// the primary (store/session-log.ts, "from a standby"). Anything else is read
// there only when the standby has replayed all the primary had written when the
// read began (readCaughtUp). A standby that lags or is gone costs a primary
// read, never a wrong one.
import type pg from 'pg';
import { createPool, DEFAULT_POOL_MAX } from './database.ts';
import { holdStatements, readingFor, type StatementScope, type StatementTimeouts } from './statement-deadlines.ts';

/** A connection or a pool a read runs on. */
type Db = Pick<pg.Pool, 'query'> | pg.PoolClient;
import { isDatabaseUnavailable } from './unavailable.ts';

/** How often each standby's replay position is read (lag in /readyz and /metrics). */
export const STANDBY_POLL_MS = 500;

export interface StandbyStatus {
  /** `standby1`, `standby2`…, in DATABASE_READ_URL's order (never the URL: /readyz is unauthenticated). */
  name: string;
  /** Its last poll answered and it is in recovery (a hot standby). */
  up: boolean;
  /** WAL bytes the primary has written that it has not replayed (undefined: unknown). */
  lagBytes?: number;
  /** Seconds since it replayed the last transaction, while it is behind (0 when caught up). */
  lagSeconds?: number;
}

interface Standby {
  status: StandbyStatus;
  pool: pg.Pool;
}

/**
 * A read a standby gave up on that the primary would answer: cancelled by a
 * conflict with the WAL it replays (40001, 40P01: a row it read was vacuumed
 * on the primary, a lock replayed) or by the pool's query timeout.
 */
export function isStandbyCancel(err: unknown): boolean {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  return code === '40001' || code === '40P01' || (typeof message === 'string' && /conflict with recovery|Query read timeout/i.test(message));
}

/**
 * The primary's WAL position that holds every commit acknowledged so far: where
 * it has written WAL to (a commit is flushed before it is acknowledged), or,
 * with synchronous_commit off (acknowledged before its record is written),
 * where it has inserted WAL to — further ahead under writes, so fewer reads
 * find a standby caught up.
 */
const FENCE = `SELECT (CASE WHEN current_setting('synchronous_commit') = 'off' THEN pg_current_wal_insert_lsn() ELSE pg_current_wal_lsn() END)::text AS lsn`;

/** "16/B374D848" → a number of bytes (exact up to 2^53: petabytes of WAL). */
export function lsnBytes(lsn: string): number {
  const [hi, lo] = lsn.split('/');
  return parseInt(hi, 16) * 2 ** 32 + parseInt(lo, 16);
}

export class ReadReplicas {
  private readonly standbys: Standby[];
  private readonly pollMs: number;
  private readonly onPoll?: (statuses: StandbyStatus[]) => void;
  private next = 0;
  private timer?: NodeJS.Timeout;
  private polling?: Promise<void>;

  constructor(
    urls: readonly string[],
    private readonly primary: pg.Pool,
    opts: { max?: number; pollMs?: number; onPoll?: (statuses: StandbyStatus[]) => void; statementTimeouts?: StatementTimeouts } = {},
  ) {
    this.pollMs = opts.pollMs ?? STANDBY_POLL_MS;
    this.onPoll = opts.onPoll;
    this.standbys = urls.map((url, i) => {
      // A standby that does not answer is given up on quickly: the primary answers instead.
      const pool = createPool(url, { max: opts.max ?? DEFAULT_POOL_MAX, connectionTimeoutMillis: 1000, query_timeout: 5000 }, opts.statementTimeouts);
      return { pool, status: { name: `standby${i + 1}`, up: false } };
    });
  }

  /** Polls once (so the first reads know which are up), then every pollMs. */
  async start(): Promise<void> {
    await this.poll();
    this.timer = setInterval(() => void (this.polling ??= this.poll().finally(() => (this.polling = undefined))), this.pollMs);
    this.timer.unref();
  }

  /** A standby to try, round robin among those up; undefined: read the primary. */
  pick(): { pool: pg.Pool; failed: (err: unknown) => void } | undefined {
    for (let i = 0; i < this.standbys.length; i++) {
      const s = this.standbys[(this.next + i) % this.standbys.length];
      if (!s.status.up) continue;
      this.next = (this.next + i + 1) % this.standbys.length;
      // Down until its next poll answers: the reads meanwhile go to the primary.
      return { pool: s.pool, failed: () => void (s.status.up = false) };
    }
    return undefined;
  }

  /**
   * Runs `read` on a standby that has replayed all the primary had written when
   * it was called — so everything committed before the request, whatever a
   * client wrote or was shown before asking — or else on the primary. The
   * primary's WAL position and the standby's replay position are asked at once
   * (the latter on the connection that then reads: replay only moves forward,
   * so a standby that had replayed past the primary's position then reads a
   * snapshot that holds it). A standby that cannot answer, or cancels the read
   * (a conflict with its replay, a timeout), costs a read on the primary.
   */
  async readCaughtUp<T>(read: (db: Db) => Promise<T>, onRead?: (served: 'standby' | 'primary') => void, statements?: StatementScope): Promise<T> {
    const standby = this.pick();
    const primary = readingFor(this.primary, statements);
    if (!standby) {
      onRead?.('primary'); // every standby down: counted, or the metric would show the reads stopping
      return read(primary);
    }
    const fence = this.primary.query<{ lsn: string }>(FENCE).then((r) => lsnBytes(r.rows[0].lsn));
    fence.catch(() => {}); // awaited below, unless the standby failed first
    let client: pg.PoolClient | undefined;
    let broken: Error | undefined; // a connection a read failed on is not given back to the pool
    try {
      let replayed: number | undefined;
      try {
        client = await standby.pool.connect();
        const { rows } = await client.query<{ lsn: string | null }>('SELECT pg_last_wal_replay_lsn()::text AS lsn');
        replayed = rows[0].lsn === null ? undefined : lsnBytes(rows[0].lsn);
      } catch (err) {
        // Whatever stopped the check, the primary answers instead.
        broken = err instanceof Error ? err : new Error(String(err));
        if (isDatabaseUnavailable(err)) standby.failed(err);
      }
      if (client && !broken && replayed !== undefined && replayed >= (await fence)) {
        const unhold = statements && holdStatements(client, statements);
        try {
          const result = await read(client);
          onRead?.('standby');
          return result;
        } catch (err) {
          broken = err instanceof Error ? err : new Error(String(err));
          if (isDatabaseUnavailable(err)) standby.failed(err);
          else if (!isStandbyCancel(err)) throw err;
        } finally {
          unhold?.();
        }
      }
    } finally {
      client?.release(broken);
    }
    onRead?.('primary');
    return read(primary);
  }

  statuses(): StandbyStatus[] {
    return this.standbys.map((s) => ({ ...s.status }));
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.polling;
    await Promise.all(this.standbys.map((s) => s.pool.end().catch(() => {})));
  }

  private async poll(): Promise<void> {
    const written = await this.primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn').then(
      (r) => lsnBytes(r.rows[0].lsn),
      () => undefined,
    );
    await Promise.all(
      this.standbys.map(async (s) => {
        try {
          const { rows } = await s.pool.query<{ recovery: boolean; lsn: string | null; since: number | null }>(
            `SELECT pg_is_in_recovery() AS recovery, pg_last_wal_replay_lsn()::text AS lsn,
                    extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS since`,
          );
          const { recovery, lsn, since } = rows[0];
          const lagBytes = written === undefined || lsn === null ? undefined : Math.max(0, written - lsnBytes(lsn));
          s.status = { name: s.status.name, up: recovery, lagBytes, lagSeconds: lagBytes === 0 ? 0 : (since ?? undefined) };
        } catch {
          s.status = { name: s.status.name, up: false };
        }
      }),
    );
    this.onPoll?.(this.statuses());
  }
}

/**
 * `read` as of the request: on a standby that has caught up with it when there
 * are standbys (ReadReplicas.readCaughtUp), else on the primary.
 */
export function readCaughtUpOr<T>(
  standbys: Pick<ReadReplicas, 'readCaughtUp'> | undefined,
  primary: pg.Pool,
  read: (db: Db) => Promise<T>,
  onRead?: (served: 'standby' | 'primary') => void,
  statements?: StatementScope,
): Promise<T> {
  return standbys ? standbys.readCaughtUp(read, onRead, statements) : read(readingFor(primary, statements));
}

/** /readyz lines: `standby1: "ok, lag 0 bytes, 0 s"` or `"down"`. */
export function standbyChecks(statuses: readonly StandbyStatus[]): Record<string, string> {
  return Object.fromEntries(
    statuses.map((s) => [s.name, s.up ? `ok, lag ${s.lagBytes ?? '?'} bytes, ${s.lagSeconds === undefined ? '?' : s.lagSeconds.toFixed(1)} s` : 'down']),
  );
}
