// sessionTurns from a seq: the turn updates of what the log holds after that
// seq, then live ones, with no gap and nothing twice, whichever order a client
// subscribes and sends in (docs/api.md, "Live turns").
//
// Updates that stand for stored events (a turn or step starting or ending, a
// tool finishing) come from the log, read like sessionEvents: in seq order,
// exactly once. Only what the log does not hold — text as it streams, a tool
// starting or reporting progress — comes from the relay. An answer's text is
// delivered whole: its deltas when the subscriber saw every one of them, then
// whatever of the stored answer they did not carry; an answer that was
// already streaming when the subscription began streams nothing and its text
// arrives at once when it is stored. A step may hold several answers (a model
// called again within it): a delta names its answer (TurnUpdate.answer, 1 by
// default), and each answer's deltas are taken once the log has shown the
// answer before it and that answer's results, so each answer's text comes
// once, in order, after the results of the calls before it, whether the relay
// runs ahead of the log or behind it. The subscriber saw every delta of the
// step's first answer when the step started after the relay subscription was
// registered, and of a later one when the answer before it was stored after
// that (a runner streams the next answer once the one before it is stored).
// Deltas of an answer already stored, or of a step that has ended, are
// dropped: the stored answer brought the text. (Deltas that do not name
// their answer and run past the stored one's text were the next answer's
// beginning: that answer's stored text is then sent less it.)
//
// The log is read as the subscriber reads: the next event only once its queue
// is down to ROOM_UPDATES / ROOM_CHARS (update-queue.ts), so a replay of a turn
// of 200,000 events to a slow client holds one page of the log and a few
// updates, and never cuts it. What the relay pushes cannot wait: past the
// queue's bounds (updates or characters) the subscriber is cut with
// SUBSCRIBER_TOO_SLOW. Relay updates the log has not reached yet (the
// subscriber is behind; an answer not stored yet; a step or answer that never
// comes) are held within half those bounds, an answer's adjacent deltas
// merged; past them the oldest are dropped, an answer's text deltas all at
// once (its stored answer then brings its whole text).
import type { LogEvent } from '../../core/events.ts';
import { asCoreEvent, fieldOf } from '../../core/core-event.ts';
import { answerOf, OpenStepCalls, turnUpdatesRead, type OpenTailReader, type TurnUpdate } from '../../agent/turn-updates.ts';
import { MAX_QUEUED_CHARS, MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';
import { mergeDeltas, turnUpdateChars } from './turn-update-relay.ts';

/** Kinds the log does not hold: the only ones taken from the relay. */
const LIVE_ONLY = new Set<TurnUpdate['kind']>(['TEXT_DELTA', 'TOOL_RUNNING', 'TOOL_PROGRESS']);

interface StepSeen {
  /** Its answers the log has shown (model/message events read). */
  stored: number;
  /** Whether the relay's deltas of its next answer (stored + 1) are taken: the subscriber saw every one of them. */
  streams: boolean;
  /** Text the subscriber has been given of its next answer. */
  given: string;
  /** Calls of its last stored answer with no result read yet: the next answer's deltas wait for those results. */
  waiting: Set<string>;
  /** Its step/end is read: no more of its text is taken. */
  ended: boolean;
  /** Its runner names its deltas' answers: what the relay gives past a stored answer's text is not the next's. */
  named: boolean;
}

const stepKey = (turn: number, step: number | undefined) => `${turn}:${step ?? 0}`;
const answerKey = (u: TurnUpdate) => `${stepKey(u.turn, u.step)}:${answerOf(u)}`;

/** Relay updates held for steps the log has not shown: at most this many, and characters of them. */
const HELD_UPDATES = MAX_QUEUED_UPDATES / 2;
const HELD_CHARS = MAX_QUEUED_CHARS / 2;

/**
 * Merges the session's event stream (after the subscriber's seq) and its relay
 * subscription into one stream of turn updates. `liveFrom` is the session's
 * event count read after the relay subscription was registered: every step
 * starting at or after it has all of its deltas on the relay.
 */
export function turnsFromLog(
  sessionId: string,
  events: AsyncIterableIterator<LogEvent>,
  live: AsyncIterableIterator<TurnUpdate>,
  liveFrom: number,
  readOpenTail: OpenTailReader,
): AsyncIterableIterator<TurnUpdate> {
  const steps = new Map<string, StepSeen>();
  /** The open step's calls, which approval updates name (seeded from the log when the stream starts mid-turn). */
  const calls = new OpenStepCalls();
  const finishedCalls = new Set<string>();
  /** Relay updates of steps the log has not shown yet, oldest first, and their characters. */
  let held: TurnUpdate[] = [];
  let heldChars = 0;
  /** Answers (answerKey) some of whose deltas were dropped from `held`: their stored answers bring their text, whole. */
  const textDropped = new Set<string>();

  const out: UpdateQueue<TurnUpdate> = new UpdateQueue<TurnUpdate>({
    max: MAX_QUEUED_UPDATES,
    maxChars: MAX_QUEUED_CHARS,
    weigh: turnUpdateChars,
    merge: mergeDeltas,
    onClose: () => {
      void events.return?.();
      void live.return?.();
    },
  });

  const hold = (u: TurnUpdate) => {
    const last = held.at(-1);
    const merged = last && mergeDeltas(last, u);
    if (merged) {
      held[held.length - 1] = merged;
      heldChars += turnUpdateChars(merged) - turnUpdateChars(last);
    } else {
      held.push(u);
      heldChars += turnUpdateChars(u);
    }
    while (held.length > HELD_UPDATES || heldChars > HELD_CHARS) {
      const dropped = held[0];
      if (dropped.kind === 'TEXT_DELTA') {
        // Part of an answer's deltas would garble its text: none of them, and its stored answer brings it.
        const key = answerKey(dropped);
        textDropped.add(key);
        setHeld(held.filter((h) => h.kind !== 'TEXT_DELTA' || answerKey(h) !== key));
      } else setHeld(held.slice(1));
    }
  };
  const setHeld = (keep: TurnUpdate[]) => {
    held = keep;
    heldChars = keep.reduce((n, h) => n + turnUpdateChars(h), 0);
  };

  const fromRelay = (u: TurnUpdate) => {
    if (!LIVE_ONLY.has(u.kind)) return; // the log delivers these
    if (u.callId && finishedCalls.has(u.callId)) return;
    const seen = steps.get(stepKey(u.turn, u.step));
    if (u.kind !== 'TEXT_DELTA') return seen ? out.push(u) : hold(u);
    const answer = answerOf(u);
    if (textDropped.has(answerKey(u)) || seen?.ended || (seen && answer <= seen.stored)) return; // its stored answer brings (or brought) the text
    // The log has not shown the answer before it, or that answer's results: it waits for them.
    if (!seen || answer > seen.stored + 1 || seen.waiting.size) return hold(u);
    if (!seen.streams) return; // some of its deltas came before the subscription: its stored answer brings the text
    if (u.answer !== undefined) seen.named = true;
    seen.given += u.text ?? '';
    out.push(u);
  };

  /** Held updates whose step is now known are routed; those of steps the log moved past are dropped. */
  const release = (turn: number, step: number | undefined, turnEnded = false) => {
    const keep: TurnUpdate[] = [];
    const route: TurnUpdate[] = [];
    for (const u of held) {
      if (u.turn === turn && (u.step ?? 0) === (step ?? 0) && !turnEnded) route.push(u);
      else if (u.turn < turn || (u.turn === turn && (turnEnded || (u.step ?? 0) < (step ?? 0)))) continue;
      else keep.push(u);
    }
    setHeld(keep);
    for (const u of route) fromRelay(u);
  };

  /**
   * A stream whose first event is inside a step (begun at or before the subscription's seq) learns from the log how
   * many answers the step holds and which of their calls wait for results: the relay's deltas name their answer.
   */
  const joinStep = async (e: LogEvent) => {
    if (e.type === 'step/start' || typeof fieldOf(e, 'step') !== 'number') return;
    const open = await readOpenTail(sessionId, e.seq - 1);
    if (!open?.step) return;
    const waiting = new Set(open.step.unanswered.map((c) => c.id));
    steps.set(stepKey(open.turn, open.step.step), { stored: open.step.answers, streams: false, given: '', waiting, ended: false, named: false });
  };
  let first = true;

  const fromLog = async (e: LogEvent) => {
    if (first) {
      first = false;
      await joinStep(e);
    }
    for (const u of await turnUpdatesRead(sessionId, [e], calls, readOpenTail)) out.add(u);
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'step/start': {
        const d = ev.data;
        steps.set(stepKey(d.turn, d.step), { stored: 0, streams: e.seq >= liveFrom, given: '', waiting: new Set(), ended: false, named: false });
        release(d.turn, d.step);
        break;
      }
      case 'model/message': {
        const d = ev.data;
        const key = stepKey(d.turn, d.step);
        // A step begun at or before the subscription's seq: the log shows its answers from here.
        const seen = steps.get(key) ?? { stored: 0, streams: false, given: '', waiting: new Set(), ended: false, named: false };
        const answer = seen.stored + 1;
        const text = d.text ?? '';
        // What the step's next answer has been given: nothing, unless deltas that did not name their answer ran
        // past this answer's text into the next's before the log showed this answer.
        let next = '';
        if (text.startsWith(seen.given)) {
          if (text.length > seen.given.length)
            out.add({ sessionId, kind: 'TEXT_DELTA', turn: d.turn, step: d.step, answer, text: text.slice(seen.given.length) });
        } else if (!seen.named && seen.given.startsWith(text)) next = seen.given.slice(text.length);
        const waiting = new Set(d.toolCalls.map((c) => c.id));
        steps.set(key, { stored: answer, streams: e.seq >= liveFrom, given: next, waiting, ended: seen.ended, named: seen.named });
        release(d.turn, d.step);
        break;
      }
      case 'tool/result': {
        const { callId, turn, step } = ev.data;
        finishedCalls.add(callId);
        setHeld(held.filter((u) => u.callId !== callId));
        const seen = steps.get(stepKey(turn, step));
        if (seen?.waiting.delete(callId) && seen.waiting.size === 0) release(turn, step);
        break;
      }
      case 'step/end': {
        const d = ev.data;
        const key = stepKey(d.turn, d.step);
        const seen = steps.get(key);
        if (seen) seen.ended = true;
        else steps.set(key, { stored: 0, streams: false, given: '', waiting: new Set(), ended: true, named: false });
        setHeld(held.filter((u) => u.kind !== 'TEXT_DELTA' || stepKey(u.turn, u.step) !== key));
        break;
      }
      case 'turn/end':
        for (const key of steps.keys()) if (key.startsWith(`${ev.data.turn}:`)) steps.delete(key);
        for (const key of textDropped) if (key.startsWith(`${ev.data.turn}:`)) textDropped.delete(key);
        finishedCalls.clear();
        release(ev.data.turn, undefined, true);
        break;
    }
  };

  // The log's next event is read once the reader has taken what was queued (room()); the relay's are taken as they come.
  const pumpLog = async () => {
    try {
      for (;;) {
        const wait = out.room();
        if (wait) await wait;
        if (out.ended) return;
        const read = await events.next();
        if (read.done) break;
        await fromLog(read.value);
      }
      out.close();
    } catch (err) {
      out.close(err as Error);
    }
  };
  const pumpRelay = async () => {
    try {
      for await (const u of live) fromRelay(u);
      out.close();
    } catch (err) {
      out.close(err as Error);
    }
  };
  void pumpLog();
  void pumpRelay();
  return out;
}
