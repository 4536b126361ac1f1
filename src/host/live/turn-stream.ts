// sessionTurns from a seq: the turn updates of what the log holds after that
// seq, then live ones, with no gap and nothing twice, whichever order a client
// subscribes and sends in (docs/api.md, "Live turns").
//
// Updates that stand for stored events (a turn or step starting or ending, a
// tool finishing) come from the log, read like sessionEvents: in seq order,
// exactly once. Only what the log does not hold — text as it streams, a tool
// starting or reporting progress — comes from the relay. Which of the
// relay's updates show, and when, agent/streaming-answers.ts decides (the
// same rules as an AG-UI run's): each answer's text once, in order, after the
// results of the calls before it, relay ahead of the log or behind it; an
// answer that was already streaming when the subscription began arrives whole
// when it is stored, and a late copy of a stored answer is dropped.
//
// The log is read as the subscriber reads: the next event only once its queue
// is down to ROOM_UPDATES / ROOM_CHARS (update-queue.ts), so a replay of a turn
// of 200,000 events to a slow client holds one page of the log and a few
// updates, and never cuts it. What the relay pushes cannot wait: past the
// queue's bounds (updates or characters) the subscriber is cut with
// SUBSCRIBER_TOO_SLOW. Relay updates the log has not reached yet (the
// subscriber is behind; an answer not stored yet; a step or answer that never
// comes) are held within half those bounds (streaming-answers.ts).
import type { LogEvent } from '../../core/events.ts';
import { fieldOf } from '../../core/core-event.ts';
import { OpenStepCalls, turnUpdatesRead, type OpenTailReader, type TurnUpdate } from '../../agent/turn-updates.ts';
import { StreamingAnswers } from '../../agent/streaming-answers.ts';
import { MAX_QUEUED_CHARS, MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';
import { mergeDeltas, turnUpdateChars } from './turn-update-relay.ts';

/**
 * Merges the session's event stream (after the subscriber's seq) and its relay
 * subscription into one stream of turn updates. `liveFrom` is the session's
 * event count read after the relay subscription was registered: every step
 * starting at or after it has all of its deltas on the relay. `afterSeq`: the
 * seq the events follow.
 */
export function turnsFromLog(
  sessionId: string,
  events: AsyncIterableIterator<LogEvent>,
  live: AsyncIterableIterator<TurnUpdate>,
  liveFrom: number,
  readOpenTail: OpenTailReader,
  afterSeq = -1,
): AsyncIterableIterator<TurnUpdate> {
  /** The open step's calls, which approval updates name (seeded from the log when the stream starts mid-turn). */
  const calls = new OpenStepCalls();
  /** Which relay updates show now; relay updates the log has not reached yet are held within half the queue's bounds. */
  const answers = new StreamingAnswers({ liveFrom, afterSeq, bounds: { updates: MAX_QUEUED_UPDATES / 2, chars: MAX_QUEUED_CHARS / 2 } });

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

  /**
   * A stream whose first event is inside a step (begun at or before the subscription's seq) learns from the log how
   * many answers the step holds and which of their calls wait for results: the relay's deltas name their answer.
   */
  const joinStep = async (e: LogEvent) => {
    if (e.type === 'step/start' || typeof fieldOf(e, 'step') !== 'number') return;
    const open = await readOpenTail(sessionId, e.seq - 1);
    if (open?.step)
      answers.join(
        open.turn,
        open.step.step,
        open.step.answers,
        open.step.unanswered.map((c) => c.id),
      );
  };
  let first = true;

  const fromLog = async (e: LogEvent) => {
    if (first) {
      first = false;
      await joinStep(e);
    }
    for (const u of await turnUpdatesRead(sessionId, [e], calls, readOpenTail)) out.add(u);
    const { stored, shown } = answers.read(e);
    // The stored answer's text the subscriber was not given.
    if (stored?.rest) out.add({ sessionId, kind: 'TEXT_DELTA', turn: stored.turn, step: stored.step, answer: stored.answer, text: stored.rest });
    for (const u of shown) out.push(u);
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
      for await (const u of live) for (const shown of answers.relay(u)) out.push(shown);
      out.close();
    } catch (err) {
      out.close(err as Error);
    }
  };
  void pumpLog();
  void pumpRelay();
  return out;
}
