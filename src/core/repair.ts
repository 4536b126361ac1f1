// The one repair algorithm (DESIGN §2, seed 000): crash recovery and forks both
// close an open tail with closeOpenTail; only the cause differs.
import type { EventData, LogEvent, NewEvent, ToolCall } from './events.ts';
import type { ToolEffect, ToolEffectLookup } from './tools.ts';

export type RepairCause =
  | { kind: 'interrupted'; sessionId: string }
  | { kind: 'forked'; parentSessionId: string; cutSeq: number };

export interface OpenTail {
  turn: number;
  /** The open step of the open turn, with its calls still lacking a result, in call order. */
  step?: { step: number; unanswered: ToolCall[] };
}

/**
 * Finds what is open at the end of `events`: the open turn and, inside it, the
 * open step with its unanswered calls. Closed steps and turns are ignored even
 * when they hold unanswered calls (their failures are history). Plugin events
 * are never inspected. `events` may be any suffix of a log that starts at or
 * before the last `turn/start`.
 */
export function findOpenTail(events: Iterable<LogEvent>): OpenTail | undefined {
  let turn: number | undefined;
  let step: number | undefined;
  let calls: ToolCall[] = [];
  let answered = new Set<string>();
  for (const e of events) {
    switch (e.type) {
      case 'turn/start':
        turn = (e.data as EventData<'turn/start'>).turn;
        step = undefined;
        break;
      case 'turn/end':
        if ((e.data as EventData<'turn/end'>).turn === turn) turn = step = undefined;
        break;
      case 'step/start': {
        const d = e.data as EventData<'step/start'>;
        if (d.turn !== turn) break;
        step = d.step;
        calls = [];
        answered = new Set();
        break;
      }
      case 'step/end': {
        const d = e.data as EventData<'step/end'>;
        if (d.turn === turn && d.step === step) step = undefined;
        break;
      }
      case 'model/message': {
        const d = e.data as EventData<'model/message'>;
        if (d.turn === turn && d.step === step) calls.push(...d.toolCalls);
        break;
      }
      case 'tool/result': {
        const d = e.data as EventData<'tool/result'>;
        if (d.turn === turn && d.step === step) answered.add(d.callId);
        break;
      }
    }
  }
  if (turn === undefined) return undefined;
  return {
    turn,
    step: step === undefined ? undefined : { step, unanswered: calls.filter((c) => !answered.has(c.id)) },
  };
}

/** Deterministic: the same cause and call always give the same id. */
export function syntheticResultId(cause: RepairCause, callId: string): string {
  return cause.kind === 'forked'
    ? `forked:${cause.parentSessionId}@${cause.cutSeq}:${callId}`
    : `interrupted:${cause.sessionId}:${callId}`;
}

function retryAdvice(call: ToolCall, effect: ToolEffect | undefined): string {
  if (effect === 'read-only' || effect === 'idempotent') {
    return `"${call.name}" is ${effect}, so it is safe to call it again if you still need its result.`;
  }
  const what = effect === 'side-effects' ? 'has side effects' : 'is not a known tool, so its effects are unknown';
  return `"${call.name}" ${what}: it may already have changed the world, so check its effect before repeating it.`;
}

/** The model-visible text of a synthetic result. */
export function syntheticResultContent(cause: RepairCause, call: ToolCall, effect: ToolEffect | undefined): string {
  const head =
    cause.kind === 'forked'
      ? `No result for tool call "${call.name}" (${call.id}) is recorded in this branch: ` +
        `it was forked at event ${cause.cutSeq} of session ${cause.parentSessionId} before the result was recorded, ` +
        `so the record is missing here. The parent session may have executed the call after the cut.`
      : `Tool call "${call.name}" (${call.id}) was interrupted: the session stopped while the call was in flight, ` +
        `so its effect is unknown.`;
  return `${head} ${retryAdvice(call, effect)}`;
}

/**
 * The closers for the open tail of `events` (DESIGN §2): synthetic results for
 * the unanswered calls of the open step (in call order), that step's end, then
 * the open turn's end. Nothing open gives no closers.
 */
export function closeOpenTail(events: Iterable<LogEvent>, cause: RepairCause, effectOf: ToolEffectLookup): NewEvent[] {
  const open = findOpenTail(events);
  if (!open) return [];
  const reason = cause.kind;
  const status = cause.kind === 'forked' ? 'not-started' : 'interrupted';
  const closers: NewEvent[] = [];
  if (open.step) {
    const { step, unanswered } = open.step;
    for (const call of unanswered) {
      closers.push({
        type: 'tool/result',
        synthetic: true,
        data: {
          turn: open.turn,
          step,
          callId: call.id,
          resultId: syntheticResultId(cause, call.id),
          status,
          content: syntheticResultContent(cause, call, effectOf(call.name)),
          name: call.name,
        } satisfies EventData<'tool/result'>,
      });
    }
    closers.push({ type: 'step/end', synthetic: true, data: { turn: open.turn, step, reason } });
  }
  closers.push({ type: 'turn/end', synthetic: true, data: { turn: open.turn, reason } });
  return closers;
}
