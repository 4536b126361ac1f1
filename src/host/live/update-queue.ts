// A subscriber's bounded queue of live updates (turn updates, session rows,
// deletions), read as an async iterator that coalesces what the reader has not
// taken yet, so a slow reader costs memory in proportion to what changed, not
// to how much was said. Adjacent updates may merge (text deltas) and a keyed
// update replaces the queued one with its key (a session's latest row); order
// is kept. Past `max` queued updates, or `maxChars` characters of them (a
// merged delta grows without adding an update), the subscriber is closed with
// an error instead of being buffered without bound: SUBSCRIBER_TOO_SLOW, which
// its client sees (a plain Error reached it as INTERNAL_SERVER_ERROR
// "Unexpected error."). That is for what is pushed as it happens (live
// updates); a producer that can wait for the reader (a replay of the log) asks
// for `room()` before each update and `add`s it, so a reader however slow reads
// a past however long, the queue holding at most ROOM_UPDATES / ROOM_CHARS of it.
// Whoever ends the stream (return() from the client going away, close() from
// the producer) unregisters it at once, even while a read is waiting.
import { ForklineError } from '../../core/errors.ts';

export const TOO_SLOW_MESSAGE = 'subscriber too slow: too many updates queued; subscribe again';
/** The usual bound: a subscriber this far behind is closed with an error. */
export const MAX_QUEUED_UPDATES = 10_000;
/** And the usual bound on their characters (what `weigh` counts): 4 Mi (at most 8 MiB of strings). */
export const MAX_QUEUED_CHARS = 4 * 1024 * 1024;
/** A producer that waits for the reader (room()) goes on once the queue is down to this many updates… */
export const ROOM_UPDATES = 64;
/** …and this many characters of them. */
export const ROOM_CHARS = 256 * 1024;

export interface UpdateQueueOptions<T> {
  /** Most updates queued for one reader; one more closes it with TOO_SLOW_MESSAGE. */
  max: number;
  /** Most characters queued for one reader (by `weigh`); past them it is closed with TOO_SLOW_MESSAGE. */
  maxChars?: number;
  /** An update's size in characters (its strings); without it only updates are counted. */
  weigh?: (item: T) => number;
  /** Combines the newest queued update with the next one, or returns undefined. */
  merge?: (last: T, next: T) => T | undefined;
  /** Updates with the same key replace each other in the queue (in the older one's place). */
  keyOf?: (item: T) => string;
  /** Unregisters the subscriber; called once, when the stream ends whichever way. */
  onClose: () => void;
}

type Read<T> = { resolve: (r: IteratorResult<T, undefined>) => void; reject: (err: unknown) => void };

const done = (): IteratorResult<never, undefined> => ({ value: undefined, done: true });

/**
 * Written out rather than built on a channel library: coalescing needs the
 * queued values themselves. (It was a Repeater with a custom buffer, which
 * sees pushed values only as promises; reading them relied on the order in
 * which Repeater calls its buffer, an internal detail.)
 */
export class UpdateQueue<T> implements AsyncIterableIterator<T, undefined> {
  /** Updates the reader has not taken yet, oldest first. */
  private items: T[] = [];
  /** What `weigh` counts of `items`. */
  private chars = 0;
  /** Producers waiting for room (room()). */
  private roomWaits: Array<() => void> = [];
  /** Reads waiting for an update (the queue is empty while there are any). */
  private reads: Read<T>[] = [];
  private closed = false;
  /** The error the reader's next read gets once, after a close with an error. */
  private failure?: Error;

  constructor(private readonly opts: UpdateQueueOptions<T>) {}

  /** Queues an update as it happens (handed over at once if a read is waiting); past the bounds the reader is cut. */
  push(item: T): void {
    if (this.closed) return;
    const waiting = this.reads.shift();
    if (waiting) return waiting.resolve({ value: item, done: false });
    if (!this.absorb(item)) {
      if (this.items.length >= this.opts.max) return this.close(new ForklineError('SUBSCRIBER_TOO_SLOW', TOO_SLOW_MESSAGE, { queued: this.items.length }));
      this.append(item);
    }
    if (this.chars > (this.opts.maxChars ?? Infinity))
      this.close(new ForklineError('SUBSCRIBER_TOO_SLOW', TOO_SLOW_MESSAGE, { queued: this.items.length, chars: this.chars }));
  }

  /**
   * Queues an update of a producer that waited for room() (the log's past): never cut, since such a producer adds
   * at most one event's updates past ROOM_UPDATES / ROOM_CHARS.
   */
  add(item: T): void {
    if (this.closed) return;
    const waiting = this.reads.shift();
    if (waiting) return waiting.resolve({ value: item, done: false });
    if (!this.absorb(item)) this.append(item);
  }

  /** A promise while the reader has more than ROOM_UPDATES / ROOM_CHARS to take (settled once it took them, or the stream ended); else undefined. */
  room(): Promise<void> | undefined {
    if (this.closed || this.roomy()) return undefined;
    return new Promise((resolve) => this.roomWaits.push(resolve));
  }

  /** Whether the stream has ended (a producer stops). */
  get ended(): boolean {
    return this.closed;
  }

  /** Ends the stream: what was queued is dropped; the reader then gets `err` (once), or done. */
  close(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.items = [];
    this.chars = 0;
    this.opts.onClose();
    this.wakeProducers();
    const reads = this.reads;
    this.reads = [];
    if (err && reads.length === 0) this.failure = err;
    for (const read of reads) {
      if (err) read.reject(err);
      else read.resolve(done());
    }
  }

  next(): Promise<IteratorResult<T, undefined>> {
    if (this.items.length) {
      const item = this.items.shift()!;
      if (this.opts.weigh) this.chars -= this.opts.weigh(item);
      if (this.roomWaits.length && this.roomy()) this.wakeProducers();
      return Promise.resolve({ value: item, done: false });
    }
    if (this.closed) {
      const failure = this.failure;
      this.failure = undefined;
      return failure ? Promise.reject(failure) : Promise.resolve(done());
    }
    return new Promise((resolve, reject) => this.reads.push({ resolve, reject }));
  }

  /** The reader went away: unregister now, and end a read that is waiting. */
  async return(): Promise<IteratorResult<T, undefined>> {
    this.close();
    return done();
  }

  async throw(err: unknown): Promise<IteratorResult<T, undefined>> {
    this.close();
    throw err;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private roomy(): boolean {
    return this.items.length <= ROOM_UPDATES && this.chars <= ROOM_CHARS;
  }

  private wakeProducers() {
    const waits = this.roomWaits;
    this.roomWaits = [];
    for (const wake of waits) wake();
  }

  private append(item: T) {
    this.items.push(item);
    if (this.opts.weigh) this.chars += this.opts.weigh(item);
  }

  /** Folds `item` into a queued update (merged into the newest, or replacing its key's); false if it needs a place of its own. */
  private absorb(item: T): boolean {
    const { merge, keyOf } = this.opts;
    const n = this.items.length;
    if (merge && n) {
      const m = merge(this.items[n - 1], item);
      if (m) return (this.replace(n - 1, m), true);
    }
    if (keyOf) {
      const key = keyOf(item);
      const i = this.items.findIndex((x) => keyOf(x) === key);
      if (i >= 0) return (this.replace(i, item), true);
    }
    return false;
  }

  private replace(i: number, item: T) {
    const weigh = this.opts.weigh;
    if (weigh) this.chars += weigh(item) - weigh(this.items[i]);
    this.items[i] = item;
  }
}
