// One turn's answer as AI SDK UI message stream chunks (docs/api.md, "useChat"):
// what POST /chat and GET /chat/<id>/stream send. It follows the turn that
// takes one input through the session's turn updates (sessionTurns from a
// seq: the log, then live) and reads the stored events the updates point at
// for what they do not carry: a step's tool calls with their input, a tool's
// output, the turn's usage and error. Every chunk it writes is one a replay
// from the log writes again, so a resumed stream rebuilds the same message.
import type { LogEvent } from '../core/events.ts';
import { dataOf } from '../core/core-event.ts';
import type { TurnSummary } from '../core/turn-summary.ts';
import type { TurnUpdate } from '../agent/turn-updates.ts';
import { TEXT_DELTA_CHARS, textPieces } from '../core/text-pieces.ts';

/** A UI message stream chunk (the `ai` package's UIMessageChunk, as JSON). */
export type UIChunk = { type: string } & Record<string, unknown>;

/** What the answer reads from the session's log. */
export interface AnswerReader {
  /** The stored event at `seq`. */
  event(seq: number): Promise<LogEvent | undefined>;
  /** The first model/message at or after `seq` (a step's answer, from its step/start). */
  answerFrom(seq: number): Promise<LogEvent | undefined>;
  /**
   * How the ended turn went: its tokens over all its answers (however many: summed by the store, not read out)
   * and, when it failed, its agent's error report.
   */
  turnOutcome(turn: TurnSummary & { endSeq: number; reason: string }): Promise<TurnOutcome>;
  /** Whether the call still awaits a decision now (the log's end). */
  awaitsApproval(callId: string): Promise<boolean>;
}

/** What an answer's end says of its turn (AnswerReader.turnOutcome). */
export interface TurnOutcome {
  usage: { inputTokens: number; outputTokens: number };
  /** A failed turn's error report's message (its beginning, when long). */
  error?: string;
}

/** Where an answer picks its turn up again after a decision (POST /chat with an approval response). */
export interface TurnInProgress {
  turn: number;
  /** Seq of its turn/start. */
  turnStartSeq: number;
  /** The step whose calls were written already. */
  step: number;
}

/** The metadata every answer carries: which session answered, for which input (docs/api.md). */
export interface AnswerMetadata {
  chatId: string;
  sessionId: string;
  inputId: string;
  turn?: number;
  /** How the turn ended (turn/end's reason). */
  reason?: string;
  usage?: { inputTokens: number; outputTokens: number };
  /** The call the answer stopped at: it awaits approval (docs/api.md, "Tool approval"). */
  awaitingApproval?: string;
}

/** The assistant message that answers an input: the same id whenever the answer is streamed or replayed. */
export const answerMessageId = (inputId: string) => `ans_${inputId}`;
/** The input an answer message id names, if it is one. */
export const inputOfAnswer = (messageId: string | undefined) => (messageId?.startsWith('ans_') ? messageId.slice(4) : undefined);

const INTERRUPTED = 'the turn was interrupted: the service stopped while it ran; send the next message to go on';

export class ChatAnswer {
  turn?: number;
  finished = false;
  private turnStartSeq = 0;
  private readonly stepStarts = new Map<number, number>();
  /** Steps whose tool calls were written as tool-input-available. */
  private readonly inputsOut = new Set<number>();
  private openText?: string;

  constructor(
    private readonly meta: AnswerMetadata,
    private readonly reader: AnswerReader,
    private readonly emit: (chunk: UIChunk) => void,
    /** An answer that goes on with a turn the client has seen up to a decision: its turn, and the step whose calls it has. */
    continuing?: TurnInProgress,
  ) {
    if (continuing) {
      this.turn = continuing.turn;
      this.turnStartSeq = continuing.turnStartSeq;
      this.inputsOut.add(continuing.step);
    }
  }

  /** The message's `start` (written first, before the turn takes the input). */
  start(): void {
    this.emit({ type: 'start', messageId: answerMessageId(this.meta.inputId), messageMetadata: { ...this.meta } });
  }

  async update(u: TurnUpdate): Promise<void> {
    if (this.finished) return;
    if (this.turn === undefined) {
      if (u.kind === 'TURN_STARTED' && u.inputId === this.meta.inputId) {
        this.turn = u.turn;
        this.turnStartSeq = u.seq ?? 0;
        this.emit({ type: 'message-metadata', messageMetadata: { ...this.meta, turn: u.turn } });
      }
      return;
    }
    if (u.turn !== this.turn) return;
    const step = u.step ?? 0;
    switch (u.kind) {
      case 'STEP_STARTED':
        if (u.seq !== undefined) this.stepStarts.set(step, u.seq);
        this.emit({ type: 'start-step' });
        break;
      case 'TEXT_DELTA': {
        if (!u.text) break;
        const id = `txt_${u.turn}_${step}`;
        if (this.openText !== id) {
          this.closeText();
          this.openText = id;
          this.emit({ type: 'text-start', id });
        }
        // A subscriber's queue merges the deltas a slow reader has not taken yet: written back in pieces.
        for (const delta of textPieces(u.text, TEXT_DELTA_CHARS)) this.emit({ type: 'text-delta', id, delta });
        break;
      }
      case 'TOOL_FINISHED': {
        this.closeText();
        await this.inputsOf(step);
        const result = u.seq === undefined ? undefined : await this.reader.event(u.seq);
        const d = dataOf(result, 'tool/result');
        if (!d) break;
        if (d.status === 'ok') this.emit({ type: 'tool-output-available', toolCallId: d.callId, output: d.content, dynamic: true });
        else
          this.emit({
            type: 'tool-output-error',
            toolCallId: d.callId,
            errorText: d.status === 'error' ? d.content : `${d.status}: ${d.content}`,
            dynamic: true,
          });
        break;
      }
      // The AI SDK's tool approval: the call's part asks (approvalId: the call's id), and the answer
      // stops while it waits; the client's response comes back in the next POST (chat-handler.ts).
      case 'APPROVAL_REQUESTED': {
        if (!u.callId) break;
        this.closeText();
        await this.inputsOf(step);
        this.emit({ type: 'tool-approval-request', approvalId: u.callId, toolCallId: u.callId });
        if (!(await this.reader.awaitsApproval(u.callId))) break; // decided since: the replay goes on
        this.finished = true;
        this.emit({ type: 'finish-step' });
        this.emit({ type: 'finish', finishReason: 'tool-calls', messageMetadata: { ...this.meta, turn: this.turn, awaitingApproval: u.callId } });
        break;
      }
      // The call's output (or, denied, its error) follows as its result.
      case 'APPROVAL_DECIDED':
        break;
      case 'STEP_ENDED':
        this.closeText();
        await this.inputsOf(step);
        this.emit({ type: 'finish-step' });
        break;
      case 'TURN_ENDED':
        await this.end(u.reason ?? 'completed', u.seq);
        break;
      // Relay-only, in no fixed order with the log's events: the calls' inputs are
      // written when the first result (or the step's end) is read, in log order.
      case 'TOOL_RUNNING':
      case 'TOOL_PROGRESS':
        break;
    }
  }

  /** Ends the answer with an error part (once): the turn cannot be followed further. */
  fail(errorText: string): void {
    if (this.finished) return;
    this.closeText();
    this.finished = true;
    this.emit({ type: 'error', errorText });
    this.emit({ type: 'finish', finishReason: 'error', messageMetadata: { ...this.meta, ...(this.turn ? { turn: this.turn } : {}) } });
  }

  private async end(reason: string, seq: number | undefined) {
    this.closeText();
    const { usage, error } =
      seq === undefined || this.turn === undefined
        ? { usage: { inputTokens: 0, outputTokens: 0 }, error: undefined }
        : await this.reader.turnOutcome({ turn: this.turn, inputId: this.meta.inputId, startSeq: this.turnStartSeq, endSeq: seq, reason });
    this.meta.turn = this.turn;
    this.meta.reason = reason;
    this.meta.usage = usage;
    const ending: UIChunk[] =
      reason === 'completed'
        ? [{ type: 'finish', finishReason: 'stop', messageMetadata: { ...this.meta } }]
        : reason === 'cancelled'
          ? [
              { type: 'abort', reason: 'the turn was cancelled' },
              { type: 'finish', finishReason: 'other', messageMetadata: { ...this.meta } },
            ]
          : [
              { type: 'error', errorText: reason === 'interrupted' ? INTERRUPTED : (error ?? `the turn ended ${reason}`) },
              { type: 'finish', finishReason: 'error', messageMetadata: { ...this.meta } },
            ];
    // Finished once written: an ending its stream refused (an error report over FORKLINE_MAX_RESPONSE_BYTES) is failed instead.
    for (const chunk of ending) this.emit(chunk);
    this.finished = true;
  }

  /** The step's tool calls with their input (once), from its stored answer; nothing while it is not stored yet. */
  private async inputsOf(step: number) {
    if (this.inputsOut.has(step)) return;
    const from = this.stepStarts.get(step);
    if (from === undefined) return;
    const answer = await this.reader.answerFrom(from);
    const d = dataOf(answer, 'model/message');
    if (!d || d.turn !== this.turn || d.step !== step) return;
    this.inputsOut.add(step);
    for (const c of d.toolCalls) {
      this.emit({ type: 'tool-input-available', toolCallId: c.id, toolName: c.name, input: parseArguments(c.arguments), dynamic: true });
    }
  }

  private closeText() {
    if (this.openText) this.emit({ type: 'text-end', id: this.openText });
    this.openText = undefined;
  }
}

/** A call's arguments as the JSON they hold (the model's raw text when they are not JSON). */
function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return text;
  }
}
