// The agent loop for one session (docs/contract.md#agent-loop): takes inputs from the durable
// inbox one turn at a time and writes turns, steps, model messages and tool
// results. It runs only while its host holds the session's lease.
import type { NewEvent, ToolCall } from '../core/events.ts';
import { dataOf } from '../core/core-event.ts';
import { APPROVED_CALL_START, hasDecidedCall } from './approval-resume.ts';
import { toStorableJson, toStorableText } from '../core/storable.ts';
import { closersFor } from '../core/repair.ts';
import { boundedId } from '../core/derived-ids.ts';
import { cancelClosers, timeLimitClosers, timeLimitMessage } from '../core/time-limit.ts';
import { awaitingApproval, deniedContent, needsApproval } from '../core/tool-approval.ts';
import { serverAllowed, toolAllowed } from '../core/tools.ts';
import { WireToolNames } from '../core/wire-names.ts';
import type { OpenTail, PendingInput } from '../core/log-state.ts';
import type { SessionStore, StoredEvent } from '../store/session-store.ts';
import type { Lease } from '../store/leases.ts';
import type { SessionFold } from './session-fold.ts';
import { ContextOverflowError, ModelError, type ChatModel } from './models/model.ts';
import { SHIPPED_MODELS } from './models/model-catalog.ts';
import { ToolError, WORKSPACE_MAX_KEYS, type Tool, type ToolContext } from './tools.ts';
import type { ToolCatalog, CatalogScope } from './tool-catalog.ts';
import { WORKSPACE_WRITE } from '../store/session-log.ts';
import { FILES_CHANGE, type FileChangeRecord } from '../core/file-tree.ts';
import type { FileWorkspace, FileWorkspaces } from './file-workspace.ts';
import { OpenStepCalls, turnUpdatesOf, type TurnUpdateSink } from './turn-updates.ts';
import { OUTPUT_MISMATCH, validateAnswer } from './structured-output.ts';
import { admitCalls, notOfferedContent } from '../core/model-calls.ts';
import { compactionThrough, writeCompaction, type CompactionResult } from './compaction.ts';
import { compactionThreshold, contextWindowOf, estimateRequestTokens, type BudgetOptions } from './context-budget.ts';
import type { ChatMessage, ToolDefinition } from '../core/chat.ts';
import { systemClock, type Clock } from '../core/clock.ts';
import { NOOP_OBSERVER, syntheticResult, type AgentObserver, type ForkOrigin, type TurnEndReason, type TurnObserver } from './agent-observer.ts';

export interface RunnerDeps {
  store: SessionStore;
  /** The lease this runner works under: every append is fenced by it. */
  lease: Lease;
  resolveModel(provider: string): ChatModel;
  defaultModel: { provider: string; model: string };
  /** The tools a session may be offered: built-ins and MCP servers' (tool-catalog.ts). */
  tools: ToolCatalog;
  toolTimeoutMs: number;
  maxSteps: number;
  /** A turn still running after this long is stopped and ends `failed` (its slot is free again); unset: no limit. */
  maxTurnMs?: number;
  /** What the turn limit is counted on (default: the system clock). */
  clock?: Clock;
  now(): Date;
  onUpdate: TurnUpdateSink;
  /** Counts tool executions (tests assert calls are never repeated). */
  onToolRun?: (sessionId: string, call: ToolCall) => void;
  /** Telemetry (src/telemetry/): told of turns, model calls and tool calls; unset: nothing. */
  observer?: AgentObserver;
  /** The sessions' file workspaces on this process (file-workspace.ts); unset: file tools answer an error. */
  workspaces?: FileWorkspaces;
  /** The context budget: the default window and when to compact (context-budget.ts). */
  budget?: BudgetOptions;
}

export type { CompactionResult } from './compaction.ts';

/** An MCP server of the session's tool set that did not start (its tools are not offered this turn): `{turn, step, server, error}`. */
export const TOOL_SERVER_DOWN = 'plugin/agent/tool-server-down';

/** A model call's attempt that failed and is tried again: `{turn, step, attempt, status?, error, delayMs}`. */
export const MODEL_RETRY = 'plugin/agent/retry';

/** How long a turn may run unless configured (FORKLINE_MAX_TURN_MS): far beyond a real turn's steps and tool timeouts. */
export const DEFAULT_MAX_TURN_MS = 30 * 60 * 1000;

/** Postgres cannot hold NUL or unpaired surrogates; model and tool output may contain them. */
const storable = toStorableText;

/**
 * Why a running turn stops early. `deleted` (the session is gone) and
 * `lease-lost` (another process runs it now) write nothing; `turn-limit`: it
 * ran past `maxTurnMs`.
 */
export type StopReason = 'cancel' | 'shutdown' | 'deleted' | 'lease-lost' | 'turn-limit';

/** What a tool call came to. */
interface ToolRun {
  status: 'ok' | 'error';
  content: string;
  writes: Array<{ key: string; value: string }>;
  kept: Array<{ type: string; data: Record<string, unknown> }>;
  /** The file change set of a call that may change files (its contents already stored), when it changed any. */
  files?: FileChangeRecord[];
}

export class SessionRunner {
  private readonly abort = new AbortController();
  private readonly sessionId: string;
  /** The lease went back with the last events (the session was left idle): this runner is done. */
  released = false;
  private readonly observer: AgentObserver;
  /** The observation of the turn this runner is in (ended once its turn/end is stored). */
  private turnObs?: TurnObserver;
  /** The session's file workspace, once a file tool needed it. */
  private files?: FileWorkspace;

  /** `fold` is the host's running view of the session (cold or kept from an earlier lease). */
  constructor(
    private readonly fold: SessionFold,
    private readonly deps: RunnerDeps,
  ) {
    this.sessionId = fold.sessionId;
    this.observer = deps.observer ?? NOOP_OBSERVER;
  }

  /** The model configuration the next model call uses. */
  private modelConfig(): { provider: string; model: string; settings?: Record<string, unknown>; contextTokens?: number } {
    return this.fold.state.model ?? this.deps.defaultModel;
  }

  /**
   * Where this session was forked, when the next turn is its first (telemetry
   * links the turn to the one at the cut). The turn at the cut was run by the
   * session that stores its turn/start: the parent, or an ancestor when the cut
   * falls in what the parent inherited (one cached lineage lookup).
   */
  private async forkOrigin(): Promise<ForkOrigin | undefined> {
    const origin = this.fold.forkOrigin;
    if (!origin || this.fold.turnsSinceSeed > 0) return undefined;
    if (origin.turnStartSeq < 0) return origin;
    const owner = await this.deps.store.log.storedBy(this.sessionId, origin.turnStartSeq);
    return owner ? { ...origin, turnSessionId: owner } : origin;
  }

  /** Tells the observer the open turn ended (its end is stored). */
  private endTurnObservation(reason: TurnEndReason, error?: string) {
    this.turnObs?.end(reason, error);
    this.turnObs = undefined;
  }

  stop(reason: StopReason) {
    if (!this.abort.signal.aborted) this.abort.abort(reason);
  }

  /** The count of turns started when one is open (what a cancel kept on the session's row names: LeaseStore.requestCancel), else undefined. */
  get runningTurnCount(): number | undefined {
    return this.fold.state.openTurn !== undefined ? this.fold.state.turnCount : undefined;
  }

  get stopReason(): StopReason | undefined {
    return this.abort.signal.aborted ? (this.abort.signal.reason as StopReason) : undefined;
  }

  /**
   * Runs what the log asks for: repairs an open turn left by a dead holder,
   * then takes queued inputs one turn at a time. It reads the log once (what
   * was appended since its fold); input that arrives later is seen when its
   * append lands among ours, or by the host, whose release of the lease
   * refuses while input waits.
   */
  async run(): Promise<void> {
    await this.prepare();
    while (!this.abort.signal.aborted && !this.released) {
      const { state } = this.fold;
      if (state.openTurn !== undefined) {
        const open = state.openTail();
        // A turn waiting for a decision stays open (docs/contract.md#crash-recovery): calls cut off while they ran are closed, and the lease goes back.
        if (awaitingApproval(open).length > 0) {
          await this.repairInterrupted();
          return;
        }
        // Decided: the turn goes on from the call, unless it already started running it (then it was in flight).
        const resumeAt = await this.decidedStep(open);
        if (resumeAt !== undefined) {
          await this.runTurnWithin(open!.turn, undefined, resumeAt);
          continue;
        }
        // The previous holder of the lease died mid-turn (docs/contract.md#crash-recovery).
        await this.repairInterrupted();
        continue;
      }
      const input = state.pendingInputs[0];
      if (!input) return;
      await this.runTurnWithin(state.lastTurn + 1, input);
    }
  }

  /**
   * The open step, when its first unanswered call has a decision and has not
   * started running (docs/contract.md#tool-approval): where a turn that waited goes on.
   * One read of the events since the decision, only for such a turn.
   */
  private async decidedStep(open: OpenTail | undefined): Promise<number | undefined> {
    // Only the approved calls' starts after the decision: the events between may be megabytes each.
    const decided = await hasDecidedCall(open, (fromSeq) =>
      this.deps.store.log.ofTypes(this.sessionId, [APPROVED_CALL_START], { fromSeq, toSeq: this.fold.state.nextSeq - 1, limit: 1000 }),
    );
    return decided ? open!.step!.step : undefined;
  }

  /**
   * After run() failed unexpectedly (a bug, an append the store refused): closes
   * the open turn `failed` with `message` as its error report, through the
   * shared repair (docs/contract.md#repair). The fold first reads what the log
   * holds beyond it, so the closers fit the log, not what the failure left in
   * memory. Pending input stays pending. Nothing open: nothing is written.
   */
  async closeFailed(message: string): Promise<void> {
    await this.prepare();
    const open = this.fold.state.openTail();
    const closers = closersFor(open, { kind: 'failed', sessionId: this.sessionId, message }, this.deps.tools.builtinEffectOf);
    if (closers.length === 0) return;
    if (open?.step?.unanswered.some((c) => c.files)) this.deps.workspaces?.of(this.sessionId).invalidate();
    await this.append(closers, true);
    this.endTurnObservation('failed', message);
  }

  /** Reads what was appended since the fold's end (a cold fold starts from the last compaction: session-fold.ts). */
  private async prepare(): Promise<void> {
    await this.fold.catchUpCold(this.deps.store);
    this.deps.store.knowTail(this.sessionId, this.fold.state);
  }

  /**
   * Manual compaction (compactSession), under the lease like a turn and
   * between turns: an open turn a dead holder left is repaired first. Through
   * `throughSeq`, by default the end of the last completed turn.
   */
  async compactNow(opts: { throughSeq?: number | null; instructions?: string | null }): Promise<CompactionResult> {
    await this.prepare();
    if (this.fold.state.openTurn !== undefined) await this.repairInterrupted();
    return this.compact(compactionThrough(this.sessionId, this.fold, opts.throughSeq), 'manual', opts.instructions ?? undefined);
  }

  /** Writes a compaction of the history through `through` with the session's model (compaction.ts). */
  private async compact(through: number, reason: 'manual' | 'automatic', instructions?: string): Promise<CompactionResult> {
    const config = this.modelConfig();
    return writeCompaction({
      append: (events) => this.append(events),
      history: this.fold.conversation.messagesThrough(through),
      through,
      reason,
      instructions,
      summarize: {
        model: this.deps.resolveModel(config.provider),
        config: { provider: config.provider, model: config.model, settings: config.settings },
        requestTokens: this.budget().threshold,
        signal: this.abort.signal,
      },
      mayRecordFailure: () => !this.stopReason || this.stopReason === 'cancel' || this.stopReason === 'turn-limit',
      failure: (err) => (err instanceof ModelError ? err : new ModelError(`compaction failed: ${(err as Error).message}`)),
    });
  }

  /**
   * After the provider refused a request as too long: compacts the history
   * before the running turn (when some is not compacted yet). Whether it did
   * (false: nothing to compact, the refusal stands).
   */
  private async compactAfterOverflow(): Promise<boolean> {
    const through = this.fold.lastTurnEndSeq;
    const covered = this.fold.compaction.lastCompleted?.toSeq ?? -1;
    if (through <= covered) return false;
    await this.compact(through, 'automatic');
    return true;
  }

  /** The session's model's context window and the size that triggers a compaction. */
  private budget(): { window: number; threshold: number } {
    const window = contextWindowOf(this.modelConfig(), this.deps.budget);
    return { window, threshold: compactionThreshold(window, this.deps.budget) };
  }

  /** The estimated tokens of a request of these messages and tools. */
  private estimate(tools: readonly ToolDefinition[], extra: readonly ChatMessage[]): number {
    return estimateRequestTokens(this.fold.conversation.messages(), tools, this.fold.usageMark, extra);
  }

  /**
   * Before a step: a request over the budget's threshold compacts the history
   * before the running turn first (when there is any not yet compacted). A
   * request that still exceeds the window is a reason to fail the turn (not
   * a provider's 400): returned as the message to fail with.
   */
  private async fitBudget(tools: readonly ToolDefinition[], extra: ChatMessage[] = [], flush?: () => Promise<void>): Promise<string | undefined> {
    const { window, threshold } = this.budget();
    let tokens = this.estimate(tools, extra);
    if (tokens <= threshold) return undefined;
    const through = this.fold.lastTurnEndSeq;
    const covered = this.fold.compaction.lastCompleted?.toSeq ?? -1;
    if (through > covered) {
      if (flush) {
        await flush(); // what the step carried is stored before the compaction's start
        extra = [];
      }
      await this.compact(through, 'automatic');
      tokens = this.estimate(tools, extra);
    }
    if (tokens <= window) return undefined;
    const { provider, model } = this.modelConfig();
    return `the request (about ${tokens} tokens) does not fit the context window of ${provider}:${model} (${window} tokens) even after compaction`;
  }

  /** The time-limit message a turn stopped by `maxTurnMs` ends with. */
  get turnLimitMessage(): string {
    return timeLimitMessage('turn', this.deps.maxTurnMs ?? 0);
  }

  /**
   * One turn, stopped when it runs past `maxTurnMs` the way a cancel stops it
   * (closeStopped), so whatever held it — a slow model, a hung tool — gives
   * the slot back.
   */
  private async runTurnWithin(turn: number, input: PendingInput | undefined, resumeStep?: number): Promise<void> {
    const { maxTurnMs, clock = systemClock } = this.deps;
    const limit = maxTurnMs ? clock.setTimeout(() => this.stop('turn-limit'), maxTurnMs) : undefined;
    limit?.unref();
    try {
      await this.runTurn(turn, input, resumeStep);
    } finally {
      clock.clearTimeout(limit);
    }
  }

  /**
   * Appends, and keeps the fold in step with the log. The append that closes a
   * turn gives the lease back in the same statement when it leaves the session
   * idle (`closesTurn`): no separate release round trip.
   */
  private async append(events: NewEvent[], closesTurn = false): Promise<StoredEvent[]> {
    const { store, lease } = this.deps;
    // The calls approval events name, as the log held them before this write.
    const calls = events.some((e) => e.type === 'tool/approval-request' || e.type === 'tool/approval')
      ? new OpenStepCalls(this.fold.state.openTail())
      : undefined;
    let appended;
    try {
      appended = closesTurn
        ? await store.appendReleasingIfIdle(this.sessionId, events, lease)
        : { events: await store.append(this.sessionId, events, { lease }), released: false };
    } catch (err) {
      // A change set that was not stored: the directory no longer matches the log.
      if (events.some((e) => e.type === FILES_CHANGE)) this.files?.invalidate();
      throw err;
    }
    const { events: written, released } = appended;
    for (const e of written) if (e.type === FILES_CHANGE) this.files?.synced(e.seq);
    await this.fold.appended(store.log, written);
    this.released = released;
    // Progress that is in the log is announced from what was stored, once it is stored.
    for (const u of turnUpdatesOf(this.sessionId, written, calls)) this.deps.onUpdate(u);
    return written;
  }

  /**
   * The text the user saw stream in the open step before a cancel or a
   * shutdown stopped it, as that step's model/message (no tool calls), so the
   * log and the model's history hold what was shown.
   */
  private keptPartial(open: OpenTail | undefined, partial: { step: number; text: string } | undefined): NewEvent[] {
    if (!open?.step || partial?.step !== open.step.step) return [];
    return [{ type: 'model/message', data: { turn: open.turn, step: partial.step, text: storable(partial.text), toolCalls: [] } }];
  }

  /** Closes the open tail with the shared repair function, cause `interrupted` (after the streamed text a shutdown cut off). */
  private async repairInterrupted(partial?: { step: number; text: string }): Promise<number> {
    const open = this.fold.state.openTail();
    const closers = [
      ...this.keptPartial(open, partial),
      ...closersFor(open, { kind: 'interrupted', sessionId: this.sessionId }, this.deps.tools.builtinEffectOf),
    ];
    if (closers.length === 0) return 0;
    // A file tool cut off mid-call (here or by another process sharing the directory) may have left changes no change set records:
    // the directory is made again from the log before the next file tool runs, as the repair's wording promises.
    if (open?.step?.unanswered.some((c) => c.files)) this.deps.workspaces?.of(this.sessionId).invalidate();
    await this.append(closers, true);
    if (this.fold.state.openTurn !== undefined) return closers.length; // it waits for a decision: not an end
    if (this.observer.enabled && open) {
      // A turn this runner did not start (its holder died) is observed only as it closes.
      const { provider, model } = this.modelConfig();
      this.turnObs ??= this.observer.turnStarted({ sessionId: this.sessionId, turn: open.turn, provider, model, recovered: true });
      const synthetic = closers.flatMap((c) => dataOf(c, 'tool/result') ?? []).map((d) => syntheticResult(d, 'interrupted'));
      if (synthetic.length) this.turnObs.synthetic(synthetic);
    }
    this.endTurnObservation('interrupted');
    return closers.length;
  }

  /**
   * One turn. Events go out in as few appends as durability allows: a step's
   * start is stored before its model call, a tool call before the tool runs,
   * each result as soon as it exists. What follows with nothing in between —
   * the last result, its step's end and the next step's start; an answer, its
   * step's end and the turn's end — shares one append (one commit instead of
   * three). Turn updates go out once their events are stored (append).
   *
   * Without `input`, a turn that waited for a decision goes on at `resumeStep`
   * (docs/contract.md#tool-approval): that step's calls not yet answered, then the next steps.
   */
  private async runTurn(turn: number, input: PendingInput | undefined, resumeStep?: number): Promise<void> {
    const id = this.sessionId;
    // A turn resumed after an approval has no input here: its schema is the open turn's input's.
    const responseFormat = input ? input.responseFormat : this.fold.conversation.responseFormatOf(this.fold.state.openTurnInputId);
    let carry: NewEvent[] = input
      ? [
          { type: 'inbox/remove', data: { inputId: input.inputId, reason: 'taken' } },
          { type: 'turn/start', data: { turn, inputId: input.inputId } },
        ]
      : [];
    const write = async (events: NewEvent[], closesTurn = false) => {
      await this.append([...carry, ...events], closesTurn);
      carry = [];
    };
    const stepEnd = (step: number, reason: 'completed' | 'failed'): NewEvent => ({ type: 'step/end', data: { turn, step, reason } });
    const turnEnd = (reason: 'completed' | 'failed'): NewEvent => ({ type: 'turn/end', data: { turn, reason } });
    /** Stores the turn's last events, then tells the observer. */
    const finish = async (events: NewEvent[], reason: 'completed' | 'failed', error?: string) => {
      await write(events, true);
      this.endTurnObservation(reason, error);
    };
    const agentError = (step: number, message: string): NewEvent => ({ type: 'plugin/agent/error', data: { turn, step, message } });
    const resultOf = (step: number, call: ToolCall, status: 'ok' | 'error', content: string): NewEvent => ({
      type: 'tool/result',
      data: { turn, step, callId: call.id, resultId: boundedId(`res_${id}_${call.id}`), status, content: storable(content), name: call.name },
    });

    /**
     * Runs the step's calls that have no result yet, in call order; false when
     * the turn does not go on here: stopped, or a call waits for approval (its
     * request is stored with what came before it, and the lease goes back).
     */
    const runCalls = async (step: number, calls: readonly ToolCall[], offered: readonly Tool[]): Promise<boolean> => {
      const open = () => this.fold.state.openStep;
      const todo = calls.filter((c) => !open()?.answered.has(c.id));
      for (const [i, call] of todo.entries()) {
        if (this.stopReason) {
          await write([]);
          await this.closeStopped();
          return false;
        }
        const tool = offered.find((t) => t.name === call.name);
        const approval = open()?.approvals?.get(call.id);
        if (approval?.state === 'pending') return false;
        let ran: ToolRun;
        if (approval?.state === 'denied') {
          // The model hears that it was denied, and why; nothing ran.
          ran = { status: 'error', content: deniedContent(call, approval.reason), writes: [], kept: [] };
        } else if (!tool) {
          // Taken up from the log (it may have come from outside): a tool this turn does not offer never runs, nor is asked for.
          ran = { status: 'error', content: notOfferedContent(call.name), writes: [], kept: [] };
        } else if (!approval && needsApproval(call.name, tool.approval, this.fold.state.toolApproval)) {
          await write([{ type: 'tool/approval-request', data: { turn, step, callId: call.id } }], true);
          this.endTurnObservation('interrupted', 'waiting for approval');
          return false;
        } else {
          if (approval?.state === 'approved') carry.push({ type: APPROVED_CALL_START, data: { turn, step, callId: call.id } });
          if (carry.length > 0) await write([]); // the call (and its start) is stored before the tool runs
          this.deps.onUpdate({ sessionId: id, kind: 'TOOL_RUNNING', turn, step, callId: call.id, toolName: call.name });
          const toolObs = this.turnObs?.toolCall({ step, call });
          ran = await this.runTool(call, tool, turn, step);
          toolObs?.end({ status: ran.status, content: ran.content });
        }
        const { status, content, writes, kept, files } = ran;
        if (this.stopReason && status !== 'ok') {
          // Its result (and any change set) is not recorded: what it did to the files is undone when the directory is next needed.
          if (files) this.files?.invalidate();
          await this.closeStopped();
          return false;
        }
        // A workspace write is stored right before its ok result, in the same append (store/session-log.ts workspaceWrites);
        // what the tool asked to keep (an MCP result) goes with any result.
        // A file change set goes last, right before the result (store/session-log.ts fileChangeSetPages), whatever the status: it is what the call did.
        const recorded: NewEvent[] = [
          // What a server answered, kept whole: made storable like the text the model reads.
          ...kept.map((k) => ({ type: k.type, data: { callId: call.id, ...(toStorableJson(k.data) as Record<string, unknown>) } })),
          ...(status === 'ok' ? writes.map((w) => ({ type: WORKSPACE_WRITE, data: { callId: call.id, key: storable(w.key), value: storable(w.value) } })) : []),
          ...(files?.length ? [{ type: FILES_CHANGE, data: { callId: call.id, changes: files } }] : []),
        ];
        const result = resultOf(step, call, status, content);
        if (i < todo.length - 1) {
          await write([...recorded, result]);
        } else {
          // Nothing happens between the last result, the step's end and what comes next.
          carry = [...carry, ...recorded, result, stepEnd(step, 'completed')];
        }
      }
      return true;
    };

    for (let step = resumeStep ?? 1; step <= this.deps.maxSteps; step++) {
      if (this.stopReason) {
        if (step === 1) return; // nothing stored yet: the input stays queued
        await write([]);
        return this.closeStopped();
      }
      const config = this.modelConfig();
      if (step === resumeStep) {
        // A turn that waited: observed from here (its start was another runner's), its step's calls taken up again.
        if (this.observer.enabled) {
          const { provider, model } = config;
          this.turnObs = this.observer.turnStarted({ sessionId: id, turn, provider, model, recovered: true });
        }
        // Its calls run by the tools the turn offers now: a call from outside (an import, a runner) naming another never runs.
        const { offered } = await this.offeredTools();
        if (!(await runCalls(step, this.fold.state.openStep?.calls ?? [], offered))) return;
        continue;
      }
      if (step === 1 && input && this.observer.enabled) {
        const forkedFrom = await this.forkOrigin();
        this.turnObs = this.observer.turnStarted({
          sessionId: id,
          turn,
          provider: config.provider,
          model: config.model,
          inputId: input.inputId,
          input: input.text,
          forkedFrom,
        });
      }
      const { scope, toolSet, offered, definitions } = await this.offeredTools();
      // The context budget: compact first when the request would not fit (before the turn starts on its first step).
      let overBudget: string | undefined;
      try {
        const pending: ChatMessage[] =
          step === 1 && input
            ? [{ role: 'user', content: input.text }]
            : carry.flatMap((e) => {
                const result = dataOf(e, 'tool/result');
                return result ? [{ role: 'tool' as const, tool_call_id: result.callId, content: result.content }] : [];
              });
        overBudget = await this.fitBudget(offered, pending, step === 1 ? undefined : () => write([]));
      } catch (err) {
        if (this.stopReason) {
          if (step === 1) return; // nothing of the turn stored yet: the input stays queued
          await write([]);
          return this.closeStopped();
        }
        overBudget = err instanceof ModelError ? err.message : `compaction failed: ${(err as Error).message}`;
      }
      // A server the session's tool set names that did not start: said in the turn's log, not left for the answer to a call of a tool not offered.
      const serversDown = step === 1 ? this.deps.tools.failedServers(scope).filter((s) => serverAllowed(s.name, toolSet)) : [];
      await write([
        { type: 'step/start', data: { turn, step } },
        ...serversDown.map((s) => ({ type: TOOL_SERVER_DOWN, data: { turn, step, server: s.name, error: storable(s.error) } })),
      ]);
      if (overBudget) return finish([agentError(step, overBudget), stepEnd(step, 'failed'), turnEnd('failed')], 'failed', overBudget);

      let messages: ChatMessage[];
      let modelObs: ReturnType<TurnObserver['modelCall']> | undefined;
      let streamed = ''; // what the user has seen of this step's answer (kept if they cancel)
      let answer;
      // A provider's context-overflow answer compacts the history and sends the request once more (docs/agents.md "Compaction").
      for (let overflowCompacted = false; ;) {
        messages = this.fold.conversation.messages();
        modelObs = this.turnObs?.modelCall({ step, provider: config.provider, model: config.model, messages });
        const obs = modelObs;
        try {
          const model = this.deps.resolveModel(config.provider);
          answer = await model.complete(
            {
              provider: config.provider,
              model: config.model,
              settings: config.settings, // the model adapter sends only allowed ones (models/settings.ts)
              messages,
              tools: definitions,
              // Every step of the turn asks for it, as the AI SDK's own multi-step calls do: the answer without tool calls is checked.
              ...(responseFormat ? { responseFormat } : {}),
            },
            {
              signal: this.abort.signal,
              onDelta: (text) => {
                streamed += text;
                this.deps.onUpdate({ sessionId: id, kind: 'TEXT_DELTA', turn, step, text });
              },
              // Each failed attempt is recorded in the step before the wait (docs/agents.md "Retries").
              onRetry: async (a) => {
                obs?.retry(a);
                await write([
                  {
                    type: MODEL_RETRY,
                    data: { turn, step, attempt: a.attempt, error: storable(a.error), delayMs: a.delayMs, ...(a.status ? { status: a.status } : {}) },
                  },
                ]);
              },
            },
          );
          break;
        } catch (err) {
          modelObs?.fail(this.stopReason ? `stopped: ${this.stopReason}` : (err as Error).message);
          if (this.stopReason) return this.closeStopped(streamed ? { step, text: streamed } : undefined);
          let message = err instanceof ModelError ? err.message : `model failed: ${(err as Error).message}`;
          if (err instanceof ContextOverflowError && !overflowCompacted && streamed === '') {
            overflowCompacted = true;
            try {
              if (await this.compactAfterOverflow()) continue;
            } catch (compactErr) {
              if (this.stopReason) return this.closeStopped();
              message = `${message} (compacting the history failed: ${(compactErr as Error).message})`;
            }
          }
          // The text the user saw stream before the call failed (a provider's limit, a cut connection) is kept, as a cancel keeps it.
          const seen = this.keptPartial(this.fold.state.openTail(), streamed ? { step, text: streamed } : undefined);
          return finish([...seen, agentError(step, message), stepEnd(step, 'failed'), turnEnd('failed')], 'failed', message);
        }
      }
      // The cost of this call by the price table (known models only), kept with its usage: a later price change rewrites no history.
      const costUsd = answer.usage && (this.deps.budget?.models ?? SHIPPED_MODELS).costOf(config.model, answer.usage);
      modelObs?.end(answer, costUsd);
      // Structured output: the final answer (no tool calls) must match its input's schema; its parsed value is stored with it.
      const checked =
        answer.toolCalls.length === 0 && responseFormat
          ? await validateAnswer(responseFormat, answer.text, this.deps.tools.schemaChecks, await this.tenant())
          : undefined;
      // Every call the model made is recorded; one whose id or name the log cannot hold, whose id is taken (in this step or
      // the conversation), or that names no tool this request offered by the name it went by, is refused (core/model-calls.ts).
      const earlier = new Set(messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.id) : [])));
      const { calls, refused } = admitCalls(answer.toolCalls, earlier, new Set(offered.map((t) => t.name)));
      const message: NewEvent = {
        type: 'model/message',
        data: {
          turn,
          step,
          text: storable(answer.text),
          // Each call keeps the effect of the tool it names as offered now: repair's advice reads it from here.
          toolCalls: calls.map((c) => {
            const tool = offered.find((t) => t.name === c.name);
            const effect = tool?.effect;
            return { id: c.id, name: c.name, arguments: storable(c.arguments), ...(effect ? { effect } : {}), ...(tool?.files ? { files: tool.files } : {}) };
          }),
          ...(answer.usage ? { usage: costUsd !== undefined ? { ...answer.usage, costUsd } : answer.usage } : {}),
          ...(checked?.ok ? { output: checked.value } : {}),
        },
      };
      const reported = (answer.usage?.inputTokens ?? 0) + (answer.usage?.outputTokens ?? 0);
      // The provider's count of this request and answer: the next request's estimate starts from it. A count past the window
      // cannot be this request's (the provider took it): it is not trusted, or one answer's claim would compact the history.
      if (answer.usage && reported <= this.budget().window) this.fold.usageMark = { tokens: reported, messageCount: messages.length + 1 };
      if (answer.toolCalls.length === 0) {
        // A mismatch is the turn's error, saying why (the answer is kept: what the model said).
        if (checked && !checked.ok) {
          const mismatch: NewEvent = { type: 'plugin/agent/error', data: { turn, step, message: checked.reason, code: OUTPUT_MISMATCH } };
          return finish([message, mismatch, stepEnd(step, 'failed'), turnEnd('failed')], 'failed', checked.reason);
        }
        return finish([message, stepEnd(step, 'completed'), turnEnd('completed')], 'completed');
      }
      // Stored before its first tool runs (or with the request for its approval).
      // Refused calls are answered with the answer (they never run, nor wait for approval).
      const recorded = dataOf(message, 'model/message')!.toolCalls;
      carry.push(message, ...recorded.flatMap((c) => (refused.has(c.id) ? [resultOf(step, c, 'error', refused.get(c.id)!)] : [])));
      const toRun = recorded.filter((c) => !refused.has(c.id));
      if (toRun.length === 0) carry.push(stepEnd(step, 'completed'));
      else if (!(await runCalls(step, toRun, offered))) return;
    }
    const tooMany = `stopped after ${this.deps.maxSteps} steps`;
    await finish([agentError(this.deps.maxSteps, tooMany), turnEnd('failed')], 'failed', tooMany);
  }

  /**
   * A user cancel ends the turn `cancelled` (the open step `interrupted`),
   * keeping the text the user already saw stream as that step's model/message
   * (`partial`: the model's history then holds what it said). The time limit
   * closes it the same way, but the turn ends `failed` with the reason in a
   * plugin/agent/error, as other failures the service decides (a model error,
   * the step limit) do: `cancelled` is what a user's cancelTurn leaves, and
   * clients (AG-UI, the dashboard) tell the two apart. A shutdown closes
   * the open tail exactly as crash recovery would; a deleted session, or one
   * another process runs now, gets nothing.
   */
  private async closeStopped(partial?: { step: number; text: string }): Promise<void> {
    // A deleted session's turn ends here; one another process runs now is closed (and observed) there.
    if (this.stopReason === 'deleted') this.endTurnObservation('deleted', 'session deleted');
    if (this.stopReason === 'deleted' || this.stopReason === 'lease-lost') return;
    if (this.stopReason === 'shutdown') {
      await this.repairInterrupted(partial);
      return;
    }
    const open = this.fold.state.openTail();
    if (!open) return;
    const kept: NewEvent[] = this.keptPartial(open, partial);
    if (this.stopReason === 'turn-limit') {
      // The same end as an external runner's step past its limit (RunnerProtocol.renew).
      const message = this.turnLimitMessage;
      await this.append([...kept, ...timeLimitClosers(open, this.fold.state.lastStep, message)], true);
      this.endTurnObservation('failed', message);
      return;
    }
    await this.append([...kept, ...cancelClosers(open)], true);
    this.endTurnObservation('cancelled');
  }

  /**
   * The tools a step offers the model, and runs calls of: the session's set as of now (session/tools in its log: a
   * fork offers those of its cut; none recorded: the catalog's default set, built-ins and the servers marked default),
   * less any tool whose wire name an earlier one has (core/wire-names.ts: it is never offered, so never run).
   */
  private async offeredTools(): Promise<{ scope: CatalogScope; toolSet: readonly string[] | undefined } & Offering> {
    const scope = await this.toolScope();
    const toolSet = this.fold.state.tools ?? this.deps.tools.defaultToolSet(scope);
    return { scope, toolSet, ...offeringOf(await this.deps.tools.tools(scope), toolSet) };
  }

  /** Whose tools a session may use: read once per fold, only when some server is limited to tenants. */
  private async toolScope(): Promise<CatalogScope> {
    if (!this.deps.tools.tenantScoped) return { tenant: '' };
    return { tenant: await this.tenant() };
  }

  /** The session's tenant, read once per fold. */
  private async tenant(): Promise<string> {
    return (this.fold.tenant ??= (await this.deps.store.sessions.tenantOf(this.sessionId)) ?? '');
  }

  private async runTool(call: ToolCall, tool: Tool, turn: number, step: number): Promise<ToolRun> {
    const writes: Array<{ key: string; value: string }> = [];
    const kept: Array<{ type: string; data: Record<string, unknown> }> = [];
    let args: unknown;
    try {
      args = JSON.parse(call.arguments || '{}');
    } catch {
      return { status: 'error', content: `arguments are not valid JSON: ${call.arguments.slice(0, 200)}`, writes, kept };
    }
    if (tool.files && !this.files && this.deps.workspaces) this.files = this.deps.workspaces.of(this.sessionId);
    const files = tool.files ? this.files : undefined;
    // While a call works in the directory, it is not evicted (file-workspace.ts).
    files?.enter();
    try {
      return await this.runInFiles(call, tool, args, turn, step, files);
    } finally {
      files?.leave();
    }
  }

  private async runInFiles(call: ToolCall, tool: Tool, args: unknown, turn: number, step: number, files: FileWorkspace | undefined): Promise<ToolRun> {
    const result = await this.execute(call, tool, args, turn, step, files);
    if (!files || tool.effect === 'read-only' || !files.materialised) return result;
    // What the call changed, by what it touched or a walk of the tree; its contents stored before the change set names them.
    try {
      // A built-in file tool says what it touched; the shell and an MCP workspace server do not: a walk by size and mtime.
      const captured = await files.capture({ walk: tool.files === 'also' || tool.server !== undefined });
      await this.deps.store.files.put(this.sessionId, captured.blobs);
      return { ...result, files: captured.changes };
    } catch (err) {
      files.invalidate();
      const why = err instanceof ToolError ? err.message : `the files could not be recorded: ${(err as Error).message}`;
      return { ...result, status: 'error', content: `${result.content}\n(${why}: the call's file changes were undone)` };
    }
  }

  private async execute(call: ToolCall, tool: Tool, args: unknown, turn: number, step: number, files: FileWorkspace | undefined) {
    const writes: Array<{ key: string; value: string }> = [];
    const kept: Array<{ type: string; data: Record<string, unknown> }> = [];
    const { log } = this.deps.store;
    const callSignal = new CallSignal(this.abort.signal, this.deps.toolTimeoutMs);
    this.deps.onToolRun?.(this.sessionId, call);
    try {
      const content = await tool.run(
        args,
        new CallContext(callSignal, {
          sessionId: this.sessionId,
          // The workspace is the log's: reads as of now, writes stored with the ok result.
          workspace: {
            read: async (key) => writes.findLast((w) => w.key === key)?.value ?? (await log.workspaceEntry(this.sessionId, key))?.value,
            hasRoomFor: async (key) =>
              writes.some((w) => w.key === key) ||
              (await log.workspaceEntry(this.sessionId, key)) !== undefined ||
              (await log.workspace(this.sessionId, WORKSPACE_MAX_KEYS)).entries.length + new Set(writes.map((w) => w.key)).size < WORKSPACE_MAX_KEYS,
            write: (key, value) => void writes.push({ key, value }),
          },
          now: this.deps.now,
          timeoutMs: this.deps.toolTimeoutMs,
          onProgress: (p) =>
            this.deps.onUpdate({
              sessionId: this.sessionId,
              kind: 'TOOL_PROGRESS',
              turn,
              step,
              callId: call.id,
              toolName: call.name,
              progress: p.progress,
              total: p.total,
              text: p.message,
            }),
          record: (event) => void kept.push(event),
          files,
        }),
      );
      return { status: 'ok' as const, content, writes, kept };
    } catch (err) {
      writes.length = 0; // a failed call writes nothing
      const status = 'error' as const;
      if (callSignal.timedOut()) return { status, content: `timed out after ${this.deps.toolTimeoutMs} ms`, writes, kept };
      if (this.abort.signal.aborted) return { status, content: 'stopped before the tool finished', writes, kept };
      return { status, content: err instanceof ToolError ? err.message : `tool failed: ${(err as Error).message}`, writes, kept };
    } finally {
      callSignal.done();
    }
  }
}

/** The tools a step offers, and their definitions as its model request sends them (shared between steps: never changed). */
interface Offering {
  readonly offered: readonly Tool[];
  readonly definitions: ToolDefinition[];
}

/**
 * The last offering made of each catalog answer (`all`, an array the catalog answers again while its tools stay the
 * same), with the tool set it was made for: every step of every turn of sessions with the same tool set offers the
 * same tools, and made anew they were a few kB of garbage a step, the model adapter's wire names and tools too
 * (language-model.ts: kept by `definitions`).
 */
const offerings = new WeakMap<readonly Tool[], Offering & { toolSet: readonly string[] | undefined }>();

/** What `all` offers under `toolSet` (less any tool whose wire name an earlier one has: core/wire-names.ts). */
function offeringOf(all: readonly Tool[], toolSet: readonly string[] | undefined): Offering {
  const kept = offerings.get(all);
  if (kept && kept.toolSet === toolSet) return kept;
  const allowed = all.filter((t) => toolAllowed(t.name, toolSet));
  const names = new WireToolNames(allowed.map((t) => t.name));
  const offered = allowed.filter((t) => names.offers(t.name));
  const definitions = offered.map(({ name, description, parameters, effect }) => ({ name, description, parameters, effect }));
  offerings.set(all, { toolSet, offered, definitions });
  return { offered, definitions };
}

/**
 * What a tool's run is given: its signal made only when the tool reads it
 * (CallSignal). A class, not an object literal with a getter: V8 allocates a
 * literal's accessor pair in the old generation, which would keep each call's
 * context past the young-generation collections.
 */
class CallContext implements ToolContext {
  readonly sessionId: string;
  readonly timeoutMs: number;
  readonly workspace: ToolContext['workspace'];
  readonly now: ToolContext['now'];
  readonly onProgress: ToolContext['onProgress'];
  readonly files: ToolContext['files'];
  readonly record: ToolContext['record'];

  constructor(
    private readonly callSignal: CallSignal,
    c: Omit<ToolContext, 'signal'>,
  ) {
    this.sessionId = c.sessionId;
    this.timeoutMs = c.timeoutMs;
    this.workspace = c.workspace;
    this.now = c.now;
    this.onProgress = c.onProgress;
    this.files = c.files;
    this.record = c.record;
  }

  get signal(): AbortSignal {
    return this.callSignal.signal;
  }
}

/**
 * A tool call's signal: aborted when the runner stops (its reason) or `ms`
 * after the call began (a TimeoutError, as AbortSignal.timeout's), whichever
 * comes first. It is made when the tool first reads it, with the time left
 * then: most tools never read it (a call that cannot be told to stop is not
 * stopped by it either), and an AbortSignal with its timer and listener on the
 * runner's signal was most of a short call's cost (in-process, 4.7–5.9 µs a
 * call against 0.45–0.7 for one never read). `done()` once the call
 * ended clears the timer and the listener. Not AbortSignal.timeout and
 * AbortSignal.any: their timer and signals lived the whole timeout after
 * every call (thousands at once at a few hundred calls a second, each
 * surviving into the old generation), weakly referenced from the runner's signal.
 */
export class CallSignal {
  private controller?: AbortController;
  private timer?: NodeJS.Timeout;
  private expired = false;
  private readonly startedAt = performance.now();

  constructor(
    private readonly stop: AbortSignal,
    private readonly ms: number,
  ) {}

  get signal(): AbortSignal {
    if (this.controller) return this.controller.signal;
    const controller = (this.controller = new AbortController());
    const left = this.ms - (performance.now() - this.startedAt);
    if (this.stop.aborted) controller.abort(this.stop.reason);
    else if (left <= 0) this.expire();
    else {
      this.timer = setTimeout(() => this.expire(), left);
      this.timer.unref();
      this.stop.addEventListener('abort', this.onStop, { once: true });
    }
    return controller.signal;
  }

  /** The call ran past its time (whether or not it read the signal). */
  timedOut(): boolean {
    return this.expired || (this.controller === undefined && performance.now() - this.startedAt >= this.ms);
  }

  done(): void {
    if (this.timer === undefined) return;
    clearTimeout(this.timer);
    this.stop.removeEventListener('abort', this.onStop);
  }

  private readonly onStop = () => this.controller?.abort(this.stop.reason);

  private expire() {
    this.expired = true;
    this.controller?.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }
}
