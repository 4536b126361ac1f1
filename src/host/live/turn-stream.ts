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
// nothing and its answer's text arrives at once when it is stored.
import type { LogEvent } from '../../core/events.ts';
import { asCoreEvent } from '../../core/core-event.ts';
import { OpenStepCalls, turnUpdatesRead, type OpenTailReader, type TurnUpdate } from '../../agent/turn-updates.ts';
import { MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';
import { mergeDeltas } from './turn-update-relay.ts';

/** Kinds the log does not hold: the only ones taken from the relay. */
const LIVE_ONLY = new Set<TurnUpdate['kind']>(['TEXT_DELTA', 'TOOL_RUNNING', 'TOOL_PROGRESS']);

interface StepSeen {
  /** Seq of its step/start; -1 when the step began at or before the subscription's seq. */
  startSeq: number;
  /** Text the subscriber has been given for it so far. */
  given: string;
  /** Its model/message is stored: its text is complete. */
  answered: boolean;
}

const stepKey = (turn: number, step: number | undefined) => `${turn}:${step ?? 0}`;

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
  /** Relay updates of steps the log has not shown yet, oldest first. */
  let held: TurnUpdate[] = [];

  const out: UpdateQueue<TurnUpdate> = new UpdateQueue<TurnUpdate>({
    max: MAX_QUEUED_UPDATES,
    merge: mergeDeltas,
    onClose: () => {
      void events.return?.();
      void live.return?.();
    },
  });

  const fromRelay = (u: TurnUpdate) => {
    if (!LIVE_ONLY.has(u.kind)) return; // the log delivers these
    if (u.callId && finishedCalls.has(u.callId)) return;
    const seen = steps.get(stepKey(u.turn, u.step));
    if (!seen) {
      if (held.length >= MAX_QUEUED_UPDATES) held.shift();
      held.push(u);
      return;
    }
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
    held = keep;
    for (const u of route) fromRelay(u);
  };

  const fromLog = async (e: LogEvent) => {
    for (const u of await turnUpdatesRead(sessionId, [e], calls, readOpenTail)) out.push(u);
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
        if (text.length > seen.given.length && text.startsWith(seen.given)) {
          out.push({ sessionId, kind: 'TEXT_DELTA', turn: d.turn, step: d.step, text: text.slice(seen.given.length) });
        }
        steps.set(key, { ...seen, given: text, answered: true });
        release(d.turn, d.step);
        break;
      }
      case 'tool/result': {
        const { callId } = ev.data;
        finishedCalls.add(callId);
        held = held.filter((u) => u.callId !== callId);
        break;
      }
      case 'turn/end':
        for (const key of steps.keys()) if (key.startsWith(`${ev.data.turn}:`)) steps.delete(key);
        finishedCalls.clear();
        release(ev.data.turn, undefined, true);
        break;
    }
  };

  const pump = async <T>(source: AsyncIterableIterator<T>, each: (item: T) => void | Promise<void>) => {
    try {
      for await (const item of source) await each(item);
      out.close();
    } catch (err) {
      out.close(err as Error);
    }
  };
  void pump(events, fromLog);
  void pump(live, fromRelay);
  return out;
}
