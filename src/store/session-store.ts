// SessionStore: the only module that writes to Postgres. It owns seq
// allocation, the session counters, forks and deletion (DESIGN §1, §3.1, §7);
// reads go through SessionLog (store/session-log.ts).
import type pg from 'pg';
import { CURRENT_FORMAT_VERSION, decodeEvent, type NewEvent } from '../core/events.ts';
import { ForklineError, badInput, sessionNotFound } from '../core/errors.ts';
import { buildForkSeed, type ForkSeed } from '../core/fork-seed.ts';
import { selectBranchCut } from '../core/cut.ts';
import type { ToolEffectLookup } from '../core/tools.ts';
import { eventId, newInputId, newSessionId } from './ids.ts';
import { childRanges, commonPrefix, lineageOf, type Lineage } from './lineage.ts';
import { SessionLog, type StoredEvent } from './session-log.ts';
import { LEASE_IS_FREE, RUN_BY_FORKLINE, leaseOf, type Lease, type LeaseClaim } from './leases.ts';
import { statement } from './statements.ts';
import { SessionRows, type SessionColumns, type SessionRow } from './session-rows.ts';
import { TailStates } from './tail-states.ts';
import { AppendBatcher } from './append-batcher.ts';
import { NotifyQueue } from './notify-queue.ts';
import { isTransactionConflict, retried, sqlStateOf } from './retries.ts';
import type { LogState } from '../core/log-state.ts';

export type { StoredEvent } from './session-log.ts';
export type { SessionRow };

/** Postgres NOTIFY channel: one notification per committed batch. */
export const EVENTS_CHANNEL = 'forkline_events';
export const SESSIONS_CHANNEL = 'forkline_sessions';
/** Deleted sessions: `{"tenant", "ids"}` per notification (split below the payload limit). */
export const DELETED_CHANNEL = 'forkline_deleted';

/** Who is asking: every read and write is confined to one tenant. */
export interface Scope {
  tenant: string;
}

export interface ForkResult {
  session: SessionRow;
  parent: SessionRow;
  cutSeq: number;
  syntheticEvents: StoredEvent[];
  /** The input the fork queued in the child (its `message`), if any. */
  inputId?: string;
}

export interface ModelConfig {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
}

/**
 * What a fork's child gets after its seed, in the fork's own transaction
 * (issue 17): a title, a model, and a message queued as its input, so its
 * agent starts on it as soon as the fork commits.
 */
export interface ChildOverrides {
  title?: string | null;
  model?: ModelConfig | null;
  message?: string | null;
}

/** Children of one parent at one cut (fanOut). */
export interface ForkManyResult {
  parent: SessionRow;
  cutSeq: number;
  children: Array<{ session: SessionRow; syntheticEvents: StoredEvent[]; inputId?: string }>;
}

export interface ForkManyRecord {
  parentId: string;
  cutSeq: number;
  children: Array<{ sessionId: string; inputId?: string }>;
}

/** At most this many children per fork (fanOut variants). */
export const MAX_FORK_CHILDREN = 16;

/** Runs inside a mutation's transaction, before it commits (idempotency keys are written here). */
export type BeforeCommit<T> = (client: pg.PoolClient, result: T) => Promise<void>;

/** What identifies a fork's result (an idempotent retry loads the answer from it). */
export interface ForkRecord {
  sessionId: string;
  parentId: string;
  cutSeq: number;
  inputId?: string;
}

/**
 * An exact seq (never moves, seed 000), a turn-level branch through the
 * turn/end at or after an anchor (seed 003), or right before the inbox/add of
 * an input (editMessage: an exact cut at its seq - 1).
 */
export type Cut = number | { anchorSeq?: number | null; beforeInput?: undefined } | { beforeInput: string; anchorSeq?: undefined };

export const MAX_APPEND_BATCH = 10_000;
/** Postgres rejects NOTIFY payloads of 8000 bytes or more. */
const MAX_NOTIFY_IDS = 100;

/** What a batch changes in the session row, from the reducer's states before and after it. */
function rowChanges(before: LogState, after: LogState) {
  const turnMoved = after.turnCount !== before.turnCount || after.openTurn !== before.openTurn;
  return {
    turnStarts: after.turnCount - before.turnCount,
    pendingDelta: after.pendingInputCount - before.pendingInputCount,
    status: turnMoved ? (after.openTurn === undefined ? 'IDLE' : 'RUNNING') : null,
    title: after.title !== before.title ? after.title : undefined,
  };
}

/** Parameters of one session's append (appendBlock). */
const APPEND_PARAMS = 14;

/**
 * One session's append (see SessionStore.append) as CTEs and the SELECT of
 * what it stored, its parameters at $(offset + 1)…$(offset + 14) and its CTEs
 * named s<k> and ins<k>: the whole of a lone append's statement (APPEND_SQL),
 * or one block of a statement that appends to several sessions
 * (append-batcher.ts). A runner's append ($10: its fencing token) also
 * extends its lease by $13 ms — a working runner keeps its lease without
 * waiting for the heartbeat — and with $12 gives the lease back when the
 * batch leaves the session idle (no open turn, no queued input): the last
 * append of a turn needs no second round trip. A queued message ($14: the
 * claiming process) takes the lease for $13 ms when nobody holds it, as
 * LeaseStore.claim would: the process that received it runs it without a
 * round trip of its own. With `notify`, the statement NOTIFYs EVENTS_CHANNEL
 * itself; otherwise its caller does once it committed (append-batcher.ts
 * chooses, notify-queue.ts says why).
 */
function appendBlock(k: number, offset = APPEND_PARAMS * k, notify = false): { ctes: string; select: string } {
  const $ = (n: number) => `$${offset + n}`;
  const s = `s${k}`;
  const ins = `ins${k}`;
  // Conditions on the row before the update (SET expressions all read the old row).
  const releases = `${$(12)}::boolean AND COALESCE(${$(4)}::"SessionStatus", status) = 'IDLE' AND "pendingInputCount" + ${$(9)} = 0`;
  // A session an external runner pool runs is never claimed by forkline's own agent (issue 32).
  const claims = `${$(14)}::text IS NOT NULL AND ${LEASE_IS_FREE} AND ${RUN_BY_FORKLINE}`;
  return {
    ctes: `${s} AS (
         UPDATE "Session"
            SET "eventCount" = "eventCount" + ${$(2)},
                "turnCount" = "turnCount" + ${$(3)},
                "pendingInputCount" = "pendingInputCount" + ${$(9)},
                status = COALESCE(${$(4)}::"SessionStatus", status),
                title = CASE WHEN ${$(5)}::boolean THEN ${$(6)} ELSE title END,
                "updatedAt" = now(),
                "leaseOwner" = CASE WHEN ${releases} THEN NULL WHEN ${claims} THEN ${$(14)}::text ELSE "leaseOwner" END,
                "leaseExpiresAt" = CASE WHEN ${releases} THEN NULL
                                        WHEN (${$(10)}::int IS NOT NULL OR ${claims}) AND ${$(13)}::int IS NOT NULL THEN now() + ${$(13)}::int * interval '1 millisecond'
                                        ELSE "leaseExpiresAt" END,
                "leaseToken" = CASE WHEN ${claims} THEN "leaseToken" + 1 ELSE "leaseToken" END
          WHERE id = ${$(1)} AND (${$(7)}::int IS NULL OR "eventCount" = ${$(7)}::int) AND (${$(10)}::int IS NULL OR "leaseToken" = ${$(10)}::int)
            AND (${$(11)}::text IS NULL OR tenant = ${$(11)}::text)
          RETURNING "eventCount" - ${$(2)} AS base, "pendingInputCount" - ${$(9)} AS pending, "treeId", "leaseOwner" IS NULL AS released,
                    "leaseOwner" = ${$(14)}::text AS held, "leaseToken",
                    CASE WHEN ${$(14)}::text IS NOT NULL THEN "inheritedRanges" END AS "inheritedRanges", "inheritedEventCount"
       ), ${ins} AS (
         INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount")
         SELECT ${$(1)}, ${s}.base + (t.ord - 1)::int, ${s}."treeId", t.e->>'type', t.e->'data', (t.e->>'synthetic')::boolean, ${s}.pending + (t.e->>'p')::int
           FROM ${s}, jsonb_array_elements(${$(8)}::jsonb) WITH ORDINALITY AS t(e, ord)
         RETURNING seq, type, data, synthetic, "createdAt"
       )`,
    select: `SELECT ${k} AS k, ${ins}.*, ${s}.released, ${s}.held, ${s}."leaseToken", ${s}."inheritedRanges", ${s}."inheritedEventCount"${
      notify ? `,
              (SELECT pg_notify('${EVENTS_CHANNEL}', json_build_object('s', ${$(1)}::text, 'last', max(seq))::text) FROM ${ins}) AS notified` : ''
    }
         FROM ${ins}, ${s}`,
  };
}

const loneAppend = ({ ctes, select }: { ctes: string; select: string }) => `WITH ${ctes}\n       ${select} ORDER BY seq`;
/** A lone append whose caller notifies once it committed (notify-queue.ts). */
const APPEND_SQL = loneAppend(appendBlock(0));
/** A lone append that NOTIFYs what it stored (inside a caller's transaction: delivered at its commit). */
const APPEND_NOTIFYING_SQL = loneAppend(appendBlock(0, 0, true));

/** Appends retried after a concurrent writer got in first (each re-checks the batch). */
const MAX_APPEND_ATTEMPTS = 5;
/** Forks and deletions run again after a conflict with a concurrent transaction (retries.ts); a fork from a new snapshot. */
const MAX_FORK_ATTEMPTS = 5;
const MAX_DELETE_ATTEMPTS = 6;

/**
 * The batch checked against the relationship rules (core/log-state.ts) from
 * `state`, or BAD_USER_INPUT naming the first event that breaks one. Returns
 * the state after it and, per event, the change in waiting inputs through it.
 */
function checkedAppend(sessionId: string, state: LogState, events: NewEvent[]): { after: LogState; pendingDeltas: number[] } {
  const after = state.clone();
  const pendingDeltas = events.map((e) => {
    const event = { ...e, seq: after.nextSeq };
    const broken = after.violation(event);
    if (broken) {
      throw badInput(`event ${event.seq} (${e.type}) of session ${sessionId} breaks the log's rules: ${broken.rule}: ${broken.detail}`, { rule: broken.rule, seq: event.seq });
    }
    return after.apply(event).pendingInputCount - state.pendingInputCount;
  });
  return { after, pendingDeltas };
}

/** Rows as the INSERTs below read them: `p` is the change in waiting inputs through this event. */
function eventRows(events: Array<NewEvent & { seq?: number }>, pendingDeltas: number[]) {
  return events.map((e, i) => ({ seq: e.seq, type: e.type, data: e.data, synthetic: e.synthetic ?? false, p: pendingDeltas[i] }));
}

export class SessionStore {
  /** The one way to read logs. */
  readonly log: SessionLog;
  /** Session rows: the hot reads, on prepared statements. */
  readonly sessions: SessionRows;
  /** Reducer states at the end of logs this process appends to: appends are checked against them. */
  private readonly tails: TailStates;

  private readonly appendStatement: ReturnType<typeof statement>;
  /** Appends outside a transaction: several sessions' in one statement when they wait together (group commit). */
  private readonly appends: AppendBatcher;
  private readonly appendNotifying: ReturnType<typeof statement>;
  /** NOTIFYs sent after the commits they announce (notify-queue.ts). */
  readonly notifications: NotifyQueue;

  constructor(
    readonly pool: pg.Pool,
    readonly effectOf: ToolEffectLookup,
    opts: { prepare?: boolean; log?: (msg: string, err?: unknown) => void } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.notifications = new NotifyQueue(pool, opts.log);
    this.log = new SessionLog(pool, { prepare });
    this.sessions = new SessionRows(pool, prepare);
    this.tails = new TailStates(this.log);
    this.appendStatement = statement(prepare, 'append', APPEND_SQL);
    this.appendNotifying = statement(prepare, 'append_notify', APPEND_NOTIFYING_SQL);
    const poolMax = pool.options.max ?? 10;
    this.appends = new AppendBatcher(
      pool,
      {
        single: (params, notify) => (notify ? this.appendNotifying : this.appendStatement)(params),
        block: (k, notify) => appendBlock(k, APPEND_PARAMS * k, notify),
        params: APPEND_PARAMS,
        prepare,
      },
      Math.max(1, Math.floor(poolMax / 2)),
    );
  }

  async createSession(
    scope: Scope,
    input: { title?: string | null; model?: ModelConfig | null; tools?: string[] | null; runner?: string | null },
    opts: { beforeCommit?: BeforeCommit<{ sessionId: string }> } = {},
  ): Promise<SessionRow> {
    const id = newSessionId();
    const initial: NewEvent[] = [];
    if (input.title != null) initial.push({ type: 'session/title', data: { title: input.title } });
    if (input.model) initial.push({ type: 'session/model', data: input.model });
    if (input.tools) initial.push({ type: 'session/tools', data: { tools: input.tools } });
    // One transaction: a session never exists without its initial events.
    await this.transaction(async (client) => {
      await client.query('INSERT INTO "Session" (id, tenant, "treeId", "formatVersion", runner) VALUES ($1, $2, $1, $3, $4)', [id, scope.tenant, CURRENT_FORMAT_VERSION, input.runner ?? null]);
      await this.append(id, initial, { client });
      await this.notify(SESSIONS_CHANNEL, id, client);
      await opts.beforeCommit?.(client, { sessionId: id });
    });
    return this.requireSession(scope, id);
  }

  /**
   * Runs `fn` in a transaction on one pooled connection. A checked-out client
   * has no error listener of the pool's: a connection lost between statements
   * would be an unhandled 'error' and kill the process. Ours records it; the
   * failed statement rejects, and the broken client is discarded.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>, isolation = 'READ COMMITTED'): Promise<T> {
    const client = await this.pool.connect();
    let lost: Error | undefined;
    const onError = (err: Error) => (lost = err);
    client.on('error', onError);
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${isolation}`);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      if (!lost) await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.off('error', onError);
      client.release(lost ?? undefined);
    }
  }

  /** A session's row (with `columns`, only those: the GraphQL layer reads what a query selects). */
  async getSession(scope: Scope, id: string, columns: SessionColumns = null): Promise<SessionRow | null> {
    const row = await this.sessions.get(scope.tenant, id, columns);
    if (row && row.inheritedRanges !== undefined) this.log.remember(row);
    return row;
  }

  /**
   * The last seq session row `a` (as read: never past its eventCount) and
   * session `bId` share, stored once for both (-1: none, e.g. sessions of
   * different trees): their common ancestor's cut, from the two rows' lineages
   * (store/lineage.ts `commonPrefix`). One row read, no event read.
   */
  async commonPrefix(scope: Scope, a: Pick<SessionRow, 'id' | 'eventCount' | 'inheritedRanges' | 'inheritedEventCount'>, bId: string): Promise<number> {
    const b = await this.requireSession(scope, bId, ['id', 'eventCount', 'inheritedRanges', 'inheritedEventCount']);
    return commonPrefix(lineageOf(a), a.eventCount, lineageOf(b), b.eventCount);
  }

  async requireSession(scope: Scope, id: string, columns: SessionColumns = null): Promise<SessionRow> {
    const s = await this.getSession(scope, id, columns);
    if (!s) throw sessionNotFound(id);
    return s;
  }

  /**
   * Appends a batch atomically, in one statement: the UPDATE of the session row
   * allocates the seqs under its row lock (concurrent appenders queue on it), the
   * INSERT writes the events, and one NOTIFY per batch is sent at commit.
   * Every payload is validated by the V4 codec first; nothing is written when one
   * is invalid. `expectedEventCount` makes the append conditional (the writer's
   * view of the log must still be current), failing with SESSION_BUSY otherwise.
   * `lease` fences a runner's appends (store/leases.ts): once another process
   * has taken the session over, they fail with SESSION_BUSY and write nothing.
   * `scope` confines the append to a tenant's session (SESSION_NOT_FOUND otherwise).
   */
  async append(
    sessionId: string,
    events: NewEvent[],
    opts: { expectedEventCount?: number; client?: pg.PoolClient; lease?: Lease; scope?: Scope } = {},
  ): Promise<StoredEvent[]> {
    return (await this.appendAndMaybeRelease(sessionId, events, opts, false)).events;
  }

  /**
   * A runner's append that also gives its lease back when the batch leaves the
   * session idle (no open turn, no queued input), in the same statement:
   * `released` says whether it did.
   */
  async appendReleasingIfIdle(sessionId: string, events: NewEvent[], lease: Lease): Promise<{ events: StoredEvent[]; released: boolean }> {
    return this.appendAndMaybeRelease(sessionId, events, { lease }, true);
  }

  /**
   * Queues a message (sendMessage): an inbox/add under an input id made here.
   * The one rule an inbox/add can break is an input id already pending, which
   * a new id cannot be, so nothing needs checking and no tail state is read:
   * one statement, not conditional on the log's length (the session's row lock
   * orders it among other writers, whose own appends then find the log moved).
   * Most messages reach a process that holds no tail state of their session
   * (another process ran its last turn), and loading one was a round trip.
   * With `claimFor`, the same statement takes the session's lease when nobody
   * holds it (`lease`: run it), so the agent needs no claim of its own either.
   */
  async queueInput(
    sessionId: string,
    text: string,
    opts: { scope?: Scope; client?: pg.PoolClient; claimFor?: LeaseClaim } = {},
  ): Promise<{ event: StoredEvent; lease?: Lease }> {
    const event = { type: 'inbox/add', data: decodeEvent('inbox/add', { inputId: newInputId(), text }) };
    const queue = async () => {
      const rows = { changes: { turnStarts: 0, pendingDelta: 1, status: null, title: undefined }, pendingDeltas: [1] };
      const { events, lease } = await this.runAppend(sessionId, [event], rows, { ...opts, expectedEventCount: null }, false);
      // A state this process keeps of the session moves with it when it was current; otherwise it goes.
      const known = opts.client ? undefined : this.tails.cached(sessionId);
      if (known && known.nextSeq === events[0].seq) this.tails.remember(sessionId, checkedAppend(sessionId, known, [event]).after);
      else this.tails.forget([sessionId]);
      return { event: events[0], lease };
    };
    return opts.client ? queue() : this.inLine(sessionId, queue);
  }

  /**
   * The reducer state at the end of the session's log as the caller replayed it
   * (a runner's fold): appends check against it instead of loading one (see
   * TailStates.offer).
   */
  knowTail(sessionId: string, state: LogState): void {
    this.tails.offer(sessionId, state);
  }

  private async appendAndMaybeRelease(
    sessionId: string,
    events: NewEvent[],
    opts: { expectedEventCount?: number; client?: pg.PoolClient; lease?: Lease; scope?: Scope },
    release: boolean,
  ): Promise<{ events: StoredEvent[]; released: boolean }> {
    if (events.length === 0) return { events: [], released: false };
    if (events.length > MAX_APPEND_BATCH) throw badInput(`at most ${MAX_APPEND_BATCH} events per append`);
    const decoded = events.map((e) => ({ ...e, data: decodeEvent(e.type, e.data) }));
    // Writers in this process take turns per session (they would only race each
    // other's checks); an append inside a caller's transaction does not wait in
    // line, since that transaction may already hold the row the line waits for.
    return opts.client ? this.checkAndAppend(sessionId, decoded, opts, release) : this.inLine(sessionId, () => this.checkAndAppend(sessionId, decoded, opts, release));
  }

  private readonly lines = new Map<string, Promise<unknown>>();

  private inLine<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const run = (this.lines.get(sessionId) ?? Promise.resolve()).then(work, work);
    const settled = run.catch(() => {});
    this.lines.set(sessionId, settled);
    void settled.then(() => this.lines.get(sessionId) === settled && this.lines.delete(sessionId));
    return run;
  }

  private async checkAndAppend(
    sessionId: string,
    decoded: NewEvent[],
    opts: { expectedEventCount?: number; client?: pg.PoolClient; lease?: Lease; scope?: Scope },
    release: boolean,
  ): Promise<{ events: StoredEvent[]; released: boolean }> {
    const db = opts.client ?? this.pool;
    // The batch must keep the log's relationship rules (core/log-state.ts), checked
    // against the reducer state at the end of the log. The append is conditional
    // on the length that state was taken at: when another writer got in between,
    // the state is reloaded and the batch checked again (unless the caller made
    // the append conditional itself: then SESSION_BUSY is its answer). A writer
    // that loses twice appends holding the session's row, so busy sessions
    // written by several processes still make progress.
    for (let attempt = 1; ; attempt++) {
      let state = opts.client ? undefined : this.tails.cached(sessionId);
      if (!state || (opts.expectedEventCount !== undefined && state.nextSeq !== opts.expectedEventCount)) {
        state = await this.tails.load(sessionId, db, opts.scope?.tenant);
      }
      const { after, pendingDeltas } = checkedAppend(sessionId, state, decoded);
      try {
        const rows = { changes: rowChanges(state, after), pendingDeltas };
        const result = await this.runAppend(sessionId, decoded, rows, { ...opts, expectedEventCount: opts.expectedEventCount ?? state.nextSeq }, release);
        // Inside a transaction the batch may still roll back: keep nothing.
        if (opts.client) this.tails.forget([sessionId]);
        else this.tails.remember(sessionId, after);
        return result;
      } catch (err) {
        this.tails.forget([sessionId]);
        const raced = err instanceof ForklineError && err.code === 'SESSION_BUSY' && !err.details?.leaseLost;
        if (!raced || opts.expectedEventCount !== undefined || attempt >= MAX_APPEND_ATTEMPTS) throw err;
        if (attempt >= 2 && !opts.client) {
          return this.transaction(async (client) => {
            // NO KEY: a fork's parent-key check on this row does not conflict with it (see fork()).
            await client.query('SELECT 1 FROM "Session" WHERE id = $1 FOR NO KEY UPDATE', [sessionId]);
            return this.checkAndAppend(sessionId, decoded, { ...opts, client }, release);
          });
        }
      }
    }
  }

  private async runAppend(
    sessionId: string,
    decoded: NewEvent[],
    rows: { changes: ReturnType<typeof rowChanges>; pendingDeltas: number[] },
    opts: { expectedEventCount: number | null; client?: pg.PoolClient; lease?: Lease; scope?: Scope; claimFor?: LeaseClaim },
    release: boolean,
  ): Promise<{ events: StoredEvent[]; released: boolean; lease?: Lease }> {
    const { turnStarts, status, title, pendingDelta } = rows.changes;
    const n = decoded.length;
    const params = [sessionId, n, turnStarts, status, title !== undefined, title ?? null, opts.expectedEventCount, JSON.stringify(eventRows(decoded, rows.pendingDeltas)), pendingDelta,
      opts.lease?.token ?? null, opts.scope?.tenant ?? null, release, opts.lease?.ttlMs ?? opts.claimFor?.ttlMs ?? null, opts.claimFor?.owner ?? null];
    type Out = Omit<StoredEvent, 'id' | 'sessionId' | 'inherited'> & {
      k: number; notified: unknown; released: boolean; held: boolean | null; leaseToken: number; inheritedRanges: unknown; inheritedEventCount: number;
    };
    const appended = opts.client ? { rows: (await opts.client.query<Out>(this.appendNotifying(params))).rows, notified: true } : await this.appends.run(params);
    const out = appended.rows as Out[];
    if (out.length === 0) {
      const exists = await (opts.client ?? this.pool).query<{ eventCount: number; leaseToken: number }>(
        'SELECT "eventCount", "leaseToken" FROM "Session" WHERE id = $1 AND ($2::text IS NULL OR tenant = $2::text)',
        [sessionId, opts.scope?.tenant ?? null],
      );
      if (!exists.rowCount) throw sessionNotFound(sessionId);
      const found = exists.rows[0];
      if (opts.lease && found.leaseToken !== opts.lease.token) {
        throw new ForklineError('SESSION_BUSY', `session ${sessionId} is run by another process now (its lease was taken over)`, { leaseLost: true });
      }
      throw new ForklineError('SESSION_BUSY', `session ${sessionId} was appended to concurrently (expected ${opts.expectedEventCount} events, found ${found.eventCount})`);
    }
    const first = out[0];
    if (!appended.notified) this.notifications.post(EVENTS_CHANNEL, JSON.stringify({ s: sessionId, last: out[out.length - 1].seq }));
    // Appended events are the session's own: never inherited.
    return {
      events: out.map(({ seq, type, data, synthetic, createdAt }) => ({ seq, type, data, synthetic, createdAt, id: eventId(sessionId, seq), sessionId, inherited: false })),
      released: release && first.released,
      // Held by the claimer: taken by this statement, or already its own (adopting it again is harmless: SessionHost.adopt).
      lease: opts.claimFor && first.held ? leaseOf({ id: sessionId, token: first.leaseToken, inheritedRanges: first.inheritedRanges, inheritedEventCount: first.inheritedEventCount }, opts.claimFor.ttlMs) : undefined,
    };
  }

  /**
   * Exact fork (DESIGN §3.1, seed 000). In one REPEATABLE READ transaction — one
   * snapshot of the parent even while it is being appended to — it validates or
   * selects the cut, reads the open tail at the cut, and writes the child: its
   * row, recording the ancestor ranges it shares (store/lineage.ts), and its own
   * marker and closers (then its title, model and queued message, when given),
   * before the child is visible.
   * Nothing is copied: the cost is a few index lookups whatever the parent's length.
   * A numeric cut is exact and never moves; an anchor selects a turn-level
   * branch from the same snapshot (seed 003); an input cuts right before the
   * inbox/add that queued it (editMessage). Omitted: through the last turn/end.
   */
  async fork(
    scope: Scope,
    parentId: string,
    cut: Cut | undefined,
    opts: ChildOverrides & { beforeCommit?: BeforeCommit<ForkRecord> } = {},
  ): Promise<ForkResult> {
    const { beforeCommit, ...overrides } = opts;
    const r = await this.forkMany(scope, parentId, cut, [overrides], {
      beforeCommit: beforeCommit && ((client, rec) => beforeCommit(client, { ...rec.children[0], parentId: rec.parentId, cutSeq: rec.cutSeq })),
    });
    return { ...r.children[0], parent: r.parent, cutSeq: r.cutSeq };
  }

  /**
   * Several children of one parent at one cut (fanOut), in one REPEATABLE READ
   * transaction: the cut, the state at it and the seed are read once, from one
   * snapshot, and each child gets its own row, marker and closers and its own
   * overrides. All of them or none exist once it commits.
   */
  async forkMany(
    scope: Scope,
    parentId: string,
    cut: Cut | undefined,
    children: readonly ChildOverrides[],
    opts: { beforeCommit?: BeforeCommit<ForkManyRecord> } = {},
  ): Promise<ForkManyResult> {
    if (children.length < 1 || children.length > MAX_FORK_CHILDREN) throw badInput(`a fork writes 1..${MAX_FORK_CHILDREN} children, not ${children.length}`);
    // The child's parent key is checked against the parent row as of the
    // snapshot: a transaction that deleted or locked the row FOR UPDATE after
    // it makes Postgres abort the fork (serialization failure). The whole fork
    // runs again from a new snapshot, so it still reads one observation: it
    // succeeds, or finds the parent gone (SESSION_NOT_FOUND).
    const result = await retried(MAX_FORK_ATTEMPTS, isTransactionConflict, () => this.forkOnce(scope, parentId, cut, children, opts.beforeCommit)).catch((err) => {
      throw isTransactionConflict(err)
        ? new ForklineError('SESSION_BUSY', `session ${parentId} kept changing while it was being forked (${MAX_FORK_ATTEMPTS} attempts); try again`, { sessionId: parentId })
        : err;
    });
    for (const c of result.made) this.tails.remember(c.sessionId, c.after);
    const rows = new Map((await this.sessions.byIds(result.made.map((c) => c.sessionId))).map((r) => [r.id, r]));
    return {
      parent: result.parent,
      cutSeq: result.cutSeq,
      children: result.made.map((c) => {
        const session = rows.get(c.sessionId)!;
        this.log.remember(session);
        return { session, syntheticEvents: c.synthetic, inputId: c.inputId };
      }),
    };
  }

  /** One attempt at forkMany: its REPEATABLE READ transaction. */
  private forkOnce(scope: Scope, parentId: string, cut: Cut | undefined, children: readonly ChildOverrides[], beforeCommit?: BeforeCommit<ForkManyRecord>) {
    return this.transaction(async (client) => {
      const { rows } = await client.query<SessionRow>('SELECT * FROM "Session" WHERE id = $1 AND tenant = $2', [parentId, scope.tenant]);
      const parent = rows[0];
      if (!parent) throw sessionNotFound(parentId);
      const lineage = this.log.remember(parent);
      const cutSeq = await this.selectCut(parent, lineage, cut, client);

      // The reducer's state at the cut — indexed lookups, never a scan of the
      // prefix — gives the seed; each child's events are checked like any
      // append, and its counters are the state after them.
      const { state: atCut, openTurn } = await this.tails.at(lineage, cutSeq, client);
      const inheritedTitle = cutSeq >= 0 ? ((await this.log.lastOfType(lineage, 'session/title', cutSeq, client))?.data.title as string | undefined) : undefined;
      const seed = buildForkSeed({ parentSessionId: parentId, cutSeq, openTail: openTurn, effectOf: this.effectOf });
      // Children written together share a createdAt (the transaction's): ids in
      // ascending order keep them listed (createdAt, id) in the order given.
      const ids = children.map(() => newSessionId()).sort();
      const made: Array<{ sessionId: string; inputId?: string; after: LogState; synthetic: StoredEvent[] }> = [];
      for (const [i, overrides] of children.entries()) {
        made.push(await this.writeChild(client, ids[i], { parent, lineage, cutSeq, atCut, seed, inheritedTitle }, overrides));
      }
      await beforeCommit?.(client, { parentId, cutSeq, children: made.map(({ sessionId, inputId }) => ({ sessionId, inputId })) });
      return { parent, cutSeq, made };
    }, 'REPEATABLE READ');
  }

  /** The cut a fork takes, from the transaction's snapshot of the parent. */
  private async selectCut(parent: SessionRow, lineage: Lineage, cut: Cut | undefined, client: pg.PoolClient): Promise<number> {
    const last = parent.eventCount - 1;
    if (typeof cut === 'number') {
      if (!Number.isSafeInteger(cut) || cut < 0 || cut > last) {
        throw new ForklineError(
          'SEQ_OUT_OF_RANGE',
          `atSeq ${cut} is not an event of session ${parent.id} (valid: 0..${last})`,
          { atSeq: cut, eventCount: parent.eventCount },
        );
      }
      return cut;
    }
    if (cut?.beforeInput !== undefined) {
      // Right before the input's inbox/add (-1 when it is the first event: the child holds only its seed).
      const added = await this.log.inboxAddOf(lineage, cut.beforeInput, last, client);
      if (!added) throw badInput(`input ${cut.beforeInput} is not an input of session ${parent.id}`, { inputId: cut.beforeInput });
      return added.seq - 1;
    }
    const seqOf = (e: StoredEvent | undefined) => e?.seq;
    return selectBranchCut(
      {
        atOrAfter: async (seq) => seqOf(await this.log.firstOfType(lineage, 'turn/end', seq, client)),
        last: async () => seqOf(await this.log.lastOfType(lineage, 'turn/end', last, client)),
      },
      cut?.anchorSeq,
    );
  }

  /** One child of a fork: its row and its own events (seed, then its overrides), inside the fork's transaction. */
  private async writeChild(
    client: pg.PoolClient,
    childId: string,
    at: { parent: SessionRow; lineage: Lineage; cutSeq: number; atCut: LogState; seed: ForkSeed; inheritedTitle: string | undefined },
    overrides: ChildOverrides,
  ) {
    const { parent, lineage, cutSeq, atCut, seed } = at;
    const own: Array<NewEvent & { seq: number }> = seed.events.map((e) => ({ ...e }));
    // After the seed (firstLiveSeq counts marker and closers only), as if appended at once.
    const add = (e: NewEvent) => own.push({ ...e, seq: seed.firstLiveSeq + own.length - seed.events.length });
    if (overrides.title != null) add({ type: 'session/title', data: { title: overrides.title } });
    if (overrides.model) add({ type: 'session/model', data: overrides.model });
    let inputId: string | undefined;
    if (overrides.message != null) {
      inputId = newInputId();
      add({ type: 'inbox/add', data: { inputId, text: overrides.message } });
    }
    for (const e of own) e.data = decodeEvent(e.type, e.data);

    const { after, pendingDeltas } = checkedAppend(childId, atCut, own);
    await client.query(
      `INSERT INTO "Session" (id, tenant, "treeId", title, status, "formatVersion", "eventCount", "turnCount", "pendingInputCount",
                              "parentId", "forkedAtSeq", "inheritedEventCount", "firstLiveSeq", "inheritedRanges", runner)
       VALUES ($1, $2, $3, $4, 'IDLE', $13, $5, $6, $7, $8, $9, $10, $11, $12, $14)`,
      // A child of a session an external runner pool runs is run by the same pool (issue 32).
      [childId, parent.tenant, parent.treeId, overrides.title ?? at.inheritedTitle ?? null, after.nextSeq, after.turnCount, after.pendingInputCount,
       parent.id, cutSeq, seed.inheritedEventCount, seed.firstLiveSeq, JSON.stringify(childRanges(lineage, cutSeq)), CURRENT_FORMAT_VERSION, parent.runner ?? null],
    );
    const { rows: written } = await client.query<StoredEvent>(
      `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount")
       SELECT $1, (e->>'seq')::int, $2, e->>'type', e->'data', (e->>'synthetic')::boolean, $3 + (e->>'p')::int
         FROM jsonb_array_elements($4::jsonb) AS e
       RETURNING seq, type, data, synthetic, "createdAt"`,
      [childId, parent.treeId, atCut.pendingInputCount, JSON.stringify(eventRows(own, pendingDeltas))],
    );
    await this.notify(SESSIONS_CHANNEL, childId, client);
    const synthetic = written
      .filter((e) => e.synthetic)
      .sort((a, b) => a.seq - b.seq)
      .map((e) => ({ ...e, id: eventId(childId, e.seq), sessionId: childId, inherited: false }));
    return { sessionId: childId, inputId, after, synthetic };
  }

  /**
   * Deletes a session, and with `withDescendants` its whole subtree, in one
   * transaction: rows, events (the immutability trigger lets only this path
   * through) and lineage. A session with children is refused otherwise
   * (SESSION_HAS_CHILDREN): a child shares its ancestors' events, so no
   * surviving session ever loses an inherited event. Returns the deleted ids,
   * the session first.
   */
  async deleteSession(
    scope: Scope,
    id: string,
    opts: { withDescendants?: boolean; beforeCommit?: BeforeCommit<{ deletedSessionIds: string[] }> } = {},
  ): Promise<string[]> {
    // A child forked while we collected the subtree (the parentId key refuses
    // the delete at the end of the statement), or a deadlock with a batch of
    // appends (append-batcher.ts) to the same sessions: again.
    const again = (err: unknown) => isTransactionConflict(err) || (opts.withDescendants === true && sqlStateOf(err) === '23503');
    return retried(MAX_DELETE_ATTEMPTS, again, () => this.deleteOnce(scope, id, opts.withDescendants ?? false, opts.beforeCommit));
  }

  private async deleteOnce(
    scope: Scope,
    id: string,
    withDescendants: boolean,
    beforeCommit?: BeforeCommit<{ deletedSessionIds: string[] }>,
  ): Promise<string[]> {
    const ids = await this.transaction(async (client) => {
      // The row lock makes a concurrent fork of this session wait, then fail on its parent key.
      const { rowCount } = await client.query('SELECT 1 FROM "Session" WHERE id = $1 AND tenant = $2 FOR UPDATE', [id, scope.tenant]);
      if (!rowCount) throw sessionNotFound(id);
      const { rows } = await client.query<{ id: string }>(
        `WITH RECURSIVE subtree AS (
           SELECT id FROM "Session" WHERE "parentId" = $1
           UNION ALL
           SELECT s.id FROM "Session" s JOIN subtree ON s."parentId" = subtree.id
         ) SELECT id FROM subtree`,
        [id],
      );
      if (rows.length && !withDescendants) {
        throw new ForklineError(
          'SESSION_HAS_CHILDREN',
          `session ${id} has ${rows.length} descendant session(s) sharing its events; delete them first or pass withDescendants: true`,
          { sessionId: id, descendants: rows.length },
        );
      }
      const all = [id, ...rows.map((r) => r.id)];
      await client.query(`SET LOCAL forkline.deleting_sessions = 'on'`);
      await client.query('DELETE FROM "Session" WHERE id = ANY($1::text[])', [all]); // events go with them (ON DELETE CASCADE)
      for (let i = 0; i < all.length; i += MAX_NOTIFY_IDS) {
        await this.notify(DELETED_CHANNEL, JSON.stringify({ tenant: scope.tenant, ids: all.slice(i, i + MAX_NOTIFY_IDS) }), client);
      }
      await beforeCommit?.(client, { deletedSessionIds: all });
      return all;
    });
    this.log.forget(ids);
    this.tails.forget(ids);
    return ids;
  }

  /** NOTIFY is transactional: given a transaction's client, it is delivered at its commit. */
  async notify(channel: string, payload: string, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    await client.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }
}
