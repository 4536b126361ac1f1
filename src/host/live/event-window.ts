// The sessionEvents side of live delivery (docs/contract.md#graphql-names): every event a subscriber
// receives is read from the log, so delivery is in seq order with no gaps and no
// duplicates whichever process wrote it; notifications are only wake-ups, and a
// listener reconnect only costs a re-read.
// Per session and process, one bounded window of recent events is shared by all
// its subscribers (one query per commit, not one per subscriber); a subscriber
// behind that window reads its own pages. Nothing grows with a slow subscriber
// but the page it is reading.
import { readingFor, StatementAbandonedError, type StatementScope } from '../../db/statement-deadlines.ts';
import type { SessionStore, StoredEvent } from '../../store/session-store.ts';

export const PAGE_SIZE = 200;
/** Recent events kept per watched session and process (shared by its subscribers). */
export const WINDOW_SIZE = 512;

/** This process's watched sessions: one shared window each, and the streams reading it. */
export class EventWindows {
  private readonly windows = new Map<string, SessionWindow>();
  private readonly pageSize: number;
  private readonly windowSize: number;

  constructor(
    private readonly store: SessionStore,
    sizes: { pageSize?: number; windowSize?: number } = {},
  ) {
    this.pageSize = sizes.pageSize ?? PAGE_SIZE;
    this.windowSize = Math.max(sizes.windowSize ?? WINDOW_SIZE, this.pageSize);
  }

  /** The session's events with seq > afterSeq, then live ones, in seq order; read in `statements`, its subscription's scope. */
  stream(sessionId: string, afterSeq: number, statements?: StatementScope): EventStream {
    let window = this.windows.get(sessionId);
    if (!window) {
      window = new SessionWindow(sessionId, this.store, this.pageSize, this.windowSize);
      this.windows.set(sessionId, window);
    }
    const w = window;
    const stream = new EventStream(
      w,
      afterSeq,
      () => {
        w.subscribers.delete(stream);
        if (w.subscribers.size === 0 && this.windows.get(sessionId) === w) this.windows.delete(sessionId);
      },
      statements,
    );
    w.subscribers.add(stream);
    return stream;
  }

  /** Whether any session is watched here (a commit notification concerns this process only then). */
  watching(): boolean {
    return this.windows.size > 0;
  }

  /** Events up to `last` were committed to the session's log. */
  committed(sessionId: string, last: number) {
    this.windows.get(sessionId)?.committed(last);
  }

  /** Notifications may have been lost (listener reconnect): re-read everything watched. */
  invalidateAll() {
    for (const window of this.windows.values()) window.invalidate();
  }

  /** The session is gone: its streams end. */
  endSession(sessionId: string) {
    for (const s of this.windows.get(sessionId)?.subscribers ?? []) s.close();
  }

  closeAll() {
    for (const window of this.windows.values()) for (const s of window.subscribers) s.close();
  }

  stats() {
    let streams = 0;
    for (const window of this.windows.values()) streams += window.subscribers.size;
    return { watchedSessions: this.windows.size, streams };
  }
}

/**
 * One watched session in this process: the newest committed seq we were told
 * of, and a contiguous window of recent events read once for all subscribers.
 */
class SessionWindow {
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
  async eventsAfter(seq: number, statements?: StatementScope): Promise<StoredEvent[]> {
    for (;;) {
      if (seq >= this.lo - 1 && seq < this.hi) {
        const from = seq - this.lo + 1;
        return this.window.slice(from, from + this.pageSize);
      }
      if (!this.unknown && this.notifiedLast <= seq && seq >= this.hi) return [];
      if (seq < this.lo - 1 && this.window.length) {
        // Behind the shared window: this subscriber reads its own page (catching
        // up: a standby may serve it; the window says how far the log goes).
        return contiguousAfter(seq, (await this.store.log.pageFromStandby(this.sessionId, seq, this.pageSize, this.hi, { statements })).events);
      }
      if (this.fetching) {
        // Someone else's read: look again. It runs in the scope of the subscriber
        // that began it, and is cancelled if that one leaves: then read again.
        await this.fetching.catch((err: unknown) => {
          if (!(err instanceof StatementAbandonedError)) throw err;
        });
        continue;
      }
      const read = await (this.fetching = this.fetch(seq, statements).finally(() => (this.fetching = undefined)));
      if (read === 0 && !this.unknown) return []; // nothing after seq yet; the next notification wakes us
    }
  }

  /** Reads the page after `seq` (≥ hi, or the window is empty) into the window. */
  private async fetch(seq: number, statements: StatementScope | undefined): Promise<number> {
    const generation = this.generation;
    if (seq !== this.hi) this.window = [];
    // Until a read reached the end of the log, subscribers are catching up: a
    // standby may serve full pages (the rest from the primary); the live tail
    // is read from the primary, which has what a notification announced.
    const log = this.store.log;
    const read = await (this.unknown
      ? log.pageFromStandby(this.sessionId, seq, this.pageSize, undefined, { statements })
      : log.pageWithin(this.sessionId, seq, this.pageSize, readingFor(this.store.pool, statements)));
    const page = contiguousAfter(seq, read.events);
    if (page.length) {
      this.window.push(...page);
      if (this.window.length > this.windowSize) this.window.splice(0, this.window.length - this.windowSize);
      if (this.hi > this.notifiedLast) this.notifiedLast = this.hi;
    }
    // A page cut short by its bytes (PAGE_BYTES) is not the log's end.
    if (!read.cut && page.length < this.pageSize && generation === this.generation) this.unknown = false;
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

/**
 * One sessionEvents subscriber: a pull iterator over its session's window,
 * reading the page after its last delivered seq (not a queue: nothing is pushed
 * to it but wake-ups). return() (the client went away) unregisters it at once,
 * even mid-wait.
 */
export class EventStream implements AsyncIterableIterator<StoredEvent> {
  private page: StoredEvent[] = [];
  private index = 0;
  private pending = true;
  private closed = false;
  private waiter?: () => void;

  constructor(
    private readonly window: SessionWindow,
    private delivered: number,
    private readonly onClose: () => void,
    statements: StatementScope | undefined,
  ) {
    // Its reads end with it, whoever closes it.
    const gone = statements?.gone;
    const closed = () => this.closed;
    this.statements = statements && {
      ...statements,
      gone: {
        get aborted() {
          return closed() || gone?.aborted === true;
        },
      },
    };
  }

  private readonly statements: StatementScope | undefined;

  /** Something may have been committed: look again before sleeping. */
  wake() {
    this.pending = true;
    this.wakeReader();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.page = [];
    this.wakeReader();
    this.onClose();
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
        this.page = await this.window.eventsAfter(this.delivered, this.statements);
        this.index = 0;
        if (this.page.length || this.closed) continue;
        if (!this.pending) await new Promise<void>((r) => (this.waiter = r));
      }
    } catch (err) {
      this.close();
      throw err;
    }
  }

  async return(): Promise<IteratorResult<StoredEvent>> {
    this.close();
    return DONE;
  }

  async throw(err: unknown): Promise<IteratorResult<StoredEvent>> {
    this.close();
    throw err;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private wakeReader() {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
}
