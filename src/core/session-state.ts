// Ordinary replay of a log: what is pending, which turn comes next, which model
// is configured. Pure; used by the agent loop and the GraphQL fields.
import type { EventData, LogEvent } from './events.ts';

export interface PendingInput {
  inputId: string;
  text: string;
  seq: number;
}

export interface SessionState {
  /** Inputs added and not removed, in arrival order. */
  pendingInputs: PendingInput[];
  /** Highest turn number started in this lineage (0: none). */
  lastTurn: number;
  /** The open turn, if the log ends inside one. */
  openTurn?: number;
  model?: EventData<'session/model'>;
  title?: string;
}

export function replaySession(events: Iterable<LogEvent>): SessionState {
  const pending = new Map<string, PendingInput>();
  const state: SessionState = { pendingInputs: [], lastTurn: 0 };
  for (const e of events) {
    switch (e.type) {
      case 'inbox/add':
        pending.set(e.data.inputId, { inputId: e.data.inputId, text: e.data.text, seq: e.seq });
        break;
      case 'inbox/remove':
        pending.delete(e.data.inputId);
        break;
      case 'turn/start':
        state.lastTurn = Math.max(state.lastTurn, e.data.turn);
        state.openTurn = e.data.turn;
        break;
      case 'turn/end':
        if (state.openTurn === e.data.turn) state.openTurn = undefined;
        break;
      case 'session/model':
        state.model = e.data;
        break;
      case 'session/title':
        state.title = e.data.title;
        break;
    }
  }
  state.pendingInputs = [...pending.values()].sort((a, b) => a.seq - b.seq);
  return state;
}

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
