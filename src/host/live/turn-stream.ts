// sessionTurns from a seq: the turn updates of what the log holds after that
// seq, then live ones, with no gap and nothing twice, whichever order a client
// subscribes and sends in (docs/api.md, "Live turns").
//
// Updates that stand for stored events (a turn or step starting or ending, a
// tool finishing) come from the log, read like sessionEvents: in seq order,
// exactly once. Only what the log does not hold — text as it streams, a tool
// starting or reporting progress — comes from the relay. A step's text is
// delivered whole: its deltas when the subscriber saw every one of them (the
// step started after the relay subscription was registered), then whatever of
// the stored answer they did not carry; a step that began earlier streams
// nothing and its answer's text arrives at once when it is stored. A step may
// hold several answers (docs/api.md, "Live turns"): each one's text is
// delivered, in order, once, as the step's next deltas, as the relay streams
// them. After the step's first stored answer the relay's deltas are not taken
// (they may be late copies of it): each later answer's text arrives when it is
// stored, less what the relay gave of it before the log showed the answer
// before it.
//
// The log is read as the subscriber reads: the next event only once its queue
// is down to ROOM_UPDATES / ROOM_CHARS (update-queue.ts), so a replay of a turn
// of 200,000 events to a slow client holds one page of the log and a few
// updates, and never cuts it. What the relay pushes cannot wait: past the
// queue's bounds (updates or characters) the subscriber is cut with
// SUBSCRIBER_TOO_SLOW. Relay updates of steps the log has not reached yet
// (the subscriber is behind) are held within half those bounds; past them the
// oldest are dropped, a step's text deltas all at once (its stored answer then
// brings its whole text).
import type { LogEvent } from '../../core/events.ts';
import { asCoreEvent } from '../../core/core-event.ts';
import { OpenStepCalls, turnUpdatesRead, type OpenTailReader, type TurnUpdate } from '../../agent/turn-updates.ts';
import { MAX_QUEUED_CHARS, MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';
import { mergeDeltas, turnUpdateChars } from './turn-update-relay.ts';

/** Kinds the log does not hold: the only ones taken from the relay. */
const LIVE_ONLY = new Set<TurnUpdate['kind']>(['TEXT_DELTA', 'TOOL_RUNNING', 'TOOL_PROGRESS']);

interface StepSeen {
  /** Seq of its step/start; -1 when the step began at or before the subscription's seq. */
  startSeq: number;
  /** Text the subscriber has been given of its answer not stored yet. */
  given: string;
  /** A model/message of it is stored: the relay's deltas are no longer taken. */
  answered: boolean;
}

const stepKey = (turn: number, step: number | undefined) => `${turn}:${step ?? 0}`;

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
  /** Steps some of whose deltas were dropped from `held`: their stored answers bring their text, whole. */
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
    held.push(u);
    heldChars += turnUpdateChars(u);
    while (held.length > HELD_UPDATES || heldChars > HELD_CHARS) {
      const dropped = held[0];
      if (dropped.kind === 'TEXT_DELTA') {
        // Part of a step's deltas would garble its text: none of them, and its stored answer brings it.
        const key = stepKey(dropped.turn, dropped.step);
        textDropped.add(key);
        setHeld(held.filter((h) => h.kind !== 'TEXT_DELTA' || stepKey(h.turn, h.step) !== key));
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
    const key = stepKey(u.turn, u.step);
    if (u.kind === 'TEXT_DELTA' && textDropped.has(key)) return;
    const seen = steps.get(key);
    if (!seen) return hold(u);
    if (u.kind !== 'TEXT_DELTA') return out.push(u);
    if (seen.answered || seen.startSeq < liveFrom) return; // the stored answer brings (or brought) the text
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

  const fromLog = async (e: LogEvent) => {
    for (const u of await turnUpdatesRead(sessionId, [e], calls, readOpenTail)) out.add(u);
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'step/start': {
        const d = ev.data;
        steps.set(stepKey(d.turn, d.step), { startSeq: e.seq, given: '', answered: false });
        release(d.turn, d.step);
        break;
      }
      case 'model/message': {
        const d = ev.data;
        const key = stepKey(d.turn, d.step);
        const seen = steps.get(key) ?? { startSeq: -1, given: '', answered: false };
        const text = d.text ?? '';
        // What the step's next answer (a model called again within it) has been given: nothing, unless the relay's
        // deltas ran past this answer's text into the next's before the log showed this answer.
        let next = '';
        if (text.startsWith(seen.given)) {
          if (text.length > seen.given.length) out.add({ sessionId, kind: 'TEXT_DELTA', turn: d.turn, step: d.step, text: text.slice(seen.given.length) });
        } else if (seen.given.startsWith(text)) next = seen.given.slice(text.length);
        steps.set(key, { ...seen, given: next, answered: true });
        release(d.turn, d.step);
        break;
      }
      case 'tool/result': {
        const { callId } = ev.data;
        finishedCalls.add(callId);
        setHeld(held.filter((u) => u.callId !== callId));
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
