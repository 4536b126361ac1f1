// The turns of a log, as the Session.turns field lists them. Pure.
import type { LogEvent } from './events.ts';
import { LogState } from './log-state.ts';
import { asCoreEvent } from './core-event.ts';

export interface TurnSummary {
  turn: number;
  inputId: string;
  startSeq: number;
  endSeq: number | null;
  /** The turn/end reason; null while the turn is open. */
  reason: string | null;
  /** When its turn/start and turn/end were stored (when the events carry their times). */
  startedAt?: Date;
  endedAt?: Date;
}

/** Tokens as the provider reported them; a sum over answers (absent counts add nothing). */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  /** US dollars by the price table when the answers were written; null when no answer's model had a price. */
  costUsd: number | null;
}

export interface StepSummary {
  step: number;
  startSeq: number;
  endSeq: number | null;
  /** The step/end reason; null while the step is open. */
  reason: string | null;
  startedAt?: Date;
  endedAt?: Date;
  /** Over all the step's model/messages (a step may hold several). */
  toolCallCount: number;
  /** Summed over the step's model/messages, when the provider reported it. */
  usage: Usage | null;
}

/** Events as the store returns them: with the time each was stored. */
type Timed = LogEvent & { createdAt?: Date };

/** Turns in log order, as the reducer brackets them (turn/start and turn/end events are enough). */
export function summarizeTurns(events: Iterable<Timed>): TurnSummary[] {
  const turns: TurnSummary[] = [];
  const state = new LogState();
  for (const e of events) {
    const wasOpen = state.openTurn;
    state.apply(e);
    const ev = asCoreEvent(e);
    if (ev.type === 'turn/start' && state.openTurn === ev.data.turn) {
      turns.push({ turn: ev.data.turn, inputId: ev.data.inputId, startSeq: e.seq, endSeq: null, reason: null, startedAt: e.createdAt });
    } else if (ev.type === 'turn/end' && wasOpen !== undefined && state.openTurn === undefined) {
      const t = turns[turns.length - 1];
      t.endSeq = e.seq;
      t.reason = ev.data.reason;
      t.endedAt = e.createdAt;
    }
  }
  return turns;
}

/**
 * The steps of one turn, from its turn/start, step/start, model/message and
 * step/end events (others are ignored), bracketed by the reducer like the
 * turns above.
 */
export function summarizeSteps(events: Iterable<Timed>): StepSummary[] {
  const steps: StepSummary[] = [];
  const state = new LogState();
  for (const e of events) {
    const wasOpen = state.openStep;
    state.apply(e);
    const ev = asCoreEvent(e);
    if (ev.type === 'step/start' && state.openStep?.step === ev.data.step) {
      steps.push({ step: ev.data.step, startSeq: e.seq, endSeq: null, reason: null, startedAt: e.createdAt, toolCallCount: 0, usage: null });
    } else if (ev.type === 'model/message' && state.openStep?.step === ev.data.step) {
      // A step may hold several answers (docs/contract.md#append-rules): each was a model call, so all count.
      const s = steps[steps.length - 1];
      s.toolCallCount += ev.data.toolCalls.length;
      s.usage = addUsage(s.usage, usageOf(ev.data));
    } else if (ev.type === 'step/end' && wasOpen && !state.openStep) {
      const s = steps[steps.length - 1];
      s.endSeq = e.seq;
      s.reason = ev.data.reason;
      s.endedAt = e.createdAt;
    }
  }
  return steps;
}

/** The usage a model/message's data reports (counts it lacks are 0); null when it reports none. */
export function usageOf(message: { usage?: Partial<Usage> }): Usage | null {
  const u = message.usage;
  return u ? { inputTokens: u.inputTokens ?? 0, outputTokens: u.outputTokens ?? 0, costUsd: typeof u.costUsd === 'number' ? u.costUsd : null } : null;
}

/** Two usages added (a step's answers'); null when neither reported any. */
function addUsage(a: Usage | null, b: Usage | null): Usage | null {
  if (!a || !b) return a ?? b;
  const costUsd = a.costUsd === null || b.costUsd === null ? (a.costUsd ?? b.costUsd) : roundUsd(a.costUsd + b.costUsd);
  return { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens, costUsd };
}

/** Dollars summed without float dust (nano-dollars, as the price table writes them). */
export const roundUsd = (usd: number) => Math.round(usd * 1e9) / 1e9;
