// The agent loop for one session (DESIGN §6): takes inputs from the durable
// inbox one turn at a time and writes turns, steps, model messages and tool
// results. It runs only while its host holds the session's lease.
import path from 'node:path';
import type { NewEvent, ToolCall } from '../core/events.ts';
import { closersFor } from '../core/repair.ts';
import type { PendingInput } from '../core/log-state.ts';
import type { SessionStore, StoredEvent } from '../store/session-store.ts';
import type { SessionFold } from './session-fold.ts';
import { ModelError, type ChatModel } from './models/model.ts';
import { findTool, toolDefinitions, toolEffectOf, ToolError } from './tools.ts';
import type { TurnUpdateSink } from './turn-updates.ts';

export interface RunnerDeps {
  store: SessionStore;
  resolveModel(provider: string): ChatModel;
  defaultModel: { provider: string; model: string };
  sandboxRoot: string;
  toolTimeoutMs: number;
  maxSteps: number;
  now(): Date;
  onUpdate: TurnUpdateSink;
  /** Counts tool executions (tests assert calls are never repeated). */
  onToolRun?: (sessionId: string, call: ToolCall) => void;
}

/** Postgres JSON cannot hold NUL characters; model and tool output may contain them. */
const storable = (text: string) => text.replace(/\u0000/g, '\uFFFD');

/** Why a running turn stops early (`deleted`: the session is gone, nothing is written). */
export type StopReason = 'cancel' | 'shutdown' | 'deleted';

export class SessionRunner {
  private readonly abort = new AbortController();
  private readonly sessionId: string;

  /** `fold` is the host's running view of the session (cold or kept from an earlier lease). */
  constructor(
    private readonly fold: SessionFold,
    private readonly deps: RunnerDeps,
  ) {
    this.sessionId = fold.sessionId;
  }

  stop(reason: StopReason) {
    if (!this.abort.signal.aborted) this.abort.abort(reason);
  }

  get stopReason(): StopReason | undefined {
    return this.abort.signal.aborted ? (this.abort.signal.reason as StopReason) : undefined;
  }

  /** Runs turns until the inbox is empty (or the runner is stopped). */
  async run(): Promise<void> {
    while (!this.abort.signal.aborted) {
      await this.fold.catchUp(this.deps.store.log); // input and settings others appended
      const { state } = this.fold;
      if (state.openTurn !== undefined) {
        // The previous holder of the lease died mid-turn (DESIGN §4).
        await this.repairInterrupted();
        continue;
      }
      const input = state.pendingInputs[0];
      if (!input) return;
      await this.runTurn(state.lastTurn + 1, input);
    }
  }

  /** Appends, and keeps the fold in step with the log. */
  private async append(events: NewEvent[]): Promise<StoredEvent[]> {
    const written = await this.deps.store.append(this.sessionId, events);
    await this.fold.appended(this.deps.store.log, written);
    return written;
  }

  /** Closes the open tail with the shared repair function, cause `interrupted`. */
  private async repairInterrupted(): Promise<number> {
    const closers = closersFor(this.fold.state.openTail(), { kind: 'interrupted', sessionId: this.sessionId }, toolEffectOf);
    if (closers.length === 0) return 0;
    await this.append(closers);
    const turnEnd = closers.at(-1)!.data as { turn: number };
    this.deps.onUpdate({ sessionId: this.sessionId, kind: 'TURN_ENDED', turn: turnEnd.turn, reason: 'interrupted' });
    return closers.length;
  }

  private async runTurn(turn: number, input: PendingInput): Promise<void> {
    const { onUpdate } = this.deps;
    const append = (events: NewEvent[]) => this.append(events);
    await append([
      { type: 'inbox/remove', data: { inputId: input.inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn, inputId: input.inputId } },
    ]);
    onUpdate({ sessionId: this.sessionId, kind: 'TURN_STARTED', turn });
    const endTurn = async (reason: 'completed' | 'failed' | 'cancelled', extra: NewEvent[] = []) => {
      await append([...extra, { type: 'turn/end', data: { turn, reason } }]);
      onUpdate({ sessionId: this.sessionId, kind: 'TURN_ENDED', turn, reason });
    };
    const endStep = (step: number, reason: 'completed' | 'failed' | 'interrupted'): NewEvent => {
      onUpdate({ sessionId: this.sessionId, kind: 'STEP_ENDED', turn, step, reason });
      return { type: 'step/end', data: { turn, step, reason } };
    };
    const agentError = (step: number, message: string): NewEvent => ({
      type: 'plugin/agent/error',
      data: { turn, step, message },
    });

    for (let step = 1; step <= this.deps.maxSteps; step++) {
      if (await this.stoppedBetweenSteps()) return;
      await append([{ type: 'step/start', data: { turn, step } }]);
      onUpdate({ sessionId: this.sessionId, kind: 'STEP_STARTED', turn, step });

      const config = this.fold.state.model ?? this.deps.defaultModel;
      let answer;
      try {
        const model = this.deps.resolveModel(config.provider);
        answer = await model.complete(
          {
            provider: config.provider,
            model: config.model,
            settings: (config as { settings?: Record<string, unknown> }).settings,
            messages: this.fold.conversation.messages(),
            tools: toolDefinitions(),
          },
          {
            signal: this.abort.signal,
            onDelta: (text) => onUpdate({ sessionId: this.sessionId, kind: 'TEXT_DELTA', turn, step, text }),
          },
        );
      } catch (err) {
        if (this.stopReason) return this.closeStopped();
        const message = err instanceof ModelError ? err.message : `model failed: ${(err as Error).message}`;
        return endTurn('failed', [agentError(step, message), endStep(step, 'failed')]);
      }
      await append([{ type: 'model/message', data: { turn, step, text: storable(answer.text), toolCalls: answer.toolCalls.map((c) => ({ ...c, arguments: storable(c.arguments) })) } }]);
      if (answer.toolCalls.length === 0) return endTurn('completed', [endStep(step, 'completed')]);

      for (const call of answer.toolCalls) {
        if (this.stopReason) return this.closeStopped();
        onUpdate({ sessionId: this.sessionId, kind: 'TOOL_RUNNING', turn, step, callId: call.id, toolName: call.name });
        const { status, content } = await this.runTool(call);
        if (this.stopReason && status !== 'ok') return this.closeStopped();
        await append([{
          type: 'tool/result',
          data: { turn, step, callId: call.id, resultId: `res_${this.sessionId}_${call.id}`, status, content: storable(content), name: call.name },
        }]);
        onUpdate({ sessionId: this.sessionId, kind: 'TOOL_FINISHED', turn, step, callId: call.id, toolName: call.name, status });
      }
      await append([endStep(step, 'completed')]);
    }
    await endTurn('failed', [agentError(this.deps.maxSteps, `stopped after ${this.deps.maxSteps} steps`)]);
  }

  private async stoppedBetweenSteps(): Promise<boolean> {
    if (!this.stopReason) return false;
    await this.closeStopped();
    return true;
  }

  /**
   * A user cancel ends the turn `cancelled` (the open step `interrupted`); a
   * shutdown closes the open tail exactly as crash recovery would; a deleted
   * session gets nothing.
   */
  private async closeStopped(): Promise<void> {
    if (this.stopReason === 'deleted') return;
    if (this.stopReason === 'shutdown') {
      await this.repairInterrupted();
      return;
    }
    const open = this.fold.state.openTail();
    if (!open) return;
    const { turn } = open;
    const closers: NewEvent[] = open.step ? [{ type: 'step/end', data: { turn, step: open.step.step, reason: 'interrupted' } }] : [];
    await this.append([...closers, { type: 'turn/end', data: { turn, reason: 'cancelled' } }]);
    this.deps.onUpdate({ sessionId: this.sessionId, kind: 'TURN_ENDED', turn, reason: 'cancelled' });
  }

  private async runTool(call: ToolCall): Promise<{ status: 'ok' | 'error'; content: string }> {
    const tool = findTool(call.name);
    if (!tool) return { status: 'error', content: `unknown tool "${call.name}"` };
    let args: unknown;
    try {
      args = JSON.parse(call.arguments || '{}');
    } catch {
      return { status: 'error', content: `arguments are not valid JSON: ${call.arguments.slice(0, 200)}` };
    }
    const timeout = AbortSignal.timeout(this.deps.toolTimeoutMs);
    const signal = AbortSignal.any([this.abort.signal, timeout]);
    this.deps.onToolRun?.(this.sessionId, call);
    try {
      const content = await tool.run(args, {
        sessionId: this.sessionId,
        signal,
        sandbox: path.join(this.deps.sandboxRoot, this.sessionId),
        now: this.deps.now,
      });
      return { status: 'ok', content };
    } catch (err) {
      if (timeout.aborted) return { status: 'error', content: `timed out after ${this.deps.toolTimeoutMs} ms` };
      if (this.abort.signal.aborted) return { status: 'error', content: 'stopped before the tool finished' };
      return { status: 'error', content: err instanceof ToolError ? err.message : `tool failed: ${(err as Error).message}` };
    }
  }
}
