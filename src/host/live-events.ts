// Live delivery for the subscriptions (DESIGN §7), across processes.
//
// Notifications are only wake-ups: every event a subscriber receives is read
// from the log, so delivery is in seq order with no gaps and no duplicates
// whichever process wrote it, and a listener reconnect only costs a re-read.
// Per session and process, one bounded window of recent events is shared by all
// its subscribers (one query per commit, not one per subscriber); a subscriber
// behind that window reads its own pages. Nothing grows with a slow subscriber
// but the page it is reading.
//
// Turn updates are not in the log: they travel as NOTIFY payloads on
// TURNS_CHANNEL, batched while a NOTIFY is in flight and split below the
// payload limit, and every process re-emits them to its local subscribers.
import type { PgListener } from '../store/pg-listener.ts';
import {
  DELETED_CHANNEL,
  EVENTS_CHANNEL,
  SESSIONS_CHANNEL,
  type Scope,
  type SessionRow,
  type SessionStore,
  type StoredEvent,
} from '../store/session-store.ts';
import type { TurnUpdate } from '../agent/turn-updates.ts';

export const TURNS_CHANNEL = 'forkline_turns';

/** Postgres rejects NOTIFY payloads of 8000 bytes or more; keep a margin for the envelope. */
const MAX_PAYLOAD_BYTES = 7000;
const MAX_DELTA_CHARS = 1500; // ≤ 4 bytes per char in UTF-8, JSON escapes aside: well under the limit
const PAGE_SIZE = 200;
/** Recent events kept per watched session and process (shared by its subscribers). */
const WINDOW_SIZE = 512;
/** First turn update waits this long for company before it is sent. */
const TURN_COALESCE_MS = 10;
const SESSIONS_COALESCE_MS = 25;
/** A subscriber this far behind on turn updates is closed with an error. */
const MAX_QUEUED_UPDATES = 10_000;

export interface SessionsDeleted {
  deletedSessionIds: string[];
}

export interface LiveEventsOptions {
  log?: (msg: string, err?: unknown) => void;
  /** Page and window sizes (tests shrink them to exercise the re-read paths). */
  pageSize?: number;
  windowSize?: number;
}

export class LiveEvents {
  private readonly tails = new Map<string, SessionTail>();
  private readonly turnStreams = new Map<string, Set<PushStream<TurnUpdate>>>();
  private readonly sessionStreams = new Set<{ scope: Scope; stream: PushStream<SessionRow> }>();
  private readonly deletionStreams = new Set<{ scope: Scope; stream: PushStream<SessionsDeleted> }>();
  private changedSessions = new Set<string>();
  private changedTimer?: NodeJS.Timeout;
  private outbox: TurnUpdate[] = [];
  private publishing?: Promise<void>;
  private publishSerial = 0;
  private closed = false;
  private readonly pageSize: number;
  private readonly windowSize: number;
  private readonly handlers: Array<[string, (payload: string) => void]>;

  constructor(
    private readonly store: SessionStore,
    private readonly listener: PgListener,
    private readonly opts: LiveEventsOptions = {},
  ) {
    this.pageSize = opts.pageSize ?? PAGE_SIZE;
    this.windowSize = Math.max(opts.windowSize ?? WINDOW_SIZE, this.pageSize);
    // Registered before any subscriber exists: a subscriber always listens before it catches up.
    this.handlers = [
      [EVENTS_CHANNEL, (p) => this.onEventsCommitted(p)],
      [SESSIONS_CHANNEL, (id) => this.onSessionChanged(id)],
      [TURNS_CHANNEL, (p) => this.onTurnUpdates(p)],
      [DELETED_CHANNEL, (p) => this.onSessionsDeleted(p)],
      ['reconnect', () => this.onReconnect()],
    ];
    for (const [channel, handler] of this.handlers) listener.on(channel, handler);
  }

  /** The session's events with seq > afterSeq, then live ones, in seq order. */
  sessionEvents(sessionId: string, afterSeq: number): EventStream {
    let tail = this.tails.get(sessionId);
    if (!tail) {
      tail = new SessionTail(sessionId, this.store, this.pageSize, this.windowSize);
      this.tails.set(sessionId, tail);
    }
    const t = tail;
    const stream = new EventStream(t, afterSeq, () => {
      t.subscribers.delete(stream);
      if (t.subscribers.size === 0 && this.tails.get(sessionId) === t) this.tails.delete(sessionId);
    });
    t.subscribers.add(stream);
    return stream;
  }

  /** Turn updates of the session from now on, whichever process runs its agent. */
  sessionTurns(sessionId: string): AsyncIterableIterator<TurnUpdate> {
    let set = this.turnStreams.get(sessionId);
    if (!set) this.turnStreams.set(sessionId, (set = new Set()));
    const subscribers = set;
    const stream: PushStream<TurnUpdate> = new PushStream<TurnUpdate>({
      max: MAX_QUEUED_UPDATES,
      merge: mergeDeltas,
      onClose: () => {
        subscribers.delete(stream);
        if (subscribers.size === 0 && this.turnStreams.get(sessionId) === subscribers) this.turnStreams.delete(sessionId);
      },
    });
    subscribers.add(stream);
    return stream;
  }

  /** Sessions of the scope's tenant as they are created, forked, imported or appended to. */
  sessionsChanged(scope: Scope): AsyncIterableIterator<SessionRow> {
    const entry = {
      scope,
      stream: new PushStream<SessionRow>({
        // A slow dashboard gets each session's latest row once, not every intermediate one.
        keyOf: (s) => s.id,
        max: MAX_QUEUED_UPDATES,
        onClose: () => this.sessionStreams.delete(entry),
      }),
    };
    this.sessionStreams.add(entry);
    return entry.stream;
  }

  /** Ids of the caller's tenant's sessions as they are deleted. */
  sessionsDeleted(scope: Scope): AsyncIterableIterator<SessionsDeleted> {
    const entry = {
      scope,
      stream: new PushStream<SessionsDeleted>({ max: MAX_QUEUED_UPDATES, onClose: () => this.deletionStreams.delete(entry) }),
    };
    this.deletionStreams.add(entry);
    return entry.stream;
  }

  /** Live subscribers in this process (metrics; tests check that disconnects clean up). */
  stats() {
    let events = 0;
    let turns = 0;
    for (const tail of this.tails.values()) events += tail.subscribers.size;
    for (const set of this.turnStreams.values()) turns += set.size;
    return { watchedSessions: this.tails.size, events, turns, sessions: this.sessionStreams.size, deletions: this.deletionStreams.size };
  }

  /** Sends a turn update to every process's subscribers (the host's onUpdate sink). */
  publishTurnUpdate(update: TurnUpdate): void {
    if (this.closed) return;
    this.outbox.push(update);
    if (!this.publishing) this.publishing = this.flushTurnUpdates();
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const [channel, handler] of this.handlers) this.listener.off(channel, handler);
    clearTimeout(this.changedTimer);
    await this.publishing;
    for (const tail of this.tails.values()) for (const s of tail.subscribers) s.close();
    for (const set of this.turnStreams.values()) for (const s of set) s.close();
    for (const { stream } of this.sessionStreams) stream.close();
    for (const { stream } of this.deletionStreams) stream.close();
  }

  /** A deleted session's subscriptions complete; its tenant's sessionsDeleted subscribers are told. */
  private onSessionsDeleted(payload: string) {
    let msg: { tenant: string; ids: string[] };
    try {
      msg = JSON.parse(payload);
    } catch {
      return;
    }
    for (const id of msg.ids) {
      for (const s of this.tails.get(id)?.subscribers ?? []) s.close();
      for (const s of this.turnStreams.get(id) ?? []) s.close();
    }
    for (const { scope, stream } of this.deletionStreams) if (scope.tenant === msg.tenant) stream.push({ deletedSessionIds: msg.ids });
  }

  private onEventsCommitted(payload: string) {
    let msg: { s: string; last: number };
    try {
      msg = JSON.parse(payload);
    } catch {
      return;
    }
    this.tails.get(msg.s)?.committed(msg.last);
    if (this.sessionStreams.size) this.onSessionChanged(msg.s);
  }

  private onReconnect() {
    // Notifications sent while the listener was down are lost: re-read everything watched.
    for (const tail of this.tails.values()) tail.invalidate();
  }

  private onSessionChanged(id: string) {
    if (this.sessionStreams.size === 0 || this.closed) return;
    this.changedSessions.add(id);
    this.changedTimer ??= setTimeout(() => void this.emitChangedSessions(), SESSIONS_COALESCE_MS);
  }

  private async emitChangedSessions() {
    const ids = [...this.changedSessions];
    this.changedSessions = new Set();
    try {
      const rows = await this.store.sessions.byIds(ids);
      for (const { scope, stream } of this.sessionStreams) {
        for (const row of rows) if (row.tenant === scope.tenant) stream.push(row);
      }
    } catch (err) {
      this.opts.log?.('sessionsChanged: loading sessions failed', err);
    } finally {
      this.changedTimer = undefined;
      if (this.changedSessions.size && !this.closed) {
        this.changedTimer = setTimeout(() => void this.emitChangedSessions(), SESSIONS_COALESCE_MS);
      }
    }
  }

  private onTurnUpdates(payload: string) {
    let msg: { u: TurnUpdate[] };
    try {
      msg = JSON.parse(payload);
    } catch {
      return;
    }
    for (const u of msg.u) {
      const set = this.turnStreams.get(u.sessionId);
      if (set) for (const s of set) s.push(u);
    }
  }

  // Updates queued while one NOTIFY is in flight go out together, in order.
  private async flushTurnUpdates(): Promise<void> {
    await new Promise((r) => setTimeout(r, TURN_COALESCE_MS));
    try {
      while (this.outbox.length) {
        const batch = this.outbox;
        this.outbox = [];
        // `n` keeps payloads distinct: Postgres folds identical payloads sent in one transaction into one.
        const payloads = turnPayloads(batch).map((u) => JSON.stringify({ n: ++this.publishSerial, u }));
        await this.store.notifyAll(TURNS_CHANNEL, payloads).catch((err) => this.opts.log?.('publishing turn updates failed', err));
      }
    } finally {
      this.publishing = undefined;
    }
  }
}

/** Consecutive text deltas of one step become one; order is kept. */
function mergeDeltas(a: TurnUpdate, b: TurnUpdate): TurnUpdate | undefined {
  if (a.kind !== 'TEXT_DELTA' || b.kind !== 'TEXT_DELTA') return undefined;
  if (a.sessionId !== b.sessionId || a.turn !== b.turn || a.step !== b.step) return undefined;
  return { ...a, text: (a.text ?? '') + (b.text ?? '') };
}

/**
 * Groups updates into NOTIFY payloads below the size limit, in order: adjacent
 * deltas are merged, long ones split. Exported for tests.
 */
export function turnPayloads(updates: TurnUpdate[]): TurnUpdate[][] {
  const merged: TurnUpdate[] = [];
  for (const u of updates) {
    const m = merged.length ? mergeDeltas(merged[merged.length - 1], u) : undefined;
    if (m) merged[merged.length - 1] = m;
    else merged.push(u);
  }
  const pieces: TurnUpdate[] = [];
  for (const u of merged) {
    const text = u.kind === 'TEXT_DELTA' ? (u.text ?? '') : '';
    if (text.length <= MAX_DELTA_CHARS) pieces.push(u);
    else {
      const chars = Array.from(text); // never split a surrogate pair
      for (let i = 0; i < chars.length; i += MAX_DELTA_CHARS) pieces.push({ ...u, text: chars.slice(i, i + MAX_DELTA_CHARS).join('') });
    }
  }
  const out: TurnUpdate[][] = [];
  let group: TurnUpdate[] = [];
  let bytes = 0;
  for (const u of pieces) {
    const size = Buffer.byteLength(JSON.stringify(u)) + 1;
    if (group.length && bytes + size > MAX_PAYLOAD_BYTES) {
      out.push(group);
      group = [];
      bytes = 0;
    }
    group.push(u);
    bytes += size;
  }
  if (group.length) out.push(group);
  return out;
}

/**
 * One watched session in this process: the newest committed seq we were told
 * of, and a contiguous window of recent events read once for all subscribers.
 */
class SessionTail {
  readonly subscribers = new Set<EventStream>();
  private window: StoredEvent[] = [];
  private notifiedLast = -1;
  /** True until a read that began after the last reconnect reached the end of the log. */
  private unknown = true;
  private generation = 0;
  private fetching?: Promise<number>;

  constructor(
    readonly sessionId: string,
    private readonly store: SessionStore,
    private readonly pageSize: number,
    private readonly windowSize: number,
  ) {}

  committed(last: number) {
    if (last > this.notifiedLast) this.notifiedLast = last;
    for (const s of this.subscribers) s.wake();
  }

  invalidate() {
    this.unknown = true;
    this.generation++;
    for (const s of this.subscribers) s.wake();
  }

  private get lo() {
    return this.window.length ? this.window[0].seq : Infinity;
  }

  private get hi() {
    return this.window.length ? this.window[this.window.length - 1].seq : -Infinity;
  }

  /** The next contiguous events after `seq` (empty: none committed yet). */
  async eventsAfter(seq: number): Promise<StoredEvent[]> {
    for (;;) {
      if (seq >= this.lo - 1 && seq < this.hi) {
        const from = seq - this.lo + 1;
        return this.window.slice(from, from + this.pageSize);
      }
      if (!this.unknown && this.notifiedLast <= seq && seq >= this.hi) return [];
      if (seq < this.lo - 1 && this.window.length) {
        // Behind the shared window: this subscriber reads its own page.
        return contiguousAfter(seq, await this.store.log.page(this.sessionId, seq, this.pageSize));
      }
      if (this.fetching) {
        await this.fetching; // someone else's read: look again
        continue;
      }
      const read = await (this.fetching = this.fetch(seq).finally(() => (this.fetching = undefined)));
      if (read === 0 && !this.unknown) return []; // nothing after seq yet; the next notification wakes us
    }
  }

  /** Reads the page after `seq` (≥ hi, or the window is empty) into the window. */
  private async fetch(seq: number): Promise<number> {
    const generation = this.generation;
    if (seq !== this.hi) this.window = [];
    const page = contiguousAfter(seq, await this.store.log.page(this.sessionId, seq, this.pageSize));
    if (page.length) {
      this.window.push(...page);
      if (this.window.length > this.windowSize) this.window.splice(0, this.window.length - this.windowSize);
      if (this.hi > this.notifiedLast) this.notifiedLast = this.hi;
    }
    if (page.length < this.pageSize && generation === this.generation) this.unknown = false;
    return page.length;
  }
}

/** The prefix of `page` that continues `seq` without a gap. */
function contiguousAfter(seq: number, page: StoredEvent[]): StoredEvent[] {
  let n = 0;
  while (n < page.length && page[n].seq === seq + 1 + n) n++;
  return n === page.length ? page : page.slice(0, n);
}

const DONE: IteratorReturnResult<undefined> = { value: undefined, done: true };

/** A subscriber's iterator: return() (the client went away) unregisters it at once, even mid-wait. */
abstract class LiveStream<T> implements AsyncIterableIterator<T> {
  protected closed = false;
  private waiter?: () => void;

  constructor(private readonly onClose: () => void) {}

  abstract next(): Promise<IteratorResult<T>>;
  /** Drops what is buffered for a reader that is gone. */
  protected abstract discard(): void;

  protected wakeReader() {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  protected sleep(): Promise<void> {
    return new Promise<void>((r) => (this.waiter = r));
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.discard();
    this.wakeReader();
    this.onClose();
  }

  async return(): Promise<IteratorResult<T>> {
    this.close();
    return DONE;
  }

  async throw(err: unknown): Promise<IteratorResult<T>> {
    this.close();
    throw err;
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

/** One sessionEvents subscriber: pulls pages after its last delivered seq. */
export class EventStream extends LiveStream<StoredEvent> {
  private page: StoredEvent[] = [];
  private index = 0;
  private pending = true;

  constructor(
    private readonly tail: SessionTail,
    private delivered: number,
    onClose: () => void,
  ) {
    super(onClose);
  }

  /** Something may have been committed: look again before sleeping. */
  wake() {
    this.pending = true;
    this.wakeReader();
  }

  protected discard() {
    this.page = [];
  }

  /** Every event available now (at least one), in order; null once the stream has ended. For writers that send a batch at once. */
  async nextBatch(): Promise<StoredEvent[] | null> {
    const first = await this.next();
    if (first.done) return null;
    const batch = [first.value, ...this.page.slice(this.index)];
    this.index = this.page.length;
    this.delivered = batch[batch.length - 1].seq;
    return batch;
  }

  async next(): Promise<IteratorResult<StoredEvent>> {
    try {
      for (;;) {
        if (this.closed) return DONE;
        if (this.index < this.page.length) {
          const event = this.page[this.index++];
          this.delivered = event.seq;
          return { value: event, done: false };
        }
        this.pending = false;
        this.page = await this.tail.eventsAfter(this.delivered);
        this.index = 0;
        if (this.page.length || this.closed) continue;
        if (!this.pending) await this.sleep();
      }
    } catch (err) {
      this.close();
      throw err;
    }
  }
}

/** A bounded push queue read as an async iterator (turn updates, session rows). */
class PushStream<T> extends LiveStream<T> {
  private items: T[] = [];
  private failure?: Error;

  constructor(
    private readonly opts: {
      onClose: () => void;
      max: number;
      /** Combines the newest queued item with the next one, or returns undefined. */
      merge?: (last: T, next: T) => T | undefined;
      /** Items with the same key replace each other in the queue. */
      keyOf?: (item: T) => string;
    },
  ) {
    super(opts.onClose);
  }

  push(item: T) {
    if (this.closed) return;
    const { merge, keyOf } = this.opts;
    if (merge && this.items.length) {
      const m = merge(this.items[this.items.length - 1], item);
      if (m) return void (this.items[this.items.length - 1] = m);
    }
    if (keyOf) {
      const key = keyOf(item);
      const i = this.items.findIndex((x) => keyOf(x) === key);
      if (i >= 0) return void (this.items[i] = item);
    }
    if (this.items.length >= this.opts.max) {
      this.failure = new Error('subscriber too slow: too many updates queued');
      return this.close();
    }
    this.items.push(item);
    this.wakeReader();
  }

  protected discard() {
    this.items = [];
  }

  async next(): Promise<IteratorResult<T>> {
    for (;;) {
      if (this.items.length) return { value: this.items.shift()!, done: false };
      if (this.failure) throw this.failure;
      if (this.closed) return DONE;
      await this.sleep();
    }
  }
}
