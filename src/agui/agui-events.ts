// Stored events and turn updates → AG-UI events (README "AG-UI"). Pure: the
// HTTP side (agui-handler.ts) feeds a RunTranslator what the log and the turn
// relay deliver, in any interleaving, and writes what it emits.
import { EventType, type BaseEvent, type Message } from '@ag-ui/core';
import type { EventData, LogEvent } from '../core/events.ts';
import { asCoreEvent, dataOf, fieldOf, otherThanCore } from '../core/core-event.ts';
import { answerOf, type TurnUpdate } from '../agent/turn-updates.ts';
import { StreamingAnswers, type StoredAnswer } from '../agent/streaming-answers.ts';
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

/** Text deltas a run holds that it cannot show yet (their step or the answer before them not read yet), and their characters. */
const HELD = { updates: 10_000, chars: 1024 * 1024 };

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
  /** Which deltas show now: a step's answers read, the calls the next one waits for, the deltas held until then. */
  private readonly answers: StreamingAnswers;
  private text?: { step: number; answer: number; messageId: string };
  private lastError?: string;

  constructor(
    private readonly run: { threadId: string; runId: string; inputId: string },
    private readonly emit: (event: BaseEvent) => void,
    /** A run that resumes a turn after its interrupt (docs/agui.md): that turn's open tail, followed from the decision on. */
    resumed?: OpenTail,
    /** The client ids of the calls the client was shown before the run (its snapshot's, messagesOf). */
    private readonly ids = new ClientCallIds(),
    /**
     * The log the run reads: after `afterSeq`, its relay subscription registered when it held `liveFrom` events (a
     * step begun before streams nothing: its answers come whole). By default, from the start, every step live.
     */
    log: { afterSeq: number; liveFrom: number } = { afterSeq: -1, liveFrom: 0 },
  ) {
    this.answers = new StreamingAnswers({ ...log, bounds: HELD });
    if (resumed?.step)
      this.answers.join(
        resumed.turn,
        resumed.step.step,
        resumed.step.answers,
        resumed.step.unanswered.map((c) => c.id),
      );
    if (resumed) this.turn = resumed.turn;
  }

  event(e: LogEvent): void {
    if (this.finished) return;
    // Every event the run reads, in seq order: what it stores, and the deltas it lets through (shown after it).
    const { stored, shown } = this.answers.read(e);
    this.translate(e, stored);
    this.show(shown);
  }

  private translate(e: LogEvent, stored: StoredAnswer | undefined) {
    if (this.turn === undefined) {
      const started = dataOf(e, 'turn/start');
      const removed = dataOf(e, 'inbox/remove');
      if (started?.inputId === this.run.inputId) this.turn = started.turn;
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
        break;
      }
      case 'model/message': {
        const d = ev.data;
        const answer = stored?.answer ?? 1;
        const messageId = assistantMessageId(d.turn, d.step, answer);
        if (this.text && (this.text.step !== d.step || this.text.answer !== answer)) this.closeText();
        if (d.text) {
          if (!this.text) {
            this.text = { step: d.step, answer, messageId };
            this.emit({ type: EventType.TEXT_MESSAGE_START, messageId, role: 'assistant' });
          }
          // Deltas the relay did not deliver (or not yet): the stored answer completes the text.
          for (const delta of textPieces(stored?.rest ?? '', TEXT_DELTA_CHARS)) this.emit({ type: EventType.TEXT_MESSAGE_CONTENT, messageId, delta });
        }
        this.closeText();
        this.ids.message(d);
        for (const c of d.toolCalls) {
          const toolCallId = this.ids.of(d.turn, d.step, c.id);
          this.emit({ type: EventType.TOOL_CALL_START, toolCallId, toolCallName: c.name, parentMessageId: messageId });
          if (c.arguments) this.emit({ type: EventType.TOOL_CALL_ARGS, toolCallId, delta: c.arguments });
          this.emit({ type: EventType.TOOL_CALL_END, toolCallId });
        }
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
    if (this.turn === undefined && u.kind === 'TURN_STARTED' && u.inputId === this.run.inputId) this.turn = u.turn;
    // Only text deltas: the log brings the rest. Before the run's turn is known, any turn's (held until their step shows).
    if (u.kind !== 'TEXT_DELTA' || u.step === undefined || !u.text || (this.turn !== undefined && u.turn !== this.turn)) return;
    this.show(this.answers.relay(u));
  }

  /** Ends the run with RUN_ERROR (once). */
  fail(message: string, code: string): void {
    if (this.finished) return;
    this.closeText();
    this.finished = true;
    this.emit({ type: EventType.RUN_ERROR, message, code });
  }

  /** The deltas of the run's turn that show now (none once it has finished). */
  private show(deltas: readonly TurnUpdate[]) {
    for (const u of deltas) if (!this.finished && u.turn === this.turn && u.step !== undefined && u.text) this.delta(u.step, answerOf(u), u.text);
  }

  private delta(step: number, answer: number, text: string) {
    if (this.text && (this.text.step !== step || this.text.answer !== answer)) this.closeText();
    if (!this.text) {
      this.text = { step, answer, messageId: assistantMessageId(this.turn!, step, answer) };
      this.emit({ type: EventType.TEXT_MESSAGE_START, messageId: this.text.messageId, role: 'assistant' });
    }
    for (const delta of textPieces(text, TEXT_DELTA_CHARS)) this.emit({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: this.text.messageId, delta });
  }

  private closeText() {
    if (this.text) this.emit({ type: EventType.TEXT_MESSAGE_END, messageId: this.text.messageId });
    this.text = undefined;
  }

  private endStep(step: number) {
    if (!this.started.has(step)) return;
    if (this.text?.step === step) this.closeText();
    this.started.delete(step);
    this.emit({ type: EventType.STEP_FINISHED, stepName: stepName(step) });
  }
}
