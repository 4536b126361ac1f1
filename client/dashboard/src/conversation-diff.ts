// The conversation-level diff of two sessions of one tree (pure, for
// compare-turns.tsx): each log folded into its turns (the input a turn took,
// the model's answers, its tool calls with their result status, how it
// ended), then aligned by turn number, not by seq: turns are numbered per
// lineage, so turn N is the same place in both conversations however many
// events either side wrote before it. A row differs when what a reader sees
// of the turn differs.
import type { LogEvent } from './conversation.ts';

export interface TurnView {
  turn: number;
  /** The input the turn took (null when its inbox/add is before the events folded). */
  input: string | null;
  /** The model's text per step (empty steps left out). */
  answers: string[];
  /** `name(args) → status` per call; `→ …` while it has no result. */
  calls: string[];
  /** turn/end reason; null while open. */
  end: string | null;
  /** The agent's error report of a failed turn. */
  error: string | null;
  /** The model that answered, when a session/model event inside the folded events set it. */
  model: string | null;
  startSeq: number;
  lastSeq: number;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));

/** The turns of `events` (a contiguous run of one log), in order. Inputs added before the run are looked up in `inputs`. */
export function turnsOf(events: readonly LogEvent[]): TurnView[] {
  const inputs = new Map<string, string>();
  const turns: TurnView[] = [];
  const calls = new Map<string, { turn: TurnView; index: number; text: string }>();
  let model: string | null = null;
  let open: TurnView | null = null;
  for (const e of events) {
    const d = (e.data ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case 'inbox/add':
        inputs.set(str(d.inputId), str(d.text));
        break;
      case 'session/model':
        model = `${str(d.provider)}/${str(d.model)}`;
        break;
      case 'turn/start':
        open = {
          turn: Number(d.turn),
          input: inputs.get(str(d.inputId)) ?? null,
          answers: [],
          calls: [],
          end: null,
          error: null,
          model,
          startSeq: e.seq,
          lastSeq: e.seq,
        };
        turns.push(open);
        break;
      case 'model/message':
        if (!open) break;
        if (str(d.text)) open.answers.push(str(d.text));
        for (const c of Array.isArray(d.toolCalls) ? (d.toolCalls as Array<Record<string, unknown>>) : []) {
          const text = `${str(c.name)}(${str(c.arguments)})`;
          calls.set(str(c.id), { turn: open, index: open.calls.length, text });
          open.calls.push(`${text} → …`);
        }
        break;
      case 'tool/result': {
        const call = calls.get(str(d.callId));
        if (call) call.turn.calls[call.index] = `${call.text} → ${str(d.status)}`;
        break;
      }
      case 'plugin/agent/error':
        if (open) open.error = str(d.message);
        break;
      case 'turn/end':
        if (open) open.end = str(d.reason);
        break;
    }
    if (open) open.lastSeq = e.seq;
    if (e.type === 'turn/end') open = null;
  }
  return turns;
}

export interface TurnRow {
  turn: number;
  left: TurnView | undefined;
  right: TurnView | undefined;
  same: boolean;
}

/** What a reader compares: the model is shown, not compared (a variant may change it on purpose and answer alike). */
const shape = (t: TurnView | undefined) => (t ? JSON.stringify([t.input, t.answers, t.calls, t.end, t.error]) : '');

/** Rows by turn number over both sides, each marked same or different. */
export function alignTurns(left: readonly TurnView[], right: readonly TurnView[]): TurnRow[] {
  const byTurn = (list: readonly TurnView[]) => new Map(list.map((t) => [t.turn, t]));
  const l = byTurn(left);
  const r = byTurn(right);
  const numbers = [...new Set([...l.keys(), ...r.keys()])].sort((a, b) => a - b);
  return numbers.map((turn) => ({ turn, left: l.get(turn), right: r.get(turn), same: shape(l.get(turn)) === shape(r.get(turn)) }));
}

/** Where a side's fold starts: the last turn/start at or before `seq` in `events` (a run ending at or after it), else `seq`. */
export function turnStartAtOrBefore(events: readonly LogEvent[], seq: number): number | undefined {
  for (let i = events.length - 1; i >= 0; i--) if (events[i].seq <= seq && events[i].type === 'turn/start') return events[i].seq;
  return undefined;
}

/** The difference to move to from `current` (an index into `rows`, -1: none yet) in direction `step`, or -1. */
export function nextDifference(rows: readonly TurnRow[], current: number, step: 1 | -1): number {
  for (let i = current + step; i >= 0 && i < rows.length; i += step) if (!rows[i].same) return i;
  return -1;
}

/**
 * A side folded only up to a point (a long tail is compared a window at a
 * time) knows its turns through `lastTurn` at most: rows past the lowest such
 * limit are left out rather than shown as missing on that side.
 */
export function rowsThrough(rows: readonly TurnRow[], limits: ReadonlyArray<number | undefined>): TurnRow[] {
  const known = limits.filter((l): l is number => l !== undefined);
  if (!known.length) return [...rows];
  const limit = Math.min(...known);
  return rows.filter((r) => r.turn <= limit);
}
