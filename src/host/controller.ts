// SessionController: the use cases behind the GraphQL mutations. It owns
// turn-level branch selection (seed 003); the store owns exact forks (seed 000).
import { selectBranchCut } from '../core/cut.ts';
import type { ForkResult, Scope, SessionRow, SessionStore } from '../store/session-store.ts';

export interface ModelConfig {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
}

export class SessionController {
  constructor(
    private readonly store: SessionStore,
    private readonly hooks: { onForked?: (r: ForkResult) => void } = {},
  ) {}

  createSession(scope: Scope, input: { title?: string | null; model?: ModelConfig | null }): Promise<SessionRow> {
    return this.store.createSession(scope, input);
  }

  /** Exact fork: an explicit seq never moves (seed 000). */
  async forkSession(scope: Scope, sessionId: string, atSeq: number | undefined, title?: string | null): Promise<ForkResult> {
    const r = await this.store.fork(scope, sessionId, atSeq, { title });
    this.hooks.onForked?.(r);
    return r;
  }

  /**
   * Turn-level branch (seed 003): the prefix through the first turn/end at or
   * after the anchor (omitted or past the end: the last one), selected inside the
   * fork's own snapshot so a running parent cannot leak later events in.
   */
  async branchSession(scope: Scope, sessionId: string, anchorSeq: number | undefined, title?: string | null): Promise<ForkResult> {
    const r = await this.store.fork(
      scope,
      sessionId,
      async (parent) => selectBranchCut(await parent.turnEndSeqs(), anchorSeq),
      { title },
    );
    this.hooks.onForked?.(r);
    return r;
  }
}
