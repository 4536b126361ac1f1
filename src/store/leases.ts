// One runner per session across processes (DESIGN §6), with leases held as
// row state on the session: owner, expiry, fencing token.
//
// Why rows and not advisory locks: a lock lives on a connection, so a process
// held one connection per running session (two busy processes needed ~170
// connections, measured) or all its locks on one connection that, once lost,
// frees every lock at once with nothing to stop the old runners. Rows cost no
// connection, work behind a transaction-mode pooler (nothing session-scoped),
// survive a brief connection loss, and carry a fencing token that every append
// of the runner must match: a takeover bumps it under the session's row lock —
// the same lock appends take — so once a takeover commits, the old runner's
// appends fail (SESSION_BUSY) and it stops. A dead process's leases expire;
// live processes renew theirs in one statement per heartbeat.
import type pg from 'pg';
import { statement } from './statements.ts';
import { lineageOf, type Lineage } from './lineage.ts';

export interface Lease {
  sessionId: string;
  /** The fencing token this holder's appends must match. */
  token: number;
  /** How long each of the holder's appends extends the lease. */
  ttlMs?: number;
  /**
   * The session's lineage, from the row the claim took: the runner's first
   * read needs it, and a process that never touched the session would look it
   * up with a statement of its own (two processes: 0.4 per turn).
   */
  lineage?: Lineage;
}

/** A lease a batch claim took, with the tenant whose slot it fills. */
export type TenantLease = Lease & { tenant: string };

/** A process's slots per tenant: the most one tenant may hold, and what each holds now. */
export interface TenantShare {
  perTenant: number;
  held: ReadonlyMap<string, number>;
}

/** A process asking for a session's lease along with an append (SessionStore.queueInput). */
export interface LeaseClaim {
  owner: string;
  ttlMs: number;
}

/** A session row a claim returns: what its lease and the runner's first read need. */
export type ClaimedRow = { id: string; token: number; inheritedRanges: unknown; inheritedEventCount: number };

/** The lease a claim took, from the row it returned (LeaseStore's claims, and a message's append: SessionStore.queueInput). */
export function leaseOf(row: ClaimedRow, ttlMs: number): Lease {
  return { sessionId: row.id, token: row.token, ttlMs, lineage: lineageOf(row) };
}

/** SQL on a session row: nobody holds its lease (never taken, given back, or expired), so a claim may take it. */
export const LEASE_IS_FREE = `("leaseOwner" IS NULL OR "leaseExpiresAt" < now())`;

/** SQL on a session row: forkline's own agent runs it (no external runner pool: issue 32); only such rows are claimed here. */
export const RUN_BY_FORKLINE = `"runner" IS NULL`;

export const DEFAULT_LEASE_TTL_MS = 10_000;

const LEASE_SQL = {
  claim: `UPDATE "Session" SET "leaseOwner" = $2, "leaseExpiresAt" = now() + $3 * interval '1 millisecond', "leaseToken" = "leaseToken" + 1
        WHERE id = $1 AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
        RETURNING id, "leaseToken" AS token, "inheritedRanges", "inheritedEventCount"`,
  claimRunnable: `WITH runnable AS (
         SELECT id FROM "Session"
          WHERE (status = 'RUNNING' OR "pendingInputCount" > 0)
            AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
            AND id <> ALL($4::text[])
          ORDER BY "updatedAt"
          LIMIT $3
          FOR NO KEY UPDATE SKIP LOCKED
       )
       UPDATE "Session" s SET "leaseOwner" = $1, "leaseExpiresAt" = now() + $2 * interval '1 millisecond', "leaseToken" = s."leaseToken" + 1
         FROM runnable WHERE s.id = runnable.id
       RETURNING s.id, s.tenant, s."leaseToken" AS token, s."inheritedRanges", s."inheritedEventCount"`,
  // For each tenant below its share of the claimer's slots ($7; $5/$6: what
  // each holds there), its oldest free runnable sessions, as many as its share
  // leaves, SKIP LOCKED; of those the batch takes first the ones whose tenant
  // would then hold the fewest (held + place in its queue), oldest first among
  // equals: a waiting tenant gets the next free slot before a tenant already
  // holding many. Rows locked and not taken are free again when the statement ends.
  claimRunnableFair: `WITH held AS (SELECT * FROM unnest($5::text[], $6::int[]) AS h(tenant, n)),
       waiting AS (
         SELECT DISTINCT "Session".tenant, coalesce(held.n, 0) AS n FROM "Session" LEFT JOIN held ON held.tenant = "Session".tenant
          WHERE (status = 'RUNNING' OR "pendingInputCount" > 0)
            AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
            AND id <> ALL($4::text[])
            AND coalesce(held.n, 0) < $7
       ),
       candidates AS (
         SELECT c.id, w.n + row_number() OVER (PARTITION BY w.tenant ORDER BY c."updatedAt") AS rank, c."updatedAt"
           FROM waiting w CROSS JOIN LATERAL (
             SELECT s.id, s."updatedAt" FROM "Session" s
              WHERE s.tenant = w.tenant
                AND (s.status = 'RUNNING' OR s."pendingInputCount" > 0)
                AND ${LEASE_IS_FREE} AND s.${RUN_BY_FORKLINE}
                AND s.id <> ALL($4::text[])
              ORDER BY s."updatedAt"
              LIMIT LEAST($3, $7 - w.n)
              FOR UPDATE SKIP LOCKED
           ) c
       ),
       runnable AS (SELECT id FROM candidates ORDER BY rank, "updatedAt" LIMIT $3)
       UPDATE "Session" s SET "leaseOwner" = $1, "leaseExpiresAt" = now() + $2 * interval '1 millisecond', "leaseToken" = s."leaseToken" + 1
         FROM runnable WHERE s.id = runnable.id
       RETURNING s.id, s.tenant, s."leaseToken" AS token, s."inheritedRanges", s."inheritedEventCount"`,
  // Rows locked in id order (byte order, as append batches lock theirs: append-batcher.ts), so a
  // heartbeat and a batch of appends never wait on each other in a cycle (they did: deadlocks, 1 s each).
  // Row locks here are NO KEY UPDATE (the lock the UPDATE takes anyway): FOR UPDATE made a fork whose
  // snapshot predates it fail its child's parent-key check (a serialization failure, issue 27).
  renew: `UPDATE "Session" s SET "leaseExpiresAt" = now() + $2 * interval '1 millisecond'
         FROM (SELECT x.id, l.token FROM "Session" x JOIN unnest($3::text[], $4::int[]) AS l(id, token) ON x.id = l.id
                WHERE x."leaseOwner" = $1
                ORDER BY x.id COLLATE "C" FOR NO KEY UPDATE OF x) held
        WHERE s.id = held.id AND s."leaseOwner" = $1 AND s."leaseToken" = held.token
       RETURNING s.id`,
  releaseIfIdle: `UPDATE "Session" SET
          "leaseOwner" = CASE WHEN status = 'IDLE' AND "pendingInputCount" = 0 THEN NULL ELSE "leaseOwner" END,
          "leaseExpiresAt" = CASE WHEN status = 'IDLE' AND "pendingInputCount" = 0 THEN NULL ELSE now() + $4 * interval '1 millisecond' END
        WHERE id = $1 AND "leaseToken" = $2 AND "leaseOwner" = $3
       RETURNING "leaseOwner" IS NULL AS released`,
  release: `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL WHERE id = $1 AND "leaseToken" = $2 AND "leaseOwner" = $3`,
};

export class LeaseStore {
  private readonly sql: Record<keyof typeof LEASE_SQL, ReturnType<typeof statement>>;

  constructor(
    private readonly pool: pg.Pool,
    /** This process, as lease owner: unique per process start. */
    readonly owner: string,
    readonly ttlMs = DEFAULT_LEASE_TTL_MS,
    opts: { prepare?: boolean } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.sql = Object.fromEntries(
      Object.entries(LEASE_SQL).map(([name, text]) => [name, statement(prepare, `lease_${name}`, text)]),
    ) as LeaseStore['sql'];
  }

  /**
   * Takes the session's lease when it is free or expired. Not when this process
   * holds it already: two claims of ours racing for one session (input arriving
   * while a batch claim runs) must not fence off the runner the first one started.
   */
  async claim(sessionId: string): Promise<Lease | null> {
    const { rows } = await this.pool.query<ClaimedRow>(this.sql.claim([sessionId, this.owner, this.ttlMs]));
    return rows[0] ? leaseOf(rows[0], this.ttlMs) : null;
  }

  /**
   * Claims up to `limit` sessions that need an agent (an open turn or queued
   * input) and that nobody holds, oldest first. SKIP LOCKED: processes
   * claiming at the same time take different sessions instead of queueing on
   * each other. `excluding`: the sessions the caller runs or is claiming
   * already (an expired lease of its own must not be claimed from under its
   * own runner). With `share`, no tenant ends up holding more than `perTenant`
   * of the caller's slots (`held`: what each holds now), and tenants holding
   * fewer go first. That claim scans the waiting sessions once, then once per
   * tenant among them (10,000 waiting of two tenants, on a busy 2-core machine:
   * 30-50 ms instead of 9-17), so callers whose share cannot bind (one tenant)
   * leave it out.
   */
  async claimRunnable(limit: number, excluding: readonly string[] = [], share?: TenantShare): Promise<TenantLease[]> {
    if (limit <= 0) return [];
    const held = [...(share?.held ?? [])];
    const { rows } = await this.pool.query<ClaimedRow & { tenant: string }>(
      share
        ? this.sql.claimRunnableFair([this.owner, this.ttlMs, limit, excluding, held.map(([t]) => t), held.map(([, n]) => n), share.perTenant])
        : this.sql.claimRunnable([this.owner, this.ttlMs, limit, excluding]),
    );
    return rows.map((r) => ({ ...leaseOf(r, this.ttlMs), tenant: r.tenant }));
  }

  /** Extends the leases still held, in one statement; returns the ids renewed (the others were taken over). */
  async renew(leases: Iterable<Lease>): Promise<Set<string>> {
    const list = [...leases];
    if (list.length === 0) return new Set();
    const { rows } = await this.pool.query<{ id: string }>(this.sql.renew([this.owner, this.ttlMs, list.map((l) => l.sessionId), list.map((l) => l.token)]));
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Gives the lease up unless the session still needs its agent, in one
   * statement: `released`; `busy` when work remains (the lease is kept and
   * renewed); `lost` when it is no longer ours.
   */
  async releaseIfIdle(lease: Lease): Promise<'released' | 'busy' | 'lost'> {
    const { rows } = await this.pool.query<{ released: boolean }>(this.sql.releaseIfIdle([lease.sessionId, lease.token, this.owner, this.ttlMs]));
    return rows.length === 0 ? 'lost' : rows[0].released ? 'released' : 'busy';
  }

  /** Gives the lease up whatever the session's state (shutdown, deletion, a stopped runner). */
  async release(lease: Lease): Promise<void> {
    await this.pool.query(this.sql.release([lease.sessionId, lease.token, this.owner]));
  }
}
