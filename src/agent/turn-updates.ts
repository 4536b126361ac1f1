// Live progress of a session's turns (sessionTurns subscription, docs/contract.md#graphql-names).
// What is in the log is announced from the stored events (turnUpdatesOf);
// only what is not — the model's text as it streams, a tool starting — is
// announced by hand.
import type { LogEvent, ToolCall } from '../core/events.ts';
import type { OpenTail } from '../core/log-state.ts';
import { asCoreEvent, otherThanCore } from '../core/core-event.ts';
import type { Db, SessionLog } from '../store/session-log.ts';

export type TurnUpdateKind =
  | 'TURN_STARTED'
  | 'STEP_STARTED'
  | 'TEXT_DELTA'
  | 'TOOL_RUNNING'
  | 'TOOL_PROGRESS'
  | 'TOOL_FINISHED'
  | 'APPROVAL_REQUESTED'
  | 'APPROVAL_DECIDED'
  | 'STEP_ENDED'
  | 'TURN_ENDED';

export interface TurnUpdate {
  sessionId: string;
  kind: TurnUpdateKind;
  turn: number;
  /** The stored event this update stands for (absent for what is not in the log: deltas, a tool running, progress). */
  seq?: number;
  /** TURN_STARTED: the input the turn takes (sendMessage's inputId). */
  inputId?: string;
  step?: number;
  /**
   * TEXT_DELTA: which answer of the step the text is of (1, the default: its first; a model called again within the
   * step answers again: 2, 3, …), as the runner that streams it says (docs/api.md, "Live turns").
   */
  answer?: number;
  /**
   * TEXT_DELTA relayed for an external runner: how many events the session's log held when forkline relayed it (not
   * shown to clients). A delta of an answer the log held by then is a late copy, whenever a reader reads it
   * (agent/streaming-answers.ts).
   */
  eventCount?: number;
  /** TEXT_DELTA: the streamed text; TOOL_PROGRESS: the tool's progress message. */
  text?: string;
  /** TOOL_PROGRESS: how far the tool is, of `total` when it knows. */
  progress?: number;
  total?: number;
  callId?: string;
  toolName?: string;
  /** APPROVAL_REQUESTED / APPROVAL_DECIDED: the call's arguments as the model wrote them (JSON text). */
  arguments?: string;
  /** TOOL_FINISHED: result status. */
  status?: string;
  /** STEP_ENDED / TURN_ENDED: reason; APPROVAL_DECIDED: the decision's reason. */
  reason?: string;
  /** APPROVAL_DECIDED: `approved` or `denied`, and who decided. */
  decision?: 'approved' | 'denied';
  by?: string;
}

export type TurnUpdateSink = (update: TurnUpdate) => void;

/** Which answer of its step a text delta is of (docs/api.md, "Live turns"): the first unless its runner said otherwise. */
export const answerOf = (u: Pick<TurnUpdate, 'answer'>): number => u.answer ?? 1;

/**
 * Whether `b` is a text delta of the same answer of the same step as the text delta `a`, relayed at the same length of
 * the log (the two merge: a late copy never merges into the live text before it).
 */
export function sameDeltaRun(a: TurnUpdate, b: TurnUpdate): boolean {
  return (
    a.kind === 'TEXT_DELTA' &&
    b.kind === 'TEXT_DELTA' &&
    a.sessionId === b.sessionId &&
    a.turn === b.turn &&
    a.step === b.step &&
    answerOf(a) === answerOf(b) &&
    a.eventCount === b.eventCount
  );
}

/** An update's size for a subscriber's queue: its strings that can be long (a text, a call's arguments, a reason), and the rest as a constant. */
export function turnUpdateChars(u: TurnUpdate): number {
  return 100 + (u.text?.length ?? 0) + (u.arguments?.length ?? 0) + (u.reason?.length ?? 0);
}

/** Consecutive text deltas of one answer become one; order is kept. */
export function mergeDeltas(a: TurnUpdate, b: TurnUpdate): TurnUpdate | undefined {
  return sameDeltaRun(a, b) ? { ...a, text: (a.text ?? '') + (b.text ?? '') } : undefined;
}

interface PlacedCall {
  turn: number;
  step: number;
  call: ToolCall;
}

/**
 * The open step's calls, which the updates of approvals name (their turn, step,
 * tool and arguments: tool/approval-request and tool/approval carry only the
 * call's id). Seeded with what the log held before the events (its open tail),
 * then kept by turnUpdatesOf as it reads them. An approval event concerns a
 * call of the open step not answered yet (docs/contract.md#tool-approval), so
 * the open tail's unanswered calls are all a reader starting mid-turn needs.
 */
export class OpenStepCalls {
  private readonly calls = new Map<string, PlacedCall>();

  constructor(open?: OpenTail) {
    this.seed(open);
  }

  /** Starts again from the open tail of the log before the next event. */
  seed(open: OpenTail | undefined): void {
    this.calls.clear();
    if (open?.step) this.add(open.turn, open.step.step, open.step.unanswered);
  }

  /** The call an approval event names, when known. */
  get(callId: string): PlacedCall | undefined {
    return this.calls.get(callId);
  }

  /** Whether every approval event of `events` names a call known here or stored earlier in `events`. */
  placesApprovalsOf(events: readonly LogEvent[]): boolean {
    const later = new Set<string>();
    for (const e of events) {
      const ev = asCoreEvent(e);
      if (ev.type === 'model/message') for (const c of ev.data.toolCalls) later.add(c.id);
      if ((ev.type === 'tool/approval-request' || ev.type === 'tool/approval') && !this.calls.has(ev.data.callId) && !later.has(ev.data.callId)) return false;
    }
    return true;
  }

  /** Keeps up with an event read after the seed. */
  see(e: LogEvent): void {
    const ev = asCoreEvent(e);
    if (ev.type === 'turn/start' || ev.type === 'turn/end' || ev.type === 'step/start' || ev.type === 'step/end') this.calls.clear();
    else if (ev.type === 'model/message') this.add(ev.data.turn, ev.data.step, ev.data.toolCalls);
  }

  private add(turn: number, step: number, calls: readonly ToolCall[]) {
    for (const call of calls) this.calls.set(call.id, { turn, step, call });
  }
}

/** The open tail of a session's log through a seq (the store's read): what seeds OpenStepCalls for a reader starting mid-turn. */
export type OpenTailReader = (sessionId: string, throughSeq: number) => Promise<OpenTail | undefined>;

/** An OpenTailReader on the store's log (on `db`: a request's scoped reads; default: the pool). */
export const readOpenTail =
  (log: Pick<SessionLog, 'openTailFolded'>, db?: Db): OpenTailReader =>
  async (sessionId, throughSeq) =>
    throughSeq < 0 ? undefined : (await log.openTailFolded(sessionId, throughSeq, db)).open;

/**
 * turnUpdatesOf for a writer or reader that may not have seen the call an
 * approval event names: the open tail before the events is read only then.
 */
export async function turnUpdatesRead(
  sessionId: string,
  events: readonly LogEvent[],
  calls: OpenStepCalls,
  readOpenTail: OpenTailReader,
): Promise<TurnUpdate[]> {
  if (events.length && !calls.placesApprovalsOf(events)) calls.seed(await readOpenTail(sessionId, events[0].seq - 1));
  return turnUpdatesOf(sessionId, events, calls);
}

/**
 * The updates stored events stand for, in order (TEXT_DELTA and TOOL_RUNNING are not events).
 * `calls`: the open step's calls before the events (kept up to date here); a
 * decision whose call it does not know has no update, a request one without
 * the tool's name and arguments.
 */
export function turnUpdatesOf(sessionId: string, events: readonly LogEvent[], calls = new OpenStepCalls()): TurnUpdate[] {
  const out: TurnUpdate[] = [];
  for (const e of events) {
    const ev = asCoreEvent(e);
    calls.see(e);
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
      case 'tool/approval-request': {
        const d = ev.data;
        const call = calls.get(d.callId)?.call;
        out.push({
          sessionId,
          kind: 'APPROVAL_REQUESTED',
          seq: e.seq,
          turn: d.turn,
          step: d.step,
          callId: d.callId,
          ...(call ? { toolName: call.name, arguments: call.arguments } : {}),
        });
        break;
      }
      case 'tool/approval': {
        const d = ev.data;
        const placed = calls.get(d.callId);
        if (!placed) break;
        out.push({
          sessionId,
          kind: 'APPROVAL_DECIDED',
          seq: e.seq,
          turn: placed.turn,
          step: placed.step,
          callId: d.callId,
          toolName: placed.call.name,
          arguments: placed.call.arguments,
          decision: d.decision,
          reason: d.reason,
          by: d.by,
        });
        break;
      }
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
      case 'surface/replace':
      case 'session/end-seed':
        break;
      default:
        otherThanCore(ev);
    }
  }
  return out;
}
