// The external runner protocol (issue 32, DESIGN §6): agents outside forkline
// run sessions of their runner pool with the leases, the append check and the
// model request forkline's own runner uses.
//   claim     a lease (fencing token, expiry); an open turn left by a holder
//             whose lease expired is repaired (cause `interrupted`, the shared
//             repair function) before the claim returns
//   append    a batch of core events, checked by the one reducer's rules like
//             any runner's append, fenced by the token, conditional on the
//             log's length
//   request   what the session's next model call would be sent: the fold's
//             conversation (core/model-request.ts), and the tools of the
//             session's set from the catalog
//   runnable  sessions of a pool with work nobody holds: those waiting at
//             subscribe time, then as the log or the lease changes (NOTIFY,
//             through the sessionsChanged feed), and a periodic look for leases
//             that expired with nobody to announce it
import type { NewEvent } from '../core/events.ts';
import { ForklineError, badInput } from '../core/errors.ts';
import { closeOpenTail } from '../core/repair.ts';
import { toolAllowed } from '../core/tools.ts';
import type { ChatMessage } from '../core/chat.ts';
import { FoldCache } from '../agent/session-fold.ts';
import type { ToolCatalog } from '../agent/tool-catalog.ts';
import type { Tool } from '../agent/tools.ts';
import { turnUpdatesOf, type TurnUpdate } from '../agent/turn-updates.ts';
import type { Scope, SessionRow, SessionStore, StoredEvent } from '../store/session-store.ts';
import { SESSIONS_CHANNEL } from '../store/channels.ts';
import { DEFAULT_RUNNER_LEASE_MS, leaseIsFree, RunnerLeases, type RunnerLease } from '../store/leases.ts';

/** The session/… and inbox/add events are the service's to write (createSession, sendMessage, forks): not a runner's. */
const NOT_A_RUNNERS = new Set(['inbox/add', 'session/end-seed']);

export const DEFAULT_RUNNABLE_SWEEP_MS = 5000;

export interface ModelRequest {
  messages: ChatMessage[];
  tools: Tool[];
  /** The turn the next model call is in (the open one, or the next one); null: nothing to run. */
  turn: number | null;
  /** The step number the next model call gets; null: nothing to run. */
  step: number | null;
  /** The input the next turn takes (outside an open turn). */
  inputId: string | null;
  /** Whether a turn is open (the call continues it) or the request starts the next one. */
  inTurn: boolean;
  model: { provider: string; model: string; settings?: Record<string, unknown> } | null;
  /** The log's length the request was built from: the expectedEventCount of the batch that continues it. */
  eventCount: number;
}

export interface RunnerProtocolDeps {
  store: SessionStore;
  tools: ToolCatalog;
  publish(update: TurnUpdate): void;
  /** Sessions of the scope's tenant as they change (LiveEvents.sessionsChanged). */
  sessionsChanged(scope: Scope): AsyncIterableIterator<SessionRow>;
  sweepMs?: number;
}

export class RunnerProtocol {
  readonly leases: RunnerLeases;
  /** Folds of sessions whose model request was read: the next read applies only new events. */
  private readonly folds = new FoldCache(200, 16 * 1024 * 1024);

  constructor(private readonly deps: RunnerProtocolDeps) {
    this.leases = new RunnerLeases(deps.store.pool);
  }

  async claim(scope: Scope, sessionId: string, runnerId: string, ttlMs = DEFAULT_RUNNER_LEASE_MS): Promise<RunnerLease> {
    const lease = await this.leases.claim(scope.tenant, sessionId, runnerId, ttlMs);
    // A holder that died mid-turn (its lease expired): its open tail is closed
    // before the new holder writes anything, exactly as forkline's runner does.
    const { events: tail } = await this.deps.store.log.openTail(sessionId, lease.eventCount - 1);
    const closers = closeOpenTail(tail, { kind: 'interrupted', sessionId }, this.deps.tools.builtinEffectOf);
    if (closers.length) await this.write(scope, sessionId, closers, lease.token, lease.eventCount);
    return { sessionId, token: lease.token, expiresAt: lease.expiresAt };
  }

  renew(scope: Scope, sessionId: string, token: number, ttlMs = DEFAULT_RUNNER_LEASE_MS): Promise<RunnerLease> {
    return this.leases.renew(scope.tenant, sessionId, token, ttlMs);
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
   * rules (the store's append check). Turn updates derived from what was
   * stored go to sessionTurns subscribers, as forkline's runner sends them.
   */
  async append(scope: Scope, sessionId: string, token: number, expectedEventCount: number, events: NewEvent[]): Promise<StoredEvent[]> {
    const row = await this.leases.held(scope.tenant, sessionId, token);
    if (row.eventCount !== expectedEventCount) {
      throw new ForklineError('SESSION_BUSY', `session ${sessionId} has ${row.eventCount} events, not the ${expectedEventCount} expected; read it again`, {
        sessionId,
        eventCount: row.eventCount,
      });
    }
    for (const [i, e] of events.entries()) {
      if (NOT_A_RUNNERS.has(e.type)) {
        throw badInput(`event ${expectedEventCount + i} (${e.type}): a runner does not write ${e.type} events`, { rule: 'runner events', seq: expectedEventCount + i });
      }
    }
    return this.write(scope, sessionId, events, token, expectedEventCount);
  }

  private async write(scope: Scope, sessionId: string, events: NewEvent[], token: number, expectedEventCount: number): Promise<StoredEvent[]> {
    let written: StoredEvent[];
    try {
      // No ttlMs: an append does not extend an external lease (renewLease does, at the runner's own pace).
      written = await this.deps.store.append(sessionId, events, { scope, expectedEventCount, lease: { sessionId, token } });
    } catch (err) {
      if (err instanceof ForklineError && err.code === 'SESSION_BUSY' && err.details?.leaseLost) {
        throw new ForklineError('LEASE_LOST', `the lease on session ${sessionId} was taken over: nothing was written`, { sessionId });
      }
      throw err;
    }
    for (const u of turnUpdatesOf(sessionId, written)) this.deps.publish(u);
    return written;
  }

  /** A text delta for live clients (sessionTurns), from the lease holder; not stored. */
  async publishDelta(scope: Scope, sessionId: string, token: number, update: { turn: number; step: number; text: string }): Promise<void> {
    await this.leases.held(scope.tenant, sessionId, token);
    this.deps.publish({ sessionId, kind: 'TEXT_DELTA', turn: update.turn, step: update.step, text: update.text });
  }

  /**
   * What the session's next model call would be sent, built as forkline's
   * agent builds it: the conversation of its log (synthetic results with their
   * wording, compaction summaries) and the tools of its set. Inside an open
   * turn: its next step's; otherwise the next turn's, taking the first
   * pending input (its user message added as the turn's start would add it).
   */
  async modelRequest(scope: Scope, session: Pick<SessionRow, 'id'>): Promise<ModelRequest> {
    const fold = this.folds.take(session.id);
    try {
      await fold.catchUp(this.deps.store.log);
      const { state } = fold;
      const messages = fold.conversation.messages();
      const catalog = await this.deps.tools.tools(scope);
      const tools = catalog.filter((t) => toolAllowed(t.name, state.tools));
      const model = state.model ?? null;
      if (state.openTurn !== undefined) {
        const step = state.openStep?.step ?? state.lastStep + 1;
        return { messages, tools, turn: state.openTurn, step, inputId: null, inTurn: true, model, eventCount: state.nextSeq };
      }
      const input = state.pendingInputs[0];
      if (!input) return { messages, tools, turn: null, step: null, inputId: null, inTurn: false, model, eventCount: state.nextSeq };
      messages.push({ role: 'user', content: input.text });
      return { messages, tools, turn: state.lastTurn + 1, step: 1, inputId: input.inputId, inTurn: false, model, eventCount: state.nextSeq };
    } finally {
      this.folds.put(fold);
    }
  }

  /**
   * Sessions of `pool` with pending input or an open turn that nobody holds:
   * those waiting now, then each time one changes (or its lease is given
   * back) with work left, and every `sweepMs` those whose lease expired. A
   * session may come more than once: a runner's claim decides (SESSION_BUSY
   * when another runner took it first).
   */
  async *runnable(scope: Scope, pool: string): AsyncGenerator<SessionRow> {
    const changes = this.deps.sessionsChanged(scope); // listening before the first look: nothing falls between
    const sweepMs = this.deps.sweepMs ?? DEFAULT_RUNNABLE_SWEEP_MS;
    let nextChange: Promise<IteratorResult<SessionRow>> | undefined;
    let timer: NodeJS.Timeout | undefined;
    try {
      for (const row of await this.leases.runnable(scope.tenant, pool)) yield row;
      for (;;) {
        nextChange ??= changes.next();
        const swept = new Promise<'sweep'>((resolve) => (timer = setTimeout(() => resolve('sweep'), sweepMs)));
        const got = await Promise.race([nextChange, swept]);
        clearTimeout(timer);
        if (got === 'sweep') {
          for (const row of await this.leases.runnable(scope.tenant, pool)) yield row;
          continue;
        }
        nextChange = undefined;
        if (got.done) return;
        const row = got.value;
        if (row.runner === pool && (row.status === 'RUNNING' || row.pendingInputCount > 0) && leaseIsFree(row)) yield row;
      }
    } finally {
      clearTimeout(timer);
      await changes.return?.();
    }
  }
}
