// Which text of a turn's answers a reader may show now, for a reader that
// merges the session's log with the turn relay (docs/api.md, "Live turns"):
// sessionTurns from a seq and /chat (host/live/turn-stream.ts), and an AG-UI
// run (agui/agui-events.ts). Pure: the caller reads the log and the relay,
// in whatever order they come, and shows what this says.
//
// A step may hold several answers (a model called again within it): a text
// delta names its answer (TurnUpdate.answer, 1 by default), and each answer's
// deltas are shown once the log has shown the answer before it and that
// answer's calls' results, so each answer's text comes once, in order, after
// the results of the calls before it, whether the relay runs ahead of the log
// or behind it. The reader saw every delta of a step's first answer when the
// step started at or after `liveFrom` (the log's length once the relay
// subscription was registered), and of a later one when the answer before it
// was stored then (a runner streams the next answer once the one before it is
// stored); otherwise the answer's text comes whole, once it is stored.
// Deltas of an answer already stored, or of a step that has ended, are late
// copies: dropped (the stored answer brought the text). A delta stamped with
// the log's length when it was relayed (TurnUpdate.eventCount) waits until
// the reader has read that far: an answer stored by then makes it a late copy
// even to a reader that lags behind the log. (Deltas that do not name their
// answer and run past the stored one's text were the next answer's
// beginning: that answer's stored text is then sent less it.)
//
// Relay updates the log has not reached yet are held within `bounds`, and
// stamped deltas waiting for the reader to read as far within `bounds` again,
// an answer's adjacent deltas merged; past them the oldest are dropped, an
// answer's text deltas all at once (its stored answer then brings its whole
// text).
import type { LogEvent } from '../core/events.ts';
import { asCoreEvent } from '../core/core-event.ts';
import { answerOf, mergeDeltas, turnUpdateChars, type TurnUpdate } from './turn-updates.ts';

/** Kinds the log does not hold: the only ones taken from the relay. */
const LIVE_ONLY = new Set<TurnUpdate['kind']>(['TEXT_DELTA', 'TOOL_RUNNING', 'TOOL_PROGRESS']);

interface StepSeen {
  /** Its answers the log has shown (model/message events read). */
  stored: number;
  /** Whether the relay's deltas of its next answer (stored + 1) are taken: the reader saw every one of them. */
  streams: boolean;
  /** Text the reader has been given of its next answer. */
  given: string;
  /** Calls of its last stored answer with no result read yet: the next answer's deltas wait for those results. */
  waiting: Set<string>;
  /** Its step/end is read: no more of its text is taken. */
  ended: boolean;
  /** Its runner names its deltas' answers: what the relay gives past a stored answer's text is not the next's. */
  named: boolean;
}

/** What held relay updates may cost: updates, and their characters (turnUpdateChars). */
export interface HeldBounds {
  updates: number;
  chars: number;
}

/** An answer the log showed: its number in its step, and the part of its text the reader was not given. */
export interface StoredAnswer {
  turn: number;
  step: number;
  answer: number;
  rest: string;
}

const stepKey = (turn: number, step: number | undefined) => `${turn}:${step ?? 0}`;
const answerKey = (u: TurnUpdate) => `${stepKey(u.turn, u.step)}:${answerOf(u)}`;
const fresh = (over: Partial<StepSeen> = {}): StepSeen => ({ stored: 0, streams: false, given: '', waiting: new Set(), ended: false, named: false, ...over });

/** Relay updates kept in order within bounds; past them the oldest go, an answer's text deltas all at once (`dropText`). */
class HeldUpdates {
  items: TurnUpdate[] = [];
  private chars = 0;

  constructor(
    private readonly bounds: HeldBounds,
    private readonly dropText: (key: string) => void,
  ) {}

  add(u: TurnUpdate): void {
    const last = this.items.at(-1);
    const merged = last && mergeDeltas(last, u);
    if (merged) {
      this.items[this.items.length - 1] = merged;
      this.chars += turnUpdateChars(merged) - turnUpdateChars(last);
    } else {
      this.items.push(u);
      this.chars += turnUpdateChars(u);
    }
    while (this.items.length > this.bounds.updates || this.chars > this.bounds.chars) {
      const dropped = this.items[0];
      if (dropped.kind === 'TEXT_DELTA') {
        // Part of an answer's deltas would garble its text: none of them, and its stored answer brings it.
        const key = answerKey(dropped);
        this.dropText(key);
        this.keep((h) => h.kind !== 'TEXT_DELTA' || answerKey(h) !== key);
      } else this.keep((_h, i) => i > 0);
    }
  }

  keep(which: (u: TurnUpdate, i: number) => boolean): void {
    this.items = this.items.filter(which);
    this.chars = this.items.reduce((n, h) => n + turnUpdateChars(h), 0);
  }

  /** Takes the updates from the front while `ready` says so. */
  takeWhile(ready: (u: TurnUpdate) => boolean): TurnUpdate[] {
    let n = 0;
    while (n < this.items.length && ready(this.items[n])) n++;
    const taken = this.items.slice(0, n);
    if (n) this.keep((_h, i) => i >= n);
    return taken;
  }
}

/**
 * The state of a reader's turns: each step's answers stored, the calls the next answer waits for, the text given,
 * and the relay updates held until the log shows what they follow. `afterSeq`: the last seq the reader had read
 * when it started (it reads the log after it).
 */
export class StreamingAnswers {
  private readonly steps = new Map<string, StepSeen>();
  private readonly finishedCalls = new Set<string>();
  /** Relay updates of steps (or answers) the log has not shown yet, oldest first. */
  private readonly held: HeldUpdates;
  /** Deltas relayed after the log's length the reader has read (TurnUpdate.eventCount), oldest first: routed once it has. */
  private readonly ahead: HeldUpdates;
  /** Answers (answerKey) some of whose deltas were dropped from what was held: their stored answers bring their text, whole. */
  private readonly textDropped = new Set<string>();
  /** The log's length when the relay subscription was registered: a step or answer begun from there streams. */
  private readonly liveFrom: number;
  /** The last seq the reader has read. */
  private readThrough: number;

  constructor(opts: { liveFrom: number; afterSeq: number; bounds: HeldBounds }) {
    this.liveFrom = opts.liveFrom;
    this.readThrough = opts.afterSeq;
    const dropText = (key: string) => void this.textDropped.add(key);
    this.held = new HeldUpdates(opts.bounds, dropText);
    this.ahead = new HeldUpdates(opts.bounds, dropText);
  }

  /**
   * The reader starts inside a step (the log before its first event holds `answers` of it, their calls `unanswered`
   * waiting for results): the relay's deltas name their answer; the step's next answer began before the reader did.
   */
  join(turn: number, step: number, answers: number, unanswered: readonly string[]): void {
    this.steps.set(stepKey(turn, step), fresh({ stored: answers, waiting: new Set(unanswered) }));
  }

  /** A relay update: the live updates to show now, in order (none: held, or the log brings it). */
  relay(u: TurnUpdate): TurnUpdate[] {
    const out: TurnUpdate[] = [];
    if (u.kind === 'TEXT_DELTA' && (this.ahead.items.length || (u.eventCount !== undefined && u.eventCount - 1 > this.readThrough))) this.ahead.add(u);
    else this.route(u, out);
    return out;
  }

  /**
   * A log event read, in seq order: the answer it stores (with the part of its text the reader was not given), and
   * the held relay updates it lets through, in order.
   */
  read(e: LogEvent): { stored?: StoredAnswer; shown: TurnUpdate[] } {
    const shown: TurnUpdate[] = [];
    let stored: StoredAnswer | undefined;
    this.readThrough = Math.max(this.readThrough, e.seq);
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'step/start': {
        const d = ev.data;
        this.steps.set(stepKey(d.turn, d.step), fresh({ streams: e.seq >= this.liveFrom }));
        this.release(d.turn, d.step, shown);
        break;
      }
      case 'model/message': {
        const d = ev.data;
        const key = stepKey(d.turn, d.step);
        // A step begun before the reader's first event: the log shows its answers from here.
        const seen = this.steps.get(key) ?? fresh();
        const answer = seen.stored + 1;
        const text = d.text ?? '';
        // What the step's next answer has been given: nothing, unless deltas that did not name their answer ran
        // past this answer's text into the next's before the log showed this answer.
        let next = '';
        let rest = '';
        if (text.startsWith(seen.given)) rest = text.slice(seen.given.length);
        else if (!seen.named && seen.given.startsWith(text)) next = seen.given.slice(text.length);
        stored = { turn: d.turn, step: d.step, answer, rest };
        const waiting = new Set(d.toolCalls.map((c) => c.id));
        this.steps.set(key, { stored: answer, streams: e.seq >= this.liveFrom, given: next, waiting, ended: seen.ended, named: seen.named });
        this.release(d.turn, d.step, shown);
        break;
      }
      case 'tool/result': {
        const { callId, turn, step } = ev.data;
        this.finishedCalls.add(callId);
        this.held.keep((u) => u.callId !== callId);
        const seen = this.steps.get(stepKey(turn, step));
        if (seen?.waiting.delete(callId) && seen.waiting.size === 0) this.release(turn, step, shown);
        break;
      }
      case 'step/end': {
        const d = ev.data;
        const key = stepKey(d.turn, d.step);
        const seen = this.steps.get(key);
        if (seen) seen.ended = true;
        else this.steps.set(key, fresh({ ended: true }));
        this.held.keep((u) => u.kind !== 'TEXT_DELTA' || stepKey(u.turn, u.step) !== key);
        break;
      }
      case 'turn/end': {
        const turn = `${ev.data.turn}:`;
        for (const key of this.steps.keys()) if (key.startsWith(turn)) this.steps.delete(key);
        for (const key of this.textDropped) if (key.startsWith(turn)) this.textDropped.delete(key);
        this.finishedCalls.clear();
        this.release(ev.data.turn, undefined, shown, true);
        break;
      }
      default:
        break;
    }
    // Deltas relayed after what the reader had read: routed now that it has read as far (a late copy is dropped).
    for (const u of this.ahead.takeWhile((d) => (d.eventCount ?? 0) - 1 <= this.readThrough)) this.route(u, shown);
    return { ...(stored ? { stored } : {}), shown };
  }

  /** Shows a relay update (into `out`), holds it until the log shows what it follows, or drops it. */
  private route(u: TurnUpdate, out: TurnUpdate[]): void {
    if (!LIVE_ONLY.has(u.kind)) return; // the log delivers these
    if (u.callId && this.finishedCalls.has(u.callId)) return;
    const seen = this.steps.get(stepKey(u.turn, u.step));
    if (u.kind !== 'TEXT_DELTA') return seen ? void out.push(u) : this.held.add(u);
    const answer = answerOf(u);
    if (this.textDropped.has(answerKey(u)) || seen?.ended || (seen && answer <= seen.stored)) return; // its stored answer brings (or brought) the text
    // The log has not shown the answer before it, or that answer's results: it waits for them.
    if (!seen || answer > seen.stored + 1 || seen.waiting.size) return this.held.add(u);
    if (!seen.streams) return; // some of its deltas came before the reader did: its stored answer brings the text
    if (u.answer !== undefined) seen.named = true;
    seen.given += u.text ?? '';
    out.push(u);
  }

  /** Held updates whose step is now known are routed; those of steps the log moved past are dropped. */
  private release(turn: number, step: number | undefined, out: TurnUpdate[], turnEnded = false): void {
    const route: TurnUpdate[] = [];
    this.held.keep((u) => {
      const now = u.turn === turn && (u.step ?? 0) === (step ?? 0) && !turnEnded;
      if (now) route.push(u);
      const past = u.turn < turn || (u.turn === turn && (turnEnded || (u.step ?? 0) < (step ?? 0)));
      return !now && !past;
    });
    for (const u of route) this.route(u, out);
  }
}
