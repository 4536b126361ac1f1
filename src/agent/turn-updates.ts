// Live progress of a session's turns (sessionTurns subscription, DESIGN §7).
// What is in the log is announced from the stored events (turnUpdatesOf);
// only what is not — the model's text as it streams, a tool starting — is
// announced by hand.
import type { EventData, LogEvent } from '../core/events.ts';

export type TurnUpdateKind =
  | 'TURN_STARTED'
  | 'STEP_STARTED'
  | 'TEXT_DELTA'
  | 'TOOL_RUNNING'
  | 'TOOL_FINISHED'
  | 'STEP_ENDED'
  | 'TURN_ENDED';

export interface TurnUpdate {
  sessionId: string;
  kind: TurnUpdateKind;
  turn: number;
  /** TURN_STARTED: the input the turn takes (sendMessage's inputId). */
  inputId?: string;
  step?: number;
  /** TEXT_DELTA: the streamed text. */
  text?: string;
  callId?: string;
  toolName?: string;
  /** TOOL_FINISHED: result status; STEP_ENDED / TURN_ENDED: reason. */
  status?: string;
  reason?: string;
}

export type TurnUpdateSink = (update: TurnUpdate) => void;

/** The updates stored events stand for, in order (TEXT_DELTA and TOOL_RUNNING are not events). */
export function turnUpdatesOf(sessionId: string, events: readonly LogEvent[]): TurnUpdate[] {
  const out: TurnUpdate[] = [];
  for (const e of events) {
    switch (e.type) {
      case 'turn/start': {
        const d = e.data as EventData<'turn/start'>;
        out.push({ sessionId, kind: 'TURN_STARTED', turn: d.turn, inputId: d.inputId });
        break;
      }
      case 'step/start': {
        const d = e.data as EventData<'step/start'>;
        out.push({ sessionId, kind: 'STEP_STARTED', turn: d.turn, step: d.step });
        break;
      }
      case 'tool/result': {
        const d = e.data as EventData<'tool/result'>;
        out.push({ sessionId, kind: 'TOOL_FINISHED', turn: d.turn, step: d.step, callId: d.callId, ...(d.name ? { toolName: d.name } : {}), status: d.status });
        break;
      }
      case 'step/end': {
        const d = e.data as EventData<'step/end'>;
        out.push({ sessionId, kind: 'STEP_ENDED', turn: d.turn, step: d.step, reason: d.reason });
        break;
      }
      case 'turn/end': {
        const d = e.data as EventData<'turn/end'>;
        out.push({ sessionId, kind: 'TURN_ENDED', turn: d.turn, reason: d.reason });
        break;
      }
    }
  }
  return out;
}
