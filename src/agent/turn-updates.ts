// Live progress of a session's turns (sessionTurns subscription, docs/contract.md#graphql-names).
// What is in the log is announced from the stored events (turnUpdatesOf);
// only what is not — the model's text as it streams, a tool starting — is
// announced by hand.
import type { LogEvent } from '../core/events.ts';
import { asCoreEvent, otherThanCore } from '../core/core-event.ts';

export type TurnUpdateKind = 'TURN_STARTED' | 'STEP_STARTED' | 'TEXT_DELTA' | 'TOOL_RUNNING' | 'TOOL_PROGRESS' | 'TOOL_FINISHED' | 'STEP_ENDED' | 'TURN_ENDED';

export interface TurnUpdate {
  sessionId: string;
  kind: TurnUpdateKind;
  turn: number;
  /** The stored event this update stands for (absent for what is not in the log: deltas, a tool running, progress). */
  seq?: number;
  /** TURN_STARTED: the input the turn takes (sendMessage's inputId). */
  inputId?: string;
  step?: number;
  /** TEXT_DELTA: the streamed text; TOOL_PROGRESS: the tool's progress message. */
  text?: string;
  /** TOOL_PROGRESS: how far the tool is, of `total` when it knows. */
  progress?: number;
  total?: number;
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
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'turn/start':
        out.push({ sessionId, kind: 'TURN_STARTED', seq: e.seq, turn: ev.data.turn, inputId: ev.data.inputId });
        break;
      case 'step/start':
        out.push({ sessionId, kind: 'STEP_STARTED', seq: e.seq, turn: ev.data.turn, step: ev.data.step });
        break;
      case 'tool/result': {
        const d = ev.data;
        out.push({
          sessionId,
          kind: 'TOOL_FINISHED',
          seq: e.seq,
          turn: d.turn,
          step: d.step,
          callId: d.callId,
          ...(d.name ? { toolName: d.name } : {}),
          status: d.status,
        });
        break;
      }
      case 'step/end':
        out.push({ sessionId, kind: 'STEP_ENDED', seq: e.seq, turn: ev.data.turn, step: ev.data.step, reason: ev.data.reason });
        break;
      case 'turn/end':
        out.push({ sessionId, kind: 'TURN_ENDED', seq: e.seq, turn: ev.data.turn, reason: ev.data.reason });
        break;
      // A stored answer is not an update (its text streamed as TEXT_DELTA; TOOL_RUNNING
      // announced its calls); the rest is not turn status.
      case 'model/message':
      case 'inbox/add':
      case 'inbox/remove':
      case 'session/title':
      case 'session/model':
      case 'session/tools':
      case 'session/instructions':
      case 'session/runner-tools':
      case 'session/tool-approval':
      case 'tool/approval-request':
      case 'tool/approval':
      case 'surface/replace':
      case 'session/end-seed':
        break;
      default:
        otherThanCore(ev);
    }
  }
  return out;
}
