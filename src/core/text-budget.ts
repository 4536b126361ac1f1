/**
 * What one request may read of event texts (answers, waiting inputs, error
 * reports) in all: each text is a field of one event and can be megabytes, and
 * a request can ask for many (a page of sessions, aliases), so each read takes
 * its length from the request's budget first and reads only what it got
 * (docs/operations.md "Memory and time"). Counted in characters.
 */
export class TextBudget {
  private left: number;

  constructor(readonly total: number) {
    this.left = Math.max(0, total);
  }

  /** Takes up to `length` characters: what the caller may read of a text that long. */
  take(length: number): number {
    const n = Math.max(0, Math.min(length, this.left));
    this.left -= n;
    return n;
  }

  /** Takes all that is left: for a read whose size is known only after it (then `giveBack` what it did not use). */
  takeAll(): number {
    return this.take(this.left);
  }

  giveBack(n: number): void {
    this.left = Math.min(this.total, this.left + Math.max(0, n));
  }
}

/** A text read within a budget: `truncated` when `text` is a prefix, `length` the whole text's characters. */
export interface BoundedText {
  text: string;
  length: number;
  truncated: boolean;
}
