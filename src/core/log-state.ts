// The one reducer of a log (DESIGN §1): events in, session state out — the
// inbox, turn numbering, the open turn and its open step with their calls,
// the configured model and title. Replay, the open tail that repair closes and
// the agent's running fold are all this fold. Pure.
import type { EventData, LogEvent, ToolCall } from './events.ts';

export interface PendingInput {
  inputId: string;
  text: string;
  seq: number;
}

/** The open step of the open turn: its calls, in call order, and which have a result. */
export interface OpenStep {
  step: number;
  calls: ToolCall[];
  answered: Set<string>;
}

export interface OpenTail {
  turn: number;
  /** The open step of the open turn, with its calls still lacking a result, in call order. */
  step?: { step: number; unanswered: ToolCall[] };
}

export class LogState {
  /** The seq after the last applied event. */
  nextSeq = 0;
  /** Highest turn number started in this lineage (0: none). */
  lastTurn = 0;
  /** turn/start events seen. */
  turnCount = 0;
  /** The open turn, if the log ends inside one. */
  openTurn?: number;
  /**
   * The open step of the open turn. Closed steps and turns are history, even
   * when they hold unanswered calls; plugin events are never inspected.
   */
  openStep?: OpenStep;
  model?: EventData<'session/model'>;
  title?: string;
  private readonly inbox = new Map<string, PendingInput>();

  apply(e: LogEvent): this {
    this.nextSeq = e.seq + 1;
    switch (e.type) {
      case 'inbox/add': {
        const d = e.data as EventData<'inbox/add'>;
        this.inbox.set(d.inputId, { inputId: d.inputId, text: d.text, seq: e.seq });
        break;
      }
      case 'inbox/remove':
        this.inbox.delete((e.data as EventData<'inbox/remove'>).inputId);
        break;
      case 'turn/start': {
        const d = e.data as EventData<'turn/start'>;
        this.turnCount++;
        this.lastTurn = Math.max(this.lastTurn, d.turn);
        this.openTurn = d.turn;
        this.openStep = undefined;
        break;
      }
      case 'turn/end':
        if ((e.data as EventData<'turn/end'>).turn === this.openTurn) this.openTurn = this.openStep = undefined;
        break;
      case 'step/start': {
        const d = e.data as EventData<'step/start'>;
        if (d.turn === this.openTurn) this.openStep = { step: d.step, calls: [], answered: new Set() };
        break;
      }
      case 'step/end':
        if (this.isOpenStep(e.data as EventData<'step/end'>)) this.openStep = undefined;
        break;
      case 'model/message': {
        const d = e.data as EventData<'model/message'>;
        if (this.isOpenStep(d)) this.openStep!.calls.push(...d.toolCalls);
        break;
      }
      case 'tool/result': {
        const d = e.data as EventData<'tool/result'>;
        if (this.isOpenStep(d)) this.openStep!.answered.add(d.callId);
        break;
      }
      case 'session/model':
        this.model = e.data as EventData<'session/model'>;
        break;
      case 'session/title':
        this.title = (e.data as EventData<'session/title'>).title;
        break;
    }
    return this;
  }

  applyAll(events: Iterable<LogEvent>): this {
    for (const e of events) this.apply(e);
    return this;
  }

  /** Inputs added and not removed, in arrival order. */
  get pendingInputs(): PendingInput[] {
    return [...this.inbox.values()].sort((a, b) => a.seq - b.seq);
  }

  get pendingInputCount(): number {
    return this.inbox.size;
  }

  /** What repair must close (DESIGN §2): the open turn and its open step's unanswered calls. */
  openTail(): OpenTail | undefined {
    if (this.openTurn === undefined) return undefined;
    const s = this.openStep;
    return {
      turn: this.openTurn,
      step: s && { step: s.step, unanswered: s.calls.filter((c) => !s.answered.has(c.id)) },
    };
  }

  private isOpenStep(d: { turn: number; step: number }): boolean {
    return d.turn === this.openTurn && d.step === this.openStep?.step;
  }
}

/** The state at the end of `events`. */
export const foldLog = (events: Iterable<LogEvent>): LogState => new LogState().applyAll(events);
