// The external runner protocol (docs/contract.md#agent-loop): agents outside forkline
// run sessions of their runner pool with the leases, the append check and the
// model request forkline's own runner uses.
//   claim     a lease (fencing token, expiry), on one session or on as many
//             of a pool's runnable sessions as the runner has room for; an
//             open turn left by a holder whose lease expired is repaired
//             (cause `interrupted`, the shared repair function) before the
//             claim returns, or sooner by the runnable feed's sweep when the
//             lease ends (the lease decides who repairs: exactly once)
//   append    a batch of core events, checked by the one reducer's rules like
//             any runner's append, fenced by the token, conditional on the
//             log's length; with `release`, the batch that leaves the session
//             with nothing to run gives the lease back in the same statement
//   request   what the session's next model call would be sent: the fold's
//             conversation (core/model-request.ts), and the tools: the
//             runner's declared set for a session of a pool, the session's
//             set from the catalog for one forkline runs; when that request
//             is over the session's budget, the compaction the runner should
//             write first
//   tools     a runner declares the tools it runs (session/runner-tools,
//             written when the set changes); its calls are recorded with the
//             declared effects (core/runner-tools.ts)
//   compact   compactSession on a runner session: forkline's summariser with
//             the session's model, under a lease of the service's own taken
//             between the runner's turns (docs/runners.md)
//   runnable  sessions of a pool with work nobody holds: those waiting at
//             subscribe time, then as the log or the lease changes (NOTIFY,
//             through the sessionsChanged feed), and a look when a held lease
//             ends (or every sweepMs) for leases that expired with nobody to
//             announce it, repairing the open turns they left
import { decodeEvent, type NewEvent } from '../core/events.ts';
import { FILES_CHANGE, type FilesChangeData } from '../core/file-tree.ts';
import type { SeqChangeSet } from '../store/file-blobs.ts';
import { ForklineError, badInput } from '../core/errors.ts';
import { closersFor } from '../core/repair.ts';
import { cancelClosers, timeLimitClosers, timeLimitMessage } from '../core/time-limit.ts';
import type { LogState, OpenTail } from '../core/log-state.ts';
import { APPROVED_CALL_START, hasDecidedCall } from '../agent/approval-resume.ts';
import { toolAllowed } from '../core/tools.ts';
import { dataOf, fieldOf } from '../core/core-event.ts';
import type { ResponseFormat, RunnerTool } from '../core/events.ts';
import { duplicateToolNames, runnerToolInfo, runnerToolsDiffer, withDeclaredEffects } from '../core/runner-tools.ts';
import type { ChatMessage } from '../core/chat.ts';
import { sleep, systemClock, type Clock, type ClockTimer } from '../core/clock.ts';
import { DEFAULT_FOLD_CACHE_BYTES, FoldCache, SessionFold } from '../agent/session-fold.ts';
import { compactionThrough, writeCompaction, type CompactionResult } from '../agent/compaction.ts';
import { compactionThreshold, contextWindowOf, estimateRequestTokens, type BudgetOptions } from '../agent/context-budget.ts';
import type { ChatModel } from '../agent/models/model.ts';
import type { ToolCatalog } from '../agent/tool-catalog.ts';
import type { ToolDefinition } from '../core/chat.ts';
import { OpenStepCalls, readOpenTail, turnUpdatesRead, type TurnUpdate } from '../agent/turn-updates.ts';
import type { Scope, SessionRow, SessionStore, StoredEvent } from '../store/session-store.ts';
import { readingFor, type StatementScope } from '../db/statement-deadlines.ts';
import { encodeLeaseTaken, LEASES_CHANNEL, SESSIONS_CHANNEL } from '../store/channels.ts';
import { checkCallFirst } from '../core/call-first.ts';
import { DEFAULT_RUNNER_LEASE_MS, externalRunnerOf, leaseIsFree, RunnerLeases, type RunnerClaim, type RunnerLease } from '../store/leases.ts';

/**
 * Events that are the service's to write, not a runner's: input (sendMessage), a fork's marker, and a
 * person's decision on a call (approveToolCall/denyToolCall record who made it: a runner's would forge it).
 */
const NOT_A_RUNNERS = new Set(['inbox/add', 'session/end-seed', 'tool/approval']);

/**
 * A repair's words in a runner's event (docs/contract.md#repair): the statuses a fork or crash repair gives a
 * call it cut off and the reasons it closes a step or turn with. A runner's would pass its own event off as
 * the service's (a `not-started` result tells the model the call never ran in this branch); undefined: none.
 */
function repairWordOf(e: NewEvent): string | undefined {
  const status = e.type === 'tool/result' ? fieldOf(e, 'status') : undefined;
  if (status === 'interrupted' || status === 'not-started') return `status ${status}`;
  const reason = e.type === 'step/end' || e.type === 'turn/end' ? fieldOf(e, 'reason') : undefined;
  if (reason === 'interrupted' || reason === 'forked') return `reason ${reason}`;
  return undefined;
}

/** The open step's unanswered calls with their approvals (ModelRequest.openCalls). */
function openCallsOf(step: LogState['openStep']): OpenCall[] {
  if (!step) return [];
  return step.calls
    .filter((c) => !step.answered.has(c.id))
    .map((c) => {
      const a = step.approvals?.get(c.id);
      return { id: c.id, name: c.name, arguments: c.arguments, ...(a ? { approval: { state: a.state, ...('reason' in a ? { reason: a.reason } : {}) } } : {}) };
    });
}

export const DEFAULT_RUNNABLE_SWEEP_MS = 5000;
/** How long an external runner may hold a step open (FORKLINE_RUNNER_MAX_STEP_MS; 0: no limit): a model call and its tools. */
const DEFAULT_RUNNER_MAX_STEP_MS = 10 * 60 * 1000;
/** The events a step's time is counted from (RunnerProtocol.renew): the turn moving on to a step, and a decision on a call. */
const STEP_CLOCK = ['turn/start', 'step/start', 'step/end', 'tool/approval'];
/** The runnable feed's looks for ended leases are at least this far apart. */
const MIN_LOOK_MS = 100;

export interface ModelRequest {
  messages: ChatMessage[];
  /** A runner session's: the tools its runner declared (none yet: empty); otherwise the session's set from forkline's catalog. */
  tools: Array<ToolDefinition & { server?: string }>;
  /** The turn the next model call is in (the open one, or the next one); null: nothing to run. */
  turn: number | null;
  /** The step number the next model call gets; null: nothing to run. */
  step: number | null;
  /** The input the next turn takes (outside an open turn). */
  inputId: string | null;
  /** Whether a turn is open (the call continues it) or the request starts the next one. */
  inTurn: boolean;
  /** Whether `step` is already started (its step/start is in the log): the runner writes the step's model/message next. */
  stepOpen: boolean;
  model: { provider: string; model: string; settings?: Record<string, unknown> } | null;
  /** The log's length the request was built from: the expectedEventCount of the batch that continues it. */
  eventCount: number;
  /** Set when the request is over the session's budget: the compaction to write before sending it. */
  compaction: RunnerCompaction | null;
  /** The JSON Schema the turn's input asks the final answer to match (structured output), or null. */
  responseFormat: ResponseFormat | null;
  /** The open step's calls without a result, in call order, with their approval state: what a runner taking the step up settles first. */
  openCalls: OpenCall[];
  /** The tools whose calls wait for a person's decision by the session's choice (session/tool-approval): names, `<server>__*`, `*`. */
  approvalRequired: string[];
}

/** A call of the open step without a result (docs/runners.md, Tool approval). */
export interface OpenCall {
  id: string;
  name: string;
  arguments: string;
  /** Its approval: none asked (undefined), `pending` (the session waits), or the decision with its reason. */
  approval?: { state: 'pending' | 'approved' | 'denied'; reason?: string };
}

/** A compaction the runner should write before its next model call (its own model summarises `messages`). */
export interface RunnerCompaction {
  reason: 'automatic';
  fromSeq: number;
  /** The last seq the summary covers: the end of the last completed turn. */
  throughSeq: number;
  /** The request's estimated tokens, and the threshold it is over (the session's context window × FORKLINE_COMPACT_AT). */
  estimatedTokens: number;
  thresholdTokens: number;
  /** The model-visible history through throughSeq (OpenAI chat format): what the summary replaces. */
  messages: ChatMessage[];
}

/** What compaction needs: the session's model (forkline's summariser) and the context budget. */
export interface RunnerCompactionDeps {
  resolveModel(provider: string): ChatModel;
  /** The model of a session that names none. */
  defaultModel: { provider: string; model: string; settings?: Record<string, unknown>; contextTokens?: number };
  budget?: BudgetOptions;
}

export interface RunnerProtocolDeps {
  store: SessionStore;
  tools: ToolCatalog;
  publish(update: TurnUpdate): void;
  /** Sessions of the scope's tenant as they change (LiveEvents.sessionsChanged). */
  sessionsChanged(scope: Scope): AsyncIterableIterator<SessionRow>;
  sweepMs?: number;
  /** A step a runner holds open longer is ended at its next renewal (FORKLINE_RUNNER_MAX_STEP_MS; default DEFAULT_RUNNER_MAX_STEP_MS; 0: no limit). */
  maxStepMs?: number;
  /** Sweeps, compaction waits and the step limit (default: the system clock). */
  clock?: Clock;
  /** Hot statements prepared per connection (as the store's). */
  prepare?: boolean;
  compaction: RunnerCompactionDeps;
  /** The agent's fold cache bound in estimated heap bytes (DEFAULT_FOLD_CACHE_BYTES): this cache keeps a quarter of it. */
  foldCacheBytes?: number;
  /** Where a failure nobody waits for goes (a repair the runnable feed made). */
  log?: (msg: string, err?: unknown) => void;
}

/** What a claim does besides taking the lease. */
export interface ClaimOptions {
  /** Write the next turn's opening (its input taken, turn/start, step 1's start) when the session's request starts one. */
  startTurn?: boolean;
}

/** What an append did: the events stored, the log's length after them, whether the lease was given back. */
export interface RunnerAppend {
  events: StoredEvent[];
  eventCount: number;
  released: boolean;
}

/** How often a claim's startTurn reads the request again when input was appended meanwhile (then it leaves the opening to the runner). */
const START_TURN_ATTEMPTS = 3;
/** How long the service holds a session it repairs (it gives it back as soon as the repair is written). */
const REPAIR_LEASE_MS = 10_000;
/** The holder a runner session shows while forkline compacts it (Session.runnerHolder). */
const COMPACTION_HOLDER = 'forkline-compaction';
/** How long compactSession waits for a runner's turn to end (then SESSION_BUSY), and the lease it takes meanwhile. */
const COMPACT_WAIT_MS = 60_000;
const COMPACTION_LEASE_MS = 120_000;

export class RunnerProtocol {
  readonly leases: RunnerLeases;
  /** Folds of sessions whose model request was read: the next read applies only new events. */
  private readonly folds: FoldCache;

  constructor(private readonly deps: RunnerProtocolDeps) {
    // A quarter of the agent's bound (docs/operations.md, FORKLINE_FOLD_CACHE_MAX_BYTES).
    this.folds = new FoldCache(200, Math.max(1, Math.floor((deps.foldCacheBytes ?? DEFAULT_FOLD_CACHE_BYTES) / 4)));
    this.leases = new RunnerLeases(deps.store.pool, { prepare: deps.prepare, trees: deps.store.trees });
  }

  async claim(scope: Scope, sessionId: string, runnerId: string, ttlMs = DEFAULT_RUNNER_LEASE_MS, opts: ClaimOptions = {}): Promise<RunnerClaim> {
    return this.claimed(scope, await this.leases.claim(scope.tenant, sessionId, runnerId, ttlMs), opts);
  }

  /** Up to `max` of the pool's sessions with work that nobody holds, claimed in one statement (oldest first). */
  async claimRunnable(
    scope: Scope,
    pool: string,
    runnerId: string,
    max: number,
    ttlMs = DEFAULT_RUNNER_LEASE_MS,
    opts: ClaimOptions = {},
  ): Promise<RunnerClaim[]> {
    const claims = await this.leases.claimRunnable(scope.tenant, pool, runnerId, ttlMs, max);
    // One session's failure must not lose the others' leases: the runner gets every claim that held (a failed one was given back).
    const settled = await Promise.allSettled(claims.map((c) => this.claimed(scope, c, opts)));
    const held = settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed && held.length === 0) throw failed.reason;
    return held;
  }

  /**
   * A claim as its runner gets it. A holder that died mid-turn (its lease
   * expired) left the turn open (status RUNNING): its open tail is closed
   * before the new holder writes anything, exactly as forkline's runner does.
   * With `startTurn`, the next turn's opening is written under the new lease.
   */
  private async claimed(scope: Scope, claim: RunnerClaim, opts: ClaimOptions): Promise<RunnerClaim> {
    try {
      this.deps.store.log.remember(claim.session); // the model request's first read needs its lineage
      const repaired = claim.session.status === 'RUNNING' && (await this.repair(scope, claim));
      const started = opts.startTurn === true && (await this.startTurn(scope, claim));
      if (!repaired && !started) return claim;
      return { ...claim, session: await this.deps.store.requireSession(scope, claim.session.id) };
    } catch (err) {
      // A runner answered with an error never learns the token: the lease goes back now, not when it expires.
      await this.release(scope, claim.session.id, claim.lease.token).catch(() => {});
      throw err;
    }
  }

  /**
   * The runner's first batch, written by its claim (docs/runners.md, step 2):
   * when the session's request starts a new turn and needs no compaction
   * first, inbox/remove {taken}, turn/start and step 1's start, by the same
   * append a runner's batch goes through (the rules, the fence). The step's
   * request then reads `stepOpen`: the runner's first write is the model's
   * message. Whether anything was written.
   */
  private async startTurn(scope: Scope, { session, lease }: RunnerClaim): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const request = await this.modelRequest(scope, { id: session.id, runner: session.runner });
      if (request.inTurn || request.turn == null || request.inputId == null || request.compaction) return false;
      const opening: NewEvent[] = [
        { type: 'inbox/remove', data: { inputId: request.inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn: request.turn, inputId: request.inputId } },
        { type: 'step/start', data: { turn: request.turn, step: 1 } },
      ];
      try {
        await this.write(scope, session.id, opening, lease.token, request.eventCount);
        return true;
      } catch (err) {
        // A message (or a cancel) appended between the request and the opening: read it again; past that, the runner opens the turn itself.
        if (!(err instanceof ForklineError && err.code === 'SESSION_BUSY')) throw err;
        if (attempt === START_TURN_ATTEMPTS) return false;
      }
    }
  }

  /** Closes the open tail of a session claimed with its turn open (cause interrupted); whether anything was written. */
  private async repair(scope: Scope, { session, lease }: RunnerClaim): Promise<boolean> {
    const { log } = this.deps.store;
    const last = session.eventCount - 1;
    // The open turn folded by byte-bounded pages: a turn of many large events is never held whole.
    const { open } = await log.openTailFolded(session.id, last);
    // A turn whose call was just decided is the runner's to take up, not a crash (docs/contract.md#tool-approval).
    if (await hasDecidedCall(open, (fromSeq) => log.ofTypes(session.id, [APPROVED_CALL_START], { fromSeq, toSeq: last, limit: 1000 }))) return false;
    const closers = closersFor(open, { kind: 'interrupted', sessionId: session.id }, this.deps.tools.builtinEffectOf);
    if (closers.length) await this.write(scope, session.id, closers, lease.token, session.eventCount);
    return closers.length > 0;
  }

  /**
   * Repairs the open turns of the pool nobody holds (their runner's lease
   * ended), each under a lease of the service's own taken for it and given
   * back at once: a runner's claim and this never both repair one turn.
   */
  private async repairAbandoned(scope: Scope, pool: string): Promise<void> {
    for (const claim of await this.leases.claimForRepair(scope.tenant, pool, REPAIR_LEASE_MS)) {
      try {
        await this.repair(scope, claim);
      } catch (err) {
        // One session's repair that fails (a message appended meanwhile, a log it cannot close in one append) ends
        // neither the pool's feed nor the other repairs: a claim of that session tries again, and answers why.
        this.deps.log?.(`repairing session ${claim.session.id} of runner pool ${pool} failed`, err);
      } finally {
        await this.deps.store.transaction(async (client) => {
          await this.leases.releaseRepaired(claim.lease, client);
          await this.deps.store.notify(SESSIONS_CHANNEL, claim.session.id, client); // work left (a message that came meanwhile) is offered again
        });
      }
    }
  }

  /**
   * Extends the lease. The lease is what a live runner keeps renewing, so a
   * step it holds open past `maxStepMs` (it renews, but its model or tool
   * never answers) is ended here as forkline's own agent ends a turn past its
   * limit (core/time-limit.ts): the step `interrupted`, the turn `failed` with
   * the limit as its error; the lease goes back (input waiting is offered to
   * the pool again) and the renewal answers LEASE_LOST saying so.
   */
  async renew(scope: Scope, sessionId: string, token: number, ttlMs = DEFAULT_RUNNER_LEASE_MS): Promise<RunnerLease> {
    const { status, eventCount, ...lease } = await this.leases.renew(scope.tenant, sessionId, token, ttlMs);
    // A cancel kept on the row and not ended by cancelTurn itself (kept by a service that did not end a runner's
    // turn at once) ends the turn here.
    if (lease.cancelRequested) {
      const ended = await this.endOpenTurn(scope, sessionId, (open) => cancelClosers(open), { token, eventCount });
      if (ended === 'ended')
        throw new ForklineError('LEASE_LOST', `session ${sessionId}: its turn was cancelled (cancelTurn); it ended cancelled and the lease went back`, {
          sessionId,
        });
      return lease;
    }
    const limitMs = this.deps.maxStepMs ?? DEFAULT_RUNNER_MAX_STEP_MS;
    if (status !== 'RUNNING' || limitMs <= 0) return lease;
    // The step's time: since the turn last moved on to a step (or a person decided on one of its calls: the wait is not the runner's).
    const [moved] = await this.deps.store.log.ofTypes(sessionId, STEP_CLOCK, {
      fromSeq: 0,
      toSeq: eventCount - 1,
      limit: 1,
      descending: true,
      withoutTexts: true,
    });
    if (!moved || (this.deps.clock ?? systemClock).now() - moved.createdAt.getTime() <= limitMs) return lease;
    const message = `${timeLimitMessage('step', limitMs)} (FORKLINE_RUNNER_MAX_STEP_MS)`;
    if ((await this.endOpenTurn(scope, sessionId, (open, lastStep) => timeLimitClosers(open, lastStep, message), { token, eventCount })) === 'ended') {
      throw new ForklineError('LEASE_LOST', `session ${sessionId}: ${message}; its turn ended failed and the lease went back`, { sessionId });
    }
    return lease;
  }

  /**
   * A user's cancelTurn on a session of a runner pool whose turn runs: the turn is ended here and now, as forkline's
   * own agent ends a cancelled one (the open step `interrupted`, the turn `cancelled`), and the lease goes back, so
   * the runner's next append or renewal answers LEASE_LOST naming the cancel and nothing more of its turn is stored
   * (docs/runners.md "A user's cancel"). `no-turn`: no turn runs; `held`: the service holds the session (a repair,
   * a compaction's claim), which ends the turn itself.
   */
  async cancelTurn(scope: Scope, sessionId: string): Promise<'ended' | 'no-turn' | 'held'> {
    return this.endOpenTurn(scope, sessionId, (open) => cancelClosers(open), 'cancel');
  }

  /**
   * Ends the turn open on a runner pool's session with `closers` and frees its lease (input waiting is offered to the
   * pool again), in one transaction holding the session's row lock, the lock every append takes: a runner's batch
   * goes in wholly before (and its calls are closed with the rest of the turn) or finds the lease gone (LEASE_LOST),
   * never in between. A renewal's (`token`, `eventCount`: what it read) ends its runner's turn only if the log has not
   * moved since (`no-turn` otherwise: the next renewal looks again); a user's `cancel` ends whichever turn runs,
   * held by a runner or left by one, and not one the service holds (`held`: nothing written).
   */
  private async endOpenTurn(
    scope: Scope,
    sessionId: string,
    closers: (open: OpenTail, lastStep: number) => NewEvent[],
    by: { token: number; eventCount: number } | 'cancel',
  ): Promise<'ended' | 'no-turn' | 'held'> {
    let written: { events: StoredEvent[]; eventCount: number } | undefined;
    const outcome = await this.deps.store.transaction(async (client) => {
      const row = await this.leases.lock(client, scope.tenant, sessionId);
      if (row.status !== 'RUNNING') return 'no-turn';
      if (by === 'cancel') {
        // The service's own holders (a repair, a compaction's claim) finish first; a runner's lease is taken from it.
        if (!row.free && (!row.held || externalRunnerOf(row.leaseOwner) === COMPACTION_HOLDER)) return 'held';
      } else if (row.leaseToken !== by.token || row.eventCount !== by.eventCount) return 'no-turn';
      const { openTurn } = await this.deps.store.log.openTurnFolded(sessionId, row.eventCount - 1, client);
      const open = openTurn?.openTail();
      if (!openTurn || !open) return 'no-turn';
      const lease = row.free ? undefined : { sessionId, token: row.leaseToken };
      const events = await this.deps.store.append(sessionId, closers(open, openTurn.lastStep), { client, scope, expectedEventCount: row.eventCount, lease });
      await this.leases.freeAfterEnd(client, sessionId, row.leaseToken, by === 'cancel');
      await this.deps.store.notify(SESSIONS_CHANNEL, sessionId, client);
      // Its runner hears it at once (runnerLeasesTaken), not at its next write: it stops the tool it runs.
      const runnerId = row.held ? externalRunnerOf(row.leaseOwner) : undefined;
      if (runnerId !== undefined) {
        const taken = { tenant: scope.tenant, sessionId, token: row.leaseToken, runnerId, reason: by === 'cancel' ? 'cancelled' : 'time limit' };
        await this.deps.store.notify(LEASES_CHANNEL, encodeLeaseTaken(taken), client);
      }
      written = { events, eventCount: row.eventCount };
      return 'ended';
    });
    // Announced once committed: a client told of the turn's end reads it.
    if (written) await this.stored(sessionId, { events: written.events, released: true }, written.eventCount);
    return outcome;
  }

  /** Gives the lease back; runnableSessions subscribers see the session again when work remains. */
  async release(scope: Scope, sessionId: string, token: number): Promise<void> {
    await this.deps.store.transaction(async (client) => {
      await this.leases.release(scope.tenant, sessionId, token, client);
      await this.deps.store.notify(SESSIONS_CHANNEL, sessionId, client);
    });
  }

  /**
   * A runner's batch: LEASE_LOST (nothing written) unless `token` is the
   * held lease's; SESSION_BUSY unless the log is `expectedEventCount` long;
   * BAD_USER_INPUT {rule, seq} for the first event that breaks the log's
   * rules (the store's append check). All three are the append statement's
   * own conditions: no read before it. With `release`, a batch that leaves
   * the session with nothing to run (no open turn, no queued input) gives the
   * lease back in the same statement. Turn updates derived from what was
   * stored go to sessionTurns subscribers, as forkline's runner sends them.
   */
  async append(
    scope: Scope,
    sessionId: string,
    token: number,
    expectedEventCount: number,
    events: NewEvent[],
    opts: { release?: boolean } = {},
  ): Promise<RunnerAppend> {
    for (const [i, e] of events.entries()) {
      if (NOT_A_RUNNERS.has(e.type)) {
        throw badInput(`event ${expectedEventCount + i} (${e.type}): a runner does not write ${e.type} events`, {
          rule: 'runner events',
          seq: expectedEventCount + i,
        });
      }
      const repairWord = repairWordOf(e);
      if (repairWord) {
        throw badInput(`event ${expectedEventCount + i} (${e.type}): ${repairWord} is a repair's to write, not a runner's (a result is ok or error)`, {
          rule: 'runner events',
          seq: expectedEventCount + i,
        });
      }
    }
    checkCallFirst(events, expectedEventCount);
    await this.checkFileChanges(scope, sessionId, token, expectedEventCount, events);
    const declared = events.some((e) => e.type === 'model/message') ? await this.declaredTools(sessionId, expectedEventCount) : undefined;
    return this.write(scope, sessionId, withDeclaredEffects(events, declared, expectedEventCount), token, expectedEventCount, opts.release ?? false);
  }

  /**
   * A runner's change sets keep the rules forkline's own agent keeps
   * (docs/files.md): each right before its call's result in the same batch,
   * paths by the one rule (the codec), content the tenant holds with its
   * stored size, the session's quota at every change set. The contents they
   * name become the session's (store/file-blobs.ts `checkChangeSets`).
   */
  private async checkFileChanges(scope: Scope, sessionId: string, token: number, expectedEventCount: number, events: NewEvent[]): Promise<void> {
    const changeSets: SeqChangeSet[] = [];
    for (const [i, e] of events.entries()) {
      if (e.type !== FILES_CHANGE) continue;
      const seq = expectedEventCount + i;
      let data: FilesChangeData;
      try {
        data = decodeEvent(e.type, e.data) as FilesChangeData;
      } catch (err) {
        if (err instanceof ForklineError) throw badInput(`event ${seq} (${e.type}): ${err.message}`, { ...err.details, seq });
        throw err;
      }
      const next = events[i + 1];
      if (next?.type !== 'tool/result' || dataOf(next, 'tool/result')?.callId !== data.callId) {
        throw badInput(`event ${seq} (${e.type}): a change set comes right before its call's tool/result, in the same batch`, { rule: 'change set', seq });
      }
      changeSets.push({ seq, data });
    }
    if (changeSets.length === 0) return;
    await this.leases.held(scope.tenant, sessionId, token);
    const files = this.deps.store.files;
    const named = await files.checkChangeSets(scope.tenant, changeSets, await files.tree(sessionId), undefined, (seq) => `event ${seq} (${FILES_CHANGE})`);
    await files.adopt(sessionId, named);
  }

  /**
   * The runner's declared tools as of the log's first `eventCount` events:
   * from the fold kept of the session when it is there (the runner's last
   * request), else the log's last session/runner-tools.
   */
  private async declaredTools(sessionId: string, eventCount: number): Promise<RunnerTool[] | undefined> {
    const fold = this.folds.peek(sessionId);
    if (fold && fold.nextSeq === eventCount) return fold.state.runnerTools;
    const last = await this.deps.store.log.lastOfType(sessionId, 'session/runner-tools', eventCount - 1);
    return dataOf(last, 'session/runner-tools')?.tools;
  }

  /**
   * The lease holder declares the tools it runs: a session/runner-tools event
   * when the set differs from the one in force (forks inherit it), nothing
   * otherwise. LEASE_LOST unless `token` is the held lease's.
   */
  async declareTools(scope: Scope, sessionId: string, token: number, tools: RunnerTool[]): Promise<void> {
    const twice = duplicateToolNames(tools);
    if (twice.length) throw badInput(`runner tools name "${twice[0]}" twice`, { rule: 'runner tools' });
    await this.leases.held(scope.tenant, sessionId, token);
    const current = await this.deps.store.log.lastOfType(sessionId, 'session/runner-tools');
    if (!runnerToolsDiffer(dataOf(current, 'session/runner-tools')?.tools, tools)) return;
    await this.write(scope, sessionId, [{ type: 'session/runner-tools', data: { tools } }], token);
  }

  private async write(scope: Scope, sessionId: string, events: NewEvent[], token: number, expectedEventCount?: number, release = false): Promise<RunnerAppend> {
    let written: { events: StoredEvent[]; released: boolean };
    // No ttlMs: an append does not extend an external lease (renewLease does, at the runner's own pace).
    const lease = { sessionId, token };
    try {
      written = release
        ? await this.deps.store.appendReleasingIfIdle(sessionId, events, lease, { scope, expectedEventCount })
        : { events: await this.deps.store.append(sessionId, events, { scope, expectedEventCount, lease }), released: false };
    } catch (err) {
      if (err instanceof ForklineError && err.code === 'SESSION_BUSY' && err.details?.leaseLost) {
        await this.leases.held(scope.tenant, sessionId, token); // LEASE_LOST saying why: taken over, given back, or run out
        throw new ForklineError(
          'LEASE_LOST',
          `the lease on session ${sessionId} is not held under token ${token} (taken over, or given back): nothing was written`,
          { sessionId },
        );
      }
      // A stale runner's batch rarely fits the log as it is now: it is told it lost the lease, not which rule it broke.
      if (err instanceof ForklineError && (err.code === 'SESSION_BUSY' || err.code === 'BAD_USER_INPUT'))
        await this.leases.held(scope.tenant, sessionId, token);
      if (err instanceof ForklineError && err.code === 'SESSION_BUSY') {
        throw new ForklineError(
          'SESSION_BUSY',
          `session ${sessionId} has ${err.details?.eventCount ?? 'more'} events, not the ${expectedEventCount} expected; read it again`,
          {
            sessionId,
            eventCount: err.details?.eventCount,
          },
        );
      }
      throw err;
    }
    return this.stored(sessionId, written, expectedEventCount);
  }

  /** What a write stored, taken in: the fold this process keeps of the session, and the turn updates live clients get. */
  private async stored(sessionId: string, written: { events: StoredEvent[]; released: boolean }, expectedEventCount?: number): Promise<RunnerAppend> {
    // A fold this process keeps of the session takes what was written: the next request reads nothing it wrote.
    const fold = this.folds.peek(sessionId);
    const follows = fold && written.events.length && fold.nextSeq === written.events[0].seq;
    // The calls approval events name: the fold's open step when it is in step with the log, else read from the log.
    const calls = new OpenStepCalls(follows ? fold.state.openTail() : undefined);
    if (follows) {
      fold.apply(written.events);
      this.folds.put(fold); // measured again: it grew
    }
    for (const u of await turnUpdatesRead(sessionId, written.events, calls, readOpenTail(this.deps.store.log))) this.deps.publish(u);
    return { ...written, eventCount: (written.events.at(-1)?.seq ?? (expectedEventCount ?? 0) - 1) + 1 };
  }

  /** A text delta for live clients (sessionTurns), from the lease holder; not stored. */
  async publishDelta(
    scope: Scope,
    sessionId: string,
    token: number,
    update: { turn: number; step: number; answer?: number | null; text: string },
  ): Promise<void> {
    const { eventCount } = await this.leases.held(scope.tenant, sessionId, token);
    const { turn, step, answer, text } = update;
    // Stamped with the log's length: a copy of an answer the runner had stored by then is a late one to every reader,
    // however far behind the log it reads (agent/streaming-answers.ts).
    this.deps.publish({ sessionId, kind: 'TEXT_DELTA', turn, step, ...(answer && answer > 1 ? { answer } : {}), text, eventCount });
  }

  /**
   * What the session's next model call would be sent, built as forkline's
   * agent builds it: the conversation of its log (synthetic results with their
   * wording, compaction summaries) and the tools of its set. Inside an open
   * turn: its next step's; otherwise the next turn's, taking the first
   * pending input (its user message added as the turn's start would add it).
   * With the session row's `eventCount`, the request is the one as of that
   * row (a read is one snapshot: it describes the same seq as the row's other
   * fields), even when appends came after the row was read; without it, as of
   * the end of the log (a runner's batch just appended). `statements`: the
   * scope of the query it is read for (its log's reads within its deadline,
   * cancelled once its client has gone; docs/operations.md "Database time").
   */
  async modelRequest(
    scope: Scope,
    session: Pick<SessionRow, 'id'> & { eventCount?: number; runner: string | null },
    statements?: StatementScope,
  ): Promise<ModelRequest> {
    await this.deps.store.forTenant(scope).check(session.id); // the row came from a resolver: its log is read here with the system's store
    const endSeq = session.eventCount;
    const cached = this.folds.take(session.id);
    // A cached fold past the row cannot go back: the request is folded afresh up to it (and not kept).
    const ahead = endSeq !== undefined && cached.nextSeq > endSeq;
    if (ahead) this.folds.put(cached);
    const fold = ahead ? new SessionFold(session.id) : cached;
    try {
      await fold.catchUp(this.deps.store.log, endSeq, statements && readingFor(this.deps.store.pool, statements));
      const { state } = fold;
      // The runner's next append continues this state: checked against it, with no read of the tail.
      this.deps.store.knowTail(session.id, state);
      const messages = fold.conversation.messages();
      const tools =
        session.runner != null
          ? (state.runnerTools ?? []).map(runnerToolInfo)
          : (await this.deps.tools.tools(scope)).filter((t) => toolAllowed(t.name, state.tools ?? this.deps.tools.defaultToolSet(scope)));
      const model = state.model ?? null;
      if (state.openTurn !== undefined) {
        const step = state.openStep?.step ?? state.lastStep + 1;
        const compaction = this.compactionDue(fold, messages, tools);
        const responseFormat = fold.conversation.responseFormatOf(state.openTurnInputId) ?? null;
        return {
          messages,
          tools,
          turn: state.openTurn,
          step,
          inputId: null,
          inTurn: true,
          stepOpen: state.openStep !== undefined,
          model,
          eventCount: state.nextSeq,
          compaction,
          responseFormat,
          openCalls: openCallsOf(state.openStep),
          approvalRequired: state.toolApproval ?? [],
        };
      }
      const input = state.pendingInputs[0];
      if (!input)
        return {
          messages,
          tools,
          turn: null,
          step: null,
          inputId: null,
          inTurn: false,
          stepOpen: false,
          model,
          eventCount: state.nextSeq,
          compaction: null,
          responseFormat: null,
          openCalls: [],
          approvalRequired: state.toolApproval ?? [],
        };
      messages.push({ role: 'user', content: input.text });
      const compaction = this.compactionDue(fold, messages, tools);
      return {
        messages,
        tools,
        turn: state.lastTurn + 1,
        step: 1,
        inputId: input.inputId,
        inTurn: false,
        stepOpen: false,
        model,
        eventCount: state.nextSeq,
        compaction,
        responseFormat: input.responseFormat ?? null,
        openCalls: [],
        approvalRequired: state.toolApproval ?? [],
      };
    } finally {
      if (!ahead) this.folds.put(fold);
    }
  }

  /**
   * The compaction a request over the session's budget needs first, as
   * forkline's own runner decides before a step (session-runner.ts fitBudget):
   * the estimate is over the threshold and completed turns lie past the last
   * compaction. The runner writes it with its own model (docs/runners.md).
   */
  private compactionDue(fold: SessionFold, messages: ChatMessage[], tools: readonly ToolDefinition[]): RunnerCompaction | null {
    const { threshold } = this.budgetOf(fold);
    const estimatedTokens = estimateRequestTokens(messages, tools);
    if (estimatedTokens <= threshold) return null;
    const throughSeq = fold.lastTurnEndSeq;
    if (throughSeq <= (fold.compaction.lastCompleted?.toSeq ?? -1)) return null;
    return {
      reason: 'automatic',
      fromSeq: 0,
      throughSeq,
      estimatedTokens,
      thresholdTokens: threshold,
      messages: fold.conversation.messagesThrough(throughSeq),
    };
  }

  private modelOf(fold: SessionFold) {
    return fold.state.model ?? this.deps.compaction.defaultModel;
  }

  private budgetOf(fold: SessionFold): { window: number; threshold: number } {
    const window = contextWindowOf(this.modelOf(fold), this.deps.compaction.budget);
    return { window, threshold: compactionThreshold(window, this.deps.compaction.budget) };
  }

  /**
   * compactSession on a runner session: forkline's summariser with the
   * session's model writes the compaction under a lease of the service's own,
   * taken between the runner's turns (a runner holding the session is waited
   * for, up to COMPACT_WAIT_MS, then SESSION_BUSY). An open turn its dead
   * holder left is repaired first, as any claim repairs it. The lease goes
   * back at once: work that came meanwhile is offered to the pool again.
   */
  async compact(scope: Scope, sessionId: string, opts: { throughSeq?: number | null; instructions?: string | null }): Promise<CompactionResult> {
    const clock = this.deps.clock ?? systemClock;
    const deadline = clock.now() + COMPACT_WAIT_MS;
    let claim: RunnerClaim | undefined;
    for (let waitMs = 50; !claim; waitMs = Math.min(waitMs * 2, 1000)) {
      try {
        claim = await this.claim(scope, sessionId, COMPACTION_HOLDER, COMPACTION_LEASE_MS);
      } catch (err) {
        if (!(err instanceof ForklineError && err.code === 'SESSION_BUSY') || clock.now() + waitMs > deadline) throw err;
        await sleep(clock, waitMs);
      }
    }
    const token = claim.lease.token;
    try {
      const fold = this.folds.take(sessionId);
      try {
        await fold.catchUp(this.deps.store.log);
        const through = compactionThrough(sessionId, fold, opts.throughSeq);
        const config = this.modelOf(fold);
        let count = fold.nextSeq;
        return await writeCompaction({
          append: async (events) => {
            const written = await this.write(scope, sessionId, events, token, count);
            count = written.eventCount;
            return written.events;
          },
          history: fold.conversation.messagesThrough(through),
          through,
          reason: 'manual',
          instructions: opts.instructions ?? undefined,
          summarize: {
            model: this.deps.compaction.resolveModel(config.provider),
            config: { provider: config.provider, model: config.model, settings: config.settings },
            requestTokens: this.budgetOf(fold).threshold,
            signal: AbortSignal.timeout(COMPACTION_LEASE_MS),
          },
        });
      } finally {
        this.folds.put(fold); // behind the log now: the next read catches up
      }
    } finally {
      await this.release(scope, sessionId, token).catch(() => {});
    }
  }

  /**
   * Sessions of `pool` with pending input or an open turn that nobody holds:
   * those waiting now, then each time one changes (or its lease is given
   * back) with work left. A lease that ends with nobody to announce it (its
   * runner died) is looked for when the first known lease of the pool ends,
   * or after `sweepMs` at the latest; an open turn it left is repaired then,
   * before any runner claims it. A session may come more than once: a
   * runner's claim decides (SESSION_BUSY when another runner took it first).
   */
  async *runnable(scope: Scope, pool: string): AsyncGenerator<SessionRow> {
    const changes = this.deps.sessionsChanged(scope); // listening before the first look: nothing falls between
    const sweepMs = this.deps.sweepMs ?? DEFAULT_RUNNABLE_SWEEP_MS;
    const clock = this.deps.clock ?? systemClock;
    let nextChange: Promise<IteratorResult<SessionRow>> | undefined;
    let timer: ClockTimer | undefined;
    /** When the earliest lease held on the pool's sessions with work ends, as last seen. */
    let nextExpiry: number | undefined;
    const look = async () => {
      await this.repairAbandoned(scope, pool);
      nextExpiry = (await this.leases.nextExpiry(scope.tenant, pool))?.getTime();
      return this.leases.runnable(scope.tenant, pool);
    };
    try {
      for (const row of await look()) yield row;
      for (;;) {
        nextChange ??= changes.next();
        // A few ms past the expiry: the database's clock decides, and it must see the lease ended
        // (never sooner than MIN_LOOK_MS: a clock ahead of the database's would look again and again).
        const wait = Math.max(MIN_LOOK_MS, Math.min(sweepMs, nextExpiry === undefined ? sweepMs : nextExpiry - clock.now() + 20));
        const swept = new Promise<'sweep'>((resolve) => (timer = clock.setTimeout(() => resolve('sweep'), wait)));
        const got = await Promise.race([nextChange, swept]);
        clock.clearTimeout(timer);
        if (got === 'sweep') {
          for (const row of await look()) yield row;
          continue;
        }
        nextChange = undefined;
        if (got.done) return;
        const row = got.value;
        if (row.runner !== pool || row.status === 'WAITING' || !(row.status === 'RUNNING' || row.pendingInputCount > 0)) continue;
        if (leaseIsFree(row, clock.now())) yield row;
        else if (row.leaseExpiresAt && (nextExpiry === undefined || row.leaseExpiresAt.getTime() < nextExpiry)) nextExpiry = row.leaseExpiresAt.getTime();
      }
    } finally {
      clock.clearTimeout(timer);
      await changes.return?.();
    }
  }
}
