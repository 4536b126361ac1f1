// SessionController: the use cases behind the GraphQL mutations. It owns
// turn-level branch selection (docs/contract.md#branch); the store owns exact forks (docs/contract.md#exact-fork);
// the host runs the agents. Mutations that create something take an optional
// idempotency key: a retry with it gets the first result.
import type { RunnerProtocol } from './runner-protocol.ts';
import type pg from 'pg';
import { ForklineError } from '../core/errors.ts';
import type {
  BeforeCommit,
  ChildOverrides,
  Cut,
  ForkManyRecord,
  ForkManyResult,
  ForkRecord,
  ForkResult,
  ModelConfig,
  NewSessionInput,
  Scope,
  SessionRow,
  SessionStore,
  StoredEvent,
} from '../store/session-store.ts';
import { IdempotencyStore, isDuplicateKey, requestHash, type IdempotentCall } from '../store/idempotency.ts';
import { DEFAULT_IMPORTS_PER_TENANT, ImportSlots } from './import-slots.ts';
import { importRecording, type ImportLimits, type RecordingSource } from '../store/recordings.ts';
import type { SessionHost } from './session-host.ts';
import type { Lease } from '../store/leases.ts';
import type { ToolCatalog } from '../agent/tool-catalog.ts';
import { dataOf } from '../core/core-event.ts';
import { cancelWaitingTurn } from '../core/tool-approval.ts';
import { OpenStepCalls, readOpenTail, turnUpdatesOf, turnUpdatesRead, type TurnUpdateSink } from '../agent/turn-updates.ts';
import { ModelError } from '../agent/models/model.ts';
import { checkResponseFormat } from '../agent/structured-output.ts';
import type { CompactionResult } from '../agent/compaction.ts';
import type { ResponseFormat } from '../core/events.ts';

export type { ChildOverrides, ModelConfig };

/** Where a fan-out cuts: an exact seq, or a turn-level branch (neither: through the last turn/end). */
export type FanOutCut = { atSeq: number; anchorSeq?: undefined } | { anchorSeq?: number; atSeq?: undefined };

/** An optional idempotency key, and (for bodies hashed while they stream) the request's hash. */
export interface Idempotency {
  key?: string | null;
  requestHash?: string;
}

/** A person's decision on a call awaiting approval, and who made it (tool/approval). */
export interface ToolCallDecision {
  callId: string;
  decision: 'approved' | 'denied';
  reason: string;
  by: string;
}

/**
 * Imports this process runs at once by default: a quarter of its pool (at least one). Each holds a pool connection
 * for its whole transaction (a 200,000-event recording: 5–35 s), and twelve at once took the whole pool: other
 * tenants' reads waited 10 s for a connection and failed (docs/operations.md "Memory and time").
 */
export const defaultImportsAtOnce = (poolMax: number) => Math.max(1, Math.floor(poolMax / 4));

export class SessionController {
  private readonly idempotency: IdempotencyStore;
  /** Imports running (each in its long transaction on a pool connection); the others wait here, tenants in turn. */
  private readonly imports: ImportSlots;
  /** Imports under way by tenant and idempotency key: settled when each ends, however. */
  private readonly importing = new Map<string, Promise<void>>();

  constructor(
    private readonly store: SessionStore,
    private readonly host: SessionHost,
    /** Checks a model configuration a session is given (agent/models/registry.ts): its provider and settings. */
    private readonly models: { configProblem(config: ModelConfig): string | undefined },
    private readonly tools: ToolCatalog,
    /** Runner sessions' compaction (runner-protocol.ts): forkline's summariser between the runner's turns. */
    private readonly runners: Pick<RunnerProtocol, 'compact' | 'cancelTurn'>,
    /** Turn updates of what this controller writes into a turn (a decision, a cancelled wait): sessionTurns' live subscribers. */
    private readonly publish: TurnUpdateSink,
    /** Imports run at once (FORKLINE_MAX_IMPORTS_AT_ONCE; app.ts: defaultImportsAtOnce of the pool unless set). */
    importsAtOnce: number,
    /** Imports one tenant may have running plus waiting (FORKLINE_MAX_IMPORTS_PER_TENANT). */
    importsPerTenant: number = DEFAULT_IMPORTS_PER_TENANT,
  ) {
    this.idempotency = new IdempotencyStore(store.pool);
    this.imports = new ImportSlots(importsAtOnce, importsPerTenant);
  }

  async createSession(
    scope: Scope,
    input: NewSessionInput,
    idem: Idempotency = {},
    /** A session id the door derived (POST /chat's chat ids); default: a new one. */
    id?: string,
  ): Promise<SessionRow> {
    if (input.tools) this.checkToolSet(scope, input.tools);
    if (input.model) this.checkModel(input.model);
    return this.once<SessionRow, { sessionId: string }>(
      this.call(scope, 'createSession', input, idem),
      (beforeCommit) => this.store.createSession(scope, input, { beforeCommit, id }),
      (r) => this.store.requireSession(scope, r.sessionId),
    );
  }

  /**
   * Exact fork: an explicit seq never moves (docs/contract.md#exact-fork); omitted, the same cut as
   * a branch without anchor. Overrides (title, model, a message queued as the
   * child's input) are written with the fork, in its transaction.
   */
  async forkSession(scope: Scope, sessionId: string, atSeq: number | undefined, overrides: ChildOverrides = {}, idem: Idempotency = {}): Promise<ForkResult> {
    return this.fork(scope, 'forkSession', sessionId, atSeq ?? {}, overrides, idem);
  }

  /**
   * Turn-level branch (docs/contract.md#branch): the prefix through the first turn/end at or
   * after the anchor (omitted or past the end: the last one), selected inside the
   * fork's own snapshot so a running parent cannot leak later events in.
   */
  async branchSession(
    scope: Scope,
    sessionId: string,
    anchorSeq: number | undefined,
    overrides: ChildOverrides = {},
    idem: Idempotency = {},
  ): Promise<ForkResult> {
    return this.fork(scope, 'branchSession', sessionId, { anchorSeq }, overrides, idem);
  }

  /**
   * Edit and re-run: an exact fork right before the inbox/add that
   * queued `inputId` (what is open there is closed with cause `forked`), with
   * `text` queued as the child's input. The original session is untouched.
   * An input the session never had is BAD_USER_INPUT naming it.
   */
  async editMessage(
    scope: Scope,
    sessionId: string,
    inputId: string,
    text: string,
    overrides: Omit<ChildOverrides, 'message'> = {},
    idem: Idempotency = {},
  ): Promise<ForkResult> {
    return this.fork(scope, 'editMessage', sessionId, { beforeInput: inputId }, { ...overrides, message: text }, idem);
  }

  /**
   * editMessage's cut (right before the inbox/add that queued `inputId`) with
   * nothing queued in the child: a door that streams the child's answer
   * listens to it first and then sends the message (POST /chat's regenerate),
   * so the child's turn cannot start before its stream is attached; a refused
   * message takes the child back (discardSession).
   */
  async forkBeforeInput(scope: Scope, sessionId: string, inputId: string): Promise<ForkResult> {
    return this.fork(scope, 'forkBeforeInput', sessionId, { beforeInput: inputId }, {}, {});
  }

  private async fork(scope: Scope, operation: string, sessionId: string, cut: Cut, overrides: ChildOverrides, idem: Idempotency): Promise<ForkResult> {
    if (overrides.model) this.checkModel(overrides.model);
    const { title, model, message, instructions, responseFormat } = overrides;
    await this.checkMessageFormat(scope, message, responseFormat);
    // Absent overrides hash as before they existed: a retry from an older client still matches.
    const hashed = {
      sessionId,
      cut,
      title,
      model: model ?? undefined,
      message: message ?? undefined,
      instructions: instructions ?? undefined,
      responseFormat: responseFormat ?? undefined,
    };
    const r = await this.once<ForkResult, ForkRecord>(
      this.call(scope, operation, hashed, idem),
      (beforeCommit) => this.store.fork(scope, sessionId, cut, { title, model, message, instructions, responseFormat, beforeCommit }),
      (record) => this.forkResultOf(scope, record),
    );
    // Input queued inside an exact fork's prefix is the child's pending input
    // (docs/contract.md#exact-fork), and so is a message given with the fork: its agent starts now.
    if (r.session.pendingInputCount > 0) void this.host.wake(r.session.id, scope.tenant);
    return r;
  }

  /**
   * Fan-out: one child per variant, all at one cut of one snapshot,
   * in one transaction; each continues on its own (its agent starts on its
   * message once the fan-out commits).
   */
  async fanOut(scope: Scope, sessionId: string, at: FanOutCut, variants: readonly ChildOverrides[], idem: Idempotency = {}): Promise<ForkManyResult> {
    if (at.atSeq !== undefined && at.anchorSeq !== undefined) throw new ForklineError('BAD_USER_INPUT', 'give atSeq or anchorSeq, not both');
    for (const v of variants) {
      if (v.model) this.checkModel(v.model);
      await this.checkMessageFormat(scope, v.message, v.responseFormat);
    }
    const cut: Cut = at.atSeq !== undefined ? at.atSeq : { anchorSeq: at.anchorSeq };
    const hashed = {
      sessionId,
      cut,
      variants: variants.map((v) => ({
        title: v.title ?? undefined,
        model: v.model ?? undefined,
        message: v.message ?? undefined,
        instructions: v.instructions ?? undefined,
        responseFormat: v.responseFormat ?? undefined,
      })),
    };
    const r = await this.once<ForkManyResult, ForkManyRecord>(
      this.call(scope, 'fanOut', hashed, idem),
      (beforeCommit) => this.store.forkMany(scope, sessionId, cut, variants, { beforeCommit }),
      async (record) => {
        const children = await Promise.all(record.children.map((c) => this.forkResultOf(scope, { ...c, parentId: record.parentId, cutSeq: record.cutSeq })));
        return { parent: children[0].parent, cutSeq: record.cutSeq, children };
      },
    );
    for (const c of r.children) if (c.session.pendingInputCount > 0) void this.host.wake(c.session.id, scope.tenant);
    return r;
  }

  /** A fork's answer again, from what its first call recorded. */
  private async forkResultOf(scope: Scope, r: ForkRecord): Promise<ForkResult> {
    const [session, parent] = await Promise.all([this.store.requireSession(scope, r.sessionId), this.store.requireSession(scope, r.parentId)]);
    const seed = await this.store.log.range(session.id, r.cutSeq + 1, session.firstLiveSeq - 1);
    return { session, parent, cutSeq: r.cutSeq, syntheticEvents: seed.filter((e) => e.synthetic), inputId: r.inputId };
  }

  /** A response schema goes with a message (it is what the message's answer must match) and must be a usable JSON Schema. */
  private async checkMessageFormat(scope: Scope, message: string | null | undefined, responseFormat: ResponseFormat | null | undefined): Promise<void> {
    if (!responseFormat) return;
    if (message == null) throw new ForklineError('BAD_USER_INPUT', "responseSchema needs a message: it is what the message's answer must match");
    await checkResponseFormat(responseFormat, this.tools.schemaChecks, scope.tenant);
  }

  /** Queues a user input in the durable inbox and wakes the session's agent. */
  async sendMessage(
    scope: Scope,
    sessionId: string,
    text: string,
    idem: Idempotency = {},
    responseFormat?: ResponseFormat,
  ): Promise<{ sessionId: string; inputId: string; event: StoredEvent }> {
    if (responseFormat) await checkResponseFormat(responseFormat, this.tools.schemaChecks, scope.tenant);
    // Without a schema, the input hashes as before it could have one (retries of older clients still match).
    const call = this.call(scope, 'sendMessage', responseFormat ? { sessionId, text, responseFormat } : { sessionId, text }, idem);
    // With room here, the input's append also claims the session's lease: one statement to queue it and take it.
    const claimFor = this.host.reserveClaim(sessionId, scope.tenant);
    let lease: Lease | undefined;
    let queuedInput: StoredEvent | undefined;
    let appended = false;
    let r: { sessionId: string; inputId: string; event: StoredEvent };
    try {
      r = await this.once<{ sessionId: string; inputId: string; event: StoredEvent }, { sessionId: string; inputId: string; seq: number }>(
        call,
        async (beforeCommit) => {
          // The append checks the tenant: one statement, no read before it (a transaction only to record a key with it).
          const queued = beforeCommit
            ? await this.store.transaction(async (client) => {
                const q = await this.store.queueInput(sessionId, text, { scope, client, claimFor, responseFormat });
                await beforeCommit(client, { sessionId, inputId: inputIdOf(q.event), seq: q.event.seq });
                return q;
              })
            : await this.store.queueInput(sessionId, text, { scope, claimFor, responseFormat });
          [appended, lease, queuedInput] = [true, queued.lease, queued.event]; // committed
          return { sessionId, inputId: inputIdOf(queued.event), event: queued.event };
        },
        async (r) => ({ sessionId: r.sessionId, inputId: r.inputId, event: (await this.store.log.event(r.sessionId, r.seq))! }),
      );
    } finally {
      if (claimFor) this.host.claimSettled(sessionId, lease, queuedInput);
      else if (queuedInput) this.host.inputQueued(sessionId, queuedInput);
    }
    // Not claimed with the append: run it here if this process runs it or has room by now, else announce it.
    // (An append that tried to claim and did not found the lease held elsewhere: its holder sees the input.)
    if (!lease && !(claimFor && appended)) void this.host.wake(sessionId, scope.tenant);
    return r;
  }

  /**
   * Imports a recording as a new session, once one of the process's import
   * slots is free (FORKLINE_MAX_IMPORTS_AT_ONCE: the others wait, holding no
   * connection, each tenant's in order and the tenants in turn; a tenant with
   * FORKLINE_MAX_IMPORTS_PER_TENANT running or waiting is refused, RATE_LIMITED: import-slots.ts). `limits.signal` aborted (the
   * uploader went) before the import returns: nothing is kept — it leaves the
   * queue, the import rolls back, or, aborted while it committed, its session is discarded
   * (discardSession) — and this rejects with the signal's reason.
   */
  async importRecording(scope: Scope, source: RecordingSource, idem: Idempotency = {}, limits: ImportLimits = {}): Promise<SessionRow> {
    // Counted from here to its answer, through every door (POST /recordings, the mutation over HTTP and graphql-ws):
    // past the tenant's share it is refused before it waits or holds anything more.
    const release = this.imports.admit(scope.tenant);
    try {
      return await this.importAdmitted(scope, source, idem, limits);
    } finally {
      release();
    }
  }

  /** Why an import of `tenant` would be refused now (its FORKLINE_MAX_IMPORTS_PER_TENANT is full), or undefined. */
  importRefusal(tenant: string): ForklineError | undefined {
    return this.imports.refusal(tenant);
  }

  /** What the import slots hold (import-slots.ts): `tenant`'s imports admitted, and every tenant's waiting for a slot. */
  importSlots(tenant: string): { admitted: number; waiting: number } {
    return this.imports.counts(tenant);
  }

  private async importAdmitted(scope: Scope, source: RecordingSource, idem: Idempotency, limits: ImportLimits): Promise<SessionRow> {
    let imported: string | undefined;
    // The same key imported here already (a client that sent twice at once): the first import's outcome first, then
    // this one replays it (its key committed) or runs (it failed), instead of both importing and one rolling back.
    const same = idem.key ? `${scope.tenant}\n${idem.key}` : undefined;
    const earlier = same && this.importing.get(same);
    if (earlier) await earlier;
    // The caller's signal takes it out of the queue; once it runs, the import itself answers a cancel (p-queue would
    // reject at once, and a session committed meanwhile would be kept, not discarded).
    const waiting = new AbortController();
    const leave = () => waiting.abort(limits.signal?.reason);
    if (limits.signal?.aborted) leave();
    else limits.signal?.addEventListener('abort', leave, { once: true });
    const run = this.imports.run(
      scope.tenant,
      () => {
        limits.signal?.removeEventListener('abort', leave);
        return this.once<SessionRow, { sessionId: string }>(
          this.call(scope, 'importRecording', typeof source === 'string' ? source : undefined, idem),
          async (beforeCommit, claim) => {
            const row = await importRecording(this.store, scope, source, { beforeCommit, claim, ...limits });
            imported = row.id;
            return row;
          },
          (r) => this.store.requireSession(scope, r.sessionId),
        );
      },
      waiting.signal,
    );
    if (same) {
      const settled = run.then(
        () => {},
        () => {},
      );
      this.importing.set(same, settled);
      void settled.then(() => this.importing.get(same) === settled && this.importing.delete(same));
    }
    const session = await run;
    // Only a session this call made: a retry answered with an earlier call's session leaves it be.
    if (limits.signal?.aborted && imported && (await this.discardSession(scope, imported, idem))) limits.signal.throwIfAborted();
    return session;
  }

  /**
   * Undoes a session a call just made for a purpose that failed, so nothing of
   * it is kept: an import whose caller went before it was answered (whenever it
   * was cancelled), or a door's branch whose message was refused (POST /chat's
   * regenerate, an AG-UI run from a parentRunId). The session and the
   * idempotency key naming it (so a retry with the key makes it again) go in
   * one transaction. False when it is kept: forked already (its child shares
   * its events), or gone already.
   */
  async discardSession(scope: Scope, sessionId: string, idem: Idempotency = {}): Promise<boolean> {
    const { key } = idem;
    try {
      const ids = await this.store.deleteSession(scope, sessionId, {
        withDescendants: false,
        beforeCommit: key ? (client) => this.idempotency.forget(client, scope, key) : undefined,
      });
      this.host.deleted(ids);
      return true;
    } catch (err) {
      if (err instanceof ForklineError && (err.code === 'SESSION_HAS_CHILDREN' || err.code === 'SESSION_NOT_FOUND')) return false;
      throw err;
    }
  }

  /**
   * Deletes a session (with its descendants when asked): its agent stops
   * without writing, here at once and in other processes on the notification.
   */
  async deleteSession(scope: Scope, sessionId: string, withDescendants: boolean, idem: Idempotency = {}): Promise<string[]> {
    const ids = await this.once<string[], { deletedSessionIds: string[] }>(
      this.call(scope, 'deleteSession', { sessionId, withDescendants }, idem),
      async (beforeCommit) => this.store.deleteSession(scope, sessionId, { withDescendants, beforeCommit }),
      async (r) => r.deletedSessionIds,
    );
    this.host.deleted(ids);
    return ids;
  }

  /**
   * Stops the running turn; a turn waiting for approval (no agent runs it) is
   * ended here: its waiting calls denied by `by` and answered as never run
   * (docs/contract.md#tool-approval), written only if the log has not moved since it was read.
   */
  async cancelTurn(scope: Scope, sessionId: string, by = scope.tenant): Promise<SessionRow> {
    const s = await this.store.requireSession(scope, sessionId);
    if (s.status === 'WAITING') {
      const { open } = await this.store.log.openTailFolded(sessionId, s.eventCount - 1);
      if (open) {
        const written = await this.store.append(sessionId, cancelWaitingTurn(open, by), { scope, expectedEventCount: s.eventCount });
        for (const u of turnUpdatesOf(sessionId, written, new OpenStepCalls(open))) this.publish(u);
      }
      const after = await this.store.requireSession(scope, sessionId);
      if (after.pendingInputCount > 0 && after.runner == null) void this.host.wake(sessionId, scope.tenant);
      return after;
    }
    const noTurn = () => new ForklineError('BAD_USER_INPUT', `session ${sessionId} has no running turn to cancel`);
    if (s.status !== 'RUNNING') throw noTurn();
    if (s.runner != null) {
      // A runner pool's turn ends here and now, its lease taken from its runner (docs/runners.md "A user's cancel").
      const ended = await this.runners.cancelTurn(scope, sessionId);
      if (ended === 'ended') return s;
      if (ended === 'no-turn') throw noTurn(); // it ended (or waits for a decision) since it was read
    }
    await this.host.cancel(sessionId);
    return s;
  }

  /**
   * Records a person's decision on a call awaiting approval (tool/approval, by
   * `by`); the append's rules refuse a call that is not awaiting one (decided
   * already, or never asked) with BAD_USER_INPUT. The session's agent then
   * takes the turn up again (docs/contract.md#tool-approval).
   */
  async decideToolCall(scope: Scope, sessionId: string, input: ToolCallDecision): Promise<{ session: SessionRow; decisionSeq: number }> {
    return this.decideToolCalls(scope, sessionId, [input]);
  }

  /**
   * Several decisions of one request (a /chat message, an AG-UI resume) in one
   * append: all are recorded or none (a call named twice, or one not awaiting
   * approval, refuses the whole batch), so a refused request leaves no
   * decision behind. `decisionSeq`: the first one's.
   */
  async decideToolCalls(scope: Scope, sessionId: string, decisions: readonly ToolCallDecision[]): Promise<{ session: SessionRow; decisionSeq: number }> {
    if (decisions.length === 0) throw new ForklineError('BAD_USER_INPUT', 'no decision to record');
    const written = await this.store.append(
      sessionId,
      decisions.map(({ callId, decision, reason, by }) => ({ type: 'tool/approval', data: { callId, decision, reason, by } })),
      { scope },
    );
    for (const u of await turnUpdatesRead(sessionId, written, new OpenStepCalls(), readOpenTail(this.store.log))) this.publish(u);
    const session = await this.store.requireSession(scope, sessionId);
    // An external runner's session: its pool sees the turn running again (runnableSessions).
    if (session.runner == null && session.status === 'RUNNING') void this.host.wake(sessionId, scope.tenant);
    return { session, decisionSeq: written[0].seq };
  }

  /** Records which tools' calls need approval in this session from here on (session/tool-approval; empty: only those the config marks). */
  async setSessionToolApproval(scope: Scope, sessionId: string, tools: string[]): Promise<SessionRow> {
    await this.store.append(sessionId, [{ type: 'session/tool-approval', data: { tools } }], { scope });
    return this.store.requireSession(scope, sessionId);
  }

  /**
   * Manual compaction: the session's model summarises its history
   * through `throughSeq` (default: the end of the last completed turn), written
   * under the session's lease between turns; returns once it is written. A
   * runner session is compacted the same way, between its runner's turns.
   */
  async compactSession(scope: Scope, sessionId: string, input: { throughSeq?: number | null; instructions?: string | null }): Promise<CompactionResult> {
    const session = await this.store.requireSession(scope, sessionId); // the caller's tenant's session, or SESSION_NOT_FOUND
    try {
      if (session.runner != null) return await this.runners.compact(scope, sessionId, input);
      return await this.host.compact(sessionId, scope.tenant, input);
    } catch (err) {
      // The summary's model failed (a refusal, an overflow even in parts): the provider's message, typed.
      if (err instanceof ModelError) throw new ForklineError('MODEL_ERROR', err.message);
      throw err;
    }
  }

  async setSessionModel(scope: Scope, sessionId: string, model: ModelConfig): Promise<SessionRow> {
    this.checkModel(model);
    await this.store.append(sessionId, [{ type: 'session/model', data: model }], { scope });
    return this.store.requireSession(scope, sessionId);
  }

  /** Records the session's tool set (session/tools): later steps offer only those tools, and so do forks after it. */
  async setSessionTools(scope: Scope, sessionId: string, tools: string[]): Promise<SessionRow> {
    this.checkToolSet(scope, tools);
    await this.store.append(sessionId, [{ type: 'session/tools', data: { tools } }], { scope });
    return this.store.requireSession(scope, sessionId);
  }

  /** Records the session's instructions (session/instructions; empty: none): every later model request sends them first. */
  async setSessionInstructions(scope: Scope, sessionId: string, instructions: string): Promise<SessionRow> {
    await this.store.append(sessionId, [{ type: 'session/instructions', data: { text: instructions } }], { scope });
    return this.store.requireSession(scope, sessionId);
  }

  async setSessionTitle(scope: Scope, sessionId: string, title: string): Promise<SessionRow> {
    await this.store.append(sessionId, [{ type: 'session/title', data: { title } }], { scope });
    return this.store.requireSession(scope, sessionId);
  }

  /** Idempotency keys are kept 24 hours. */
  forgetOldIdempotencyKeys(): Promise<number> {
    return this.idempotency.prune();
  }

  private checkToolSet(scope: Scope, tools: string[]) {
    const problem = this.tools.toolSetProblem(tools, scope);
    if (problem) throw new ForklineError('BAD_USER_INPUT', `tools: ${problem}`);
  }

  /** A known provider, and settings it allows: a session's settings go into requests on the operator's key. */
  private checkModel(model: ModelConfig) {
    const problem = this.models.configProblem(model);
    if (problem) throw new ForklineError('BAD_USER_INPUT', problem);
  }

  private call(scope: Scope, operation: string, input: unknown, idem: Idempotency): IdempotentCall | undefined {
    return idem.key ? { scope, key: idem.key, operation, requestHash: idem.requestHash ?? requestHash(input) } : undefined;
  }

  /**
   * Runs a mutation once per idempotency key: a prior result is answered again
   * (`replay` loads it from what was recorded); otherwise `run` records its
   * result in its own transaction (`beforeCommit`); a call racing with the same
   * key loses on the key and answers with the winner's result.
   */
  private async once<T, R>(
    call: IdempotentCall | undefined,
    /** `claim`: for long work, to call first in its transaction (IdempotencyStore.claim): throws to replay a result committed meanwhile. */
    run: (beforeCommit?: BeforeCommit<R>, claim?: (client: pg.PoolClient) => Promise<void>) => Promise<T>,
    replay: (recorded: R) => Promise<T>,
  ): Promise<T> {
    if (!call) return run();
    const prior = await this.idempotency.find(call);
    if (prior !== undefined) return replay(prior as R);
    try {
      return await run(
        (client, recorded) => this.idempotency.record(client, call, recorded),
        async (client) => {
          const committed = await this.idempotency.claim(client, call);
          if (committed !== undefined) throw new KeyCommitted(committed);
        },
      );
    } catch (err) {
      if (err instanceof KeyCommitted) return replay(err.result as R);
      if (!isDuplicateKey(err)) throw err;
      return replay((await this.idempotency.find(call)) as R);
    }
  }
}

/** A claimed key's result, committed by another call while this one waited for it: its transaction rolls back, nothing written. */
class KeyCommitted extends Error {
  constructor(readonly result: unknown) {
    super('the idempotency key was committed by another call');
  }
}

/** The input id an inbox/add queued. */
const inputIdOf = (queued: StoredEvent): string => dataOf(queued, 'inbox/add')!.inputId;
