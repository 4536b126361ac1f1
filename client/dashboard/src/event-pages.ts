// The part of one session's log the page has seen: fixed pages of PAGE_SIZE
// seqs, each fetched once on demand (a keyset read, as cheap at seq 1,000,000
// as at 0), plus the events the live subscription appends. Both panes read
// from here, so nothing is fetched twice and nothing loads the whole log.
import type { LogEvent } from './conversation.ts';
import { TimelineSpans } from './timeline-spans.ts';

export const PAGE_SIZE = 200;

/** Fetches up to `first` events after `afterSeq` (`length`: the log's length as known); returns them and the log's length then. */
export type PageFetcher = (afterSeq: number, first: number, length: number) => Promise<{ events: LogEvent[]; eventCount: number }>;

/** A page wholly below the log's end, with an event after it: it never changes (an HTTP cache may keep it). */
export const isFinalPage = (afterSeq: number, first: number, length: number) => afterSeq + first + 1 < length;

export const pageOf = (seq: number) => Math.floor(seq / PAGE_SIZE);

export class EventPages {
  /** Length of the log as far as this page knows (the next seq). */
  length: number;
  /** Bumped on every change; views re-read when it moves. */
  version = 0;
  /** The start/end pairs among the events held (the timeline's spans), kept as they arrive. */
  readonly spans = new TimelineSpans();
  private readonly events = new Map<number, LogEvent>();
  private readonly typesSeen = new Set<string>();
  private readonly pageVersions = new Map<number, number>();
  private readonly requested = new Map<number, Promise<void>>();
  /** Pages whose fetch answered: every seq of theirs below the log's length then is held. */
  private readonly fetched = new Set<number>();
  private readonly listeners = new Set<() => void>();
  private notifyQueued = false;

  constructor(
    private readonly fetchPage: PageFetcher,
    length: number,
  ) {
    this.length = length;
  }

  get(seq: number): LogEvent | undefined {
    return this.events.get(seq);
  }

  /** The event types among the events held (kept as they arrive: no pass over everything loaded). */
  types(): string[] {
    return [...this.typesSeen];
  }

  /** Pages fetched or being fetched. */
  get requestedPages(): number[] {
    return [...this.requested.keys()].sort((a, b) => a - b);
  }

  /** Events from..to (inclusive) when all are here, else undefined. */
  slice(from: number, to: number): LogEvent[] | undefined {
    const out: LogEvent[] = [];
    for (let seq = Math.max(0, from); seq <= Math.min(to, this.length - 1); seq++) {
      const e = this.events.get(seq);
      if (!e) return undefined;
      out.push(e);
    }
    return out;
  }

  /** Changes when an event in from..to arrives (a view of that range recomputes only then). */
  rangeVersion(from: number, to: number): string {
    const parts: number[] = [];
    for (let page = pageOf(Math.max(0, from)); page <= pageOf(Math.max(0, to)); page++) parts.push(this.pageVersions.get(page) ?? 0);
    return parts.join(',');
  }

  /** The last seq such that every event from `seq` to it is held (`seq - 1` when `seq` is not); whole fetched pages are skipped at once. */
  heldThrough(seq: number): number {
    let s = seq;
    while (s < this.length) {
      const page = pageOf(s);
      const pageEnd = Math.min((page + 1) * PAGE_SIZE, this.length) - 1;
      if (this.fetched.has(page) && this.events.has(pageEnd)) s = pageEnd + 1;
      else if (this.events.has(s)) s++;
      else break;
    }
    return s - 1;
  }

  /** Loads the pages covering from..to (clamped to the log). */
  ensure(from: number, to: number): Promise<void> {
    const last = Math.min(to, this.length - 1);
    const loads: Promise<void>[] = [];
    for (let page = pageOf(Math.max(0, from)); page <= pageOf(Math.max(0, last)) && last >= 0; page++) loads.push(this.loadPage(page));
    return Promise.all(loads).then(() => undefined);
  }

  loadPage(page: number): Promise<void> {
    let load = this.requested.get(page);
    if (!load) {
      load = this.fetchPage(page * PAGE_SIZE - 1, PAGE_SIZE, this.length).then(
        ({ events, eventCount }) => {
          this.length = Math.max(this.length, eventCount);
          this.fetched.add(page);
          this.add(events);
        },
        (err) => {
          this.requested.delete(page); // a later view asks again
          throw err;
        },
      );
      this.requested.set(page, load);
    }
    return load;
  }

  /** Live or fetched events; seqs already held are ignored. */
  add(events: readonly LogEvent[]) {
    for (const e of events) {
      if (this.events.has(e.seq)) continue;
      this.events.set(e.seq, e);
      this.typesSeen.add(e.type);
      this.spans.add(e);
      this.pageVersions.set(pageOf(e.seq), (this.pageVersions.get(pageOf(e.seq)) ?? 0) + 1);
      this.length = Math.max(this.length, e.seq + 1);
    }
    this.changed();
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // One notification per burst of pages and live events.
  private changed() {
    this.version++;
    if (this.notifyQueued) return;
    this.notifyQueued = true;
    queueMicrotask(() => {
      this.notifyQueued = false;
      for (const l of this.listeners) l();
    });
  }
}
