// The event timeline's spans: the start/end pairs of a log (turn/start…turn/end,
// step/start…step/end, a model/message's tool calls…their results) with how
// long each lasted, and which rows a collapsed span hides. Pure (no DOM).
// Built from the events the page holds, which may be any pages of the log: a
// span whose end is in a page not loaded yet is open "until" the last event
// held after its start; one whose end is not in the log at all is running.
import type { LogEvent } from './conversation.ts';

export type SpanKind = 'turn' | 'step' | 'calls';

interface Point {
  seq: number;
  at: string;
  /** Written by repair (a crash's or a fork's closer), when the session was recovered or forked, not when it stopped. */
  synthetic: boolean;
}

/** What a span's times are read from: an event the page holds. */
export type HeldEvent = Pick<LogEvent, 'type' | 'createdAt' | 'synthetic'>;

/** Repair closes at most a step's calls, its step and its turn: how far back a closer's stop is looked for (store/crash-stop-times.ts). */
const MAX_CLOSERS_LOOKED_AT = 256;

export interface Span {
  kind: SpanKind;
  /** `turn 3`, `step 3.1`, `2 calls`. */
  label: string;
  start?: Point;
  end?: Point;
}

/** A span as a row shows it. */
export type SpanExtent =
  | { state: 'ended'; durationMs: number }
  /** No end anywhere in the log yet (its end would be after the last event held, which is the log's last). */
  | { state: 'running' }
  /** Its end is in a page not loaded: it lasts at least until `seq` (the last event held after its start). */
  | { state: 'until'; seq: number; durationMs: number }
  /** Only its end is held. */
  | { state: 'unknown-start' };

interface Call {
  /** The model/message that made it. */
  message: number;
  result?: Point;
}

const num = (v: unknown) => (typeof v === 'number' ? v : 0);
const str = (v: unknown) => (typeof v === 'string' ? v : '');
const ms = (from: string, to: string) => Math.max(0, Date.parse(to) - Date.parse(from));

export class TimelineSpans {
  private readonly byKey = new Map<string, Span>();
  private readonly byStart = new Map<number, Span>();
  private readonly byEnd = new Map<number, Span>();
  /** Tool calls by id, and each message's calls in order (a step's calls run one after another: session-runner). */
  private readonly calls = new Map<string, Call>();
  private readonly messageCalls = new Map<number, string[]>();
  private readonly resultCall = new Map<number, string>();

  /** Indexes one event (each seq once: EventPages calls it for new events only). */
  add(e: LogEvent): void {
    const d = (e.data ?? {}) as Record<string, unknown>;
    const at = { seq: e.seq, at: e.createdAt, synthetic: e.synthetic };
    switch (e.type) {
      case 'turn/start':
      case 'turn/end':
        return this.mark('turn', `turn ${num(d.turn)}`, e.type === 'turn/start', at);
      case 'step/start':
      case 'step/end':
        return this.mark('step', `step ${num(d.turn)}.${num(d.step)}`, e.type === 'step/start', at);
      case 'model/message': {
        const ids = (Array.isArray(d.toolCalls) ? (d.toolCalls as Array<Record<string, unknown>>) : []).map((c) => str(c.id));
        if (!ids.length) return;
        this.messageCalls.set(e.seq, ids);
        const span = this.spanOf('calls', `calls@${e.seq}`, ids.length === 1 ? '1 call' : `${ids.length} calls`);
        span.start = at;
        this.byStart.set(e.seq, span);
        for (const id of ids) {
          const call = this.calls.get(id) ?? { message: e.seq };
          call.message = e.seq;
          this.calls.set(id, call);
        }
        this.closeCalls(e.seq);
        return;
      }
      case 'tool/result': {
        const id = str(d.callId);
        const call = this.calls.get(id) ?? { message: -1 };
        call.result = at;
        this.calls.set(id, call);
        this.resultCall.set(e.seq, id);
        if (call.message >= 0) this.closeCalls(call.message);
        return;
      }
    }
  }

  /** The span a row starts (turn/start, step/start, a message with tool calls). */
  startingAt(seq: number): Span | undefined {
    return this.byStart.get(seq);
  }

  /** The span a row ends (turn/end, step/end, the last result of a message's calls). */
  endingAt(seq: number): Span | undefined {
    return this.byEnd.get(seq);
  }

  /**
   * How long the call a tool/result answers ran: from its message, or the
   * previous call's result (as the conversation counts it); none for a
   * synthetic result (the call was cut off: it never ended).
   */
  callAt(seq: number): { name: string; durationMs?: number } | undefined {
    const id = this.resultCall.get(seq);
    const call = id === undefined ? undefined : this.calls.get(id);
    if (!call?.result || call.message < 0 || call.result.synthetic) return id === undefined ? undefined : { name: id };
    const ids = this.messageCalls.get(call.message) ?? [];
    const before = ids[ids.indexOf(id!) - 1];
    const from = before === undefined ? this.byStart.get(call.message)?.start?.at : this.calls.get(before)?.result?.at;
    return { name: id!, ...(from ? { durationMs: ms(from, call.result.at) } : {}) };
  }

  /**
   * Where `span` ends as far as the page knows. `heldThrough(seq)`: the last
   * seq such that every event from `seq` to it is held; `lastSeq`: the log's.
   * A span repair closed (its end synthetic) ended when its events stopped:
   * at the last event before the closers and a fork's marker, as
   * `Turn.durationMs` counts it (docs/dashboard.md), not when a recovery or
   * a fork wrote them, maybe days later.
   */
  extent(span: Span, heldThrough: (seq: number) => number, lastSeq: number, eventAt: (seq: number) => HeldEvent | undefined): SpanExtent {
    if (!span.start) return { state: 'unknown-start' };
    const { start, end } = span;
    const until = (reach: number): SpanExtent => {
      const held = eventAt(reach);
      return { state: 'until', seq: reach, durationMs: held ? ms(start.at, held.createdAt) : 0 };
    };
    if (end && !end.synthetic) return { state: 'ended', durationMs: ms(start.at, end.at) };
    if (end) {
      for (let s = end.seq - 1; s >= Math.max(start.seq, end.seq - MAX_CLOSERS_LOOKED_AT); s--) {
        const e = eventAt(s);
        // An event between not held: the stop is not known yet; as long as what is held shows.
        if (!e) return until(heldThrough(start.seq));
        if (!e.synthetic && e.type !== 'session/end-seed') return { state: 'ended', durationMs: ms(start.at, e.createdAt) };
      }
      return { state: 'ended', durationMs: 0 };
    }
    const reach = heldThrough(start.seq);
    if (reach >= lastSeq) return { state: 'running' };
    return until(reach);
  }

  private spanOf(kind: SpanKind, key: string, label: string): Span {
    let span = this.byKey.get(key);
    if (!span) this.byKey.set(key, (span = { kind, label }));
    return span;
  }

  private mark(kind: SpanKind, label: string, isStart: boolean, at: Point) {
    const span = this.spanOf(kind, label, label);
    if (isStart) {
      span.start = at;
      this.byStart.set(at.seq, span);
    } else {
      span.end = at;
      this.byEnd.set(at.seq, span);
    }
  }

  /** A message's calls span ends at its last result, once every result is held. */
  private closeCalls(message: number) {
    const ids = this.messageCalls.get(message);
    const span = this.byKey.get(`calls@${message}`);
    if (!ids || !span) return;
    const results = ids.map((id) => this.calls.get(id)?.result);
    if (results.some((r) => !r)) return;
    const last = results.reduce((a, b) => (b!.seq > a!.seq ? b : a))!;
    span.end = last;
    this.byEnd.set(last.seq, span);
  }
}

export function formatSpan(span: Span, extent: SpanExtent, format: (ms: number) => string): string {
  switch (extent.state) {
    case 'ended':
      return `${span.label} · ${format(extent.durationMs)}`;
    case 'running':
      return `${span.label} · running`;
    case 'until':
      return `${span.label} · ≥ ${format(extent.durationMs)}, until #${extent.seq}+`;
    case 'unknown-start':
      return `${span.label} · start not loaded`;
  }
}

/**
 * The rows of a timeline with some seq ranges hidden (collapsed spans): row
 * index ↔ seq. A handful of ranges whatever the log's length, so each lookup
 * is a binary search over them.
 */
export class RowMap {
  /** Disjoint hidden ranges [from, to], sorted. */
  private readonly from: number[] = [];
  private readonly to: number[] = [];
  /** Seqs hidden before range k. */
  private readonly hiddenBefore: number[] = [];
  /** The row index right after where range k is hidden (the first row shown past it). */
  private readonly rowAt: number[] = [];
  readonly count: number;

  constructor(
    readonly length: number,
    hidden: ReadonlyArray<readonly [number, number]> = [],
  ) {
    const sorted = hidden
      .map(([a, b]) => [Math.max(0, a), Math.min(b, length - 1)] as const)
      .filter(([a, b]) => a <= b)
      .sort((x, y) => x[0] - y[0]);
    let total = 0;
    for (const [a, b] of sorted) {
      const k = this.from.length - 1;
      if (k >= 0 && a <= this.to[k] + 1) {
        // Overlapping or adjacent (a span inside a collapsed one): one range.
        if (b > this.to[k]) {
          total += b - this.to[k];
          this.to[k] = b;
        }
        continue;
      }
      this.from.push(a);
      this.to.push(b);
      this.hiddenBefore.push(total);
      this.rowAt.push(a - total);
      total += b - a + 1;
    }
    this.count = length - total;
  }

  get hidesAny(): boolean {
    return this.from.length > 0;
  }

  /** The seq shown at row `index`. */
  seqAt(index: number): number {
    if (!this.from.length) return index;
    // The last range hidden at or before this row.
    let lo = 0;
    let hi = this.from.length - 1;
    let k = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.rowAt[mid] <= index) {
        k = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return k < 0 ? index : index + this.hiddenBefore[k] + (this.to[k] - this.from[k] + 1);
  }

  /** The row showing `seq`; a hidden seq: the row just before its range (the collapsed span's own). */
  indexOf(seq: number): number {
    let lo = 0;
    let hi = this.from.length - 1;
    let k = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.from[mid] <= seq) {
        k = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    if (k < 0) return seq;
    if (seq <= this.to[k]) return this.rowAt[k] - 1;
    return seq - this.hiddenBefore[k] - (this.to[k] - this.from[k] + 1);
  }

  /** The seqs shown in rows from..to, as runs of consecutive seqs (for fetching their pages, never a hidden range's). */
  seqRuns(fromIndex: number, toIndex: number): Array<[number, number]> {
    const runs: Array<[number, number]> = [];
    const last = Math.min(toIndex, this.count - 1);
    for (let i = Math.max(0, fromIndex); i <= last;) {
      const seq = this.seqAt(i);
      // The run goes on to the next hidden range or the last row asked for.
      const next = this.from.find((a) => a > seq);
      const runEnd = Math.min(next === undefined ? Infinity : next - 1, seq + (last - i));
      runs.push([seq, runEnd]);
      i += runEnd - seq + 1;
    }
    return runs;
  }
}
