// SessionStore: the only module that talks to Postgres. It owns seq allocation,
// the session counters, fork validation and copying (DESIGN §1, §3.1).
import type pg from 'pg';
import type { PrismaClient, Session } from '@prisma/client';
import { decodeEvent, type LogEvent, type NewEvent } from '../core/events.ts';
import { ForklineError, badInput, sessionNotFound } from '../core/errors.ts';
import { buildForkSeed } from '../core/fork-seed.ts';
import { selectBranchCut } from '../core/cut.ts';
import type { ToolEffectLookup } from '../core/tools.ts';
import { EVENT_ID_SQL, newSessionId } from './ids.ts';

export type SessionRow = Session;

export interface StoredEvent extends LogEvent {
  id: string;
  sessionId: string;
  inherited: boolean;
  synthetic: boolean;
  createdAt: Date;
}

/** Postgres NOTIFY channel: one notification per committed batch. */
export const EVENTS_CHANNEL = 'forkline_events';
export const SESSIONS_CHANNEL = 'forkline_sessions';

/** Who is asking: every read and write is confined to one tenant. */
export interface Scope {
  tenant: string;
}

export interface ForkResult {
  session: SessionRow;
  parent: SessionRow;
  cutSeq: number;
  syntheticEvents: StoredEvent[];
}

/**
 * What a fork's cut selector may look at: one consistent snapshot of the
 * parent, the same one the copy and the closers are built from.
 */
export interface ParentObservation {
  session: SessionRow;
  turnEndSeqs(): Promise<number[]>;
}
export type CutSelector = number | ((observation: ParentObservation) => Promise<number> | number);

const EVENT_COLUMNS = `id, "sessionId", seq, type, data, inherited, synthetic, "createdAt"`;
export const MAX_APPEND_BATCH = 10_000;

function summarize(events: NewEvent[]) {
  let turnStarts = 0;
  let pendingDelta = 0;
  let status: 'IDLE' | 'RUNNING' | null = null;
  let title: string | undefined;
  for (const e of events) {
    if (e.type === 'turn/start') {
      turnStarts++;
      status = 'RUNNING';
    } else if (e.type === 'turn/end') status = 'IDLE';
    else if (e.type === 'session/title') title = (e.data as { title: string }).title;
    else if (e.type === 'inbox/add') pendingDelta++;
    else if (e.type === 'inbox/remove') pendingDelta--;
  }
  return { turnStarts, status, title, pendingDelta };
}

export class SessionStore {
  constructor(
    readonly prisma: PrismaClient,
    readonly pool: pg.Pool,
    readonly effectOf: ToolEffectLookup,
  ) {}

  async createSession(
    scope: Scope,
    input: { title?: string | null; model?: { provider: string; model: string; settings?: Record<string, unknown> } | null },
  ): Promise<SessionRow> {
    const id = newSessionId();
    const initial: NewEvent[] = [];
    if (input.title != null) initial.push({ type: 'session/title', data: { title: input.title } });
    if (input.model) initial.push({ type: 'session/model', data: input.model });
    // One transaction: a session never exists without its initial events.
    await this.transaction(async (client) => {
      await client.query('INSERT INTO "Session" (id, tenant) VALUES ($1, $2)', [id, scope.tenant]);
      await this.append(id, initial, { client });
      await this.notify(SESSIONS_CHANNEL, id, client);
    });
    return this.requireSession(scope, id);
  }

  /** Runs `fn` in a transaction on one pooled connection. */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>, isolation = 'READ COMMITTED'): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query(`BEGIN ISOLATION LEVEL ${isolation}`);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    } finally {
      client.release();
    }
  }

  async getSession(scope: Scope, id: string): Promise<SessionRow | null> {
    return this.prisma.session.findFirst({ where: { id, tenant: scope.tenant } });
  }

  async requireSession(scope: Scope, id: string): Promise<SessionRow> {
    const s = await this.getSession(scope, id);
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
   */
  async append(
    sessionId: string,
    events: NewEvent[],
    opts: { expectedEventCount?: number; client?: pg.PoolClient } = {},
  ): Promise<StoredEvent[]> {
    if (events.length === 0) return [];
    if (events.length > MAX_APPEND_BATCH) throw badInput(`at most ${MAX_APPEND_BATCH} events per append`);
    const rows = events.map((e) => ({ type: e.type, data: decodeEvent(e.type, e.data), synthetic: e.synthetic ?? false }));
    const { turnStarts, status, title, pendingDelta } = summarize(rows);
    const n = rows.length;
    const { rows: out } = await (opts.client ?? this.pool).query<StoredEvent & { notified: unknown }>(
      `WITH s AS (
         UPDATE "Session"
            SET "eventCount" = "eventCount" + $2,
                "turnCount" = "turnCount" + $3,
                "pendingInputCount" = "pendingInputCount" + $9,
                status = COALESCE($4::"SessionStatus", status),
                title = CASE WHEN $5::boolean THEN $6 ELSE title END,
                "updatedAt" = now()
          WHERE id = $1 AND ($7::int IS NULL OR "eventCount" = $7::int)
          RETURNING "eventCount" - $2 AS base
       ), ins AS (
         INSERT INTO "Event" (id, "sessionId", seq, type, data, synthetic)
         SELECT ${EVENT_ID_SQL}, $1, s.base + (t.ord - 1)::int, t.e->>'type', t.e->'data', (t.e->>'synthetic')::boolean
           FROM s, jsonb_array_elements($8::jsonb) WITH ORDINALITY AS t(e, ord)
         RETURNING ${EVENT_COLUMNS}
       )
       SELECT ins.*, (SELECT pg_notify('${EVENTS_CHANNEL}', json_build_object('s', $1::text, 'last', max(seq))::text) FROM ins) AS notified
         FROM ins ORDER BY seq`,
      [sessionId, n, turnStarts, status, title !== undefined, title ?? null, opts.expectedEventCount ?? null, JSON.stringify(rows), pendingDelta],
    );
    if (out.length === 0) {
      const exists = await this.pool.query('SELECT "eventCount" FROM "Session" WHERE id = $1', [sessionId]);
      if (!exists.rowCount) throw sessionNotFound(sessionId);
      throw new ForklineError('SESSION_BUSY', `session ${sessionId} was appended to concurrently (expected ${opts.expectedEventCount} events, found ${exists.rows[0].eventCount})`);
    }
    for (const e of out) delete (e as { notified?: unknown }).notified;
    return out;
  }

  /** Events with afterSeq < seq, ascending, at most `limit`. */
  async readEvents(sessionId: string, afterSeq = -1, limit = 1000): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<StoredEvent>(
      `SELECT ${EVENT_COLUMNS} FROM "Event" WHERE "sessionId" = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
      [sessionId, afterSeq, limit],
    );
    return rows;
  }

  /** Events fromSeq..toSeq inclusive. */
  async readRange(sessionId: string, fromSeq: number, toSeq: number, client: pg.Pool | pg.PoolClient = this.pool): Promise<StoredEvent[]> {
    const { rows } = await client.query<StoredEvent>(
      `SELECT ${EVENT_COLUMNS} FROM "Event" WHERE "sessionId" = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq`,
      [sessionId, fromSeq, toSeq],
    );
    return rows;
  }

  /** Streams the whole log in pages (never holds more than one page). */
  async *iterateEvents(sessionId: string, pageSize = 1000): AsyncGenerator<StoredEvent> {
    let after = -1;
    for (;;) {
      const page = await this.readEvents(sessionId, after, pageSize);
      yield* page;
      if (page.length < pageSize) return;
      after = page[page.length - 1].seq;
    }
  }

  /**
   * The events from the last `turn/start` at or before `seq` through `seq`: all
   * that repair needs to close whatever is open at `seq` (DESIGN §3.1 cost).
   */
  async readOpenTail(sessionId: string, seq: number, client: pg.Pool | pg.PoolClient = this.pool): Promise<StoredEvent[]> {
    const { rows } = await client.query<{ start: number | null }>(
      `SELECT max(seq) AS start FROM "Event" WHERE "sessionId" = $1 AND type = 'turn/start' AND seq <= $2`,
      [sessionId, seq],
    );
    const start = rows[0].start;
    return start === null ? [] : this.readRange(sessionId, start, seq, client);
  }

  /** Events of the given types only, ascending (served by the (sessionId, type, seq) index). */
  async readEventsOfTypes(sessionId: string, types: string[]): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<StoredEvent>(
      `SELECT ${EVENT_COLUMNS} FROM "Event" WHERE "sessionId" = $1 AND type = ANY($2::text[]) ORDER BY seq`,
      [sessionId, types],
    );
    return rows;
  }

  async turnEndSeqs(sessionId: string, client: pg.Pool | pg.PoolClient = this.pool): Promise<number[]> {
    const { rows } = await client.query<{ seq: number }>(
      `SELECT seq FROM "Event" WHERE "sessionId" = $1 AND type = 'turn/end' ORDER BY seq`,
      [sessionId],
    );
    return rows.map((r) => r.seq);
  }

  /**
   * Exact fork (DESIGN §3.1, seed 000). In one REPEATABLE READ transaction — one
   * snapshot of the parent even while it is being appended to — it validates the
   * cut, copies events 0..cut inside Postgres, and writes the child's marker and
   * closers (and its title, when given) before the child is visible.
   * A numeric cut is exact and never moves; a function selects the cut from the
   * same snapshot (turn-level branches, seed 003). Omitted: through the last turn/end.
   */
  async fork(scope: Scope, parentId: string, cut: CutSelector | undefined, opts: { title?: string | null } = {}): Promise<ForkResult> {
    const result = await this.transaction(async (client) => {
      const { rows } = await client.query<SessionRow>('SELECT * FROM "Session" WHERE id = $1 AND tenant = $2', [parentId, scope.tenant]);
      const parent = rows[0];
      if (!parent) throw sessionNotFound(parentId);
      const observation: ParentObservation = { session: parent, turnEndSeqs: () => this.turnEndSeqs(parentId, client) };
      const selector = cut ?? ((o: ParentObservation) => o.turnEndSeqs().then((seqs) => selectBranchCut(seqs)));
      let cutSeq: number;
      if (typeof selector === 'number') {
        if (!Number.isSafeInteger(selector) || selector < 0 || selector >= parent.eventCount) {
          throw new ForklineError(
            'SEQ_OUT_OF_RANGE',
            `atSeq ${selector} is not an event of session ${parentId} (valid: 0..${parent.eventCount - 1})`,
            { atSeq: selector, eventCount: parent.eventCount },
          );
        }
        cutSeq = selector;
      } else {
        cutSeq = await selector(observation);
      }

      const openTail = cutSeq >= 0 ? await this.readOpenTail(parentId, cutSeq, client) : [];
      const seed = buildForkSeed({ parentSessionId: parentId, cutSeq, openTail, effectOf: this.effectOf });
      const inherited = await client.query<{ turns: number; pending: number; title: string | null }>(
        `SELECT (SELECT count(*)::int FROM "Event" WHERE "sessionId" = $1 AND type = 'turn/start' AND seq <= $2) AS turns,
                (SELECT (count(*) FILTER (WHERE type = 'inbox/add') - count(*) FILTER (WHERE type = 'inbox/remove'))::int
                   FROM "Event" WHERE "sessionId" = $1 AND type IN ('inbox/add', 'inbox/remove') AND seq <= $2) AS pending,
                (SELECT data->>'title' FROM "Event" WHERE "sessionId" = $1 AND type = 'session/title' AND seq <= $2
                  ORDER BY seq DESC LIMIT 1) AS title`,
        [parentId, cutSeq],
      );
      const own: Array<NewEvent & { seq: number }> = [...seed.events];
      if (opts.title != null) own.push({ type: 'session/title', data: { title: opts.title }, seq: seed.firstLiveSeq });
      for (const e of own) e.data = decodeEvent(e.type, e.data);

      const childId = newSessionId();
      await client.query(
        `INSERT INTO "Session" (id, tenant, title, status, "formatVersion", "eventCount", "turnCount", "pendingInputCount",
                                "parentId", "forkedAtSeq", "inheritedEventCount", "firstLiveSeq")
         VALUES ($1, $2, $3, 'IDLE', 4, $4, $5, $6, $7, $8, $9, $10)`,
        [childId, parent.tenant, opts.title ?? inherited.rows[0].title, seed.firstLiveSeq + (own.length - seed.events.length),
         inherited.rows[0].turns, inherited.rows[0].pending, parentId, cutSeq, seed.inheritedEventCount, seed.firstLiveSeq],
      );
      await client.query(
        `INSERT INTO "Event" (id, "sessionId", seq, type, data, inherited, synthetic, "createdAt")
         SELECT ${EVENT_ID_SQL}, $1, seq, type, data, true, synthetic, "createdAt"
           FROM "Event" WHERE "sessionId" = $2 AND seq <= $3`,
        [childId, parentId, cutSeq],
      );
      const { rows: written } = await client.query<StoredEvent>(
        `INSERT INTO "Event" (id, "sessionId", seq, type, data, synthetic)
         SELECT ${EVENT_ID_SQL}, $1, (e->>'seq')::int, e->>'type', e->'data', (e->>'synthetic')::boolean
           FROM jsonb_array_elements($2::jsonb) AS e
         RETURNING ${EVENT_COLUMNS}`,
        [childId, JSON.stringify(own.map((e) => ({ seq: e.seq, type: e.type, data: e.data, synthetic: e.synthetic ?? false })))],
      );
      await this.notify(SESSIONS_CHANNEL, childId, client);
      return { childId, parent, cutSeq, synthetic: written.filter((e) => e.synthetic).sort((a, b) => a.seq - b.seq) };
    }, 'REPEATABLE READ');
    const { rows } = await this.pool.query<SessionRow>('SELECT * FROM "Session" WHERE id = $1', [result.childId]);
    return {
      session: rows[0],
      parent: result.parent,
      cutSeq: result.cutSeq,
      syntheticEvents: result.synthetic,
    };
  }

  async listSessions(
    scope: Scope,
    args: { first: number; after?: string | null; parentId?: string | null; status?: 'IDLE' | 'RUNNING' | null },
  ): Promise<SessionRow[]> {
    return this.prisma.session.findMany({
      where: {
        tenant: scope.tenant,
        ...(args.parentId ? { parentId: args.parentId } : {}),
        ...(args.status ? { status: args.status } : {}),
      },
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
      take: args.first,
      ...(args.after ? { cursor: { id: args.after }, skip: 1 } : {}),
    });
  }

  /** Session rows by id (any tenant: callers filter), one query. */
  async sessionsByIds(ids: string[]): Promise<SessionRow[]> {
    return ids.length ? this.prisma.session.findMany({ where: { id: { in: ids } } }) : [];
  }

  /** Sessions with an open turn or queued input: what a host must (re)start. */
  async sessionsNeedingWork(): Promise<string[]> {
    const { rows } = await this.pool.query<{ id: string }>(
      `SELECT id FROM "Session" WHERE status = 'RUNNING' OR "pendingInputCount" > 0`,
    );
    return rows.map((r) => r.id);
  }

  async needsWork(sessionId: string): Promise<boolean> {
    const { rows } = await this.pool.query<{ work: boolean }>(
      `SELECT status = 'RUNNING' OR "pendingInputCount" > 0 AS work FROM "Session" WHERE id = $1`,
      [sessionId],
    );
    return rows[0]?.work ?? false;
  }

  /** NOTIFY is transactional: given a transaction's client, it is delivered at its commit. */
  async notify(channel: string, payload: string, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    await client.query('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  /** One NOTIFY per payload, in order, in one statement (one transaction: delivered together). */
  async notifyAll(channel: string, payloads: string[]): Promise<void> {
    if (payloads.length) await this.pool.query('SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p', [channel, payloads]);
  }
}
