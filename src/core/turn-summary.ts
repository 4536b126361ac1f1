// The turns of a log, as the Session.turns field lists them. Pure.
import type { LogEvent } from './events.ts';

export interface TurnSummary {
  turn: number;
  inputId: string;
  startSeq: number;
  endSeq: number | null;
  /** The turn/end reason; null while the turn is open. */
  reason: string | null;
}

/** Turns in log order, from turn/start and turn/end events (others are ignored). */
export function summarizeTurns(events: Iterable<LogEvent>): TurnSummary[] {
  const turns: TurnSummary[] = [];
  const open = new Map<number, TurnSummary>();
  for (const e of events) {
    if (e.type === 'turn/start') {
      const t: TurnSummary = { turn: e.data.turn, inputId: e.data.inputId, startSeq: e.seq, endSeq: null, reason: null };
      turns.push(t);
      open.set(t.turn, t);
    } else if (e.type === 'turn/end') {
      const t = open.get(e.data.turn);
      if (t) {
        t.endSeq = e.seq;
        t.reason = e.data.reason;
        open.delete(t.turn);
      }
    }
  }
  return turns;
}
