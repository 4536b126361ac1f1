// What the agent loop tells an observer (telemetry) about its turns, model
// calls and tool calls. The runner knows only this interface; the tracing
// module (src/telemetry/) implements it. Disabled, the runner holds the no-op
// observer below: no allocation, no work per event.
import type { ChatMessage, ModelAnswer } from '../core/chat.ts';
import type { ToolCall } from '../core/events.ts';
import type { FailedAttempt } from './models/model.ts';

/** A tool result the log holds without the tool having run (repair or a fork's seed). */
export interface SyntheticResult {
  turn: number;
  step: number;
  callId: string;
  name?: string;
  status: string;
  cause: 'forked' | 'interrupted';
}

/** A synthetic `tool/result`'s data (written by repair) as telemetry reports it. */
export function syntheticResult(
  d: { turn: number; step: number; callId: string; name?: string; status: string },
  cause: SyntheticResult['cause'],
): SyntheticResult {
  return { turn: d.turn, step: d.step, callId: d.callId, name: d.name, status: d.status, cause };
}

/** Where a forked session was cut from its parent. */
export interface ForkOrigin {
  parentSessionId: string;
  cutSeq: number;
  /** The last turn started at or before the cut (0: none), and the session that ran it (an ancestor when the cut falls in what the parent inherited). */
  turn: number;
  turnSessionId: string;
  /** The seq of that turn's turn/start (-1: none). */
  turnStartSeq: number;
  /** The synthetic results the fork wrote to close what was open at the cut. */
  synthetic: SyntheticResult[];
}

export interface TurnStart {
  sessionId: string;
  turn: number;
  provider: string;
  model: string;
  inputId?: string;
  input?: string;
  /** This is the first turn of a forked session: where it was cut. */
  forkedFrom?: ForkOrigin;
  /** The turn was started by a holder that is gone; this one only closes it (crash recovery). */
  recovered?: boolean;
}

export type TurnEndReason = 'completed' | 'failed' | 'cancelled' | 'interrupted' | 'deleted';

export interface ModelUsage {
  inputTokens?: number;
  outputTokens?: number;
}

export interface ModelCallObserver {
  /** The answer, with its cost in US dollars when the price table knows the model (agent/model-prices.ts). */
  end(answer: ModelAnswer & { usage?: ModelUsage }, costUsd?: number): void;
  fail(message: string): void;
  /** An attempt failed and the call is tried again. */
  retry(attempt: FailedAttempt): void;
}

export interface ToolCallObserver {
  end(result: { status: string; content: string }): void;
}

export interface TurnObserver {
  modelCall(info: { step: number; provider: string; model: string; messages: ChatMessage[] }): ModelCallObserver;
  toolCall(info: { step: number; call: ToolCall }): ToolCallObserver;
  /** Results written by repair for calls that never returned. */
  synthetic(results: SyntheticResult[]): void;
  /** The turn's end is stored (`error`: why it failed). Called at most once. */
  end(reason: TurnEndReason, error?: string): void;
}

export interface AgentObserver {
  /** Whether anything is observed (the runner skips building what it would pass otherwise). */
  readonly enabled: boolean;
  turnStarted(info: TurnStart): TurnObserver;
}

const noopModelCall: ModelCallObserver = { end() {}, fail() {}, retry() {} };
const noopToolCall: ToolCallObserver = { end() {} };
const noopTurn: TurnObserver = {
  modelCall: () => noopModelCall,
  toolCall: () => noopToolCall,
  synthetic() {},
  end() {},
};

export const NOOP_OBSERVER: AgentObserver = { enabled: false, turnStarted: () => noopTurn };
