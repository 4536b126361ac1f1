// One runner per session across processes (docs/contract.md#agent-loop), with leases held as
// row state on the session: owner, expiry, fencing token.
//
// Why rows and not advisory locks: a lock lives on a connection, so a process
// held one connection per running session (connections grew with active
// sessions) or all its locks on one connection that, once lost,
// frees every lock at once with nothing to stop the old runners. Rows cost no
// connection, work behind a transaction-mode pooler (nothing session-scoped),
// survive a brief connection loss, and carry a fencing token that every append
// of the runner must match: a takeover bumps it under the session's row lock —
// the same lock appends take — so once a takeover commits, the old runner's
// appends fail (SESSION_BUSY) and it stops. A dead process's leases expire;
// live processes renew theirs in one statement per heartbeat.
//
// A lease's life, and where each step is (all of its SQL is in this file):
// - taken: `claim` (a session woken here) or `claimRunnable` (work a process
//   finds: left behind, or announced on WORK_CHANNEL); or by a message's own
//   append — the controller asks the host for room (SessionHost.reserveClaim),
//   passes the claim to SessionStore.queueInput, whose statement takes the
//   lease when it is free (`leaseOnAppend`), and hands the outcome back
//   (SessionHost.claimSettled): one round trip queues the input and claims it;
// - held: every append of the runner is fenced by its token and extends the
//   lease (`leaseOnAppend`); the host's heartbeat `renew`s the others;
// - given back: by the turn's last append when it leaves the session idle
//   (SessionStore.appendReleasingIfIdle), by `releaseIfIdle` when a runner
//   stops with nothing left, by `release` on shutdown or deletion; or it
//   expires with its process, and another process's claim takes it over.
import type pg from 'pg';
import { statement } from './statements.ts';
import { lineageOf, type Lineage } from './lineage.ts';
import { ForklineError, sessionNotFound } from '../core/errors.ts';
import { SESSION_COLUMNS, SESSION_COLUMNS_SQL, type SessionRow } from './session-rows.ts';
import { SessionTrees } from './session-trees.ts';

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
  /**
   * The log's length when the claim took the lease: a fold that long is the
   * log then, and the run reads nothing first (SessionFold.claimedAt).
   */
  eventCount?: number;
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
export type ClaimedRow = { id: string; token: number; treeId: string; inheritedRanges: unknown; inheritedEventCount: number; eventCount?: number };

/** The lease a claim took, from the row it returned (LeaseStore's claims, and a message's append: SessionStore.queueInput). */
export function leaseOf(row: ClaimedRow, ttlMs: number): Lease {
  return { sessionId: row.id, token: row.token, ttlMs, lineage: lineageOf(row), eventCount: row.eventCount };
}

/** SQL on a session row: nobody holds its lease (never taken, given back, or expired), so a claim may take it. */
export const LEASE_IS_FREE = `("leaseOwner" IS NULL OR "leaseExpiresAt" < now())`;

/** The prefix of an external runner's lease owner (its runner id follows): never a forkline process's. */
export const EXTERNAL_OWNER_PREFIX = 'runner:';

/**
 * SQL on a session row: an external runner's lease ran out, whether or not
 * another runner claimed the session since (docs/runners.md "When the lease
 * ends"). Its holder may be paused (GC, SIGSTOP) and resume to write a call
 * whose tool then runs while another runner claims: nothing goes in under it,
 * and it is not renewed. Forkline's own processes extend theirs with each
 * append and are fenced by a takeover's token (SessionHost).
 */
export const EXTERNAL_LEASE_ENDED = `(starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}') AND "leaseExpiresAt" < now())`;

/**
 * SQL on a session row: its agent has nothing to run — idle with no queued
 * input, or a turn waiting for a tool call's approval (docs/contract.md#tool-approval),
 * whose input waits for the decision. Work (claims below) is a session
 * with an open turn or queued input that is not waiting.
 */
const NOTHING_TO_RUN = `(status = 'WAITING' OR (status = 'IDLE' AND "pendingInputCount" = 0))`;

/** SQL on a session row: forkline's own agent runs it (no external runner pool); only such rows are claimed here. */
export const RUN_BY_FORKLINE = `"runner" IS NULL`;

/**
 * The lease's part of an append's UPDATE of the session row (store/append.ts),
 * the statement that also writes the events: its SET clauses, the fence in its
 * WHERE and what it returns. The arguments are SQL expressions of the append's
 * parameters. A runner's append (`token`: its fencing token) writes only while
 * it holds the lease, and extends it by `ttlMs` — a working runner keeps its
 * lease without waiting for the heartbeat — and with `release` gives it back
 * when the batch leaves the session idle (`status`: the new status, or NULL;
 * `pendingDelta`: the change in waiting inputs): the last append of a turn
 * needs no second round trip. A queued message (`claimer`: the process that
 * received it) takes the lease for `ttlMs` when nobody holds it, as
 * LeaseStore.claim would: that process runs it without a claim of its own.
 * SET expressions all read the row before the update.
 */
export function leaseOnAppend(p: {
  token: string;
  ttlMs: string;
  release: string;
  claimer: string;
  status: string;
  pendingDelta: string;
  lineageWanted: string;
}) {
  // A turn waiting for approval has nothing to run until its decision: its lease goes back as an idle session's does.
  const releases = `${p.release}::boolean AND (COALESCE(${p.status}::"SessionStatus", status) = 'WAITING' OR (COALESCE(${p.status}::"SessionStatus", status) = 'IDLE' AND "pendingInputCount" + ${p.pendingDelta} = 0))`;
  // A session an external runner pool runs is never claimed by forkline's own agent.
  const claims = `${p.claimer}::text IS NOT NULL AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}`;
  return {
    set: `"leaseOwner" = CASE WHEN ${releases} THEN NULL WHEN ${claims} THEN ${p.claimer}::text ELSE "leaseOwner" END,
                "leaseExpiresAt" = CASE WHEN ${releases} THEN NULL
                                        WHEN (${p.token}::int IS NOT NULL OR ${claims}) AND ${p.ttlMs}::int IS NOT NULL THEN now() + ${p.ttlMs}::int * interval '1 millisecond'
                                        ELSE "leaseExpiresAt" END,
                "leaseToken" = CASE WHEN ${claims} THEN "leaseToken" + 1 ELSE "leaseToken" END`,
    /**
     * Once another process took the session over, the runner's append matches
     * no row and writes nothing; nor once its lease was given back (a released
     * lease fences nothing: no append may go in under it), nor once an
     * external runner's lease ran out (EXTERNAL_LEASE_ENDED).
     */
    fence: `(${p.token}::int IS NULL OR ("leaseToken" = ${p.token}::int AND "leaseOwner" IS NOT NULL AND NOT ${EXTERNAL_LEASE_ENDED}))`,
    /**
     * `released`, `held` (by the claimer), and what leaseOf needs of the row
     * when the claim took it: the session's lineage, which is also returned
     * when `lineageWanted` (the append found the row by id: its caller caches it).
     */
    returning: `"leaseOwner" IS NULL AS released, "leaseOwner" = ${p.claimer}::text AS held, "leaseToken",
                    CASE WHEN ${p.claimer}::text IS NOT NULL OR ${p.lineageWanted} THEN "inheritedRanges" END AS "inheritedRanges", "inheritedEventCount"`,
    /** Those columns as the append's SELECT reads them from its UPDATE (`cte`): an AppendLeaseRow. */
    selected: (cte: string) => `${cte}.released, ${cte}.held, ${cte}."leaseToken", ${cte}."treeId", ${cte}."inheritedRanges", ${cte}."inheritedEventCount"`,
  };
}

/** What an append's statement returned of the lease (leaseOnAppend's `returning`). */
export interface AppendLeaseRow {
  released: boolean;
  held: boolean | null;
  leaseToken: number;
  treeId: string;
  inheritedRanges: unknown;
  inheritedEventCount: number;
}

/** The lease a message's append took for `claim` (its claimer holds it: taken now, or already its own), if any. */
export function leaseTakenByAppend(sessionId: string, row: AppendLeaseRow, claim: LeaseClaim | undefined): Lease | undefined {
  // Adopting a lease the claimer already held is harmless (SessionHost.adopt).
  return claim && row.held
    ? leaseOf(
        { id: sessionId, token: row.leaseToken, treeId: row.treeId, inheritedRanges: row.inheritedRanges, inheritedEventCount: row.inheritedEventCount },
        claim.ttlMs,
      )
    : undefined;
}

export const DEFAULT_LEASE_TTL_MS = 10_000;

/**
 * A connection of the process's own, outside the pool, for the lease
 * heartbeat: in the pool, a renewal waited behind every request queued for a
 * connection (up to the pool's 10 s connection timeout, a whole lease) and
 * the lease lapsed while its holder was alive and working. `query` answers
 * undefined while the connection is down or being checked (the pool serves
 * then), and fails when no answer came within `deadlineMs` (the connection is
 * made again unless it proves only slow: PgListener.check).
 */
export interface ReservedConnection {
  query<R extends pg.QueryResultRow>(q: pg.QueryConfig, deadlineMs: number): Promise<pg.QueryResult<R>> | undefined;
}

const LEASE_SQL = {
  claim: `UPDATE "Session" SET "leaseOwner" = $2, "leaseExpiresAt" = now() + $3 * interval '1 millisecond', "leaseToken" = "leaseToken" + 1
        WHERE id = $1 AND "treeId" = $4 AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
        RETURNING id, "leaseToken" AS token, "treeId", "inheritedRanges", "inheritedEventCount", "eventCount"`,
  // Walks Session_runnable_updatedAt_idx (migration 20261212020001_session_runnable_index), whose
  // predicate repeats these conditions as written: a claim reads about the rows it takes.
  claimRunnable: `WITH runnable AS (
         SELECT id FROM "Session"
          WHERE (status = 'RUNNING' OR "pendingInputCount" > 0) AND status <> 'WAITING'
            AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
            AND id <> ALL($4::text[])
          ORDER BY "updatedAt"
          LIMIT $3
          FOR NO KEY UPDATE SKIP LOCKED
       )
       UPDATE "Session" s SET "leaseOwner" = $1, "leaseExpiresAt" = now() + $2 * interval '1 millisecond', "leaseToken" = s."leaseToken" + 1
         FROM runnable WHERE s.id = runnable.id
       RETURNING s.id, s.tenant, s."leaseToken" AS token, s."treeId", s."inheritedRanges", s."inheritedEventCount", s."eventCount"`,
  // For each tenant below its share of the claimer's slots ($7; $5/$6: what
  // each holds there), its oldest free runnable sessions, as many as its share
  // leaves, SKIP LOCKED; of those the batch takes first the ones whose tenant
  // would then hold the fewest (held + place in its queue), oldest first among
  // equals: a waiting tenant gets the next free slot before a tenant already
  // holding many. Rows locked and not taken are free again when the statement ends.
  claimRunnableFair: `WITH held AS (SELECT * FROM unnest($5::text[], $6::int[]) AS h(tenant, n)),
       waiting AS (
         SELECT DISTINCT "Session".tenant, coalesce(held.n, 0) AS n FROM "Session" LEFT JOIN held ON held.tenant = "Session".tenant
          WHERE (status = 'RUNNING' OR "pendingInputCount" > 0) AND status <> 'WAITING'
            AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}
            AND id <> ALL($4::text[])
            AND coalesce(held.n, 0) < $7
       ),
       candidates AS (
         SELECT c.id, w.n + row_number() OVER (PARTITION BY w.tenant ORDER BY c."updatedAt") AS rank, c."updatedAt"
           FROM waiting w CROSS JOIN LATERAL (
             SELECT s.id, s."updatedAt" FROM "Session" s
              WHERE s.tenant = w.tenant
                AND (s.status = 'RUNNING' OR s."pendingInputCount" > 0) AND s.status <> 'WAITING'
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
       RETURNING s.id, s.tenant, s."leaseToken" AS token, s."treeId", s."inheritedRanges", s."inheritedEventCount", s."eventCount"`,
  // SKIP LOCKED: a row an append or a claim holds locked right now is left for the next heartbeat
  // (a third of the lease's time later) instead of waited for. Waiting, the heartbeat queued behind
  // every append in flight on any of the process's sessions, and under load took longer than the lease
  // (seconds: the lease lapsed, another process took the session over and cut its turn `interrupted`),
  // or deadlocked with append batches. A runner's own append extends its lease anyway (leaseOnAppend).
  // Row locks are NO KEY UPDATE (the lock the UPDATE takes anyway): FOR UPDATE made a fork whose
  // snapshot predates it fail its child's parent-key check (a serialization failure).
  // What it returns is every lease still this process's as of the statement's snapshot, renewed now or
  // skipped: only a lease taken over (another owner or token) or gone is missing. One taken over after
  // the snapshot is seen at the next heartbeat, and the fence stops its runner's appends meanwhile.
  // A process's leases lie in many trees ($5): each shard renews those in its own. Each lease's row is found by
  // its whole key (id and tree: $3, $6). With the trees only as `x."treeId" = ANY($5)` beside `x.id = l.id`, Postgres
  // priced each probe of the key as a descent per tree, and scanned all of "Session" at every heartbeat instead.
  renew: `WITH l AS (SELECT * FROM unnest($3::text[], $4::int[], $6::text[]) AS l(id, token, tree)),
       held AS (SELECT x.id, x."treeId" FROM l JOIN "Session" x ON x.id = l.id AND x."treeId" = l.tree
                 WHERE x."leaseOwner" = $1 AND x."leaseToken" = l.token
                 FOR NO KEY UPDATE OF x SKIP LOCKED),
       renewed AS (UPDATE "Session" s SET "leaseExpiresAt" = now() + $2 * interval '1 millisecond'
                    FROM held WHERE s.id = held.id AND s."treeId" = held."treeId" AND s."treeId" = ANY($5::text[]) AND s."leaseOwner" = $1)
       SELECT x.id, CASE WHEN x.status = 'RUNNING' AND x."cancelTurn" = x."turnCount" THEN x."turnCount" END AS "cancelTurn"
         FROM l JOIN "Session" x ON x.id = l.id AND x."treeId" = l.tree WHERE x."leaseOwner" = $1 AND x."leaseToken" = l.token`,
  // A cancel names the turn running when it was asked (the count of turns started then): one asked as a turn ended
  // stops no later turn, and the column needs no clearing when the turn ends (renew reads it).
  requestCancel: `UPDATE "Session" SET "cancelTurn" = "turnCount" WHERE id = $1 AND "treeId" = $2 AND status = 'RUNNING' RETURNING "turnCount"`,
  releaseIfIdle: `UPDATE "Session" SET
          "leaseOwner" = CASE WHEN ${NOTHING_TO_RUN} THEN NULL ELSE "leaseOwner" END,
          "leaseExpiresAt" = CASE WHEN ${NOTHING_TO_RUN} THEN NULL ELSE now() + $4 * interval '1 millisecond' END
        WHERE id = $1 AND "treeId" = $5 AND "leaseToken" = $2 AND "leaseOwner" = $3
       RETURNING "leaseOwner" IS NULL AS released`,
  release: `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL WHERE id = $1 AND "treeId" = $4 AND "leaseToken" = $2 AND "leaseOwner" = $3`,
};

export class LeaseStore {
  private readonly sql: Record<keyof typeof LEASE_SQL, ReturnType<typeof statement>>;

  /** Which tree each session lies in: a statement on one session's lease names it (session-trees.ts). */
  private readonly trees: SessionTrees;

  /** Where the heartbeat's renewals run, when not on the pool (ReservedConnection). */
  private readonly reserved?: ReservedConnection;

  constructor(
    private readonly pool: pg.Pool,
    /** This process, as lease owner: unique per process start. */
    readonly owner: string,
    readonly ttlMs = DEFAULT_LEASE_TTL_MS,
    /**
     * `trees`: the process's directory cache (SessionStore.trees); a cache of its own otherwise.
     * `reserved`: a connection outside the pool for the renewals (the process's LISTEN connection, PgListener).
     */
    opts: { prepare?: boolean; trees?: SessionTrees; reserved?: ReservedConnection } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.reserved = opts.reserved;
    this.trees = opts.trees ?? new SessionTrees(pool, { prepare });
    this.sql = Object.fromEntries(Object.entries(LEASE_SQL).map(([name, text]) => [name, statement(prepare, `lease_${name}`, text)])) as LeaseStore['sql'];
  }

  /**
   * Takes the session's lease when it is free or expired. Not when this process
   * holds it already: two claims of ours racing for one session (input arriving
   * while a batch claim runs) must not fence off the runner the first one started.
   */
  async claim(sessionId: string): Promise<Lease | null> {
    const treeId = await this.trees.of(sessionId);
    if (treeId === undefined) return null;
    const { rows } = await this.pool.query<ClaimedRow>(this.sql.claim([sessionId, this.owner, this.ttlMs, treeId]));
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
   * tenant among them (several times the plain claim's cost with many
   * sessions waiting), so callers whose share cannot bind (one tenant)
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

  /**
   * Extends the leases still held, in one statement that waits for no row
   * lock (LEASE_SQL.renew); returns the ids still held (the others were taken
   * over, or their session is gone). It runs on the reserved connection when
   * there is one (`opts.reserved`), not behind request traffic in the pool;
   * when that connection fails, or gives no answer within a third of the
   * lease (it went silent, or waits behind a lock), the
   * pool runs it, in time for the lease.
   */
  async renew(leases: Iterable<Lease>): Promise<Renewed> {
    const list = [...leases];
    if (list.length === 0) return { held: new Set(), cancels: new Map() };
    const trees = await this.trees.ofMany(list.map((l) => l.sessionId));
    const query = this.sql.renew([
      this.owner,
      this.ttlMs,
      list.map((l) => l.sessionId),
      list.map((l) => l.token),
      [...new Set(trees.values())],
      list.map((l) => trees.get(l.sessionId) ?? null), // a session deleted meanwhile: no tree, nothing renewed
    ]);
    type Row = { id: string; cancelTurn: number | null };
    let result: pg.QueryResult<Row> | undefined;
    try {
      result = await this.reserved?.query<Row>(query, Math.floor(this.ttlMs / 3));
    } catch {
      // Down or silent: the pool serves this renewal. Renewing twice is harmless (it only moves the expiry).
    }
    result ??= await this.pool.query<Row>(query);
    return {
      held: new Set(result.rows.map((r) => r.id)),
      cancels: new Map(result.rows.flatMap((r) => (r.cancelTurn === null ? [] : [[r.id, r.cancelTurn] as const]))),
    };
  }

  /**
   * Asks for the running turn of `sessionId` to be cancelled, durably: the
   * holder's next renewal reads it (Renewed.cancels) even when the
   * notification that also announces it goes unheard. Returns the turn count
   * it names, or null when no turn runs.
   */
  async requestCancel(sessionId: string): Promise<number | null> {
    const treeId = await this.trees.of(sessionId);
    if (treeId === undefined) return null;
    const { rows } = await this.pool.query<{ turnCount: number }>(this.sql.requestCancel([sessionId, treeId]));
    return rows[0]?.turnCount ?? null;
  }

  /**
   * Gives the lease up unless the session still needs its agent, in one
   * statement: `released`; `busy` when work remains (the lease is kept and
   * renewed); `lost` when it is no longer ours.
   */
  async releaseIfIdle(lease: Lease): Promise<'released' | 'busy' | 'lost'> {
    const treeId = await this.trees.of(lease.sessionId);
    if (treeId === undefined) return 'lost';
    const { rows } = await this.pool.query<{ released: boolean }>(this.sql.releaseIfIdle([lease.sessionId, lease.token, this.owner, this.ttlMs, treeId]));
    return rows.length === 0 ? 'lost' : rows[0].released ? 'released' : 'busy';
  }

  /** Gives the lease up whatever the session's state (shutdown, deletion, a stopped runner). */
  async release(lease: Lease): Promise<void> {
    const treeId = await this.trees.of(lease.sessionId);
    if (treeId !== undefined) await this.pool.query(this.sql.release([lease.sessionId, lease.token, this.owner, treeId]));
  }
}

// ---- External runners' leases ----
// Leases of external runners (docs/contract.md#agent-loop): the same lease columns,
// fencing token and expiry forkline's own runner uses (leases.ts), taken by a
// runner outside forkline over GraphQL. Only sessions of an external runner
// pool (`runner` set) can be claimed here, and only those: forkline's own
// claims skip them (leases.ts RUN_BY_FORKLINE). The owner is the runner's id,
// prefixed so it never equals a forkline process's.

/** What a renewal found: the leases still held, and the cancels asked of their running turns (id → the turn count named). */
export interface Renewed {
  held: Set<string>;
  cancels: Map<string, number>;
}

/** How long an external runner's lease lasts unless it asks otherwise (renewLease extends it). */
export const DEFAULT_RUNNER_LEASE_MS = 30_000;
export const MIN_RUNNER_LEASE_MS = 500;
export const MAX_RUNNER_LEASE_MS = 10 * 60_000;

export interface RunnerLease {
  sessionId: string;
  token: number;
  expiresAt: Date;
  /** A renewal's: the session's running turn was asked to stop (cancelTurn; LeaseStore.requestCancel). */
  cancelRequested?: boolean;
}

/** A renewed lease, with the session's status and length then (what RunnerProtocol.renew's step limit reads). */
type RenewedLease = { token: number; expiresAt: Date; cancelRequested: boolean } & Pick<SessionRow, 'status' | 'eventCount'>;

/** A session row as the lease checks read it; `ended`: an external lease that ran out (EXTERNAL_LEASE_ENDED). */
export type LeaseRow = Pick<SessionRow, 'eventCount' | 'leaseToken' | 'leaseOwner' | 'leaseExpiresAt' | 'runner' | 'status' | 'turnCount' | 'cancelTurn'> & {
  ended: boolean;
};

/** A session row as RunnerLeases.lock read it under its lock. */
export type LockedRow = Pick<SessionRow, 'eventCount' | 'leaseToken' | 'leaseOwner' | 'status'> & { free: boolean; held: boolean };

export const leaseLost = (sessionId: string, why: string) =>
  new ForklineError('LEASE_LOST', `the lease on session ${sessionId} is not yours: ${why}; nothing was written`, { sessionId });

/** Why a write under `token` is refused, from the session's row. */
function whyNotHeld(row: LeaseRow, token: number): string {
  // Freed under this very token by a user's cancel of the turn it ran (RunnerLeases.freeAfterEnd), and no turn since.
  if (row.leaseToken === token && row.leaseOwner == null && row.status !== 'RUNNING' && row.cancelTurn != null && row.cancelTurn === row.turnCount)
    return 'its turn was cancelled (cancelTurn): it ended cancelled and the lease went back';
  if (row.leaseToken !== token) return row.leaseOwner ? 'it is held under another token now' : 'released, or taken by another runner after it expired';
  if (!row.leaseOwner?.startsWith(EXTERNAL_OWNER_PREFIX)) return 'nobody holds it (released, or never claimed)';
  return `it ran out at ${row.leaseExpiresAt?.toISOString()} (a lease is renewed before its end; once it ends, another runner may claim the session)`;
}

/** A session an external runner claimed: its row as the claim left it, and the lease. */
export type RunnerClaim = { session: SessionRow; lease: RunnerLease };

/** The lease owner of the service's own repair of an external session (never a runner's: no prefix). */
const REPAIR_OWNER = 'forkline:repair';

/** SQL on a session row: an external pool's session with work (an open turn, or queued input). */
const HAS_WORK = `((status = 'RUNNING' OR "pendingInputCount" > 0) AND status <> 'WAITING')`;

/**
 * SQL: the fencing token of a new external lease, drawn at random (never the
 * previous holder's): a token carried to another session, or the last
 * holder's plus one, fences nothing there. A GraphQL Int (0..2^31-1).
 */
const nextRunnerToken = (column: string) => `((${column}::bigint + 1 + floor(random() * 2147483645)::bigint) % 2147483647)::int`;

const RUNNER_LEASE_SQL = {
  claim: `UPDATE "Session" SET "leaseOwner" = $3, "leaseExpiresAt" = now() + $4 * interval '1 millisecond', "leaseToken" = ${nextRunnerToken('"leaseToken"')}
        WHERE id = $1 AND "treeId" = $5 AND tenant = $2 AND runner IS NOT NULL AND ${LEASE_IS_FREE}
        RETURNING ${SESSION_COLUMNS_SQL}`,
  // Up to $5 sessions of the pool with work nobody holds, oldest first; SKIP LOCKED: runners claiming at once take different ones.
  claimRunnable: `WITH runnable AS (
         SELECT id FROM "Session"
          WHERE tenant = $1 AND runner = $2 AND ${HAS_WORK} AND ${LEASE_IS_FREE}
          ORDER BY "updatedAt" LIMIT $5
          FOR NO KEY UPDATE SKIP LOCKED
       )
       UPDATE "Session" s SET "leaseOwner" = $3, "leaseExpiresAt" = now() + $4 * interval '1 millisecond', "leaseToken" = ${nextRunnerToken('s."leaseToken"')}
         FROM runnable WHERE s.id = runnable.id
       RETURNING ${SESSION_COLUMNS.map((c) => `s."${c}"`).join(', ')}`,
  // Open turns of the pool nobody holds (their holder's lease expired, or it let go mid-turn), taken to be repaired.
  claimForRepair: `WITH open AS (
         SELECT id FROM "Session"
          WHERE tenant = $1 AND runner = $2 AND status = 'RUNNING' AND ${LEASE_IS_FREE}
          ORDER BY "updatedAt" LIMIT 100
          FOR NO KEY UPDATE SKIP LOCKED
       )
       UPDATE "Session" s SET "leaseOwner" = $3, "leaseExpiresAt" = now() + $4 * interval '1 millisecond', "leaseToken" = ${nextRunnerToken('s."leaseToken"')}
         FROM open WHERE s.id = open.id
       RETURNING ${SESSION_COLUMNS.map((c) => `s."${c}"`).join(', ')}`,
  releaseRepaired: `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL WHERE id = $1 AND "treeId" = $4 AND "leaseToken" = $2 AND "leaseOwner" = $3`,
  // When the next lease of the pool's sessions with work ends (null: none is held).
  nextExpiry: `SELECT min("leaseExpiresAt") AS at FROM "Session"
        WHERE tenant = $1 AND runner = $2 AND ${HAS_WORK} AND "leaseOwner" IS NOT NULL AND "leaseExpiresAt" >= now()`,
  runnable: `SELECT ${SESSION_COLUMNS_SQL} FROM "Session"
        WHERE runner = $2 AND ${HAS_WORK} AND tenant = $1 AND ${LEASE_IS_FREE}
        ORDER BY "updatedAt" LIMIT $3`,
};

const claimOf = (row: SessionRow): RunnerClaim => ({ session: row, lease: { sessionId: row.id, token: row.leaseToken, expiresAt: row.leaseExpiresAt! } });

export class RunnerLeases {
  private readonly sql: Record<keyof typeof RUNNER_LEASE_SQL, ReturnType<typeof statement>>;

  /** Which tree each session lies in: a statement on one session's lease names it (session-trees.ts). */
  private readonly trees: SessionTrees;

  constructor(
    private readonly pool: pg.Pool,
    /** `trees`: the process's directory cache (SessionStore.trees); a cache of its own otherwise. */
    opts: { prepare?: boolean; trees?: SessionTrees } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.trees = opts.trees ?? new SessionTrees(pool, { prepare });
    this.sql = Object.fromEntries(
      Object.entries(RUNNER_LEASE_SQL).map(([name, text]) => [name, statement(prepare, `runner_lease_${name}`, text)]),
    ) as RunnerLeases['sql'];
  }

  /**
   * Takes the lease of a session of an external pool when nobody holds it
   * (never taken, released, or expired); the session's row as the claim left
   * it (its status says whether a turn was left open: what repair closes).
   */
  async claim(tenant: string, sessionId: string, runnerId: string, ttlMs: number): Promise<RunnerClaim> {
    const { rows } = await this.pool.query<SessionRow>(
      this.sql.claim([sessionId, tenant, EXTERNAL_OWNER_PREFIX + runnerId, ttlMs, await this.trees.require(sessionId)]),
    );
    if (rows[0]) return claimOf(rows[0]);
    const row = await this.row(tenant, sessionId);
    if (row.runner == null) {
      throw new ForklineError('BAD_USER_INPUT', `session ${sessionId} is run by forkline's own agent, not by an external runner pool`, { sessionId });
    }
    throw new ForklineError('SESSION_BUSY', `session ${sessionId} is held by ${ownerName(row.leaseOwner)} until ${row.leaseExpiresAt?.toISOString()}`, {
      sessionId,
      expiresAt: row.leaseExpiresAt?.toISOString(),
    });
  }

  /** Claims up to `limit` sessions of the pool with work that nobody holds, oldest first, in one statement. */
  async claimRunnable(tenant: string, pool: string, runnerId: string, ttlMs: number, limit: number): Promise<RunnerClaim[]> {
    if (limit <= 0) return [];
    const { rows } = await this.pool.query<SessionRow>(this.sql.claimRunnable([tenant, pool, EXTERNAL_OWNER_PREFIX + runnerId, ttlMs, limit]));
    return rows.map(claimOf);
  }

  /** Takes the open turns of the pool that nobody holds, for the service to repair (then releaseRepaired). */
  async claimForRepair(tenant: string, pool: string, ttlMs: number): Promise<RunnerClaim[]> {
    const { rows } = await this.pool.query<SessionRow>(this.sql.claimForRepair([tenant, pool, REPAIR_OWNER, ttlMs]));
    return rows.map(claimOf);
  }

  /** Gives back a lease claimForRepair took (a runner's claim may take the session now). */
  async releaseRepaired(lease: RunnerLease, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    await client.query(this.sql.releaseRepaired([lease.sessionId, lease.token, REPAIR_OWNER, await this.trees.require(lease.sessionId)]));
  }

  /** When the first lease held on the pool's sessions with work ends (undefined: none is held). */
  async nextExpiry(tenant: string, pool: string): Promise<Date | undefined> {
    const { rows } = await this.pool.query<{ at: Date | null }>(this.sql.nextExpiry([tenant, pool]));
    return rows[0]?.at ?? undefined;
  }

  /** Extends a lease still held under `token` and not run out; LEASE_LOST otherwise. */
  async renew(tenant: string, sessionId: string, token: number, ttlMs: number): Promise<RunnerLease & RenewedLease> {
    const { rows } = await this.pool.query<RenewedLease>(
      `UPDATE "Session" SET "leaseExpiresAt" = now() + $4 * interval '1 millisecond'
        WHERE id = $1 AND "treeId" = $5 AND tenant = $2 AND "leaseToken" = $3 AND starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}')
          AND NOT ${EXTERNAL_LEASE_ENDED}
        RETURNING "leaseToken" AS token, "leaseExpiresAt" AS "expiresAt", status, "eventCount",
          status = 'RUNNING' AND "cancelTurn" IS NOT DISTINCT FROM "turnCount" AS "cancelRequested"`,
      [sessionId, tenant, token, ttlMs, await this.trees.require(sessionId)],
    );
    if (rows[0]) return { sessionId, ...rows[0] };
    throw leaseLost(sessionId, whyNotHeld(await this.row(tenant, sessionId), token));
  }

  /**
   * The session's row, locked for the rest of `client`'s transaction: the lock every append takes, so what the
   * service writes under it (RunnerProtocol.endOpenTurn) and a runner's batch go in one after the other, never
   * interleaved. `free`: nobody holds the lease (LEASE_IS_FREE); `held`: an external runner's lease, not run out.
   */
  async lock(client: pg.PoolClient, tenant: string, sessionId: string): Promise<LockedRow> {
    const { rows } = await client.query<LockedRow>(
      `SELECT "eventCount", "leaseToken", "leaseOwner", status, COALESCE(${LEASE_IS_FREE}, false) AS free,
              COALESCE(starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}') AND NOT ${EXTERNAL_LEASE_ENDED}, false) AS held
         FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2 FOR NO KEY UPDATE`,
      [sessionId, tenant, await this.trees.require(sessionId)],
    );
    if (!rows[0]) throw sessionNotFound(sessionId);
    return rows[0];
  }

  /**
   * Frees the lease of a session whose turn the service ended (RunnerProtocol.endOpenTurn), in its transaction: its
   * holder's writes are refused from then on. `cancelled`: the turn was a user's cancel, kept on the row (the
   * turn it names), which is what a refused write of its runner then names (whyNotHeld).
   */
  async freeAfterEnd(client: pg.PoolClient, sessionId: string, token: number, cancelled: boolean): Promise<void> {
    await client.query(
      `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL, "cancelTurn" = CASE WHEN $3 THEN "turnCount" ELSE "cancelTurn" END
        WHERE id = $1 AND "treeId" = $4 AND "leaseToken" = $2`,
      [sessionId, token, cancelled, await this.trees.require(sessionId)],
    );
  }

  /** Gives a lease held under `token` back; LEASE_LOST when it is not held under it. */
  async release(tenant: string, sessionId: string, token: number, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    const { rowCount } = await client.query(
      `UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL
        WHERE id = $1 AND "treeId" = $4 AND tenant = $2 AND "leaseToken" = $3 AND starts_with("leaseOwner", '${EXTERNAL_OWNER_PREFIX}')`,
      [sessionId, tenant, token, await this.trees.require(sessionId)],
    );
    if (rowCount) return;
    await this.row(tenant, sessionId);
    throw leaseLost(sessionId, 'released already, or taken by another runner after it expired');
  }

  /**
   * The row a write under `token` is checked against before it is tried: the
   * token must be the lease's and the lease held (a released lease fences
   * nothing). An append needs no such read: its own statement is fenced the
   * same way (leaseOnAppend).
   */
  async held(tenant: string, sessionId: string, token: number): Promise<LeaseRow> {
    const row = await this.row(tenant, sessionId);
    if (row.leaseToken !== token || !row.leaseOwner?.startsWith(EXTERNAL_OWNER_PREFIX) || row.ended) throw leaseLost(sessionId, whyNotHeld(row, token));
    return row;
  }

  /** Sessions of the pool with work (an open turn or queued input) that nobody holds, oldest first. */
  async runnable(tenant: string, pool: string, limit = 100): Promise<SessionRow[]> {
    const { rows } = await this.pool.query<SessionRow>(this.sql.runnable([tenant, pool, limit]));
    return rows;
  }

  private async row(tenant: string, sessionId: string): Promise<LeaseRow> {
    const { rows } = await this.pool.query<LeaseRow>(
      `SELECT "eventCount", "leaseToken", "leaseOwner", "leaseExpiresAt", runner, status, "turnCount", "cancelTurn", COALESCE(${EXTERNAL_LEASE_ENDED}, false) AS ended
         FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2`,
      [sessionId, tenant, await this.trees.require(sessionId)],
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
