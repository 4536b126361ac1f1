// The agent loop for one session (DESIGN §6): takes inputs from the durable
// inbox one turn at a time and writes turns, steps, model messages and tool
// results. It runs only while its host holds the session's lease.
import path from 'node:path';
import type { LogEvent, NewEvent, ToolCall } from '../core/events.ts';
import { buildModelMessages } from '../core/model-request.ts';
import { closeOpenTail, findOpenTail } from '../core/repair.ts';
import { replaySession, type PendingInput } from '../core/session-state.ts';
import type { SessionStore } from '../store/session-store.ts';
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

/** Why a running turn stops early. */
export type StopReason = 'cancel' | 'shutdown';

export class SessionRunner {
  private readonly abort = new AbortController();

  constructor(
    private readonly sessionId: string,
    private readonly deps: RunnerDeps,
  ) {}

  stop(reason: StopReason) {
    if (!this.abort.signal.aborted) this.abort.abort(reason);
  }

  private get stopReason(): StopReason | undefined {
    return this.abort.signal.aborted ? (this.abort.signal.reason as StopReason) : undefined;
  }

  /** Runs turns until the inbox is empty (or the runner is stopped). */
  async run(): Promise<void> {
    while (!this.abort.signal.aborted) {
      const log = await this.readLog();
      const state = replaySession(log);
      if (state.openTurn !== undefined) {
        // The previous holder of the lease died mid-turn (DESIGN §4).
        await this.repairInterrupted(log);
        continue;
      }
      const input = state.pendingInputs[0];
      if (!input) return;
      await this.runTurn(log, state.lastTurn + 1, input);
    }
  }

  private async readLog(): Promise<LogEvent[]> {
    const log: LogEvent[] = [];
    for await (const e of this.deps.store.iterateEvents(this.sessionId, 5000)) log.push(e);
    return log;
  }

  /** Closes an open tail with the shared repair function, cause `interrupted`. */
  async repairInterrupted(log?: LogEvent[]): Promise<number> {
    const events = log ?? (await this.readLog());
    const closers = closeOpenTail(events, { kind: 'interrupted', sessionId: this.sessionId }, toolEffectOf);
    if (closers.length === 0) return 0;
    await this.deps.store.append(this.sessionId, closers);
    const turnEnd = closers.at(-1)!.data as { turn: number };
    this.deps.onUpdate({ sessionId: this.sessionId, kind: 'TURN_ENDED', turn: turnEnd.turn, reason: 'interrupted' });
    return closers.length;
  }

  private async runTurn(log: LogEvent[], turn: number, input: PendingInput): Promise<void> {
    const { store, onUpdate } = this.deps;
    const append = async (events: NewEvent[]) => {
      const written = await store.append(this.sessionId, events);
      log.push(...written);
      return written;
    };
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
      if (await this.stoppedBetweenSteps(log)) return;
      await append([{ type: 'step/start', data: { turn, step } }]);
      onUpdate({ sessionId: this.sessionId, kind: 'STEP_STARTED', turn, step });

      const state = replaySession(log);
      const config = state.model ?? this.deps.defaultModel;
      let answer;
      try {
        const model = this.deps.resolveModel(config.provider);
        answer = await model.complete(
          {
            provider: config.provider,
            model: config.model,
            settings: (config as { settings?: Record<string, unknown> }).settings,
            messages: buildModelMessages(log),
            tools: toolDefinitions(),
          },
          {
            signal: this.abort.signal,
            onDelta: (text) => onUpdate({ sessionId: this.sessionId, kind: 'TEXT_DELTA', turn, step, text }),
          },
        );
      } catch (err) {
        if (this.stopReason) return this.closeStopped(log);
        const message = err instanceof ModelError ? err.message : `model failed: ${(err as Error).message}`;
        return endTurn('failed', [agentError(step, message), endStep(step, 'failed')]);
      }
      await append([{ type: 'model/message', data: { turn, step, text: storable(answer.text), toolCalls: answer.toolCalls.map((c) => ({ ...c, arguments: storable(c.arguments) })) } }]);
      if (answer.toolCalls.length === 0) return endTurn('completed', [endStep(step, 'completed')]);

      for (const call of answer.toolCalls) {
        if (this.stopReason) return this.closeStopped(log);
        onUpdate({ sessionId: this.sessionId, kind: 'TOOL_RUNNING', turn, step, callId: call.id, toolName: call.name });
        const { status, content } = await this.runTool(call);
        if (this.stopReason && status !== 'ok') return this.closeStopped(log);
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

  private async stoppedBetweenSteps(log: LogEvent[]): Promise<boolean> {
    if (!this.stopReason) return false;
    await this.closeStopped(log);
    return true;
  }

  /**
   * A user cancel ends the turn `cancelled` (the open step `interrupted`); a
   * shutdown closes the open tail exactly as crash recovery would.
   */
  private async closeStopped(log: LogEvent[]): Promise<void> {
    if (this.stopReason === 'shutdown') {
      await this.repairInterrupted(log);
      return;
    }
    const open = findOpenTail(log);
    if (!open) return;
    const { turn } = open;
    const closers: NewEvent[] = open.step ? [{ type: 'step/end', data: { turn, step: open.step.step, reason: 'interrupted' } }] : [];
    await this.deps.store.append(this.sessionId, [...closers, { type: 'turn/end', data: { turn, reason: 'cancelled' } }]);
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
