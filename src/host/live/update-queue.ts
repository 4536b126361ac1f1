// A subscriber's bounded queue of live updates (turn updates, session rows,
// deletions), read as an async iterator: a Repeater whose buffer coalesces what
// the reader has not taken yet, so a slow reader costs memory in proportion to
// what changed, not to how much was said. Adjacent updates may merge (text
// deltas) and a keyed update replaces the queued one with its key (a session's
// latest row); order is kept. Past `max` queued updates the subscriber is
// closed with an error instead of being buffered without bound. Whoever ends
// the stream (return() from the client going away, close() from the producer)
// unregisters it at once, even while a read is waiting.
import { Repeater, type Push, type RepeaterBuffer, type Stop } from '@repeaterjs/repeater';

export const TOO_SLOW_MESSAGE = 'subscriber too slow: too many updates queued';
/** The usual bound: a subscriber this far behind is closed with an error. */
export const MAX_QUEUED_UPDATES = 10_000;

export interface UpdateQueueOptions<T> {
  /** Most updates queued for one reader; one more closes it with TOO_SLOW_MESSAGE. */
  max: number;
  /** Combines the newest queued update with the next one, or returns undefined. */
  merge?: (last: T, next: T) => T | undefined;
  /** Updates with the same key replace each other in the queue (in the older one's place). */
  keyOf?: (item: T) => string;
  /** Unregisters the subscriber; called once, when the stream ends whichever way. */
  onClose: () => void;
}

/**
 * The updates a reader has not taken yet. Repeater hands add() a promise of the
 * pushed value (it keeps pushes in order that way); coalescing needs the value
 * itself, so UpdateQueue.push() puts it in `incoming` just before pushing
 * (Repeater calls add() synchronously from push, when no read is waiting).
 */
class CoalescingBuffer<T> implements RepeaterBuffer {
  items: T[] = [];
  incoming?: { value: T };

  constructor(private readonly opts: UpdateQueueOptions<T>) {}

  get empty() {
    return this.items.length === 0;
  }

  /** Never: UpdateQueue enforces `max` itself (closing the reader), so a push never waits. */
  get full() {
    return false;
  }

  add(): void {
    if (!this.incoming) throw new Error('UpdateQueue: buffer add() without a value being pushed');
    this.items.push(this.incoming.value);
  }

  remove(): T {
    if (this.items.length === 0) throw new Error('Buffer empty');
    return this.items.shift()!;
  }

  /** Folds `item` into a queued update (merged into the newest, or replacing its key's); false if it needs a place of its own. */
  absorb(item: T): boolean {
    const { merge, keyOf } = this.opts;
    const n = this.items.length;
    if (merge && n) {
      const m = merge(this.items[n - 1], item);
      if (m) return (this.items[n - 1] = m), true;
    }
    if (keyOf) {
      const key = keyOf(item);
      const i = this.items.findIndex((x) => keyOf(x) === key);
      if (i >= 0) return (this.items[i] = item), true;
    }
    return false;
  }
}

export class UpdateQueue<T> extends Repeater<T, undefined> {
  private readonly buffer: CoalescingBuffer<T>;
  private readonly onClose: () => void;
  private readonly max: number;
  private closed = false;
  private failure?: Error;
  /** Repeater's push and stop: set when the first read starts the executor. */
  private pushToReader?: Push<T>;
  private stop?: Stop;

  constructor(opts: UpdateQueueOptions<T>) {
    const buffer = new CoalescingBuffer(opts);
    super((push, stop) => {
      this.pushToReader = push;
      this.stop = stop;
      if (this.closed) stop(this.failure); // closed before its first read
      return undefined;
    }, buffer);
    this.buffer = buffer;
    this.onClose = opts.onClose;
    this.max = opts.max;
  }

  /** Queues an update for the reader (handed over at once if a read is waiting). */
  push(item: T): void {
    if (this.closed) return;
    if (this.buffer.absorb(item)) return;
    if (this.buffer.items.length >= this.max) return this.close(new Error(TOO_SLOW_MESSAGE));
    if (!this.pushToReader) return void this.buffer.items.push(item); // not read yet: no read can be waiting
    this.buffer.incoming = { value: item };
    try {
      void this.pushToReader(item);
    } finally {
      this.buffer.incoming = undefined;
    }
  }

  /** Ends the stream: what was queued is dropped; the reader then gets `err`, or done. */
  close(err?: Error): void {
    if (this.closed) return;
    this.closed = true;
    this.failure = err;
    this.buffer.items = [];
    this.onClose();
    this.stop?.(err);
  }

  /** The reader went away: unregister now, and end a read that is waiting. */
  override return(value?: PromiseLike<undefined> | undefined): Promise<IteratorResult<T, undefined>> {
    this.close();
    return super.return(value);
  }

  override throw(err: unknown): Promise<IteratorResult<T, undefined>> {
    this.close();
    return super.throw(err);
  }
}
