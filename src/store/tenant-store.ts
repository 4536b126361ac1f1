// TenantStore: the store as one tenant sees it (`store.forTenant(scope)`).
// Everything the GraphQL schema, the HTTP doors (/chat, /agui, /recordings)
// and subscriptions read goes through it: each read names a session, and the
// view checks that it is the tenant's before reading. Another tenant's session
// reads exactly as one that does not exist: SESSION_NOT_FOUND (or null where
// a lookup answers null), never a different error that would tell it exists.
// The system's own readers (the host, the agent loop, recovery) hold the
// SessionStore itself; nothing in src/graphql or the doors can reach it
// (tests/structure/rooms.test.ts).
import { LRUCache } from 'lru-cache';
import type pg from 'pg';
import type { NewEvent } from '../core/events.ts';
import { sessionNotFound } from '../core/errors.ts';
import { commonPrefix, lineageOf } from './lineage.ts';
import type { AppendOptions, SessionAppends } from './append.ts';
import type { FileBlobs, FilesRef } from './file-blobs.ts';
import type { SessionSearch } from './session-search.ts';
import type { BoundedEvents, Db, EventOrigin, InboxAddShape, LogRef, PageShape, SessionLog, StoredEvent, TextKey, TurnTotals } from './session-log.ts';
import type { TextBudget } from '../core/text-budget.ts';
import type { PartialSessionRow, ReadFrom, SessionColumn, SessionColumns, SessionPageQuery, SessionRow, SessionRowWith, SessionRows } from './session-rows.ts';
import type { Scope } from './scope.ts';
import type { SessionTrees } from './session-trees.ts';
import type { DeletionProgress, DeletionReclaim } from './reclaim.ts';
import type { TotalsCheckpoint, TotalsCheckpoints } from './totals-checkpoints.ts';
import { readingFor, type StatementScope } from '../db/statement-deadlines.ts';

/** Sessions whose tenant is kept: an entry is two short strings. */
const MAX_OWNERS = 100_000;

/**
 * Whose session each id is. A session never changes tenant and an id is never
 * reused, so what was read once is kept (bounded): a row a tenant's view read
 * by id (filtered by tenant) costs no lookup when its log is read next. Pages
 * of rows are not kept: their statement names the tenant, and a page's rows
 * are read again by id when one is opened (TenantSessions.page).
 */
export class SessionOwners {
  private readonly owners = new LRUCache<string, string>({ max: MAX_OWNERS });

  constructor(private readonly sessions: Pick<SessionRows, 'tenantOf'>) {}

  /**
   * Keeps the tenant of rows read or written for it. An id already kept is
   * left as it is (`peek`, not `set`): its tenant cannot have changed, and
   * re-setting the ids of every batch of a page's parents (each a move to the
   * front of the LRU list) was a measurable share of that read's CPU.
   */
  remember(tenant: string, ids: Iterable<string>): void {
    for (const id of ids) if (this.owners.peek(id) !== tenant) this.owners.set(id, tenant);
  }

  /** The session's tenant, or undefined when it does not exist. */
  async owner(id: string, statements?: StatementScope): Promise<string | undefined> {
    let owner = this.owners.get(id);
    if (owner === undefined) {
      owner = await this.sessions.tenantOf(id, statements);
      if (owner !== undefined) this.owners.set(id, owner);
    }
    return owner;
  }

  /** Nothing when session `id` is the tenant's; SESSION_NOT_FOUND when it is another's or does not exist. */
  async check(tenant: string, id: string, statements?: StatementScope): Promise<void> {
    if ((await this.owner(id, statements)) !== tenant) throw sessionNotFound(id);
  }
}

/** The SessionStore's parts a tenant's view reads through (SessionStore.forTenant). */
export interface TenantStoreParts {
  /** The pool a request's scoped reads run on (TenantStore.reading). */
  pool: pg.Pool;
  log: SessionLog;
  sessions: SessionRows;
  files: FileBlobs;
  search: SessionSearch;
  trees: SessionTrees;
  owners: SessionOwners;
  appends: Pick<SessionAppends, 'append'>;
  reclaim: Pick<DeletionReclaim, 'progress'>;
  totals: TotalsCheckpoints;
}

/** The session a log read names: its id, or the lineage's. */
const idOf = (ref: LogRef): string => (typeof ref === 'string' ? ref : ref.sessionId);

/** The pool as a view reads it: within its request's scope, if it has one (undefined: each read's own default, the pool). */
type ViewDb = Db | undefined;

/**
 * A session's log as a tenant reads it: SessionLog's reads, each checked first
 * (no connection parameter: the view reads on the pool, within its request's
 * scope when it has one: TenantStore.reading).
 */
export class TenantLog {
  constructor(
    private readonly log: SessionLog,
    private readonly owns: (ref: LogRef) => Promise<void>,
    private readonly db: ViewDb,
    private readonly statements: StatementScope | undefined,
    private readonly totals: TotalsCheckpoints,
  ) {}

  /** `shape` within the view's scope (a shape that names its own scope keeps it). */
  private scoped(shape: PageShape | undefined): PageShape | undefined {
    return this.statements && !shape?.statements ? { ...shape, statements: this.statements } : shape;
  }

  /** What one page read holds of event data at most, plus one event (SessionLog.pageBytes). */
  get pageBytes(): number {
    return this.log.pageBytes;
  }
  async event(ref: LogRef, seq: number): Promise<StoredEvent | undefined> {
    await this.owns(ref);
    return this.log.event(ref, seq, this.db);
  }
  async range(ref: LogRef, fromSeq: number, toSeq: number): Promise<StoredEvent[]> {
    await this.owns(ref);
    return this.log.range(ref, fromSeq, toSeq, this.db);
  }
  async lastOfType(ref: LogRef, type: string, seq?: number): Promise<StoredEvent | undefined> {
    await this.owns(ref);
    return this.log.lastOfType(ref, type, seq, this.db);
  }
  async firstOfType(ref: LogRef, type: string, seq: number): Promise<StoredEvent | undefined> {
    await this.owns(ref);
    return this.log.firstOfType(ref, type, seq, this.db);
  }
  async ofTypes(ref: LogRef, types: readonly string[], opts: Parameters<SessionLog['ofTypes']>[2]): Promise<StoredEvent[]> {
    await this.owns(ref);
    return this.log.ofTypes(ref, types, opts, this.db);
  }
  async turnTotals(ref: LogRef, fromSeq: number, toSeq: number): Promise<TurnTotals> {
    await this.owns(ref);
    return this.log.turnTotals(ref, fromSeq, toSeq, this.db);
  }
  async ofTypesWithin(ref: LogRef, types: readonly string[], opts: Parameters<SessionLog['ofTypesWithin']>[2]): Promise<BoundedEvents> {
    await this.owns(ref);
    return this.log.ofTypesWithin(ref, types, opts, this.db);
  }
  async filtered(
    ref: LogRef,
    filter: { types: readonly string[]; origin: EventOrigin },
    opts: Parameters<SessionLog['filtered']>[2],
    shape?: PageShape,
  ): Promise<BoundedEvents> {
    await this.owns(ref);
    return this.log.filtered(ref, filter, opts, this.scoped(shape));
  }
  async pageFromStandby(ref: LogRef, afterSeq: number, limit: number, committedThrough?: number, shape?: PageShape): Promise<BoundedEvents> {
    await this.owns(ref);
    return this.log.pageFromStandby(ref, afterSeq, limit, committedThrough, this.scoped(shape));
  }
  async pageBeforeFromStandby(ref: LogRef, beforeSeq: number, limit: number, committedThrough?: number, shape?: PageShape): Promise<BoundedEvents> {
    await this.owns(ref);
    return this.log.pageBeforeFromStandby(ref, beforeSeq, limit, committedThrough, this.scoped(shape));
  }
  async inboxAddsWithin(ref: LogRef, inputIds: readonly string[], toSeq: number, bytes?: number): Promise<BoundedEvents> {
    await this.owns(ref);
    return this.log.inboxAddsWithin(ref, inputIds, toSeq, bytes, this.db);
  }
  async inboxAddOf(ref: LogRef, inputId: string, toSeq?: number, shape?: InboxAddShape): Promise<StoredEvent | undefined> {
    await this.owns(ref);
    return this.log.inboxAddOf(ref, inputId, toSeq, shape, this.db);
  }
  async openTailFolded(ref: LogRef, seq: number): ReturnType<SessionLog['openTailFolded']> {
    await this.owns(ref);
    return this.log.openTailFolded(ref, seq, this.db);
  }
  async pendingInputs(ref: LogRef, count: number, withoutTexts?: boolean): ReturnType<SessionLog['pendingInputs']> {
    await this.owns(ref);
    return this.log.pendingInputs(ref, count, this.db, undefined, withoutTexts);
  }
  async textWithin(ref: LogRef, seq: number, key: TextKey, budget: TextBudget, length?: number | null): ReturnType<SessionLog['textWithin']> {
    await this.owns(ref);
    return this.log.textWithin(ref, seq, key, budget, length, this.db);
  }
  async workspace(ref: LogRef, limit: number): ReturnType<SessionLog['workspace']> {
    await this.owns(ref);
    return this.log.workspace(ref, limit, this.db);
  }
  async segmentTotals(ref: LogRef, fromSeq?: number): ReturnType<SessionLog['segmentTotals']> {
    await this.owns(ref);
    return this.log.segmentTotals(ref, fromSeq, this.db);
  }
  async totalsCheckpoint(ref: LogRef, atSeq?: number): ReturnType<TotalsCheckpoints['nearest']> {
    await this.owns(ref);
    return this.totals.nearest(ref, atSeq, this.db);
  }
  async keepTotalsCheckpoint(ref: LogRef, checkpoint: TotalsCheckpoint, summed: number): Promise<void> {
    await this.owns(ref);
    return this.totals.keep(ref, checkpoint, summed);
  }
  async *streamOfTypes(ref: LogRef, types: readonly string[], pageSize?: number): AsyncGenerator<StoredEvent> {
    await this.owns(ref);
    yield* this.log.streamOfTypes(ref, types, pageSize, this.db);
  }
  async *stream(ref: LogRef, opts: Omit<NonNullable<Parameters<SessionLog['stream']>[1]>, 'db'> = {}): AsyncGenerator<StoredEvent> {
    await this.owns(ref);
    yield* this.log.stream(ref, { ...opts, db: this.db });
  }
}

/** A session's files as a tenant reads them (FileBlobs' reads, each checked first). */
export class TenantFiles {
  constructor(
    private readonly blobs: FileBlobs,
    private readonly owns: (ref: LogRef) => Promise<void>,
    private readonly db: ViewDb,
  ) {}

  async files(s: FilesRef, opts?: Parameters<FileBlobs['files']>[1]): ReturnType<FileBlobs['files']> {
    await this.owns(s.ref);
    return this.blobs.files(s, opts, this.db);
  }
  async file(s: FilesRef, path: string, atSeq?: number | null): ReturnType<FileBlobs['file']> {
    await this.owns(s.ref);
    return this.blobs.file(s, path, atSeq, this.db);
  }
  async changes(s: FilesRef, fromSeq: number, toSeq?: number | null): ReturnType<FileBlobs['changes']> {
    await this.owns(s.ref);
    return this.blobs.changes(s, fromSeq, toSeq, this.db);
  }
  async *recordingBlobs(ref: LogRef, toSeq: number): ReturnType<FileBlobs['recordingBlobs']> {
    await this.owns(ref);
    yield* this.blobs.recordingBlobs(ref, toSeq, undefined, this.db);
  }
}

/** A page of the tenant's session rows (SessionRows' reads with the tenant bound). */
export type TenantPageQuery = Omit<SessionPageQuery, 'tenant'>;

/**
 * The tenant's session rows. `statements` (each read's, else the view's):
 * the scope of the request they are read for (db/statement-deadlines.ts).
 */
export class TenantSessions {
  constructor(
    private readonly rows: SessionRows,
    private readonly tenant: string,
    private readonly owners: SessionOwners,
    private readonly statements: StatementScope | undefined,
  ) {}

  page(q: TenantPageQuery): Promise<SessionRow[]>;
  page(q: TenantPageQuery, columns: SessionColumns): Promise<PartialSessionRow[]>;
  async page(q: TenantPageQuery, columns: SessionColumns = null): Promise<PartialSessionRow[]> {
    // The tenant first and set again after the query's fields (`{ ...q, tenant }`, an object spread followed by a
    // property, is a runtime call of microseconds in V8): whatever `q` holds at run time, the page is the tenant's.
    const query: SessionPageQuery = { tenant: this.tenant, statements: this.statements, ...q };
    query.tenant = this.tenant;
    query.statements = q.statements ?? this.statements;
    // Not kept in the owner cache: the statement's own WHERE names the tenant, and a page's 50 look-ups there were a
    // share of the sessions list's CPU (a session opened from the list is remembered by its row's read: getSession).
    return this.rows.page(query, columns);
  }

  /** Rows by id; another tenant's read as missing. With `columns`, those (and id, createdAt) only. */
  byIds(ids: readonly string[]): Promise<SessionRow[]>;
  byIds(ids: readonly string[], columns: SessionColumns, statements?: StatementScope): Promise<PartialSessionRow[]>;
  async byIds(ids: readonly string[], columns: SessionColumns = null, statements?: StatementScope): Promise<PartialSessionRow[]> {
    const rows = (await this.rows.byIds(ids, columns, statements ?? this.statements)).filter((r) => r.tenant === this.tenant);
    this.owners.remember(
      this.tenant,
      rows.map((r) => r.id),
    );
    return rows;
  }

  count(statements?: StatementScope): Promise<number> {
    return this.rows.count(this.tenant, statements ?? this.statements);
  }

  forkPoints(parentId: string, statements?: StatementScope): Promise<Array<{ seq: number; childCount: number }>> {
    return this.rows.forkPoints(this.tenant, parentId, statements ?? this.statements);
  }
}

/** Full-text search over the tenant's sessions, and within one of them. */
export class TenantSearch {
  constructor(
    private readonly search: SessionSearch,
    private readonly tenant: string,
    private readonly owns: (ref: LogRef) => Promise<void>,
  ) {}

  sessions(query: string, opts: Parameters<SessionSearch['search']>[2]): ReturnType<SessionSearch['search']> {
    return this.search.search(this.tenant, query, opts);
  }

  async inSession(sessionId: string, query: string, opts: Parameters<SessionSearch['searchSession']>[2]): ReturnType<SessionSearch['searchSession']> {
    await this.owns(sessionId);
    return this.search.searchSession(sessionId, query, opts);
  }
}

export class TenantStore {
  readonly scope: Scope;
  /** The tenant's logs: SessionLog's reads, each checked. */
  readonly log: TenantLog;
  /** The tenant's session rows: pages, counts, fork points. */
  readonly sessions: TenantSessions;
  /** The tenant's file workspaces. */
  readonly files: TenantFiles;
  /** Full-text search across the tenant's sessions and within one. */
  readonly search: TenantSearch;
  /** The pool as this view reads it: within its request's scope (reading), else undefined (each read's own default). */
  private readonly db: ViewDb;

  constructor(
    scope: Scope,
    private readonly parts: TenantStoreParts,
    /** The scope of the one request this view reads for (reading), else none: each read names its own, if any. */
    private readonly statements?: StatementScope,
  ) {
    this.scope = { tenant: scope.tenant };
    const owns = (ref: LogRef) => parts.owners.check(this.scope.tenant, idOf(ref), statements);
    const db = (this.db = statements && readingFor(parts.pool, statements));
    this.log = new TenantLog(parts.log, owns, db, statements, parts.totals);
    this.sessions = new TenantSessions(parts.sessions, this.scope.tenant, parts.owners, statements);
    this.files = new TenantFiles(parts.files, owns, db);
    this.search = new TenantSearch(parts.search, this.scope.tenant, owns);
  }

  /**
   * This view as one request reads through it: every read (a session's row,
   * its log, its children, its files' contents) within `statements`, the
   * request's scope (db/statement-deadlines.ts: its bound; cancelled once its
   * client has gone). For the HTTP doors, whose reads are not resolvers that
   * each pass their operation's scope (docs/operations.md "Memory and time").
   * Writes are not scoped: a write the client started is finished or rolled back.
   */
  reading(statements: StatementScope | undefined): TenantStore {
    return statements ? new TenantStore(this.scope, this.parts, statements) : this;
  }

  /**
   * The tenant's session row (with `columns`, only those: the GraphQL layer
   * reads what a query selects), null when it is another tenant's or does not
   * exist; `from: 'standby'` for a query's read (session-rows.ts ReadFrom).
   */
  getSession(id: string): Promise<SessionRow | null>;
  getSession<C extends SessionColumn>(
    id: string,
    columns: readonly [C, ...C[]],
    from?: ReadFrom,
    statements?: StatementScope,
  ): Promise<SessionRowWith<C> | null>;
  getSession(id: string, columns: SessionColumns, from?: ReadFrom, statements?: StatementScope): Promise<PartialSessionRow | null>;
  async getSession(id: string, columns: SessionColumns = null, from: ReadFrom = 'primary', statements?: StatementScope): Promise<PartialSessionRow | null> {
    const row = await this.parts.sessions.get(this.scope.tenant, id, columns, from, statements ?? this.statements);
    if (!row) return null;
    this.parts.owners.remember(this.scope.tenant, [row.id]);
    const { treeId, inheritedRanges, inheritedEventCount } = row;
    if (treeId !== undefined && inheritedRanges !== undefined && inheritedEventCount !== undefined)
      this.parts.log.remember({ id: row.id, treeId, inheritedRanges, inheritedEventCount });
    return row;
  }

  /** The progress of the tenant's latest deletion of session `sessionId` (docs/contract.md#deletion); undefined: none kept. */
  deletion(sessionId: string): Promise<DeletionProgress | undefined> {
    return this.parts.reclaim.progress(this.scope, sessionId, this.db);
  }

  /** getSession, SESSION_NOT_FOUND instead of null. */
  requireSession(id: string): Promise<SessionRow>;
  requireSession<C extends SessionColumn>(id: string, columns: readonly [C, ...C[]], statements?: StatementScope): Promise<SessionRowWith<C>>;
  requireSession(id: string, columns: SessionColumns, statements?: StatementScope): Promise<PartialSessionRow>;
  async requireSession(id: string, columns: SessionColumns = null, statements?: StatementScope): Promise<PartialSessionRow> {
    const s = await this.getSession(id, columns, 'primary', statements);
    if (!s) throw sessionNotFound(id);
    return s;
  }

  /** Nothing when the session is the tenant's, else SESSION_NOT_FOUND (one cached lookup): for the host's reads on a tenant's behalf. */
  check(sessionId: string): Promise<void> {
    return this.parts.owners.check(this.scope.tenant, sessionId);
  }

  /**
   * The last seq session row `a` (as read: never past its eventCount) and
   * session `bId` share, stored once for both (-1: none, e.g. sessions of
   * different trees): their common ancestor's cut, from the two rows'
   * lineages. One row read, no event read.
   */
  async commonPrefix(
    a: Pick<SessionRow, 'id' | 'treeId' | 'eventCount' | 'inheritedRanges' | 'inheritedEventCount'>,
    bId: string,
    statements?: StatementScope,
  ): Promise<number> {
    const b = await this.requireSession(bId, ['id', 'treeId', 'eventCount', 'inheritedRanges', 'inheritedEventCount'], statements);
    return commonPrefix(lineageOf(a), a.eventCount, lineageOf(b), b.eventCount);
  }

  /** Appends to the tenant's session (SessionAppends.append, confined to the tenant: SESSION_NOT_FOUND otherwise). */
  append(sessionId: string, events: NewEvent[], opts: Pick<AppendOptions, 'expectedEventCount'> = {}): Promise<StoredEvent[]> {
    return this.parts.appends.append(sessionId, events, { ...opts, scope: this.scope });
  }
}
