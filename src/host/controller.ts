// SessionController: the use cases behind the GraphQL mutations. It owns
// turn-level branch selection (seed 003); the store owns exact forks (seed 000);
// the host runs the agents.
import { ForklineError } from '../core/errors.ts';
import type { ForkResult, Scope, SessionRow, SessionStore, StoredEvent } from '../store/session-store.ts';
import { newInputId } from '../store/ids.ts';
import type { SessionHost } from './session-host.ts';

export interface ModelConfig {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
}

export class SessionController {
  constructor(
    private readonly store: SessionStore,
    private readonly host: SessionHost,
    private readonly knownProviders: readonly string[],
  ) {}

  async createSession(scope: Scope, input: { title?: string | null; model?: ModelConfig | null }): Promise<SessionRow> {
    if (input.model) this.checkProvider(input.model.provider);
    return this.store.createSession(scope, input);
  }

  /** Exact fork: an explicit seq never moves (seed 000); omitted, the same cut as a branch without anchor. */
  async forkSession(scope: Scope, sessionId: string, atSeq: number | undefined, title?: string | null): Promise<ForkResult> {
    return this.afterFork(await this.store.fork(scope, sessionId, atSeq ?? {}, { title }));
  }

  /**
   * Turn-level branch (seed 003): the prefix through the first turn/end at or
   * after the anchor (omitted or past the end: the last one), selected inside the
   * fork's own snapshot so a running parent cannot leak later events in.
   */
  async branchSession(scope: Scope, sessionId: string, anchorSeq: number | undefined, title?: string | null): Promise<ForkResult> {
    return this.afterFork(await this.store.fork(scope, sessionId, { anchorSeq }, { title }));
  }

  /**
   * Deletes a session (with its descendants when asked): its agent stops
   * without writing, here at once and in other processes on the notification.
   */
  async deleteSession(scope: Scope, sessionId: string, withDescendants: boolean): Promise<string[]> {
    const ids = await this.store.deleteSession(scope, sessionId, { withDescendants });
    this.host.deleted(ids);
    return ids;
  }

  /** Input queued inside an exact fork's prefix is the child's pending input (DESIGN §3.1). */
  private afterFork(r: ForkResult): ForkResult {
    if (r.session.pendingInputCount > 0) void this.host.wake(r.session.id);
    return r;
  }

  /** Queues a user input in the durable inbox and wakes the session's agent. */
  async sendMessage(scope: Scope, sessionId: string, text: string): Promise<{ sessionId: string; inputId: string; event: StoredEvent }> {
    const inputId = newInputId();
    // The append checks the tenant: one statement, no read before it.
    const [event] = await this.store.append(sessionId, [{ type: 'inbox/add', data: { inputId, text } }], { scope });
    void this.host.wake(sessionId);
    return { sessionId, inputId, event };
  }

  async cancelTurn(scope: Scope, sessionId: string): Promise<SessionRow> {
    const s = await this.store.requireSession(scope, sessionId);
    if (s.status !== 'RUNNING') throw new ForklineError('BAD_USER_INPUT', `session ${sessionId} has no running turn to cancel`);
    await this.host.cancel(sessionId);
    return s;
  }

  async setSessionModel(scope: Scope, sessionId: string, model: ModelConfig): Promise<SessionRow> {
    this.checkProvider(model.provider);
    await this.store.requireSession(scope, sessionId);
    await this.store.append(sessionId, [{ type: 'session/model', data: model }]);
    return this.store.requireSession(scope, sessionId);
  }

  async setSessionTitle(scope: Scope, sessionId: string, title: string): Promise<SessionRow> {
    await this.store.requireSession(scope, sessionId);
    await this.store.append(sessionId, [{ type: 'session/title', data: { title } }]);
    return this.store.requireSession(scope, sessionId);
  }

  private checkProvider(provider: string) {
    if (!this.knownProviders.includes(provider)) {
      throw new ForklineError('BAD_USER_INPUT', `unknown model provider "${provider}" (known: ${this.knownProviders.join(', ')})`);
    }
  }
}
