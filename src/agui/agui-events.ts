// Stored events and turn updates → AG-UI events (README "AG-UI"). Pure: the
// HTTP side (agui-handler.ts) feeds a RunTranslator what the log and the turn
// relay deliver, in any interleaving, and writes what it emits.
import { EventType, type BaseEvent, type Message } from '@ag-ui/core';
import type { EventData, LogEvent } from '../core/events.ts';
import { asCoreEvent, dataOf, fieldOf, otherThanCore } from '../core/core-event.ts';
import { answerOf, type TurnUpdate } from '../agent/turn-updates.ts';
import type { OpenTail } from '../core/log-state.ts';
import { TEXT_DELTA_CHARS, textPieces } from '../core/text-pieces.ts';
import { callKey, SentCallIds } from '../core/model-request.ts';

/**
 * The AG-UI id of the assistant message of a turn's step (the same in a fork as in its parent); a step's later
 * answers (a model called again within it) are messages of their own.
 */
export const assistantMessageId = (turn: number, step: number, answer = 1) => (answer > 1 ? `msg_${turn}_${step}_${answer}` : `msg_${turn}_${step}`);
export const stepName = (step: number) => `step ${step}`;

/**
 * The ids a client is shown calls under. AG-UI clients key a tool call by its
 * id, but a log may reuse one in a later step (docs/contract.md#append-rules):
 * a call keeps its id unless a call shown before it was given that id, then it
 * goes by `<id>_t<turn>s<step>`, the rule of the model request
 * (core/model-request.ts SentCallIds), every call shown as it is made. One
 * instance follows a client's view: the snapshot, then its run (docs/agui.md).
 */
export class ClientCallIds {
  private readonly ids = new SentCallIds();

  /** Gives a message's calls their ids (in log order). */
  message(d: EventData<'model/message'>): void {
    this.ids.assign(d, () => true);
  }

  /** The client id of a call of that turn and step. */
  of(turn: number, step: number, callId: string): string {
    return this.ids.sent(callKey(turn, step, callId), callId);
  }
}

/**
 * The conversation of a log as AG-UI messages: user inputs as their turns take
 * them, answers, tool results. Not core/model-request.ts's Conversation, on
 * purpose: that is what the *model* reads (compacted ranges replaced by their
 * summary, unanswered calls dropped, OpenAI chat shape); a UI's snapshot is
 * what the *user* saw, every message with an id that stays the same in a fork
 * and each result's status. Calls go by their client ids (`ids`, which a run
 * then goes on with).
 */
export function messagesOf(events: Iterable<LogEvent>, ids = new ClientCallIds()): Message[] {
  const inputs = new Map<string, string>();
  const out: Message[] = [];
  /** The step of the last answer and how many answers of it came (a step's answers are consecutive in the log). */
  let last = { turn: 0, step: 0, answers: 0 };
  for (const e of events) {
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'inbox/add':
        inputs.set(ev.data.inputId, ev.data.text);
        break;
      case 'turn/start':
        out.push({ id: ev.data.inputId, role: 'user', content: inputs.get(ev.data.inputId) ?? '' });
        inputs.delete(ev.data.inputId);
        break;
      case 'model/message': {
        const d = ev.data;
        ids.message(d);
        last = last.turn === d.turn && last.step === d.step ? { ...last, answers: last.answers + 1 } : { turn: d.turn, step: d.step, answers: 1 };
        out.push({
          id: assistantMessageId(d.turn, d.step, last.answers),
          role: 'assistant',
          ...(d.text ? { content: d.text } : {}),
          ...(d.toolCalls.length
            ? {
                toolCalls: d.toolCalls.map((c) => ({
                  id: ids.of(d.turn, d.step, c.id),
                  type: 'function' as const,
                  function: { name: c.name, arguments: c.arguments },
                })),
              }
            : {}),
        });
        break;
      }
      case 'tool/result': {
        const d = ev.data;
        out.push({
          id: d.resultId,
          role: 'tool',
          toolCallId: ids.of(d.turn, d.step, d.callId),
          content: d.content,
          ...(d.status !== 'ok' ? { error: d.status } : {}),
        });
        break;
      }
      // No message of their own: brackets, settings, markers, and replacements
      // (the user saw the replaced history as it happened).
      case 'inbox/remove':
      case 'step/start':
      case 'step/end':
      case 'turn/end':
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

const MAX_EARLY_UPDATES = 10_000;
/** Characters of text deltas a run holds that it cannot show yet (their step or the answer before them not read yet). */
const MAX_HELD_CHARS = 1024 * 1024;
/** What a held delta costs besides its text (its answer's key). */
const HELD_OVERHEAD = 100;

/** What a resume entry's payload answering a tool approval holds (docs/agui.md). */
export const APPROVAL_RESPONSE_SCHEMA = {
  type: 'object',
  properties: { approved: { type: 'boolean' }, reason: { type: 'string' } },
  required: ['approved'],
};

/**
 * Follows the turn that takes one input and emits its AG-UI events: steps,
 * the answer's text (streamed from TEXT_DELTA updates, completed from the
 * stored model/message), tool calls and results, then RUN_FINISHED or
 * RUN_ERROR. Events of other turns are ignored.
 */
export class RunTranslator {
  turn?: number;
  finished = false;
  private readonly started = new Set<number>();
  /** Steps whose step/end was read (later deltas are late copies). */
  private readonly ended = new Set<number>();
  /**
   * A step's answers read (model/message events: later deltas of them are late copies), and the calls of the last one
   * with no result read yet: the next answer's text waits for them (a model is called again with their results).
   */
  private readonly answers = new Map<number, { stored: number; waiting: Set<string> }>();
  /** Deltas not shown yet, by `turn:step:answer`: their step's start, or the answer before them and its results, not read yet. */
  private readonly pending = new Map<string, string>();
  /** What `pending` holds (its texts' characters, HELD_OVERHEAD each): at most MAX_HELD_CHARS. */
  private heldChars = 0;
  /** Answers some of whose deltas were not held (past MAX_HELD_CHARS): their stored text is shown whole. */
  private readonly dropped = new Set<string>();
  private early: TurnUpdate[] = [];
  private text?: { step: number; answer: number; messageId: string; streamed: string };
  private lastError?: string;

  constructor(
    private readonly run: { threadId: string; runId: string; inputId: string },
    private readonly emit: (event: BaseEvent) => void,
    /** A run that resumes a turn after its interrupt (docs/agui.md): that turn's open tail, followed from the decision on. */
    resumed?: OpenTail,
    /** The client ids of the calls the client was shown before the run (its snapshot's, messagesOf). */
    private readonly ids = new ClientCallIds(),
  ) {
    if (resumed?.step) this.answers.set(resumed.step.step, { stored: resumed.step.answers, waiting: new Set(resumed.step.unanswered.map((c) => c.id)) });
    if (resumed) this.begin(resumed.turn);
  }

  event(e: LogEvent): void {
    if (this.finished) return;
    if (this.turn === undefined) {
      const started = dataOf(e, 'turn/start');
      const removed = dataOf(e, 'inbox/remove');
      if (started?.inputId === this.run.inputId) this.begin(started.turn);
      else if (removed?.inputId === this.run.inputId && removed.reason === 'cancelled') {
        this.fail('the input was cancelled before a turn took it', 'CANCELLED');
      }
      return;
    }
    if (fieldOf(e, 'turn') !== this.turn) return;
    if (e.type === 'plugin/agent/error') {
      const message = fieldOf(e, 'message');
      if (typeof message === 'string') this.lastError = message;
      return;
    }
    const ev = asCoreEvent(e);
    switch (ev.type) {
      case 'step/start': {
        const d = ev.data;
        this.started.add(d.step);
        this.emit({ type: EventType.STEP_STARTED, stepName: stepName(d.step) });
        this.release(d.step);
        break;
      }
      case 'model/message': {
        const d = ev.data;
        const answer = (this.answers.get(d.step)?.stored ?? 0) + 1;
        const messageId = assistantMessageId(d.turn, d.step, answer);
        if (this.text && (this.text.step !== d.step || this.text.answer !== answer)) this.closeText();
        if (d.text) {
          if (!this.text) {
            this.text = { step: d.step, answer, messageId, streamed: '' };
            this.emit({ type: EventType.TEXT_MESSAGE_START, messageId, role: 'assistant' });
          }
          const { streamed } = this.text;
          // Deltas the relay did not deliver (or not yet): the stored answer completes the text.
          if (d.text.length > streamed.length && d.text.startsWith(streamed)) {
            for (const delta of textPieces(d.text.slice(streamed.length), TEXT_DELTA_CHARS))
              this.emit({ type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta });
          }
        }
        this.closeText();
        this.forget(d.turn, d.step, answer);
        this.answers.set(d.step, { stored: answer, waiting: new Set(d.toolCalls.map((c) => c.id)) });
        this.ids.message(d);
        for (const c of d.toolCalls) {
          const toolCallId = this.ids.of(d.turn, d.step, c.id);
          this.emit({ type: EventType.TOOL_CALL_START, toolCallId, toolCallName: c.name, parentMessageId: messageId });
          if (c.arguments) this.emit({ type: EventType.TOOL_CALL_ARGS, toolCallId, delta: c.arguments });
          this.emit({ type: EventType.TOOL_CALL_END, toolCallId });
        }
        this.release(d.step);
        break;
      }
      case 'tool/result': {
        const d = ev.data;
        this.emit({
          type: EventType.TOOL_CALL_RESULT,
          messageId: d.resultId,
          toolCallId: this.ids.of(d.turn, d.step, d.callId),
          content: d.content,
          role: 'tool',
        });
        const at = this.answers.get(d.step);
        if (at?.waiting.delete(d.callId) && at.waiting.size === 0) this.release(d.step);
        break;
      }
      case 'step/end':
        this.endStep(ev.data.step);
        break;
      case 'turn/end': {
        for (const step of [...this.started]) this.endStep(step);
        if (ev.data.reason === 'completed') {
          this.finished = true;
          this.emit({
            type: EventType.RUN_FINISHED,
            threadId: this.run.threadId,
            runId: this.run.runId,
            result: { sessionId: this.run.threadId, turn: this.turn },
          });
        } else {
          this.fail(this.lastError ?? `the turn ended ${ev.data.reason}`, ev.data.reason.toUpperCase());
        }
        break;
      }
      case 'tool/approval-request': {
        // The run pauses: AG-UI's interrupt outcome; a run with `resume` answers it (docs/agui.md), naming the call by its client id.
        const call = this.ids.of(ev.data.turn, ev.data.step, ev.data.callId);
        this.closeText();
        // A run ends with no step open (AG-UI clients refuse RUN_FINISHED inside one); its resume goes on with the turn.
        for (const step of [...this.started]) this.endStep(step);
        this.finished = true;
        this.emit({
          type: EventType.RUN_FINISHED,
          threadId: this.run.threadId,
          runId: this.run.runId,
          outcome: {
            type: 'interrupt',
            interrupts: [
              {
                id: call,
                reason: 'tool_approval',
                toolCallId: call,
                message: `Approve tool call ${call}?`,
                responseSchema: APPROVAL_RESPONSE_SCHEMA,
              },
            ],
          },
        } as BaseEvent);
        break;
      }
      // Nothing a run's client is shown: its input and turn/start began the run; a decision, its resume.
      case 'inbox/add':
      case 'inbox/remove':
      case 'turn/start':
      case 'session/title':
      case 'session/model':
      case 'session/tools':
      case 'session/instructions':
      case 'session/runner-tools':
      case 'session/tool-approval':
      case 'tool/approval':
      case 'surface/replace':
      case 'session/end-seed':
        break;
      default:
        otherThanCore(ev);
    }
  }

  update(u: TurnUpdate): void {
    if (this.finished) return;
    if (this.turn === undefined) {
      if (u.kind === 'TURN_STARTED' && u.inputId === this.run.inputId) this.begin(u.turn);
      else if (u.kind === 'TEXT_DELTA' && u.step !== undefined && u.text) this.hold(u.turn, u.step, answerOf(u), u.text);
      else if (this.early.length < MAX_EARLY_UPDATES) this.early.push(u);
      return;
    }
    if (u.turn !== this.turn || u.kind !== 'TEXT_DELTA' || u.step === undefined || !u.text) return;
    const answer = answerOf(u);
    const at = this.answers.get(u.step);
    const stored = at?.stored ?? 0;
    // Its model/message came first (the text is out already), or some of its deltas were not kept (its stored text is shown whole).
    if (this.ended.has(u.step) || answer <= stored || this.dropped.has(`${u.turn}:${u.step}:${answer}`)) return;
    // Its step's start, or the answer before it and that answer's results, not read yet: shown once they are.
    if (!this.started.has(u.step) || answer > stored + 1 || at?.waiting.size) this.hold(u.turn, u.step, answer, u.text);
    else this.delta(u.step, answer, u.text);
  }

  /** Ends the run with RUN_ERROR (once). */
  fail(message: string, code: string): void {
    if (this.finished) return;
    this.closeText();
    this.finished = true;
    this.emit({ type: EventType.RUN_ERROR, message, code });
  }

  private begin(turn: number) {
    this.turn = turn;
    const early = this.early;
    this.early = [];
    for (const u of early) this.update(u);
    // Deltas held before the turn was known: only this turn's are ever shown.
    for (const key of [...this.pending.keys()]) if (!key.startsWith(`${turn}:`)) this.forgetKey(key);
  }

  /** Keeps a delta that cannot be shown yet, within MAX_HELD_CHARS: past it, its answer's text is shown whole when stored. */
  private hold(turn: number, step: number, answer: number, text: string) {
    const key = `${turn}:${step}:${answer}`;
    if (this.dropped.has(key)) return;
    const had = this.pending.get(key);
    const cost = text.length + (had === undefined ? HELD_OVERHEAD : 0);
    if (this.heldChars + cost > MAX_HELD_CHARS) {
      this.forgetKey(key);
      this.dropped.add(key);
      return;
    }
    this.pending.set(key, (had ?? '') + text);
    this.heldChars += cost;
  }

  /** Shows the held deltas of the step's next answer once it may stream (its step started, the answer before it and its results read). */
  private release(step: number) {
    const at = this.answers.get(step);
    if (!this.started.has(step) || this.ended.has(step) || at?.waiting.size) return;
    const answer = (at?.stored ?? 0) + 1;
    const key = `${this.turn}:${step}:${answer}`;
    const text = this.pending.get(key);
    this.forgetKey(key);
    if (text && !this.dropped.has(key)) this.delta(step, answer, text);
  }

  /** Drops what is held of an answer (its stored text is shown). */
  private forget(turn: number, step: number, answer: number) {
    this.forgetKey(`${turn}:${step}:${answer}`);
  }

  private forgetKey(key: string) {
    const text = this.pending.get(key);
    if (text === undefined) return;
    this.pending.delete(key);
    this.heldChars -= text.length + HELD_OVERHEAD;
  }

  private delta(step: number, answer: number, text: string) {
    if (this.text && (this.text.step !== step || this.text.answer !== answer)) this.closeText();
    if (!this.text) {
      this.text = { step, answer, messageId: assistantMessageId(this.turn!, step, answer), streamed: '' };
      this.emit({ type: EventType.TEXT_MESSAGE_START, messageId: this.text.messageId, role: 'assistant' });
    }
    this.text.streamed += text;
    for (const delta of textPieces(text, TEXT_DELTA_CHARS)) this.emit({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.text.messageId, delta });
  }

  private closeText() {
    if (this.text) this.emit({ type: EventType.TEXT_MESSAGE_END, messageId: this.text.messageId });
    this.text = undefined;
  }

  private endStep(step: number) {
    if (!this.started.has(step)) return;
    if (this.text?.step === step) this.closeText();
    this.ended.add(step);
    for (const key of [...this.pending.keys()]) if (key.startsWith(`${this.turn}:${step}:`)) this.forgetKey(key);
    this.started.delete(step);
    this.emit({ type: EventType.STEP_FINISHED, stepName: stepName(step) });
  }
}
