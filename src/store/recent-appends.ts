// The events this process appended last to each session, as long as nobody
// appended between them, with the lease they were appended under. A runner
// holding that same lease (its token), or one a claim took while the log ended
// with them, starts its fold from them instead of reading them back: the input its process just queued, or the turn it just
// wrote. While a lease is held only inputs can be added by others (an append of
// turn events needs the lease), and those the fold misses are seen as
// session-fold.ts says: when its next append finds the log moved, or by the
// host, whose release of the lease refuses while input waits. So the events
// are a correct prefix of the log for that lease, never a guess at its end.
// Appends inside a caller's transaction are not kept (it may roll back).
import { LRUCache } from 'lru-cache';
import type { StoredEvent } from './session-log.ts';
import type { Lease } from './leases.ts';

/** Events kept per session at most (the newest): a turn's appends and the input before it. */
const MAX_EVENTS = 32;

interface Run {
  events: StoredEvent[];
  /** The lease token the last of these appends was fenced by or claimed; undefined: none. */
  token?: number;
  /** Characters of their data as sent, for the cache's bound. */
  chars: number;
}

export class RecentAppends {
  private readonly runs: LRUCache<string, Run>;

  constructor(maxSessions = 10_000, maxChars = 32 * 1024 * 1024) {
    this.runs = new LRUCache({ max: maxSessions, maxSize: maxChars, sizeCalculation: (r) => Math.max(1, r.chars) });
  }

  /** A committed append of this process: continues the session's run when it follows it directly, else starts a new one. */
  record(sessionId: string, events: StoredEvent[], token: number | undefined, chars: number): void {
    if (events.length === 0) return;
    const run = this.runs.peek(sessionId);
    const follows = run && run.events[run.events.length - 1].seq + 1 === events[0].seq;
    let kept = follows ? run.events.concat(events) : events;
    let size = follows ? run.chars + chars : chars;
    if (kept.length > MAX_EVENTS) {
      kept = kept.slice(kept.length - MAX_EVENTS);
      size = chars; // an estimate once trimmed: the newest append's size
    }
    this.runs.set(sessionId, { events: kept, token, chars: size });
  }

  /**
   * The session's events from `fromSeq` to the end of the last append this
   * process made, when they are known to end the log for `lease`: that append
   * was fenced by it or claimed it, or a claim statement took it when the log
   * ended there. Undefined otherwise, or when the kept events do not reach
   * back to `fromSeq`.
   */
  since(sessionId: string, fromSeq: number, lease: Pick<Lease, 'token' | 'claimedAtEventCount'>): StoredEvent[] | undefined {
    const run = this.runs.get(sessionId);
    if (!run) return undefined;
    const first = run.events[0].seq;
    const last = run.events[run.events.length - 1].seq;
    if (run.token !== lease.token && lease.claimedAtEventCount !== last + 1) return undefined;
    if (fromSeq < first || fromSeq > last + 1) return undefined;
    return run.events.slice(fromSeq - first);
  }

  forget(sessionId: string): void {
    this.runs.delete(sessionId);
  }
}
