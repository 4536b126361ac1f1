// The session list's live side (sessionsChanged, sessionsDeleted; docs/contract.md#graphql-names).
// Changed sessions are coalesced for SESSIONS_COALESCE_MS, then read once for
// all subscribers, each getting its tenant's rows; a slow dashboard gets each
// session's latest row once, not every intermediate one. Deletions go to the
// deleting tenant's subscribers as they are announced.
import type { Scope, SessionRow, SessionStore } from '../../store/session-store.ts';
import { MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';

const SESSIONS_COALESCE_MS = 25;

export interface SessionsDeleted {
  deletedSessionIds: string[];
}

/** The first item of `changedFromListening`: the subscriber is registered, so any later change reaches it. */
export const LISTENING = Symbol('listening');

interface Subscriber<T> {
  scope: Scope;
  queue: UpdateQueue<T>;
  /** Sessions whose row went out live while the rows to start with were read: those rows would be older. */
  sentLive?: Set<string>;
}

export class SessionChanges {
  private readonly changedSubscribers = new Set<Subscriber<SessionRow>>();
  private readonly deletedSubscribers = new Set<Subscriber<SessionsDeleted>>();
  private changedSessions = new Set<string>();
  private changedTimer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly store: SessionStore,
    private readonly log?: (msg: string, err?: unknown) => void,
  ) {}

  /**
   * Sessions of the scope's tenant as they are created, forked, imported or appended to; first the rows of
   * `startWith` as read once this subscriber is registered, so their arrival tells a client that any later
   * change reaches it (a read made before then may have missed one).
   */
  changed(scope: Scope, startWith: readonly string[] = []): AsyncIterableIterator<SessionRow> {
    const entry = this.register(scope);
    if (startWith.length) void this.startWith(entry, [...new Set(startWith)]);
    return entry.queue;
  }

  /**
   * `changed` without rows to start with, LISTENING first: a client that read the list before subscribing reads
   * again on it, even when it held no row to start with (an empty list).
   */
  changedFromListening(scope: Scope): AsyncIterableIterator<SessionRow | typeof LISTENING> {
    const rows = this.register(scope).queue;
    let announced = false;
    // Not an async generator: its return() waits for a pending next(), and the queue's must not (update-queue.ts).
    return {
      next: () => (announced ? rows.next() : ((announced = true), Promise.resolve({ value: LISTENING, done: false }))),
      return: () => rows.return(),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  private register(scope: Scope): Subscriber<SessionRow> {
    const entry: Subscriber<SessionRow> = {
      scope,
      queue: new UpdateQueue<SessionRow>({
        keyOf: (s) => s.id, // the latest row per session
        max: MAX_QUEUED_UPDATES,
        onClose: () => this.changedSubscribers.delete(entry),
      }),
    };
    this.changedSubscribers.add(entry);
    return entry;
  }

  private async startWith(entry: Subscriber<SessionRow>, ids: string[]) {
    entry.sentLive = new Set();
    try {
      const rows = await this.store.sessions.byIds(ids);
      for (const row of rows) if (row.tenant === entry.scope.tenant && !entry.sentLive.has(row.id)) entry.queue.push(row);
    } catch (err) {
      this.log?.('sessionsChanged: loading the sessions to start with failed', err);
    } finally {
      entry.sentLive = undefined;
    }
  }

  /** Ids of the scope's tenant's sessions as they are deleted. */
  deleted(scope: Scope): AsyncIterableIterator<SessionsDeleted> {
    const entry: Subscriber<SessionsDeleted> = {
      scope,
      queue: new UpdateQueue<SessionsDeleted>({ max: MAX_QUEUED_UPDATES, onClose: () => this.deletedSubscribers.delete(entry) }),
    };
    this.deletedSubscribers.add(entry);
    return entry.queue;
  }

  /** A session was created or changed: its row goes out with the others changed meanwhile. */
  /** Whether a sessionsChanged subscriber is here (a changed session concerns this process only then). */
  watching(): boolean {
    return this.changedSubscribers.size > 0 && !this.closed;
  }

  sessionChanged(id: string) {
    if (this.changedSubscribers.size === 0 || this.closed) return;
    this.changedSessions.add(id);
    this.changedTimer ??= setTimeout(() => void this.emitChanged(), SESSIONS_COALESCE_MS);
  }

  /** The tenant's sessions `ids` were deleted. */
  sessionsDeleted(tenant: string, ids: string[]) {
    for (const { scope, queue } of this.deletedSubscribers) if (scope.tenant === tenant) queue.push({ deletedSessionIds: ids });
  }

  stats() {
    return { sessions: this.changedSubscribers.size, deletions: this.deletedSubscribers.size };
  }

  close() {
    this.closed = true;
    clearTimeout(this.changedTimer);
    for (const { queue } of this.changedSubscribers) queue.close();
    for (const { queue } of this.deletedSubscribers) queue.close();
  }

  private async emitChanged() {
    const ids = [...this.changedSessions];
    this.changedSessions = new Set();
    try {
      const rows = await this.store.sessions.byIds(ids);
      for (const { scope, queue, sentLive } of this.changedSubscribers) {
        for (const row of rows) {
          if (row.tenant !== scope.tenant) continue;
          sentLive?.add(row.id);
          queue.push(row);
        }
      }
    } catch (err) {
      this.log?.('sessionsChanged: loading sessions failed', err);
    } finally {
      this.changedTimer = undefined;
      if (this.changedSessions.size && !this.closed) {
        this.changedTimer = setTimeout(() => void this.emitChanged(), SESSIONS_COALESCE_MS);
      }
    }
  }
}
