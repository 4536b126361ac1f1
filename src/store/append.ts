// Appends: a batch checked against the log's relationship rules from the
// reducer state at the end of the log (tail-states.ts), written in one
// statement that allocates seqs under the session's row lock, batched with
// other sessions' appends when they wait together (append-batcher.ts), and
// retried when another writer got in first. The statement also carries the
// lease's part of an append (leases.ts `leaseOnAppend`).
import type pg from 'pg';
import { decodeEvent, type EventData, type NewEvent, type ResponseFormat } from '../core/events.ts';
import { dataOf } from '../core/core-event.ts';
import { ForklineError, badInput, sessionNotFound } from '../core/errors.ts';
import { inboxBound, inputBytes, MAX_PENDING_INPUT_BYTES, MAX_PENDING_INPUTS, type LogState } from '../core/log-state.ts';
import { eventId, newInputId } from './ids.ts';
import type { SessionLog, StoredEvent } from './session-log.ts';
import { EXTERNAL_LEASE_ENDED, leaseOnAppend, leaseTakenByAppend, type AppendLeaseRow, type Lease, type LeaseClaim } from './leases.ts';
import { statement } from './statements.ts';
import type { TailStates } from './tail-states.ts';
import { AppendBatcher, MAX_BATCH, MAX_IN_FLIGHT } from './append-batcher.ts';
import { asJsonb } from './jsonb-value.ts';
import type { NotifyQueue } from './notify-queue.ts';
import { EVENTS_CHANNEL, encodeEventsCommitted, eventsCommittedSql } from './channels.ts';
import { inTransaction } from './transaction.ts';
import type { Scope } from './scope.ts';
import type { SessionModel } from './session-rows.ts';

export const MAX_APPEND_BATCH = 10_000;

/** How an append is made (see SessionAppends.append). */
export interface AppendOptions {
  expectedEventCount?: number;
  client?: pg.PoolClient;
  lease?: Lease;
  scope?: Scope;
}

/** Appends retried after a concurrent writer got in first (each re-checks the batch). */
const MAX_APPEND_ATTEMPTS = 5;

/** What a batch changes in the session row, from the reducer's states before and after it. */
function rowChanges(before: LogState, after: LogState, events: readonly NewEvent[]) {
  const turnMoved = after.turnCount !== before.turnCount || after.openTurn !== before.openTurn;
  // `waiting` is read only when a turn is open: a batch that asked for or gave a decision moves the status too.
  const waiting = after.openTurn !== undefined && after.waiting;
  const statusMoved = turnMoved || waiting !== (before.openTurn !== undefined && before.waiting);
  return {
    turnStarts: after.turnCount - before.turnCount,
    pendingDelta: after.pendingInputCount - before.pendingInputCount,
    pendingBytesDelta: after.pendingInputBytes - before.pendingInputBytes,
    status: statusMoved ? (after.openTurn === undefined ? 'IDLE' : waiting ? 'WAITING' : 'RUNNING') : null,
    title: after.title !== before.title ? after.title : undefined,
    lastTurnFailed: lastTurnFailedIn(events),
    model: lastModelIn(events),
  };
}

/** Whether the batch's last turn/end failed (the list shows such a session as failed); null: no turn ended in it. */
export function lastTurnFailedIn(events: readonly NewEvent[]): boolean | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const end = dataOf(events[i], 'turn/end');
    if (end) return end.reason === 'failed';
  }
  return null;
}

/** The model the batch's last session/model sets (the list shows it); null: the batch sets none. */
export function lastModelIn(events: readonly NewEvent[]): SessionModel | null {
  for (let i = events.length - 1; i >= 0; i--) {
    const m = dataOf(events[i], 'session/model');
    if (m) return { provider: m.provider, model: m.model };
  }
  return null;
}

/** Parameters of one session's append (loneAppend). */
export const APPEND_PARAMS = 19;

/**
 * One session's append (see SessionAppends.append) in one statement: an
 * UPDATE of its row and an INSERT of the events (CTEs), and the SELECT of what
 * it stored ($1: the session, $2: the number of events, $8: the events;
 * $16: whether the batch's last turn/end failed, null: none ended;
 * $17, $18: the provider and model its last session/model sets, null: none;
 * $15: the session's tree, which every statement on its rows names; $9, $19:
 * the change in waiting inputs and in what they weigh). Several
 * sessions' appends go out together as appendBatch (append-batcher.ts). The
 * lease's part ($10: a runner's fencing token, $12: give it back when idle,
 * $13: its ttl, $14: a message's claimer) is leases.ts `leaseOnAppend`. With
 * `notify`, the statement NOTIFYs EVENTS_CHANNEL itself; otherwise its caller
 * does once it committed (append-batcher.ts chooses, notify-queue.ts says why).
 *
 * `byTree`: the row is found by its tree and id, so a distributed Postgres
 * routes the statement to the tree's shard ($15 is always given). Otherwise
 * $15 may be null (a session this process has not seen yet): the row is
 * found by id and the statement returns the session's lineage, which the
 * caller caches, so a first append costs no read of the row beforehand.
 */
function loneAppend(notify: boolean, byTree: boolean): string {
  const update = sessionRowUpdate((n) => `$${n}`, byTree);
  // One row per append, not one per event: the events are the batch as sent, from seq `base` on,
  // stored at the statement's now() (the column's default, at its precision). No row: nothing was written.
  return `WITH s0 AS (
         UPDATE "Session"
            SET ${update.set}
          WHERE ${update.where}
          RETURNING ${update.returning}
       ), ins0 AS (
         INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "dataBytes", tenant)
         SELECT $1, s0.base + (t.ord - 1)::int, s0."treeId", t.e->>'type', t.e->'data', (t.e->>'synthetic')::boolean, s0.pending + (t.e->>'p')::int,
                pg_column_size(t.e->'data'), s0.tenant
           FROM s0, jsonb_array_elements($8::jsonb) WITH ORDINALITY AS t(e, ord)
         RETURNING seq
       )
       SELECT 0 AS k, s0.base, now()::timestamptz(3) AS "createdAt", ${update.lease.selected('s0')}${
         notify
           ? `,
              (SELECT ${eventsCommittedSql('$1::text', 'max(seq)')} FROM ins0) AS notified`
           : ''
       }
         FROM s0`;
}

/**
 * What an append changes in its session row, in the terms of `$` (an
 * expression for each of loneAppend's parameters): its SET clauses, its WHERE
 * (the row, the expected length, the lease's fence, the tenant, the inbox's
 * bounds) and what it returns (`base`, `pending`, the tree and the lease's
 * columns). The inbox's bounds (rule `inbox`, core/log-state.ts) are checked
 * here, on the row the statement locks, because a message (queueInput) is not
 * conditional on the log's length: a check before the statement would let
 * concurrent messages pass it together. A batch that takes inputs out (or
 * adds none) always passes. "pendingInputBytes" never goes below 0 and is 0
 * with an empty inbox (inputs that waited before it was kept count 0).
 */
function sessionRowUpdate($: (n: number) => string, byTree: boolean) {
  const lease = leaseOnAppend({
    token: $(10),
    ttlMs: $(13),
    release: $(12),
    claimer: $(14),
    status: $(4),
    pendingDelta: $(9),
    lineageWanted: byTree ? 'false' : `${$(15)}::text IS NULL`,
  });
  return {
    lease,
    set: `"eventCount" = "eventCount" + ${$(2)},
                "turnCount" = "turnCount" + ${$(3)},
                "pendingInputCount" = "pendingInputCount" + ${$(9)},
                "pendingInputBytes" = CASE WHEN "pendingInputCount" + ${$(9)} = 0 THEN 0 ELSE GREATEST(0, "pendingInputBytes" + ${$(19)}) END,
                status = COALESCE(${$(4)}::"SessionStatus", status),
                title = CASE WHEN ${$(5)}::boolean THEN ${$(6)} ELSE title END,
                "lastTurnFailed" = COALESCE(${$(16)}::boolean, "lastTurnFailed"),
                "modelProvider" = CASE WHEN ${$(17)}::text IS NULL THEN "modelProvider" ELSE ${$(17)}::text END,
                "modelName" = CASE WHEN ${$(17)}::text IS NULL THEN "modelName" ELSE ${$(18)}::text END,
                "updatedAt" = now(),
                ${lease.set}`,
    where: `id = ${$(1)} AND ${byTree ? `"treeId" = ${$(15)}` : `(${$(15)}::text IS NULL OR "treeId" = ${$(15)}::text)`}
            AND (${$(7)}::int IS NULL OR "eventCount" = ${$(7)}::int) AND ${lease.fence}
            AND (${$(11)}::text IS NULL OR tenant = ${$(11)}::text)
            AND (${$(9)} <= 0 OR "pendingInputCount" + ${$(9)} <= ${MAX_PENDING_INPUTS})
            AND (${$(19)} <= 0 OR "pendingInputBytes" + ${$(19)} <= ${MAX_PENDING_INPUT_BYTES})`,
    // The tenant goes into each event row (search walks a tenant's rows: store/session-search.ts).
    returning: `"eventCount" - ${$(2)} AS base, "pendingInputCount" - ${$(9)} AS pending, "treeId", tenant, ${lease.returning}`,
  };
}

/** loneAppend's parameters as the fields of appendBatch's rows: their types, in order ($8, the events, as jsonb). */
const APPEND_PARAM_TYPES = [
  'text',
  'int',
  'int',
  'text',
  'boolean',
  'text',
  'int',
  'jsonb',
  'int',
  'int',
  'text',
  'boolean',
  'int',
  'text',
  'text',
  'boolean',
  'text',
  'text',
  'int',
];

/**
 * Several sessions' appends in one statement (append-batcher.ts), whatever
 * their number: $1 is a jsonb array with an object per append, `k` (its place
 * in the batch, from 0) and loneAppend's parameters as p1…p18 (appendRows).
 * One UPDATE of the session rows and one INSERT of the events, not a block of
 * each per session: one statement for a connection to plan, and the same
 * executor set-up for 2 appends as for 8. (Arrays unnested would tell the
 * planner each batch's size: it planned every execution anew, a custom plan
 * always looking cheaper than the generic one.) Each append answers the row a
 * lone one would (loneAppend's SELECT), tagged `k`; one whose conditions fail
 * updates nothing, so it stores nothing and answers no row. Rows are updated
 * (locked) in the array's order, the session key probed for each (the LIMIT
 * tells the planner how few rows `a` has: with its default guess of 100 it
 * scanned the table), and the batch comes sorted by session id.
 */
function appendBatch(notify: boolean, byTree: boolean): string {
  const update = sessionRowUpdate((n) => `a.p${n}`, byTree);
  const columns = APPEND_PARAM_TYPES.map((type, i) => `p${i + 1} ${type}`).join(', ');
  return `WITH s0 AS (
         UPDATE "Session"
            SET ${update.set}
           FROM (SELECT * FROM jsonb_to_recordset($1::jsonb) AS a(k int, ${columns}) LIMIT ${MAX_BATCH}) a
          WHERE ${update.where}
          RETURNING a.k, a.p8 AS events, "Session".id, ${update.returning}
       ), ins0 AS (
         INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "dataBytes", tenant)
         SELECT s0.id, s0.base + (t.ord - 1)::int, s0."treeId", t.e->>'type', t.e->'data', (t.e->>'synthetic')::boolean, s0.pending + (t.e->>'p')::int,
                pg_column_size(t.e->'data'), s0.tenant
           FROM s0, jsonb_array_elements(s0.events) WITH ORDINALITY AS t(e, ord)
         RETURNING "sessionId", seq
       )
       SELECT s0.k, s0.base, now()::timestamptz(3) AS "createdAt", ${update.lease.selected('s0')}${
         notify
           ? `,
              (SELECT ${eventsCommittedSql('s0.id', 'max(ins0.seq)')} FROM ins0 WHERE ins0."sessionId" = s0.id) AS notified`
           : ''
       }
         FROM s0`;
}

/**
 * appendBatch's $1 for appends given as loneAppend's parameters (APPEND_PARAMS of them), the events ($8) as their rows
 * (eventRows): the whole batch is one JSON.stringify, written once into one string. Each append's events made into
 * JSON text first and then pasted into its row by concatenation were copied twice more (the row's pieces, then their
 * flattening): about 3.7 KB of garbage an append. Each row an object literal, not keys added in a loop: an object
 * given 20 keys one by one becomes a dictionary, which JSON.stringify serialises off its fast path.
 */
function appendRows(batch: ReadonlyArray<readonly unknown[]>): string {
  if (batch.length > MAX_BATCH) throw new Error(`at most ${MAX_BATCH} appends a statement`);
  return JSON.stringify(
    batch.map((p, k) => ({
      k,
      p1: p[0],
      p2: p[1],
      p3: p[2],
      p4: p[3],
      p5: p[4],
      p6: p[5],
      p7: p[6],
      p8: p[7],
      p9: p[8],
      p10: p[9],
      p11: p[10],
      p12: p[11],
      p13: p[12],
      p14: p[13],
      p15: p[14],
      p16: p[15],
      p17: p[16],
      p18: p[17],
      p19: p[18],
    })),
  );
}

/** loneAppend's parameters as sent: the events ($8, kept as their rows for appendRows) as JSON text. */
function loneParams(params: readonly unknown[]): unknown[] {
  const values = [...params];
  values[7] = JSON.stringify(values[7]);
  return values;
}

/**
 * The batch checked against the relationship rules (core/log-state.ts) from
 * `state`, or BAD_USER_INPUT naming the first event that breaks one. Returns
 * the state after it and, per event, the change in waiting inputs through it.
 */
export function checkedAppend(sessionId: string, state: LogState, events: NewEvent[]): { after: LogState; pendingDeltas: number[] } {
  const after = state.clone();
  const pendingDeltas = events.map((e) => {
    // Literals, not `{ ...e, seq }`: a spread with a property after it is a runtime call in V8, most of the check's time.
    const event = { type: e.type, data: e.data, synthetic: e.synthetic, seq: after.nextSeq };
    const broken = after.violation(event);
    if (broken) {
      throw badInput(`event ${event.seq} (${e.type}) of session ${sessionId} breaks the log's rules: ${broken.rule}: ${broken.detail}`, {
        rule: broken.rule,
        seq: event.seq,
        ...broken.bound,
      });
    }
    return after.apply(event).pendingInputCount - state.pendingInputCount;
  });
  return { after, pendingDeltas };
}

/** Rows as the INSERTs of appends and forks read them: `p` is the change in waiting inputs through this event. */
export function eventRows(events: Array<NewEvent & { seq?: number }>, pendingDeltas: number[]) {
  return events.map((e, i) => ({ seq: e.seq, type: e.type, data: e.data, synthetic: e.synthetic ?? false, p: pendingDeltas[i] }));
}

export class SessionAppends {
  private readonly appendStatement: ReturnType<typeof statement>;
  private readonly appendNotifying: ReturnType<typeof statement>;
  /** Appends outside a transaction: several sessions' in one statement when they wait together (group commit). */
  private readonly appends: AppendBatcher;

  constructor(
    private readonly pool: pg.Pool,
    /** Reducer states at the end of logs this process appends to: appends are checked against them. */
    private readonly tails: TailStates,
    /** NOTIFYs sent after the commits they announce (notify-queue.ts). */
    private readonly notifications: NotifyQueue,
    prepare: boolean,
    /** Where a session's tree is known (its cached lineage): the append names it. */
    private readonly log: SessionLog,
    /** Every append names its tree, read first when not cached (a distributed Postgres: see loneAppend). */
    private readonly byTree = false,
  ) {
    // A lone append whose caller notifies once it committed (notify-queue.ts), and
    // one that NOTIFYs what it stored (inside a caller's transaction: delivered at its commit).
    this.appendStatement = statement(prepare, byTree ? 'append_by_tree' : 'append', loneAppend(false, byTree));
    this.appendNotifying = statement(prepare, byTree ? 'append_notify_by_tree' : 'append_notify', loneAppend(true, byTree));
    const poolMax = pool.options.max ?? 10;
    this.appends = new AppendBatcher(
      pool,
      {
        single: (params, notify) => (notify ? this.appendNotifying : this.appendStatement)(loneParams(params)),
        batch: (notify) => appendBatch(notify, byTree),
        batchValues: (batch) => [appendRows(batch)],
        params: APPEND_PARAMS,
        prepare,
        name: byTree ? 'append_by_tree' : 'append',
      },
      Math.max(1, Math.min(MAX_IN_FLIGHT, Math.floor(poolMax / 2))),
    );
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
  async append(sessionId: string, events: NewEvent[], opts: AppendOptions = {}): Promise<StoredEvent[]> {
    return (await this.appendAndMaybeRelease(sessionId, events, opts, false)).events;
  }

  /**
   * A runner's append that also gives its lease back when the batch leaves the
   * session idle (no open turn, no queued input), in the same statement:
   * `released` says whether it did.
   */
  async appendReleasingIfIdle(
    sessionId: string,
    events: NewEvent[],
    lease: Lease,
    opts: Pick<AppendOptions, 'scope' | 'expectedEventCount'> = {},
  ): Promise<{ events: StoredEvent[]; released: boolean }> {
    return this.appendAndMaybeRelease(sessionId, events, { ...opts, lease }, true);
  }

  /**
   * Queues a message (sendMessage): an inbox/add under an input id made here.
   * The rules an inbox/add can break are an input id already pending, which
   * a new id cannot be, and the inbox's bounds, which the statement checks on
   * the row it locks (sessionRowUpdate), so no tail state is read: one
   * statement, not conditional on the log's length (the session's row lock
   * orders it among other writers, whose own appends then find the log moved).
   * Refused (BAD_USER_INPUT, rule `inbox`): nothing is written.
   * Most messages reach a process that holds no tail state of their session
   * (another process ran its last turn), and loading one was a round trip.
   * With `claimFor`, the same statement takes the session's lease when nobody
   * holds it (`lease`: run it), so the agent needs no claim of its own either.
   */
  async queueInput(
    sessionId: string,
    text: string,
    opts: { scope?: Scope; client?: pg.PoolClient; claimFor?: LeaseClaim; responseFormat?: ResponseFormat } = {},
  ): Promise<{ event: StoredEvent; lease?: Lease }> {
    const { responseFormat } = opts;
    const data = decodeEvent('inbox/add', { inputId: newInputId(), text, ...(responseFormat ? { responseFormat } : {}) }) as EventData<'inbox/add'>;
    const event = { type: 'inbox/add', data };
    const queue = async () => {
      const changes = {
        turnStarts: 0,
        pendingDelta: 1,
        pendingBytesDelta: inputBytes(data),
        status: null,
        title: undefined,
        lastTurnFailed: null,
        model: null,
      };
      const append = () => this.runAppend(sessionId, [event], { changes, pendingDeltas: [1] }, { ...opts, expectedEventCount: null }, false);
      // Refused for a full inbox that had room again when runAppend looked why (an input taken in between): sent again.
      const { events, lease } = await append().catch((err: unknown) => {
        if (err instanceof ForklineError && err.code === 'SESSION_BUSY' && !err.details?.leaseLost) return append();
        throw err;
      });
      // A state this process keeps of the session moves with it when it was current; otherwise it goes. Applied, not
      // checked: the input is stored (the statement checked the inbox's bounds), nothing may throw now.
      const known = opts.client ? undefined : this.tails.cached(sessionId);
      if (known && known.nextSeq === events[0].seq) this.tails.remember(sessionId, known.clone().apply({ ...event, seq: events[0].seq }));
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
    opts: AppendOptions,
    release: boolean,
  ): Promise<{ events: StoredEvent[]; released: boolean }> {
    if (events.length === 0) return { events: [], released: false };
    if (events.length > MAX_APPEND_BATCH) throw badInput(`at most ${MAX_APPEND_BATCH} events per append`);
    const decoded: NewEvent[] = events.map((e) => ({ type: e.type, data: decodeEvent(e.type, e.data), synthetic: e.synthetic }));
    // Writers in this process take turns per session (they would only race each
    // other's checks); an append inside a caller's transaction does not wait in
    // line, since that transaction may already hold the row the line waits for.
    return opts.client
      ? this.checkAndAppend(sessionId, decoded, opts, release)
      : this.inLine(sessionId, () => this.checkAndAppend(sessionId, decoded, opts, release));
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
    opts: AppendOptions,
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
        // The caller's view of the log is not current: its batch is not checked against another end.
        if (opts.expectedEventCount !== undefined && state.nextSeq !== opts.expectedEventCount) {
          throw new ForklineError('SESSION_BUSY', `session ${sessionId} has ${state.nextSeq} events, not the ${opts.expectedEventCount} expected`, {
            eventCount: state.nextSeq,
          });
        }
      }
      const { after, pendingDeltas } = checkedAppend(sessionId, state, decoded);
      try {
        const rows = { changes: rowChanges(state, after, decoded), pendingDeltas };
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
          return inTransaction(this.pool, async (client) => {
            // NO KEY: a fork's parent-key check on this row does not conflict with it (see fork()).
            await client.query('SELECT 1 FROM "Session" WHERE id = $1 AND "treeId" = $2 FOR NO KEY UPDATE', [
              sessionId,
              await this.log.treeOf(sessionId, client),
            ]);
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
    const { turnStarts, status, title, pendingDelta, pendingBytesDelta, lastTurnFailed, model } = rows.changes;
    const n = decoded.length;
    const db = opts.client ?? this.pool;
    const treeId = this.byTree ? await this.log.treeOf(sessionId, db) : (this.log.knownTree(sessionId) ?? null);
    const params = [
      sessionId,
      n,
      turnStarts,
      status,
      title !== undefined,
      title ?? null,
      opts.expectedEventCount,
      eventRows(decoded, rows.pendingDeltas), // its JSON is made once, with the statement's (appendRows, loneParams)
      pendingDelta,
      opts.lease?.token ?? null,
      opts.scope?.tenant ?? null,
      release,
      opts.lease?.ttlMs ?? opts.claimFor?.ttlMs ?? null,
      opts.claimFor?.owner ?? null,
      treeId,
      lastTurnFailed,
      model?.provider ?? null,
      model?.model ?? null,
      pendingBytesDelta,
    ];
    type Out = AppendLeaseRow & { k: number; base: number; createdAt: Date; notified: unknown };
    const appended = opts.client
      ? { rows: (await opts.client.query<Out>(this.appendNotifying(loneParams(params)))).rows, notified: true }
      : await this.appends.run(params);
    const out = appended.rows as Out[];
    if (out.length === 0) {
      const exists = await (opts.client ?? this.pool).query<{
        eventCount: number;
        leaseToken: number;
        leaseOwner: string | null;
        ended: boolean;
        pendingInputCount: number;
        pendingInputBytes: number;
      }>(
        `SELECT "eventCount", "leaseToken", "leaseOwner", COALESCE(${EXTERNAL_LEASE_ENDED}, false) AS ended, "pendingInputCount", "pendingInputBytes" FROM "Session"
          WHERE id = $1 AND ($3::text IS NULL OR "treeId" = $3::text) AND ($2::text IS NULL OR tenant = $2::text)`,
        [sessionId, opts.scope?.tenant ?? null, treeId],
      );
      if (!exists.rowCount) throw sessionNotFound(sessionId);
      const found = exists.rows[0];
      if (opts.lease && (found.leaseToken !== opts.lease.token || found.leaseOwner == null || found.ended)) {
        throw new ForklineError('SESSION_BUSY', `session ${sessionId} is run by another process now (its lease was taken over or given back)`, {
          leaseLost: true,
        });
      }
      // The inbox's bounds (sessionRowUpdate): inputs the batch adds would pass one. A batch checked against the
      // log's end was refused by the reducer first; this is a message's (queueInput) answer.
      const full =
        (pendingDelta > 0 && found.pendingInputCount + pendingDelta > MAX_PENDING_INPUTS) ||
        (pendingBytesDelta > 0 && found.pendingInputBytes + pendingBytesDelta > MAX_PENDING_INPUT_BYTES)
          ? inboxBound(found.pendingInputCount + pendingDelta - 1, found.pendingInputBytes, pendingBytesDelta)
          : undefined;
      if (full) throw badInput(`session ${sessionId} takes no more input now: ${full.rule}: ${full.detail}`, { rule: full.rule, ...full.bound });
      throw new ForklineError(
        'SESSION_BUSY',
        `session ${sessionId} was appended to concurrently (expected ${opts.expectedEventCount} events, found ${found.eventCount})`,
        {
          eventCount: found.eventCount,
        },
      );
    }
    const first = out[0];
    if (treeId === null)
      this.log.remember({ id: sessionId, treeId: first.treeId, inheritedRanges: first.inheritedRanges, inheritedEventCount: first.inheritedEventCount });
    // post never rejects: the append does not wait for its NOTIFY.
    const { base, createdAt } = first;
    if (!appended.notified) void this.notifications.post(EVENTS_CHANNEL, encodeEventsCommitted({ sessionId, lastSeq: base + n - 1 }));
    // The batch as stored, without reading it back: each event's data as jsonb gives it back (a read of the log returns
    // the same). Appended events are the session's own: never inherited.
    return {
      events: decoded.map((e, i) => ({
        seq: base + i,
        type: e.type,
        data: asJsonb(e.data),
        synthetic: e.synthetic ?? false,
        createdAt,
        id: eventId(sessionId, base + i),
        sessionId,
        inherited: false,
      })),
      released: release && first.released,
      lease: leaseTakenByAppend(sessionId, first, opts.claimFor),
    };
  }
}
