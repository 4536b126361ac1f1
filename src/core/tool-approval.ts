// Tool approval (docs/contract.md#tool-approval): which calls need a person's
// decision, what the model reads for a denied call, and what a cancel writes
// for a turn that waits for one. Pure.
import type { EventData, NewEvent, ToolCall } from './events.ts';
import type { OpenTail } from './log-state.ts';
import { toolAllowed } from './tools.ts';
import { boundedId } from './derived-ids.ts';

/**
 * Whether a call needs approval: its tool is marked so by the operator's
 * configuration (`configured`), or the session's own set (session/tool-approval:
 * names, `<server>__*`, `*`) names it. Nothing configured costs one check.
 */
export function needsApproval(name: string, configured: boolean | undefined, sessionSet: readonly string[] | undefined): boolean {
  return configured === true || (sessionSet !== undefined && toolAllowed(name, sessionSet));
}

/** The model-visible result of a denied call: it did not run, and why. */
export function deniedContent(call: Pick<ToolCall, 'id' | 'name'>, reason: string): string {
  return `Tool call "${call.name}" (${call.id}) was denied${reason ? `: ${reason}` : ''}. It did not run.`;
}

/** Calls of the open step that await a decision, in call order. */
export function awaitingApproval(open: OpenTail | undefined): ToolCall[] {
  const step = open?.step;
  if (!step?.approvals) return [];
  return step.unanswered.filter((c) => step.approvals!.get(c.id)?.state === 'pending');
}

/** The reason a cancel records when it denies the calls its turn waited on. */
export const CANCELLED_REASON = 'the turn was cancelled while the call awaited approval';

/**
 * What `cancelTurn` writes for a turn that waits for approval (no agent runs
 * it): each waiting call denied by `by` and answered as never run, then the
 * step's end (`interrupted`) and the turn's end (`cancelled`), as a cancel of a
 * running turn leaves them.
 */
export function cancelWaitingTurn(open: OpenTail, by: string): NewEvent[] {
  const { turn } = open;
  const events: NewEvent[] = [];
  if (open.step) {
    const { step } = open.step;
    for (const call of awaitingApproval(open)) {
      events.push({ type: 'tool/approval', data: { callId: call.id, decision: 'denied', reason: CANCELLED_REASON, by } satisfies EventData<'tool/approval'> });
      events.push({
        type: 'tool/result',
        data: {
          turn,
          step,
          callId: call.id,
          resultId: boundedId(`cancelled:${call.id}`),
          status: 'error',
          content: deniedContent(call, CANCELLED_REASON),
          name: call.name,
        } satisfies EventData<'tool/result'>,
      });
    }
    events.push({ type: 'step/end', data: { turn, step, reason: 'interrupted' } });
  }
  events.push({ type: 'turn/end', data: { turn, reason: 'cancelled' } });
  return events;
}
