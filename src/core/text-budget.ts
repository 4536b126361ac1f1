/**
 * What one request may read of event texts (answers, waiting inputs, error
 * reports) in all: each text is a field of one event and can be megabytes, and
 * a request can ask for many (a page of sessions, aliases), so each read takes
 * its length from the request's budget first and reads only what it got
 * (docs/operations.md "Memory and time"). Counted in characters.
 */
export class TextBudget {
  private left: number;
  /** What reservations (reserveAll) hold until they settle. */
  private held = 0;
  /** Takers waiting for a reservation to settle. */
  private waiting: Array<() => void> = [];

  constructor(readonly total: number) {
    this.left = Math.max(0, total);
  }

  /** Takes up to `length` characters: what the caller may read of a text that long. */
  take(length: number): number {
    const n = Math.max(0, Math.min(length, this.left));
    this.left -= n;
    return n;
  }

  /**
   * take(), once no reservation holds what it would need: a text is not cut for
   * what a list of texts held only while it read (the list settles with what
   * it used). Takers never wait on each other, only on a reservation.
   */
  async takeSettled(length: number): Promise<number> {
    while (this.held > 0 && this.left < length) await this.settled();
    return this.take(length);
  }

  /**
   * Reserves all that is left, once no other reservation holds any: for a read
   * whose size is known only after it. `settle` must end it (in a `finally`).
   */
  async reserveAll(): Promise<number> {
    while (this.held > 0) await this.settled();
    const n = this.take(this.left);
    this.held += n;
    return n;
  }

  /** Ends a reservation of `reserved` characters of which `used` were read: the rest is left, and the waiting go on. */
  settle(reserved: number, used: number): void {
    this.held -= reserved;
    this.left = Math.min(this.total, this.left + Math.max(0, reserved - Math.max(0, used)));
    for (const go of this.waiting.splice(0)) go();
  }

  private settled(): Promise<void> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}

/** A text read within a budget: `truncated` when `text` is a prefix, `length` the whole text's characters. */
export interface BoundedText {
  text: string;
  length: number;
  truncated: boolean;
}
