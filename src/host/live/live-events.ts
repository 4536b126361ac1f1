// Live delivery for the subscriptions (docs/contract.md#graphql-names), across processes: the one
// place that listens to the store's notification channels and hands each to
// the part it concerns.
//   event-window.ts      sessionEvents: read from the log through a shared window per session
//   turn-update-relay.ts sessionTurns: turn updates as NOTIFY payloads on TURNS_CHANNEL
//   session-changes.ts   sessionsChanged, sessionsDeleted: coalesced, per tenant
//   leases-taken.ts      runnerLeasesTaken: an external runner's leases the service took
//   update-queue.ts      a subscriber's bounded, coalescing queue of pushed updates
// Handlers are registered before any subscriber exists: a subscriber always
// listens before it catches up.
import type { PgListener } from '../../store/pg-listener.ts';
import type { Scope, SessionRow, SessionStore } from '../../store/session-store.ts';
import {
  DELETED_CHANNEL,
  EVENTS_CHANNEL,
  LEASES_CHANNEL,
  SESSIONS_CHANNEL,
  TURNS_CHANNEL,
  decodeEventsCommitted,
  decodeLeaseTaken,
  decodeSessionsDeleted,
} from '../../store/channels.ts';
import { readOpenTail, type OpenTailReader, type TurnUpdate } from '../../agent/turn-updates.ts';
import { EventWindows, type EventStream } from './event-window.ts';
import { TurnUpdateRelay } from './turn-update-relay.ts';
import { turnsFromLog } from './turn-stream.ts';
import { LISTENING, SessionChanges, type SessionsDeleted } from './session-changes.ts';
import { LeasesTaken, type RunnerLeaseTaken } from './leases-taken.ts';
import { readingFor, type StatementScope } from '../../db/statement-deadlines.ts';
import { Repeater } from '@repeaterjs/repeater';

export { turnPayloads } from './turn-update-relay.ts';
export type { EventStream } from './event-window.ts';
export { LISTENING, type SessionsDeleted } from './session-changes.ts';

export interface LiveEventsOptions {
  log?: (msg: string, err?: unknown) => void;
  /** Page and window sizes (tests shrink them to exercise the re-read paths). */
  pageSize?: number;
  windowSize?: number;
}

export class LiveEvents {
  private readonly windows: EventWindows;
  private readonly turns: TurnUpdateRelay;
  private readonly changes: SessionChanges;
  private readonly leasesTaken = new LeasesTaken();
  private readonly handlers: Array<[string, (payload: string) => void]>;
  private readonly readOpenTail: OpenTailReader;

  constructor(
    private readonly store: SessionStore,
    private readonly listener: PgListener,
    opts: LiveEventsOptions = {},
  ) {
    this.windows = new EventWindows(store, opts);
    this.turns = new TurnUpdateRelay(store);
    this.changes = new SessionChanges(store, opts.log);
    this.readOpenTail = readOpenTail(store.log);
    this.handlers = [
      [EVENTS_CHANNEL, (p) => this.onEventsCommitted(p)],
      [SESSIONS_CHANNEL, (id) => this.changes.sessionChanged(id)],
      [TURNS_CHANNEL, (p) => this.turns.received(p)],
      [DELETED_CHANNEL, (p) => this.onSessionsDeleted(p)],
      [LEASES_CHANNEL, (p) => this.onLeaseTaken(p)],
      // Notifications sent while the listener was down are lost: re-read everything watched.
      ['reconnect', () => this.windows.invalidateAll()],
    ];
    for (const [channel, handler] of this.handlers) listener.on(channel, handler);
  }

  /** The session's events with seq > afterSeq, then live ones, in seq order; its reads in `statements`, its subscription's scope. */
  sessionEvents(sessionId: string, afterSeq: number, statements?: StatementScope): EventStream {
    return this.windows.stream(sessionId, afterSeq, statements);
  }

  /** Turn updates of the session from now on, whichever process runs its agent. */
  sessionTurns(sessionId: string): AsyncIterableIterator<TurnUpdate> {
    return this.turns.subscribe(sessionId);
  }

  /**
   * Turn updates of what the log holds after `afterSeq`, then live ones: no gap,
   * nothing twice (turn-stream.ts). `eventCount` reads the session's length; it
   * is read after the live subscription is registered, which is what makes the
   * two meet. `statements`: the scope of the request it is read for (its
   * log's catch-up, and the open step it starts in when it starts inside one).
   */
  async sessionTurnsAfter(
    sessionId: string,
    afterSeq: number,
    eventCount: () => Promise<number>,
    statements?: StatementScope,
  ): Promise<AsyncIterableIterator<TurnUpdate>> {
    const live = this.turns.subscribe(sessionId);
    let liveFrom: number;
    try {
      liveFrom = await eventCount();
    } catch (err) {
      await live.return?.();
      throw err;
    }
    const openTail = statements ? readOpenTail(this.store.log, readingFor(this.store.pool, statements)) : this.readOpenTail;
    return turnsFromLog(sessionId, this.windows.stream(sessionId, afterSeq, statements), live, liveFrom, openTail, afterSeq);
  }

  /**
   * The turn updates of several sessions as one stream, interleaved as they come (each session's as
   * sessionTurnsAfter gives them from its `afterSeq`, or from now on without one): one subscription follows a
   * fan-out's variants (docs/contract.md#graphql-names, sessionsTurns). It ends when every session's has ended
   * (each one's ends when it is deleted); an error in one ends it; its end ends every session's.
   */
  async sessionsTurns(
    from: ReadonlyArray<{ sessionId: string; afterSeq?: number | null }>,
    eventCount: (sessionId: string) => Promise<number>,
    statements?: StatementScope,
  ): Promise<AsyncIterableIterator<TurnUpdate>> {
    const opened = await Promise.allSettled(
      from.map(({ sessionId, afterSeq }) =>
        afterSeq == null ? this.sessionTurns(sessionId) : this.sessionTurnsAfter(sessionId, afterSeq, () => eventCount(sessionId), statements),
      ),
    );
    const streams = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    const failed = opened.find((o) => o.status === 'rejected');
    if (failed) {
      await Promise.all(streams.map((s) => s.return?.()));
      throw failed.reason;
    }
    return Repeater.merge(streams);
  }

  /** Sessions of the scope's tenant as they are created, forked, imported or appended to. */
  sessionsChanged(scope: Scope, startWith: readonly string[] = []): AsyncIterableIterator<SessionRow> {
    return this.changes.changed(scope, startWith);
  }

  /** sessionsChanged, LISTENING first (once this process hears the tenant's changes). */
  sessionsChangedFromListening(scope: Scope): AsyncIterableIterator<SessionRow | typeof LISTENING> {
    return this.changes.changedFromListening(scope);
  }

  /** Ids of the caller's tenant's sessions as they are deleted. */
  sessionsDeleted(scope: Scope): AsyncIterableIterator<SessionsDeleted> {
    return this.changes.deleted(scope);
  }

  /** The leases of the scope's tenant's runner `runnerId` as the service takes them (a user's cancel, a step's time limit). */
  runnerLeasesTaken(scope: Scope, runnerId: string): AsyncIterableIterator<RunnerLeaseTaken> {
    return this.leasesTaken.subscribe(scope, runnerId);
  }

  /** Live subscribers in this process (metrics; tests check that disconnects clean up). */
  stats() {
    const { watchedSessions, streams } = this.windows.stats();
    return { watchedSessions, events: streams, turns: this.turns.subscriberCount(), ...this.changes.stats(), leasesTaken: this.leasesTaken.count() };
  }

  /** Sends a turn update to every process's subscribers (the host's onUpdate sink). */
  publishTurnUpdate(update: TurnUpdate): void {
    this.turns.publish(update);
  }

  async close(): Promise<void> {
    for (const [channel, handler] of this.handlers) this.listener.off(channel, handler);
    this.changes.close();
    this.leasesTaken.close();
    await this.turns.close(); // what was published is still sent
    this.windows.closeAll();
  }

  /** A deleted session's subscriptions complete; its tenant's sessionsDeleted subscribers are told. */
  private onSessionsDeleted(payload: string) {
    const msg = decodeSessionsDeleted(payload);
    if (!msg) return;
    for (const id of msg.ids) {
      this.windows.endSession(id);
      this.turns.endSession(id);
    }
    this.changes.sessionsDeleted(msg.tenant, msg.ids);
  }

  private onLeaseTaken(payload: string) {
    const msg = decodeLeaseTaken(payload);
    if (msg) this.leasesTaken.taken(msg);
  }

  private onEventsCommitted(payload: string) {
    // Every process receives every append's notification (about five a turn): nobody here watching, nothing to decode.
    if (!this.windows.watching() && !this.changes.watching()) return;
    const msg = decodeEventsCommitted(payload);
    if (!msg) return;
    this.windows.committed(msg.sessionId, msg.lastSeq);
    this.changes.sessionChanged(msg.sessionId); // an append changes the session's row too
  }
}
