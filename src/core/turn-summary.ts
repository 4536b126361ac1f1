// The turns of a log, as the Session.turns field lists them. Pure.
import type { LogEvent } from './events.ts';
import { LogState } from './log-state.ts';

export interface TurnSummary {
  turn: number;
  inputId: string;
  startSeq: number;
  endSeq: number | null;
  /** The turn/end reason; null while the turn is open. */
  reason: string | null;
}

/** Turns in log order, as the reducer brackets them (turn/start and turn/end events are enough). */
export function summarizeTurns(events: Iterable<LogEvent>): TurnSummary[] {
  const turns: TurnSummary[] = [];
  const state = new LogState();
  for (const e of events) {
    const wasOpen = state.openTurn;
    state.apply(e);
    if (e.type === 'turn/start' && state.openTurn === e.data.turn) {
      turns.push({ turn: e.data.turn, inputId: e.data.inputId, startSeq: e.seq, endSeq: null, reason: null });
    } else if (e.type === 'turn/end' && wasOpen !== undefined && state.openTurn === undefined) {
      const t = turns[turns.length - 1];
      t.endSeq = e.seq;
      t.reason = e.data.reason;
    }
  }
  return turns;
}
