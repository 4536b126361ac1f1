// Leases of external runners (issue 32, DESIGN §6): the same lease columns,
// fencing token and expiry forkline's own runner uses (leases.ts), taken by a
// runner outside forkline over GraphQL. Only sessions of an external runner
// pool (`runner` set) can be claimed here, and only those: forkline's own
// claims skip them (leases.ts RUN_BY_FORKLINE). The owner is the runner's id,
// prefixed so it never equals a forkline process's.
import type pg from 'pg';
import { ForklineError, sessionNotFound } from '../core/errors.ts';
import { LEASE_IS_FREE } from './leases.ts';
import type { SessionRow } from './session-rows.ts';

export const EXTERNAL_OWNER_PREFIX = 'runner:';

/** How long an external runner's lease lasts unless it asks otherwise (renewLease extends it). */
export const DEFAULT_RUNNER_LEASE_MS = 30_000;
export const MIN_RUNNER_LEASE_MS = 500;
export const MAX_RUNNER_LEASE_MS = 10 * 60_000;

export interface RunnerLease {
  sessionId: string;
  token: number;
  expiresAt: Date;
}

/** A session row as the lease checks read it. */
export type LeaseRow = Pick<SessionRow, 'eventCount' | 'leaseToken' | 'leaseOwner' | 'leaseExpiresAt' | 'runner'>;

export const leaseLost = (sessionId: string, why: string) =>
  new ForklineError('LEASE_LOST', `the lease on session ${sessionId} is not yours: ${why}; nothing was written`, { sessionId });

export class RunnerLeases {
  constructor(private readonly pool: pg.Pool) {}

  /**
   * Takes the lease of a session of an external pool when nobody holds it
   * (never taken, released, or expired). `eventCount`: the log's length as the
   * claim found it (what repair continues from).
   */
  async claim(tenant: string, sessionId: string, runnerId: string, ttlMs: number): Promise<RunnerLease & { eventCount: number }> {
    const { rows } = await this.pool.query<{ token: number; expiresAt: Date; eventCount: number }>(
      `UPDATE "Session" SET "leaseOwner" = $3, "leaseExpiresAt" = now() + $4 * interval '1 millisecond', "leaseToken" = "leaseToken" + 1
        WHERE id = $1 AND tenant = $2 AND runner IS NOT NULL AND ${LEASE_IS_FREE}
        RETURNING "leaseToken" AS token, "leaseExpiresAt" AS "expiresAt", "eventCount"`,
      [sessionId, tenant, EXTERNAL_OWNER_PREFIX + runnerId, ttlMs],
    );
    if (rows[0]) return { sessionId, ...rows[0] };
    const row = await this.row(tenant, sessionId);
    if (row.runner == null) {
      throw new ForklineError('BAD_USER_INPUT', `session ${sessionId} is run by forkline's own agent, not by an external runner pool`, { sessionId });
    }
    throw new ForklineError('SESSION_BUSY', `session ${sessionId} is held by ${ownerName(row.leaseOwner)} until ${row.leaseExpiresAt?.toISOString()}`, {
      sessionId,
      expiresAt: row.leaseExpiresAt?.toISOString(),
    });
  }

  /** Extends a lease still held under `token`; LEASE_LOST otherwise. */
  async renew(tenant: string, sessionId: string, token: number, ttlMs: number): Promise<RunnerLease> {
    const { rows } = await this.pool.query<{ token: number; expiresAt: Date }>(
      `UPDATE "Session" SET "leaseExpiresAt" = now() + $4 * interval '1 millisecond'
        WHERE id = $1 AND tenant = $2 AND "leaseToken" = $3 AND starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}')
        RETURNING "leaseToken" AS token, "leaseExpiresAt" AS "expiresAt"`,
      [sessionId, tenant, token, ttlMs],
    );
    if (rows[0]) return { sessionId, ...rows[0] };
    await this.row(tenant, sessionId);
    throw leaseLost(sessionId, 'released, or taken by another runner after it expired');
  }

  /** Gives a lease held under `token` back; LEASE_LOST when it is not held under it. */
  async release(tenant: string, sessionId: string, token: number, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    const { rowCount } = await client.query(
      `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL
        WHERE id = $1 AND tenant = $2 AND "leaseToken" = $3 AND starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}')`,
      [sessionId, tenant, token],
    );
    if (rowCount) return;
    await this.row(tenant, sessionId);
    throw leaseLost(sessionId, 'released already, or taken by another runner after it expired');
  }

  /**
   * The row a write under `token` is checked against before it is tried: the
   * token must be the lease's and the lease held (a released lease fences
   * nothing). The append itself is conditional on the token too (the store's
   * fencing), so a takeover between this read and it still writes nothing.
   */
  async held(tenant: string, sessionId: string, token: number): Promise<LeaseRow> {
    const row = await this.row(tenant, sessionId);
    if (row.leaseToken !== token || !row.leaseOwner?.startsWith(EXTERNAL_OWNER_PREFIX)) {
      throw leaseLost(sessionId, row.leaseOwner ? `it is held under another token now` : 'nobody holds it (released, or never claimed)');
    }
    return row;
  }

  /** Sessions of the pool with work (an open turn or queued input) that nobody holds, oldest first. */
  async runnable(tenant: string, pool: string, limit = 100): Promise<SessionRow[]> {
    const { rows } = await this.pool.query<SessionRow>(
      `SELECT * FROM "Session"
        WHERE runner = $2 AND (status = 'RUNNING' OR "pendingInputCount" > 0) AND tenant = $1 AND ${LEASE_IS_FREE}
        ORDER BY "updatedAt" LIMIT $3`,
      [tenant, pool, limit],
    );
    return rows;
  }

  private async row(tenant: string, sessionId: string): Promise<LeaseRow> {
    const { rows } = await this.pool.query<LeaseRow>(
      'SELECT "eventCount", "leaseToken", "leaseOwner", "leaseExpiresAt", runner FROM "Session" WHERE id = $1 AND tenant = $2',
      [sessionId, tenant],
    );
    if (!rows[0]) throw sessionNotFound(sessionId);
    return rows[0];
  }
}

/** Whether a row's lease is free for a claim (the same condition as LEASE_IS_FREE). */
export function leaseIsFree(row: Pick<SessionRow, 'leaseOwner' | 'leaseExpiresAt'>, now = Date.now()): boolean {
  return row.leaseOwner == null || (row.leaseExpiresAt != null && row.leaseExpiresAt.getTime() < now);
}

/** The runner id an external lease owner names; undefined for forkline's own processes. */
export function externalRunnerOf(owner: string | null | undefined): string | undefined {
  return owner?.startsWith(EXTERNAL_OWNER_PREFIX) ? owner.slice(EXTERNAL_OWNER_PREFIX.length) : undefined;
}

const ownerName = (owner: string | null) => (externalRunnerOf(owner) !== undefined ? `runner ${externalRunnerOf(owner)}` : 'another holder');
