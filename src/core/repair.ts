// The one repair algorithm (docs/contract.md#repair, docs/contract.md#exact-fork): crash recovery, forks and an
// agent that failed unexpectedly all close an open tail with closeOpenTail; only the cause differs.
import type { EventData, LogEvent, NewEvent, ToolCall } from './events.ts';
import { foldLog, type CallApproval, type OpenTail } from './log-state.ts';
import type { ToolEffect, ToolEffectLookup } from './tools.ts';
import { boundedId } from './derived-ids.ts';

export type RepairCause =
  | { kind: 'interrupted'; sessionId: string }
  | { kind: 'forked'; parentSessionId: string; cutSeq: number }
  /** The agent failed unexpectedly (a bug, a refused append): the turn ends `failed` with `message` as its error report. */
  | { kind: 'failed'; sessionId: string; message: string };

/** What is open at the end of `events` (see LogState); `events` may be any suffix of a log that starts at or before the last `turn/start`. */
const findOpenTail = (events: Iterable<LogEvent>): OpenTail | undefined => foldLog(events).openTail();

/** Deterministic: the same cause and call always give the same id, one an event holds whatever the call's id's length. */
export function syntheticResultId(cause: RepairCause, callId: string): string {
  return boundedId(cause.kind === 'forked' ? `forked:${cause.parentSessionId}@${cause.cutSeq}:${callId}` : `${cause.kind}:${cause.sessionId}:${callId}`);
}

function retryAdvice(call: ToolCall, effect: ToolEffect | undefined): string {
  if (effect === 'read-only' || effect === 'idempotent') {
    return `"${call.name}" is ${effect}, so it is safe to call it again if you still need its result.`;
  }
  const what = effect === 'side-effects' ? 'has side effects' : 'is not a known tool, so its effects are unknown';
  return `"${call.name}" ${what}: it may already have changed the world, so check its effect before repeating it.`;
}

/**
 * A call of a file tool (`files` recorded with it: its effects are confined to
 * the session's file workspace) changed no file in this branch, whatever its
 * effect: its changes are recorded with its result, which this branch does not
 * have, and the workspace is restored from the log (docs/contract.md#repair, docs/contract.md#agent-loop).
 */
function restoredFiles(cause: RepairCause, call: ToolCall, effect: ToolEffect | undefined): string {
  const where = cause.kind === 'forked' ? 'it did not run in this branch' : 'it changed no file in this session';
  if (call.files === 'only') return `The files were restored to before this call; ${where}, so it is safe to call "${call.name}" again if you still need it.`;
  // Effects outside the workspace keep the effect's advice (docs/contract.md#repair).
  return `The files were restored to before this call; ${where} as far as the files go. Outside the files: ${retryAdvice(call, effect)}`;
}

/** The model-visible text of a synthetic result. */
export function syntheticResultContent(cause: RepairCause, call: ToolCall, effect: ToolEffect | undefined): string {
  const head =
    cause.kind === 'forked'
      ? `No result for tool call "${call.name}" (${call.id}) is recorded in this branch: ` +
        `it was forked at event ${cause.cutSeq} of session ${cause.parentSessionId} before the result was recorded, ` +
        `so the record is missing here. The parent session may have executed the call after the cut.`
      : cause.kind === 'failed'
        ? `Tool call "${call.name}" (${call.id}) has no recorded result: the agent failed while the call was in flight, so its effect is unknown.`
        : `Tool call "${call.name}" (${call.id}) was interrupted: the session stopped while the call was in flight, ` + `so its effect is unknown.`;
  return `${head} ${call.files ? restoredFiles(cause, call, effect) : retryAdvice(call, effect)}`;
}

/**
 * The model-visible text of a synthetic result for a call that never ran: it
 * awaited approval at the cut (or the crash), or was denied and not yet
 * answered (docs/contract.md#repair). Nothing ran, so nothing needs checking.
 */
export function neverRanContent(cause: RepairCause, call: ToolCall, approval: CallApproval): string {
  const why =
    approval.state === 'denied'
      ? `it was denied${approval.reason ? ` (${approval.reason})` : ''}`
      : cause.kind === 'forked'
        ? `it was awaiting approval when this branch was forked at event ${cause.cutSeq} of session ${cause.parentSessionId}, so it was never approved here`
        : 'it was awaiting approval';
  return `Tool call "${call.name}" (${call.id}) never ran: ${why}. Nothing was done; call "${call.name}" again if you still need it (it will need approval again).`;
}

/**
 * The closers for the open tail of `events` (docs/contract.md#repair): synthetic results for
 * the unanswered calls of the open step (in call order), that step's end, then
 * the open turn's end (for cause `failed`, preceded by the turn's plugin/agent/error).
 * Nothing open gives no closers.
 */
export function closeOpenTail(events: Iterable<LogEvent>, cause: RepairCause, effectOf: ToolEffectLookup): NewEvent[] {
  return closersFor(findOpenTail(events), cause, effectOf);
}

/** The closers for an open tail already folded (the agent keeps its fold: LogState.openTail()). */
export function closersFor(open: OpenTail | undefined, cause: RepairCause, effectOf: ToolEffectLookup): NewEvent[] {
  if (!open) return [];
  const reason = cause.kind;
  // A call the failed agent left open may have run: its effect is unknown, as after a crash.
  const status = cause.kind === 'forked' ? 'not-started' : 'interrupted';
  const closers: NewEvent[] = [];
  if (open.step) {
    const { step, approvals } = open.step;
    let { unanswered } = open.step;
    // Crash recovery keeps a pending approval pending (docs/contract.md#crash-recovery): the turn stays open and waits
    // for its decision; only calls cut off while they ran are closed (a denied one is answered when the turn goes on).
    const keepsWaiting = cause.kind === 'interrupted' && unanswered.some((c) => approvals?.get(c.id)?.state === 'pending');
    if (keepsWaiting) unanswered = unanswered.filter((c) => !approvals?.has(c.id) || approvals.get(c.id)!.state === 'approved');
    for (const call of unanswered) {
      // A call that awaited approval, or was denied, never ran; an approved one may have (the usual wording).
      const approval = approvals?.get(call.id);
      const neverRan = approval && approval.state !== 'approved';
      closers.push({
        type: 'tool/result',
        synthetic: true,
        data: {
          turn: open.turn,
          step,
          callId: call.id,
          resultId: syntheticResultId(cause, call.id),
          status,
          // The effect recorded with the call; a log from before calls recorded one: the tool's own.
          content: neverRan ? neverRanContent(cause, call, approval) : syntheticResultContent(cause, call, call.effect ?? effectOf(call.name)),
          name: call.name,
        } satisfies EventData<'tool/result'>,
      });
    }
    if (keepsWaiting) return closers;
    closers.push({ type: 'step/end', synthetic: true, data: { turn: open.turn, step, reason } });
  }
  // The error report a failed turn carries, as for failures the agent decides itself (docs/contract.md#agent-loop).
  if (cause.kind === 'failed')
    closers.push({ type: 'plugin/agent/error', synthetic: true, data: { turn: open.turn, step: open.step?.step ?? 0, message: cause.message } });
  closers.push({ type: 'turn/end', synthetic: true, data: { turn: open.turn, reason } });
  return closers;
}
