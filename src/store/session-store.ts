// SessionStore: the store's facade, composing one module per verb — appends
// (append.ts, with its batcher and retries), forks (forks.ts), deletion
// (deletion.ts) — with session creation and the reads callers need beside
// them. Reads of a log go through SessionLog (session-log.ts); session rows
// through SessionRows (session-rows.ts); leases are LeaseStore (leases.ts);
// NOTIFY channels and their payloads are channels.ts. This facade is the
// system's store (the host, the agent loop, recovery); the GraphQL schema and
// the HTTP doors get a tenant's view of it, `forTenant` (tenant-store.ts).
import type pg from 'pg';
import { LRUCache } from 'lru-cache';
import type { LogState } from '../core/log-state.ts';
import { CURRENT_FORMAT_VERSION, type NewEvent } from '../core/events.ts';
import type { ToolEffectLookup } from '../core/tools.ts';
import { newSessionId } from './ids.ts';
import { SessionLog } from './session-log.ts';
import {
  SessionRows,
  type ReadFrom,
  type PartialSessionRow,
  type SessionColumn,
  type SessionColumns,
  type SessionRow,
  type SessionRowWith,
} from './session-rows.ts';
import { TailStates } from './tail-states.ts';
import { SESSION_TREE_INSERT, SessionTrees } from './session-trees.ts';
import { NotifyQueue } from './notify-queue.ts';
import { SESSIONS_CHANNEL, notify } from './channels.ts';
import { SessionAppends } from './append.ts';
import { Forks, type ModelConfig } from './forks.ts';
import { SessionDeletion } from './deletion.ts';
import { DeletionReclaim } from './reclaim.ts';
import { FileBlobs, type FileDoorLimits } from './file-blobs.ts';
import { FoldCheckpoints } from './fold-checkpoints.ts';
import { TotalsCheckpoints } from './totals-checkpoints.ts';
import { SessionSearch } from './session-search.ts';
import { inTransaction, type BeforeCommit } from './transaction.ts';
import type { Scope } from './scope.ts';
import { SessionOwners, TenantStore } from './tenant-store.ts';
import type { ReadReplicas } from '../db/read-replicas.ts';
import type { OnStandbyRead } from './session-log.ts';

/** Tenants whose views (forTenant) are kept: a view is a handful of small objects. */
const MAX_TENANT_VIEWS = 1000;

export type { StoredEvent } from './session-log.ts';
export type { PartialSessionRow, SessionRow };
export type { Scope } from './scope.ts';
export type { TenantPageQuery, TenantStore } from './tenant-store.ts';
export type { BeforeCommit } from './transaction.ts';

/** What a new session's log starts with (each given one an event of its first append). */
export interface NewSessionInput {
  title?: string | null;
  model?: ModelConfig | null;
  tools?: string[] | null;
  runner?: string | null;
  instructions?: string | null;
  approvalRequired?: string[] | null;
}
export { MAX_APPEND_BATCH } from './append.ts';
export {
  MAX_FORK_CHILDREN,
  type ChildOverrides,
  type Cut,
  type ForkManyRecord,
  type ForkManyResult,
  type ForkRecord,
  type ForkResult,
  type ModelConfig,
} from './forks.ts';

export class SessionStore {
  /** The one way to read logs. */
  readonly log: SessionLog;
  /** Which fork tree each session lies in (the directory): every statement on a session's rows names it. */
  readonly trees: SessionTrees;
  /** Session rows: the hot reads, on prepared statements. */
  readonly sessions: SessionRows;
  /** NOTIFYs sent after the commits they announce (notify-queue.ts). */
  readonly notifications: NotifyQueue;
  /** Reducer states at the end of logs this process appends to: appends are checked against them. */
  private readonly tails: TailStates;
  private readonly appends: SessionAppends;
  private readonly forks: Forks;
  private readonly deletion: SessionDeletion;
  /** What deletions leave to delete, in bounded chunks (reclaim.ts): the host's reclaimer runs them. */
  readonly reclaim: DeletionReclaim;
  /** File workspaces: contents by hash, and the trees the log's change sets make. */
  readonly files: FileBlobs;
  /** The agent's fold as of a seq (a cold start reads it and the events after it). */
  readonly foldCheckpoints: FoldCheckpoints;
  /** Session.totals through a seq (a read sums only the events after the nearest). */
  readonly totalsCheckpoints: TotalsCheckpoints;
  /** Full-text search across a tenant's sessions and within one log. */
  readonly search: SessionSearch;
  /** Whose session each id is: a tenant's view checks it before every read (tenant-store.ts). */
  private readonly owners: SessionOwners;
  /** Tenants' views (forTenant), kept for the tenants seen lately. */
  private readonly tenantViews = new LRUCache<string, TenantStore>({ max: MAX_TENANT_VIEWS });

  constructor(
    readonly pool: pg.Pool,
    readonly effectOf: ToolEffectLookup,
    opts: {
      prepare?: boolean;
      log?: (msg: string, err?: unknown) => void;
      /** Hot standbys that serve event pages, subscription catch-up, session lists and rows, and searches (DATABASE_READ_URL). */
      standbys?: Pick<ReadReplicas, 'pick' | 'readCaughtUp'>;
      onStandbyRead?: OnStandbyRead;
      /**
       * A distributed Postgres (DATABASE_DISTRIBUTED): every statement on a
       * session's rows names its tree, read first when this process has not
       * cached it. On one Postgres a first append finds the row by id instead.
       */
      byTree?: boolean;
      /** What change sets from outside are held to (recordings, runners' batches: store/file-blobs.ts). */
      fileLimits?: FileDoorLimits;
      /** The most a fold checkpoint's state or history may hold decompressed (MAX_FOLD_CHECKPOINT_TEXT_BYTES). */
      foldCheckpointMaxBytes?: number;
      /** Brackets and answers a totals read sums before it keeps a checkpoint (TOTALS_CHECKPOINT_EVERY). */
      totalsCheckpointEvery?: number;
      /** What one page read of events holds of their data at most, plus one event (SessionLog's PAGE_BYTES by default). */
      pageBytes?: number;
      /** Events one reclaim transaction of a deletion deletes at most (DEFAULT_RECLAIM_CHUNK_EVENTS). */
      reclaimChunkEvents?: number;
    } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.notifications = new NotifyQueue(pool, opts.log, prepare);
    this.trees = new SessionTrees(pool, { prepare });
    this.log = new SessionLog(pool, { prepare, standbys: opts.standbys, onStandbyRead: opts.onStandbyRead, trees: this.trees, pageBytes: opts.pageBytes });
    this.sessions = new SessionRows(pool, this.trees, prepare, opts.standbys, opts.onStandbyRead);
    this.files = new FileBlobs(pool, this.log, opts.fileLimits);
    this.foldCheckpoints = new FoldCheckpoints(pool, this.log, { maxTextBytes: opts.foldCheckpointMaxBytes, warn: opts.log });
    this.totalsCheckpoints = new TotalsCheckpoints(pool, this.log, opts.totalsCheckpointEvery);
    this.search = new SessionSearch(pool, this.log, opts.standbys, opts.onStandbyRead);
    this.owners = new SessionOwners(this.sessions);
    this.tails = new TailStates(this.log);
    this.appends = new SessionAppends(pool, this.tails, this.notifications, prepare, this.log, opts.byTree ?? false);
    this.forks = new Forks(pool, this.log, this.tails, effectOf);
    this.reclaim = new DeletionReclaim(pool, this.log, this.files, opts.reclaimChunkEvents);
    this.deletion = new SessionDeletion(pool, this.log, this.tails, this.files, this.reclaim);
  }

  async createSession(
    scope: Scope,
    input: NewSessionInput,
    opts: {
      beforeCommit?: BeforeCommit<{ sessionId: string }>;
      /** A session id the caller derived (the chat door's); default: a new one. */ id?: string;
    } = {},
  ): Promise<SessionRow> {
    const id = opts.id ?? newSessionId();
    const initial: NewEvent[] = [];
    if (input.title != null) initial.push({ type: 'session/title', data: { title: input.title } });
    if (input.model) initial.push({ type: 'session/model', data: input.model });
    if (input.tools) initial.push({ type: 'session/tools', data: { tools: input.tools } });
    if (input.instructions) initial.push({ type: 'session/instructions', data: { text: input.instructions } });
    if (input.approvalRequired?.length) initial.push({ type: 'session/tool-approval', data: { tools: input.approvalRequired } });
    // One transaction: a session never exists without its initial events.
    await this.transaction(async (client) => {
      if (opts.id) await this.reclaim.refuseWhileReclaiming(id, client);
      await client.query(SESSION_TREE_INSERT, [id, id]);
      await client.query('INSERT INTO "Session" (id, tenant, "treeId", "formatVersion", runner) VALUES ($1, $2, $1, $3, $4)', [
        id,
        scope.tenant,
        CURRENT_FORMAT_VERSION,
        input.runner ?? null,
      ]);
      // A root is its own tree: its lineage is known without reading the row back (appends name the tree).
      this.log.remember({ id, treeId: id, inheritedRanges: [], inheritedEventCount: 0 });
      await this.append(id, initial, { client });
      await notify(client, SESSIONS_CHANNEL, id);
      await opts.beforeCommit?.(client, { sessionId: id });
    });
    return this.requireSession(scope, id);
  }

  /** Runs `fn` in a transaction on one pooled connection (transaction.ts). */
  transaction<T>(fn: (client: pg.PoolClient) => Promise<T>, isolation = 'READ COMMITTED', work: 'short' | 'long' = 'short'): Promise<T> {
    return inTransaction(this.pool, fn, isolation, work);
  }

  /**
   * The store as one tenant sees it (tenant-store.ts): what the GraphQL
   * schema and the HTTP doors read and write through, every session it names
   * checked to be the tenant's.
   */
  forTenant(scope: Scope): TenantStore {
    // A view holds nothing but its tenant: one per tenant serves every request (the doors ask once per request).
    let view = this.tenantViews.get(scope.tenant);
    if (!view) {
      view = new TenantStore(scope, {
        pool: this.pool,
        log: this.log,
        sessions: this.sessions,
        files: this.files,
        search: this.search,
        trees: this.trees,
        owners: this.owners,
        totals: this.totalsCheckpoints,
        appends: this.appends,
        reclaim: this.reclaim,
      });
      this.tenantViews.set(scope.tenant, view);
    }
    return view;
  }

  /** TenantStore.getSession, for the system's callers that hold a scope (the controller). */
  getSession(scope: Scope, id: string): Promise<SessionRow | null>;
  getSession<C extends SessionColumn>(scope: Scope, id: string, columns: readonly [C, ...C[]], from?: ReadFrom): Promise<SessionRowWith<C> | null>;
  getSession(scope: Scope, id: string, columns: SessionColumns, from?: ReadFrom): Promise<PartialSessionRow | null>;
  getSession(scope: Scope, id: string, columns: SessionColumns = null, from: ReadFrom = 'primary'): Promise<PartialSessionRow | null> {
    return this.forTenant(scope).getSession(id, columns, from);
  }

  /** TenantStore.commonPrefix. */
  commonPrefix(scope: Scope, ...args: Parameters<TenantStore['commonPrefix']>): Promise<number> {
    return this.forTenant(scope).commonPrefix(...args);
  }

  /** TenantStore.requireSession. */
  requireSession(scope: Scope, id: string): Promise<SessionRow>;
  requireSession<C extends SessionColumn>(scope: Scope, id: string, columns: readonly [C, ...C[]]): Promise<SessionRowWith<C>>;
  requireSession(scope: Scope, id: string, columns: SessionColumns): Promise<PartialSessionRow>;
  requireSession(scope: Scope, id: string, columns: SessionColumns = null): Promise<PartialSessionRow> {
    return this.forTenant(scope).requireSession(id, columns);
  }

  // The verbs below are their modules' own, with the same parameters.

  /** Appends a batch atomically, checked against the log's rules (SessionAppends.append). */
  append(...args: Parameters<SessionAppends['append']>) {
    return this.appends.append(...args);
  }

  /** A runner's append that gives its lease back when it leaves the session idle (SessionAppends.appendReleasingIfIdle). */
  appendReleasingIfIdle(...args: Parameters<SessionAppends['appendReleasingIfIdle']>) {
    return this.appends.appendReleasingIfIdle(...args);
  }

  /** Queues a message, claiming the session's lease with `claimFor` (SessionAppends.queueInput). */
  queueInput(...args: Parameters<SessionAppends['queueInput']>) {
    return this.appends.queueInput(...args);
  }

  /**
   * The reducer state right after `seq` (its open turn, inbox and turn
   * counters; no title, model or tools), read as an append check reads it:
   * where an agent's cold fold starts after a compaction.
   */
  async stateAt(sessionId: string, seq: number): Promise<LogState> {
    return (await this.tails.at(sessionId, seq, this.pool)).state;
  }

  /** The reducer state at the end of the log as a runner replayed it (SessionAppends.knowTail). */
  knowTail(...args: Parameters<SessionAppends['knowTail']>) {
    this.appends.knowTail(...args);
  }

  /** Exact fork, turn-level branch or edit (Forks.fork). */
  fork(...args: Parameters<Forks['fork']>) {
    return this.forks.fork(...args);
  }

  /** Several children of one parent at one cut (Forks.forkMany). */
  forkMany(...args: Parameters<Forks['forkMany']>) {
    return this.forks.forkMany(...args);
  }

  /** Deletes a session, or with `withDescendants` its subtree (SessionDeletion.delete). */
  deleteSession(...args: Parameters<SessionDeletion['delete']>) {
    return this.deletion.delete(...args);
  }

  /** NOTIFY is transactional: given a transaction's client, it is delivered at its commit. */
  async notify(channel: string, payload: string, client: pg.Pool | pg.PoolClient = this.pool): Promise<void> {
    await notify(client, channel, payload);
  }
}
