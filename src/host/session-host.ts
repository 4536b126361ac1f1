// SessionHost: runs session agents in this process. It wakes a session when
// input arrives, holds the session's lease while its runner works, recovers
// sessions left inside an open turn (at start, and when a dead process's lease
// is found free), and stops runners on cancel, deletion or shutdown. It keeps
// each session's fold between turns, so a turn reads only the new events.
import { DELETED_CHANNEL, type SessionStore } from '../store/session-store.ts';
import type { PgListener } from '../store/pg-listener.ts';
import { SessionRunner, type RunnerDeps } from '../agent/session-runner.ts';
import { FoldCache } from '../agent/session-fold.ts';
import { ForklineError } from '../core/errors.ts';
import type { LeaseManager } from '../store/leases.ts';

export const CONTROL_CHANNEL = 'forkline_control';

export class SessionHost {
  private readonly runners = new Map<string, { runner?: SessionRunner; again: boolean; done: Promise<void> }>();
  private readonly folds = new FoldCache();
  private sweepTimer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly store: SessionStore,
    private readonly leases: LeaseManager,
    private readonly runnerDeps: Omit<RunnerDeps, 'store'>,
    private readonly opts: { listener?: PgListener; sweepMs?: number; log?: (msg: string, err?: unknown) => void } = {},
  ) {
    // A cancel may arrive at any process; the one running the session acts on it.
    opts.listener?.on(CONTROL_CHANNEL, (payload: string) => {
      let msg: { cancel?: unknown };
      try {
        msg = JSON.parse(payload);
      } catch {
        return opts.log?.(`ignored a malformed control message: ${payload.slice(0, 100)}`);
      }
      if (typeof msg.cancel === 'string') this.runners.get(msg.cancel)?.runner?.stop('cancel');
    });
    opts.listener?.on(DELETED_CHANNEL, (payload: string) => {
      try {
        const { ids } = JSON.parse(payload) as { ids: string[] };
        this.deleted(ids);
      } catch {
        opts.log?.(`ignored a malformed deletion message: ${payload.slice(0, 100)}`);
      }
    });
  }

  /** Sessions deleted (here or by another process): their runners stop without writing, their folds go. */
  deleted(ids: readonly string[]): void {
    this.store.log.forget(ids);
    for (const id of ids) {
      this.runners.get(id)?.runner?.stop('deleted');
      this.folds.forget(id);
    }
  }

  /** Recovers what a previous process left behind, then keeps sweeping for orphaned sessions. */
  async start(): Promise<void> {
    await this.sweep();
    if (this.opts.sweepMs) {
      this.sweepTimer = setInterval(() => void this.sweep().catch((e) => this.opts.log?.('sweep failed', e)), this.opts.sweepMs);
      this.sweepTimer.unref();
    }
  }

  /** Sessions with an open turn or queued input that no live process is running. */
  async sweep(): Promise<void> {
    // Not awaited: a runner repairs an open turn before it takes input, under the lease.
    for (const id of await this.store.sessionsNeedingWork()) if (!this.runners.has(id)) void this.wake(id);
  }

  /** Resolves when every runner of this process is idle (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.runners.size) await Promise.all([...this.runners.values()].map((r) => r.done));
  }

  /** Makes sure the session's agent runs (here, or in the process that holds its lease). */
  wake(sessionId: string): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const current = this.runners.get(sessionId);
    if (current) {
      current.again = true;
      return current.done;
    }
    const entry: { runner?: SessionRunner; again: boolean; done: Promise<void> } = { again: false, done: Promise.resolve() };
    entry.done = this.drive(sessionId, entry).finally(() => this.runners.delete(sessionId));
    this.runners.set(sessionId, entry);
    return entry.done;
  }

  private async drive(sessionId: string, entry: { runner?: SessionRunner; again: boolean }): Promise<void> {
    try {
      do {
        entry.again = false;
        const lease = await this.leases.tryAcquire(sessionId);
        if (!lease) return; // another process runs it; it re-checks the inbox after releasing
        const fold = this.folds.take(sessionId);
        try {
          entry.runner = new SessionRunner(fold, { ...this.runnerDeps, store: this.store });
          await entry.runner.run();
          // Only a fold that ended in step with the log is kept, and none of a deleted session.
          if (entry.runner.stopReason !== 'deleted') this.folds.put(fold);
        } finally {
          entry.runner = undefined;
          await lease.release();
        }
        // Re-check after releasing: input appended while we were finishing must not wait.
      } while (!this.stopped && (entry.again || (await this.store.needsWork(sessionId))));
    } catch (err) {
      // A session deleted under its running agent is not a failure: the agent just stops.
      if (err instanceof ForklineError && err.code === 'SESSION_NOT_FOUND') return;
      this.opts.log?.(`agent of session ${sessionId} failed`, err);
    }
  }

  /** Ends the running turn with `cancelled`, wherever it runs. */
  async cancel(sessionId: string): Promise<void> {
    const local = this.runners.get(sessionId)?.runner;
    if (local) local.stop('cancel');
    else await this.store.notify(CONTROL_CHANNEL, JSON.stringify({ cancel: sessionId }));
  }

  isRunningHere(sessionId: string): boolean {
    return this.runners.get(sessionId)?.runner !== undefined;
  }

  /** Graceful shutdown: running turns are closed as interrupted, leases released. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    for (const r of this.runners.values()) r.runner?.stop('shutdown');
    await Promise.all([...this.runners.values()].map((r) => r.done));
  }
}
