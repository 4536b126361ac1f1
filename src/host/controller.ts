// SessionController: the use cases behind the GraphQL mutations. It owns
// turn-level branch selection (seed 003); the store owns exact forks (seed 000);
// the host runs the agents. Mutations that create something take an optional
// idempotency key: a retry with it gets the first result.
import { ForklineError } from '../core/errors.ts';
import type { BeforeCommit, Cut, ForkRecord, ForkResult, Scope, SessionRow, SessionStore, StoredEvent } from '../store/session-store.ts';
import { newInputId } from '../store/ids.ts';
import { IdempotencyStore, isDuplicateKey, requestHash, type IdempotentCall } from '../store/idempotency.ts';
import { importRecording, type RecordingSource } from '../store/recordings.ts';
import type { SessionHost } from './session-host.ts';

export interface ModelConfig {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
}

/** An optional idempotency key, and (for bodies hashed while they stream) the request's hash. */
export interface Idempotency {
  key?: string | null;
  requestHash?: string;
}

export class SessionController {
  private readonly idempotency: IdempotencyStore;

  constructor(
    private readonly store: SessionStore,
    private readonly host: SessionHost,
    private readonly knownProviders: readonly string[],
  ) {
    this.idempotency = new IdempotencyStore(store.pool);
  }

  async createSession(scope: Scope, input: { title?: string | null; model?: ModelConfig | null }, idem: Idempotency = {}): Promise<SessionRow> {
    if (input.model) this.checkProvider(input.model.provider);
    return this.once<SessionRow, { sessionId: string }>(
      this.call(scope, 'createSession', input, idem),
      (beforeCommit) => this.store.createSession(scope, input, { beforeCommit }),
      (r) => this.store.requireSession(scope, r.sessionId),
    );
  }

  /** Exact fork: an explicit seq never moves (seed 000); omitted, the same cut as a branch without anchor. */
  async forkSession(scope: Scope, sessionId: string, atSeq: number | undefined, title?: string | null, idem: Idempotency = {}): Promise<ForkResult> {
    return this.fork(scope, 'forkSession', sessionId, atSeq ?? {}, title, idem);
  }

  /**
   * Turn-level branch (seed 003): the prefix through the first turn/end at or
   * after the anchor (omitted or past the end: the last one), selected inside the
   * fork's own snapshot so a running parent cannot leak later events in.
   */
  async branchSession(scope: Scope, sessionId: string, anchorSeq: number | undefined, title?: string | null, idem: Idempotency = {}): Promise<ForkResult> {
    return this.fork(scope, 'branchSession', sessionId, { anchorSeq }, title, idem);
  }

  private async fork(scope: Scope, operation: string, sessionId: string, cut: Cut, title: string | null | undefined, idem: Idempotency): Promise<ForkResult> {
    const r = await this.once<ForkResult, ForkRecord>(
      this.call(scope, operation, { sessionId, cut, title }, idem),
      (beforeCommit) => this.store.fork(scope, sessionId, cut, { title, beforeCommit }),
      (record) => this.forkResultOf(scope, record),
    );
    // Input queued inside an exact fork's prefix is the child's pending input (DESIGN §3.1).
    if (r.session.pendingInputCount > 0) void this.host.wake(r.session.id);
    return r;
  }

  /** A fork's answer again, from what its first call recorded. */
  private async forkResultOf(scope: Scope, r: ForkRecord): Promise<ForkResult> {
    const [session, parent] = await Promise.all([this.store.requireSession(scope, r.sessionId), this.store.requireSession(scope, r.parentId)]);
    const seed = await this.store.log.range(session.id, r.cutSeq + 1, session.firstLiveSeq - 1);
    return { session, parent, cutSeq: r.cutSeq, syntheticEvents: seed.filter((e) => e.synthetic) };
  }

  /** Queues a user input in the durable inbox and wakes the session's agent. */
  async sendMessage(scope: Scope, sessionId: string, text: string, idem: Idempotency = {}): Promise<{ sessionId: string; inputId: string; event: StoredEvent }> {
    const call = this.call(scope, 'sendMessage', { sessionId, text }, idem);
    const r = await this.once<{ sessionId: string; inputId: string; event: StoredEvent }, { sessionId: string; inputId: string; seq: number }>(
      call,
      async (beforeCommit) => {
        const inputId = newInputId();
        const events = [{ type: 'inbox/add', data: { inputId, text } }];
        // The append checks the tenant: one statement, no read before it (a transaction only to record a key with it).
        const [event] = beforeCommit
          ? await this.store.transaction(async (client) => {
              const written = await this.store.append(sessionId, events, { scope, client });
              await beforeCommit(client, { sessionId, inputId, seq: written[0].seq });
              return written;
            })
          : await this.store.append(sessionId, events, { scope });
        return { sessionId, inputId, event };
      },
      async (r) => ({ sessionId: r.sessionId, inputId: r.inputId, event: (await this.store.log.event(r.sessionId, r.seq))! }),
    );
    void this.host.wake(sessionId);
    return r;
  }

  async importRecording(scope: Scope, source: RecordingSource, idem: Idempotency = {}): Promise<SessionRow> {
    return this.once<SessionRow, { sessionId: string }>(
      this.call(scope, 'importRecording', typeof source === 'string' ? source : undefined, idem),
      (beforeCommit) => importRecording(this.store, scope, source, { beforeCommit }),
      (r) => this.store.requireSession(scope, r.sessionId),
    );
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

  async cancelTurn(scope: Scope, sessionId: string): Promise<SessionRow> {
    const s = await this.store.requireSession(scope, sessionId);
    if (s.status !== 'RUNNING') throw new ForklineError('BAD_USER_INPUT', `session ${sessionId} has no running turn to cancel`);
    await this.host.cancel(sessionId);
    return s;
  }

  async setSessionModel(scope: Scope, sessionId: string, model: ModelConfig): Promise<SessionRow> {
    this.checkProvider(model.provider);
    await this.store.append(sessionId, [{ type: 'session/model', data: model }], { scope });
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

  private checkProvider(provider: string) {
    if (!this.knownProviders.includes(provider)) {
      throw new ForklineError('BAD_USER_INPUT', `unknown model provider "${provider}" (known: ${this.knownProviders.join(', ')})`);
    }
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
    run: (beforeCommit?: BeforeCommit<R>) => Promise<T>,
    replay: (recorded: R) => Promise<T>,
  ): Promise<T> {
    if (!call) return run();
    const prior = await this.idempotency.find(call);
    if (prior !== undefined) return replay(prior as R);
    try {
      return await run((client, recorded) => this.idempotency.record(client, call, recorded));
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      return replay((await this.idempotency.find(call)) as R);
    }
  }
}
