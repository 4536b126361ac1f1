/** Live progress of a session's turns (sessionTurns subscription, DESIGN §7). */
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
