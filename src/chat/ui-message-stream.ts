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
import { answerOf, type TurnUpdate } from '../agent/turn-updates.ts';
import { TEXT_DELTA_CHARS, textPieces } from '../core/text-pieces.ts';

/** A UI message stream chunk (the `ai` package's UIMessageChunk, as JSON). */
export type UIChunk = { type: string } & Record<string, unknown>;

/** What the answer reads from the session's log. */
export interface AnswerReader {
  /**
   * The stored answers (model/message) and tool results at or after `seq`, ascending: a page of them (`more` when
   * the page was cut by its count or bytes, not by the log's end).
   */
  answersAndResults(seq: number): Promise<{ events: LogEvent[]; more: boolean }>;
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
  /** The seq through which the client has the turn's calls and results (the first decision's). */
  seenThrough: number;
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
  /**
   * The turn's stored answers and results read ahead of the updates (a page at a time: the log is append-only, so a
   * page read stays true), not taken yet; `readFrom` is the seq the next page starts at, and every one of them
   * through `readThrough` has been read.
   */
  private ahead: LogEvent[] = [];
  private readFrom = 0;
  private readThrough = -1;
  private openText?: string;

  constructor(
    private readonly meta: AnswerMetadata,
    private readonly reader: AnswerReader,
    private readonly emit: (chunk: UIChunk) => void,
    /** An answer that goes on with a turn the client has seen up to a decision: its turn, and how far it has its calls. */
    continuing?: TurnInProgress,
  ) {
    if (continuing) {
      this.turn = continuing.turn;
      this.turnStartSeq = continuing.turnStartSeq;
      this.readFrom = continuing.seenThrough + 1;
      this.readThrough = continuing.seenThrough;
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
        this.readFrom = this.readThrough = this.turnStartSeq;
        this.emit({ type: 'message-metadata', messageMetadata: { ...this.meta, turn: u.turn } });
      }
      return;
    }
    if (u.turn !== this.turn) return;
    const step = u.step ?? 0;
    switch (u.kind) {
      case 'STEP_STARTED':
        this.emit({ type: 'start-step' });
        break;
      case 'TEXT_DELTA': {
        if (!u.text) break;
        // A step's later answers (a model called again within it) are text parts of their own.
        const answer = answerOf(u);
        const id = answer > 1 ? `txt_${u.turn}_${step}_${answer}` : `txt_${u.turn}_${step}`;
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
        if (u.seq === undefined) break;
        const seq = u.seq;
        const d = dataOf(
          (await this.inputsThrough(seq)).find((e) => e.seq === seq),
          'tool/result',
        );
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
        if (u.seq !== undefined) await this.inputsThrough(u.seq);
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
        if (u.seq !== undefined) await this.inputsThrough(u.seq);
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

  /**
   * Writes the tool calls of the turn's answers stored through `seq` (the update's event) that were not written yet,
   * each with its input: every answer of a step, however many it holds (a model called again within a step), each
   * once. Returns the results read with them, the one at `seq` last when `seq` is one.
   */
  private async inputsThrough(seq: number): Promise<LogEvent[]> {
    const events = await this.through(seq);
    for (const e of events) {
      const d = dataOf(e, 'model/message');
      if (!d || d.turn !== this.turn) continue;
      for (const c of d.toolCalls) {
        this.emit({ type: 'tool-input-available', toolCallId: c.id, toolName: c.name, input: parseArguments(c.arguments), dynamic: true });
      }
    }
    return events;
  }

  /** The stored answers and results after those taken, through `seq` (stored already), in order; read a page ahead. */
  private async through(seq: number): Promise<LogEvent[]> {
    while (this.readThrough < seq) {
      const page = await this.reader.answersAndResults(this.readFrom);
      this.ahead.push(...page.events);
      const last = page.events.at(-1)?.seq;
      if (last !== undefined) this.readFrom = last + 1;
      // A page the log's end cut holds everything stored when it was read: `seq` was.
      this.readThrough = page.more ? (last ?? seq) : Math.max(seq, last ?? seq);
    }
    let n = 0;
    while (n < this.ahead.length && this.ahead[n].seq <= seq) n++;
    return this.ahead.splice(0, n);
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
