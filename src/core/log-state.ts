// The one reducer of a log (docs/contract.md#log): events in, session state out — the
// inbox, turn numbering, the open turn and its open step with their calls,
// the configured model and title. Replay, the open tail that repair closes,
// the agent's running fold, the recording validator and the store's append
// check are all this fold. Pure.
//
// `apply` is lenient: it folds any log the store holds (closed steps and turns
// are history even with unanswered calls; plugin events are never inspected).
// `violation` is the strict side: the relationship rules a new event must keep
// (docs/contract.md#log), checked against the state before it.
import type { EventData, LogEvent, ResponseFormat, RunnerTool, ToolCall } from './events.ts';
import { asCoreEvent, otherThanCore } from './core-event.ts';

export interface PendingInput {
  inputId: string;
  text: string;
  seq: number;
  /** The JSON Schema its answer must match (structured output), when it asks for one. */
  responseFormat?: ResponseFormat;
}

/**
 * Inputs a session may have waiting in its inbox at once (docs/contract.md#append-rules, rule `inbox`), from
 * every door that queues one (sendMessage, a fork's message, a recording). Whatever reads them holds them all: the
 * agent taking its next input, Session.pendingInputs, /chat, the store's tail state; a recording's validator holds
 * each one's id while it reads (core/recording.ts). 10,000 ids are a few MB. One bound for live sessions and
 * recordings: a session's export imports elsewhere.
 */
export const MAX_PENDING_INPUTS = 10_000;
/**
 * The UTF-8 bytes of the texts and response schemas of the inputs a session has waiting at once (inputBytes): the
 * process that runs the session holds them all, so without a bound one token's messages could make it hold gigabytes.
 */
export const MAX_PENDING_INPUT_BYTES = 64 * 1024 * 1024;

/** UTF-8 bytes of `s`: Buffer's count in Node, TextEncoder's in the dashboard, which folds logs too and has no Buffer. */
const utf8Bytes = typeof Buffer === 'function' ? (s: string) => Buffer.byteLength(s) : (s: string) => new TextEncoder().encode(s).length;

/** What a waiting input weighs against MAX_PENDING_INPUT_BYTES: its text and its response schema, in UTF-8 bytes. */
export const inputBytes = (d: { text: string; responseFormat?: ResponseFormat }): number =>
  utf8Bytes(d.text) + (d.responseFormat ? utf8Bytes(JSON.stringify(d.responseFormat)) : 0);

/**
 * The `inbox` rule's bounds for one more input of `bytes` (inputBytes) where `waiting` inputs weighing
 * `waitingBytes` wait, or undefined: the reducer's check, and the store's answer when the statement that
 * queues a message found the session's inbox full.
 */
export function inboxBound(waiting: number, waitingBytes: number, bytes: number): Violation | undefined {
  const bound = { limit: MAX_PENDING_INPUTS, byteLimit: MAX_PENDING_INPUT_BYTES, pendingInputs: waiting, pendingInputBytes: waitingBytes };
  if (waiting >= MAX_PENDING_INPUTS)
    return { rule: 'inbox', detail: `more than ${MAX_PENDING_INPUTS} inputs waiting at once (${waiting} wait, the most a session may have)`, bound };
  if (waitingBytes + bytes > MAX_PENDING_INPUT_BYTES)
    return {
      rule: 'inbox',
      detail: `the inputs waiting at once hold more than ${MAX_PENDING_INPUT_BYTES} bytes of text with this one of ${bytes} (${waiting} wait, holding ${waitingBytes})`,
      bound,
    };
  return undefined;
}

/** A waiting input as the state keeps it: with its weight (its text may be left out: LogState.inputTexts). */
type Waiting = PendingInput & { bytes?: number };

/** The pending input an inbox/add queues. */
export const pendingInputOf = (d: EventData<'inbox/add'>, seq: number): PendingInput => ({
  inputId: d.inputId,
  text: d.text,
  seq,
  ...(d.responseFormat ? { responseFormat: d.responseFormat } : {}),
});

/** A LogState as plain JSON (LogState.snapshot). */
export interface LogStateSnapshot {
  nextSeq: number;
  lastTurn: number;
  turnCount: number;
  openTurn?: number;
  openTurnInputId?: string;
  lastStep: number;
  openStep?: { step: number; calls: ToolCall[]; answered: string[]; answers?: number };
  model?: EventData<'session/model'>;
  title?: string;
  tools?: string[];
  instructions?: string;
  runnerTools?: RunnerTool[];
  inbox: PendingInput[];
}

/**
 * Where a call of the open step stands with approval (docs/contract.md#tool-approval): asked
 * (`pending`, its tool/approval-request at `seq`), or decided (its tool/approval at `seq`).
 */
export type CallApproval = { state: 'pending'; seq: number } | { state: 'approved' | 'denied'; seq: number; reason: string; by: string; requestSeq: number };

/** The open step of the open turn: its calls, in call order, and which have a result. */
export interface OpenStep {
  step: number;
  calls: ToolCall[];
  answered: Set<string>;
  /** Its model/message events so far (a model called again within the step answers again). */
  answers: number;
  /** Calls asked for approval, by call id (none asked: unset, so a turn without approval keeps no map). */
  approvals?: Map<string, CallApproval>;
}

export interface OpenTail {
  turn: number;
  /**
   * The open step of the open turn, with its calls still lacking a result, in call order, its calls' approvals, and
   * how many answers (model/message events) it holds so far.
   */
  step?: { step: number; unanswered: ToolCall[]; approvals?: ReadonlyMap<string, CallApproval>; answers: number };
}

/** A broken relationship rule: its name (as recordings report it) and what broke it. */
export interface Violation {
  rule: string;
  detail: string;
  /** The bound it passed and where the log stands, for a bound's rule (the error's details). */
  bound?: Record<string, number>;
}

/** Causes a synthetic closer may carry: repair's (a crash; an agent that failed), or a fork's in its V4 spelling. */
const SYNTHETIC_CAUSES = new Set(['interrupted', 'failed', 'not-started', 'forked']);
/** What repair writes (core/repair.ts closeOpenTail): no other event is synthetic, so none from outside may claim to be. */
const SYNTHETIC_TYPES = new Set(['tool/result', 'step/end', 'turn/end', 'plugin/agent/error']);

/**
 * The highest step number (docs/contract.md#append-rules): steps may skip numbers, but every reader serves them as
 * 32-bit numbers (GraphQL Int: Step.step, TurnUpdate.step), so a larger one would make the session unreadable.
 */
const MAX_STEP = 2 ** 31 - 1;

/**
 * The most tool calls one step holds, over all its model/messages (docs/contract.md#append-rules): its
 * repair (a result per unanswered call, the step's and the turn's ends, a failed turn's error) is one
 * append, which holds at most 10,000 events (store/append.ts MAX_APPEND_BATCH), and checking a step's
 * results stays cheap. Forkline's own agent gives up an answer past FORKLINE_MODEL_MAX_TOOL_CALLS, at most this.
 */
export const MAX_STEP_CALLS = 4096;

// At module level: a closure made per call is named per call under tsx (keepNames), a defineProperty for every event checked.
const fail = (rule: string, detail: string): Violation => ({ rule, detail });

export class LogState {
  /** The seq after the last applied event. */
  nextSeq = 0;
  /** Highest turn number started in this lineage (0: none). */
  lastTurn = 0;
  /** turn/start events seen. */
  turnCount = 0;
  /** The open turn, if the log ends inside one. */
  openTurn?: number;
  /** The input the open turn took (its turn/start's). */
  openTurnInputId?: string;
  /** Highest step started in the open turn (0: none yet). */
  lastStep = 0;
  /**
   * The open step of the open turn. Closed steps and turns are history, even
   * when they hold unanswered calls; plugin events are never inspected.
   */
  openStep?: OpenStep;
  model?: EventData<'session/model'>;
  title?: string;
  /** The session's tool set (session/tools); undefined: every tool. */
  tools?: string[];
  /** The session's instructions (session/instructions); undefined: none. */
  instructions?: string;
  /** The tools an external runner declared (session/runner-tools); undefined: none declared. */
  runnerTools?: RunnerTool[];
  /** The tools whose calls need approval by the session's own choice (session/tool-approval); undefined: none. */
  toolApproval?: string[];
  /**
   * False: a pending input keeps its id and seq only, its text left empty and its schema dropped. The rules read
   * neither, and a validator that folds a recording from outside (core/recording.ts) would otherwise hold every
   * queued input's text: gigabytes from one upload of inputs never taken.
   */
  inputTexts = true;
  /** The inputs waiting, by id: each with its weight (inputBytes), whose sum is pendingInputBytes. */
  private inbox = new Map<string, Waiting>();
  /** What the waiting inputs weigh (inputBytes), kept as they come and go: the `inbox` rule's byte bound. */
  pendingInputBytes = 0;

  /** The whole state as plain JSON (the agent's fold checkpoint: agent/session-fold.ts). */
  snapshot(): LogStateSnapshot {
    const { nextSeq, lastTurn, turnCount, openTurn, openTurnInputId, lastStep, model, title, tools, instructions, runnerTools } = this;
    const openStep = this.openStep && {
      step: this.openStep.step,
      calls: this.openStep.calls,
      answered: [...this.openStep.answered],
      answers: this.openStep.answers,
    };
    return {
      nextSeq,
      lastTurn,
      turnCount,
      openTurn,
      openTurnInputId,
      lastStep,
      openStep,
      model,
      title,
      tools,
      instructions,
      runnerTools,
      inbox: this.pendingInputs,
    };
  }

  /** The state a snapshot holds. */
  static restore(snap: LogStateSnapshot): LogState {
    const s = new LogState();
    const { openStep, inbox, ...fields } = snap;
    Object.assign(s, fields);
    if (openStep) s.openStep = { step: openStep.step, calls: openStep.calls, answered: new Set(openStep.answered), answers: openStep.answers ?? 0 };
    s.setInbox(inbox);
    return s;
  }

  /**
   * The state at the end of a log from what the store keeps cheaply instead of
   * a replay: its length, its turn counters, the inputs waiting in its inbox,
   * and the fold of its open turn's events (from its turn/start), if one is
   * open (read by pages: never held whole). Title and model are not part of it.
   */
  static resume(at: { nextSeq: number; turnCount: number; lastTurn: number; pending: PendingInput[]; openTurn?: LogState }): LogState {
    const s = at.openTurn?.clone() ?? new LogState();
    s.nextSeq = at.nextSeq;
    s.turnCount = at.turnCount;
    s.lastTurn = Math.max(s.lastTurn, at.lastTurn);
    s.setInbox(at.pending);
    return s;
  }

  /** The waiting inputs, weighed (a snapshot's carry their weight: their texts may have been left out). */
  private setInbox(pending: Waiting[]): void {
    this.inbox = new Map();
    this.pendingInputBytes = 0;
    for (const p of pending) {
      const bytes = p.bytes ?? inputBytes(p);
      this.inbox.set(p.inputId, { ...p, bytes });
      this.pendingInputBytes += bytes;
    }
  }

  apply(e: LogEvent): this {
    this.nextSeq = e.seq + 1;
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'inbox/add': {
        const bytes = inputBytes(ev.data);
        // Lenient: an id added twice (a log the rules did not check) counts once, as the inbox holds it once.
        this.pendingInputBytes += bytes - (this.inbox.get(ev.data.inputId)?.bytes ?? 0);
        this.inbox.set(
          ev.data.inputId,
          this.inputTexts ? { ...pendingInputOf(ev.data, e.seq), bytes } : { inputId: ev.data.inputId, text: '', seq: e.seq, bytes },
        );
        break;
      }
      case 'inbox/remove':
        this.pendingInputBytes -= this.inbox.get(ev.data.inputId)?.bytes ?? 0;
        this.inbox.delete(ev.data.inputId);
        break;
      case 'turn/start':
        this.turnCount++;
        this.lastTurn = Math.max(this.lastTurn, ev.data.turn);
        this.openTurn = ev.data.turn;
        this.openTurnInputId = ev.data.inputId;
        this.openStep = undefined;
        this.lastStep = 0;
        break;
      case 'turn/end':
        if (ev.data.turn === this.openTurn) this.openTurn = this.openStep = this.openTurnInputId = undefined;
        break;
      case 'step/start':
        if (ev.data.turn === this.openTurn) {
          this.openStep = { step: ev.data.step, calls: [], answered: new Set(), answers: 0 };
          this.lastStep = Math.max(this.lastStep, ev.data.step);
        }
        break;
      case 'step/end':
        if (this.isOpenStep(ev.data)) this.openStep = undefined;
        break;
      case 'model/message':
        if (this.isOpenStep(ev.data)) {
          this.openStep!.calls.push(...ev.data.toolCalls);
          this.openStep!.answers++;
        }
        break;
      case 'tool/result':
        if (this.isOpenStep(ev.data)) this.openStep!.answered.add(ev.data.callId);
        break;
      case 'tool/approval-request':
        if (this.isOpenStep(ev.data)) (this.openStep!.approvals ??= new Map()).set(ev.data.callId, { state: 'pending', seq: e.seq });
        break;
      case 'tool/approval': {
        const { callId, decision, reason, by } = ev.data;
        const asked = this.openStep?.approvals?.get(callId);
        if (asked?.state === 'pending') this.openStep!.approvals!.set(callId, { state: decision, seq: e.seq, reason, by, requestSeq: asked.seq });
        break;
      }
      case 'session/tool-approval':
        this.toolApproval = ev.data.tools.length > 0 ? ev.data.tools : undefined;
        break;
      case 'session/model':
        this.model = ev.data;
        break;
      case 'session/title':
        this.title = ev.data.title;
        break;
      case 'session/tools':
        this.tools = ev.data.tools;
        break;
      case 'session/instructions':
        this.instructions = ev.data.text || undefined;
        break;
      case 'session/runner-tools':
        this.runnerTools = ev.data.tools;
        break;
      case 'surface/replace':
      case 'session/end-seed':
        break; // no state of the reducer's: a replacement is the model request's business, a marker the lineage's
      default:
        otherThanCore(ev);
    }
    return this;
  }

  applyAll(events: Iterable<LogEvent>): this {
    for (const e of events) this.apply(e);
    return this;
  }

  /**
   * The relationship rule `e` would break as the next event, or undefined.
   * Rules, named as recordings name them: `turn bracket` / `turn numbering`
   * (one open turn at a time, numbered previous + 1), `step bracket` / `step
   * numbering` (step events only in the open turn's open step, steps
   * increasing within a turn, up to MAX_STEP; a turn ends after its step), `unanswered call` (a step ends
   * `completed` once each call has its result), `call ids` (unique per step), `step calls` (at most
   * MAX_STEP_CALLS per step), `result pairing`
   * (a result answers a call of the open step that has none yet), `inbox`
   * (a new input id; a removal of a waiting one), `surface range` (earlier
   * events only), `synthetic closer` (a synthetic result or end carries a
   * repair cause; nothing but repair's closers is synthetic), `approval pairing` (a request names an unanswered call of
   * the open step not asked before; a decision answers a pending request; a
   * call awaiting approval gets no result but a repair's).
   */
  violation(e: LogEvent & { synthetic?: boolean }): Violation | undefined {
    const ev = asCoreEvent(e);
    if (e.synthetic && !SYNTHETIC_TYPES.has(e.type)) return fail('synthetic closer', `only repair's closers are synthetic, not a ${e.type}`);
    if (e.synthetic && (ev.type === 'tool/result' || ev.type === 'step/end' || ev.type === 'turn/end')) {
      const cause = ev.type === 'tool/result' ? ev.data.status : ev.data.reason;
      if (!SYNTHETIC_CAUSES.has(cause)) return fail('synthetic closer', `a synthetic ${e.type} must carry a repair cause, not "${cause}"`);
    }
    switch (ev.type) {
      case 'inbox/add': {
        const d = ev.data;
        if (this.inbox.has(d.inputId)) return fail('inbox', `input ${d.inputId} is already pending`);
        return this.inboxFull(d);
      }
      case 'inbox/remove': {
        const d = ev.data;
        if (!this.inbox.has(d.inputId)) return fail('inbox', `inbox/remove names input ${d.inputId}, which is not pending`);
        return undefined;
      }
      case 'turn/start': {
        const d = ev.data;
        if (this.openTurn !== undefined) return fail('turn bracket', `turn/start of turn ${d.turn} while turn ${this.openTurn} is open`);
        if (d.turn !== this.lastTurn + 1) return fail('turn numbering', `expected turn ${this.lastTurn + 1}, got turn ${d.turn}`);
        return undefined;
      }
      case 'turn/end': {
        const d = ev.data;
        if (d.turn !== this.openTurn) return fail('turn bracket', `turn/end of turn ${d.turn}, but ${this.openTurnText()}`);
        // A step closes once, before its turn (docs/contract.md#append-rules): its end says how it ended.
        if (this.openStep) return fail('step bracket', `turn/end of turn ${d.turn} while its step ${this.openStep.step} is open: the step ends first`);
        return undefined;
      }
      case 'step/start': {
        const d = ev.data;
        if (d.turn !== this.openTurn) return fail('step bracket', `step/start in turn ${d.turn}, but ${this.openTurnText()}`);
        if (this.openStep) return fail('step bracket', `step/start of step ${d.step} while step ${this.openStep.step} is open`);
        if (d.step <= this.lastStep) return fail('step numbering', `step ${d.step} does not follow step ${this.lastStep} of turn ${d.turn}`);
        if (d.step > MAX_STEP) return fail('step numbering', `step ${d.step} is past the highest step number, ${MAX_STEP}`);
        return undefined;
      }
      case 'step/end': {
        const d = ev.data;
        const notOpen = this.notOpenStep(d, 'step bracket');
        if (notOpen) return notOpen;
        // A step that ran to its end answered each of its calls (docs/contract.md#append-rules); one that failed, was
        // stopped (a cancel, a time limit) or repaired may leave calls unanswered, as history.
        if (d.reason === 'completed') {
          const step = this.openStep!;
          const unanswered = step.calls.find((c) => !step.answered.has(c.id));
          if (unanswered) return fail('unanswered call', `step ${d.step} of turn ${d.turn} ends completed, but call ${unanswered.id} has no result`);
        }
        return undefined;
      }
      case 'model/message': {
        const d = ev.data;
        const notOpen = this.notOpenStep(d, 'step bracket');
        if (notOpen) return notOpen;
        const calls = this.openStep!.calls.length + d.toolCalls.length;
        if (calls > MAX_STEP_CALLS)
          return fail('step calls', `turn ${d.turn} step ${d.step} would hold ${calls} tool calls, past the most one step holds, ${MAX_STEP_CALLS}`);
        const seen = new Set(this.openStep!.calls.map((c) => c.id));
        for (const call of d.toolCalls) {
          if (seen.has(call.id)) return fail('call ids', `tool call id ${call.id} is used twice in turn ${d.turn} step ${d.step}`);
          seen.add(call.id);
        }
        return undefined;
      }
      case 'tool/result': {
        const d = ev.data;
        const notOpen = this.notOpenStep(d, 'result pairing');
        if (notOpen) return notOpen;
        const step = this.openStep!;
        if (!step.calls.some((c) => c.id === d.callId)) return fail('result pairing', `no call ${d.callId} in turn ${d.turn} step ${d.step} (orphan result)`);
        if (step.answered.has(d.callId)) return fail('result pairing', `call ${d.callId} already has a result (duplicate result)`);
        // Only a repair answers a call still awaiting its decision (docs/contract.md#tool-approval): it cannot have run.
        if (!e.synthetic && step.approvals?.get(d.callId)?.state === 'pending')
          return fail('approval pairing', `call ${d.callId} awaits approval: it cannot have run`);
        return undefined;
      }
      case 'tool/approval-request': {
        const d = ev.data;
        const notOpen = this.notOpenStep(d, 'approval pairing');
        if (notOpen) return notOpen;
        const step = this.openStep!;
        if (!step.calls.some((c) => c.id === d.callId)) return fail('approval pairing', `no call ${d.callId} in turn ${d.turn} step ${d.step}`);
        if (step.answered.has(d.callId)) return fail('approval pairing', `call ${d.callId} already has a result`);
        if (step.approvals?.has(d.callId)) return fail('approval pairing', `call ${d.callId} was already asked for approval`);
        return undefined;
      }
      case 'tool/approval': {
        const d = ev.data;
        const asked = this.openStep?.approvals?.get(d.callId);
        if (asked?.state === 'pending' && !this.openStep!.answered.has(d.callId)) return undefined;
        const why = asked ? `was already ${asked.state}` : 'is not awaiting approval in the open step';
        return fail('approval pairing', `call ${d.callId} ${why}`);
      }
      case 'surface/replace': {
        const d = ev.data;
        if (d.fromSeq > d.toSeq || d.toSeq >= e.seq)
          return fail('surface range', `surface/replace ${d.fromSeq}..${d.toSeq} must cover earlier events (seq ${e.seq})`);
        return undefined;
      }
      case 'session/title':
      case 'session/model':
      case 'session/tools':
      case 'session/instructions':
      case 'session/runner-tools':
      case 'session/tool-approval':
      case 'session/end-seed':
        return undefined; // no relationship rule (a marker's placement is the recording validator's)
      default:
        otherThanCore(ev);
    }
    return undefined;
  }

  /** The `inbox` rule's bounds (MAX_PENDING_INPUTS, MAX_PENDING_INPUT_BYTES) for one more input, or undefined. */
  inboxFull(d: { text: string; responseFormat?: ResponseFormat }): Violation | undefined {
    return inboxBound(this.inbox.size, this.pendingInputBytes, inputBytes(d));
  }

  /** An independent copy (a candidate batch is checked on one, the state kept if it passes). */
  clone(): LogState {
    const c = Object.assign(new LogState(), this);
    c.inbox = new Map(this.inbox);
    if (this.openStep) {
      const { step, calls, answered, answers, approvals } = this.openStep;
      c.openStep = { step, calls: [...calls], answered: new Set(answered), answers, ...(approvals ? { approvals: new Map(approvals) } : {}) };
    }
    return c;
  }

  /** Inputs added and not removed, in arrival order. */
  get pendingInputs(): PendingInput[] {
    return [...this.inbox.values()].sort((a, b) => a.seq - b.seq).map(({ bytes: _, ...p }) => p);
  }

  get pendingInputCount(): number {
    return this.inbox.size;
  }

  /** What repair must close (docs/contract.md#repair): the open turn and its open step's unanswered calls. */
  openTail(): OpenTail | undefined {
    if (this.openTurn === undefined) return undefined;
    const s = this.openStep;
    return {
      turn: this.openTurn,
      step: s && {
        step: s.step,
        unanswered: s.calls.filter((c) => !s.answered.has(c.id)),
        answers: s.answers,
        ...(s.approvals ? { approvals: s.approvals } : {}),
      },
    };
  }

  /** The open turn waits for a decision (docs/contract.md#tool-approval): a call of its open step awaits approval. */
  get waiting(): boolean {
    const approvals = this.openStep?.approvals;
    if (!approvals) return false;
    for (const [callId, a] of approvals) if (a.state === 'pending' && !this.openStep!.answered.has(callId)) return true;
    return false;
  }

  private isOpenStep(d: { turn: number; step: number }): boolean {
    return d.turn === this.openTurn && d.step === this.openStep?.step;
  }

  private openTurnText() {
    return this.openTurn === undefined ? 'no turn is open' : `turn ${this.openTurn} is open`;
  }

  private notOpenStep(d: { turn: number; step: number }, rule: string): Violation | undefined {
    if (this.isOpenStep(d)) return undefined;
    const open = this.openStep ? `step ${this.openStep.step} of turn ${this.openTurn} is open` : `no step is open (${this.openTurnText()})`;
    return { rule, detail: `turn ${d.turn} step ${d.step} is not the open step: ${open}` };
  }
}

/** The state at the end of `events`. */
export const foldLog = (events: Iterable<LogEvent>): LogState => new LogState().applyAll(events);
