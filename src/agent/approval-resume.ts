// Taking up a turn after a tool call's decision (docs/contract.md#tool-approval,
// docs/contract.md#crash-recovery): the turn goes on from a decided call only
// while that call has not started running. The agent (forkline's or an
// external runner) writes APPROVED_CALL_START right before it runs an approved
// call, so a crash while it ran is repaired as any call in flight, never run twice.
import { fieldOf } from '../core/core-event.ts';
import type { LogEvent, ToolCall } from '../core/events.ts';
import type { OpenTail } from '../core/log-state.ts';

/** `{turn, step, callId}`: an approved call starts running now. */
export const APPROVED_CALL_START = 'plugin/agent/approved-call-start';

/**
 * The call a turn goes on from: the open step's first unanswered call when it
 * has a decision and (approved) no APPROVED_CALL_START among `since` (events
 * after its decision, or more); else undefined.
 */
export function decidedCall(open: OpenTail | undefined, since: readonly LogEvent[]): { call: ToolCall; decisionSeq: number } | undefined {
  const step = open?.step;
  const first = step?.unanswered[0];
  const approval = first && step.approvals?.get(first.id);
  if (!approval || approval.state === 'pending') return undefined;
  if (approval.state === 'approved' && since.some((e) => e.seq > approval.seq && e.type === APPROVED_CALL_START && fieldOf(e, 'callId') === first.id))
    return undefined;
  return { call: first, decisionSeq: approval.seq };
}

/** Whether a decided call waits to be taken up (decidedCall), reading events only when there is a decision: `read(fromSeq)`. */
export async function hasDecidedCall(open: OpenTail | undefined, read: (fromSeq: number) => Promise<readonly LogEvent[]>): Promise<boolean> {
  const candidate = decidedCall(open, []);
  if (!candidate) return false;
  return decidedCall(open, await read(candidate.decisionSeq + 1)) !== undefined;
}
