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
    opts: { max?: number; pollMs?: number; onPoll?: (statuses: StandbyStatus[]) => void } = {},
  ) {
    this.pollMs = opts.pollMs ?? STANDBY_POLL_MS;
    this.onPoll = opts.onPoll;
    this.standbys = urls.map((url, i) => {
      // A standby that does not answer is given up on quickly: the primary answers instead.
      const pool = createPool(url, { max: opts.max ?? DEFAULT_POOL_MAX, connectionTimeoutMillis: 1000, query_timeout: 5000 });
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
   * client wrote or was shown before asking — or else on the primary. Checked in
   * two small statements (the primary's WAL position, then the standby's replay
   * position on the connection that then reads: replay only moves forward).
   */
  async readCaughtUp<T>(read: (db: pg.Pool | pg.PoolClient) => Promise<T>, onRead?: (served: 'standby' | 'primary') => void): Promise<T> {
    const standby = this.pick();
    if (!standby) return read(this.primary);
    const { rows } = await this.primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    let client: pg.PoolClient | undefined;
    try {
      client = await standby.pool.connect();
      const caught = await client.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [rows[0].lsn]);
      if (caught.rows[0].ok) {
        const result = await read(client);
        onRead?.('standby');
        return result;
      }
    } catch (err) {
      if (!isDatabaseUnavailable(err)) throw err;
      standby.failed(err);
    } finally {
      client?.release();
    }
    onRead?.('primary');
    return read(this.primary);
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

/** /readyz lines: `standby1: "ok, lag 0 bytes, 0 s"` or `"down"`. */
export function standbyChecks(statuses: readonly StandbyStatus[]): Record<string, string> {
  return Object.fromEntries(
    statuses.map((s) => [s.name, s.up ? `ok, lag ${s.lagBytes ?? '?'} bytes, ${s.lagSeconds === undefined ? '?' : s.lagSeconds.toFixed(1)} s` : 'down']),
  );
}
