// runnerLeasesTaken (docs/runners.md "A user's cancel"): an external runner
// hears at once that the service took a lease it held (a user's cancel, a
// step's time limit), from whichever process took it (LEASES_CHANNEL), so it
// stops the tool it runs instead of learning it at its next write. Each
// subscriber gets its own tenant's takings of its own runner id only: the
// payload's tenant is the session's, written by the service, never a caller's.
// A push is a wake-up: the runner's next write or renewal answers LEASE_LOST
// all the same when one is missed.
import type { Scope } from '../../store/session-store.ts';
import type { LeaseTaken } from '../../store/channels.ts';
import { MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';

/** What a runner is told: the session, the lease's token, and why (`cancelled`, `time limit`). */
export type RunnerLeaseTaken = Pick<LeaseTaken, 'sessionId' | 'token' | 'reason'>;

interface Subscriber {
  tenant: string;
  runnerId: string;
  queue: UpdateQueue<RunnerLeaseTaken>;
}

export class LeasesTaken {
  private readonly subscribers = new Set<Subscriber>();

  /** Leases of runner `runnerId` of the scope's tenant, as the service takes them from now on. */
  subscribe(scope: Scope, runnerId: string): AsyncIterableIterator<RunnerLeaseTaken> {
    const entry: Subscriber = {
      tenant: scope.tenant,
      runnerId,
      queue: new UpdateQueue<RunnerLeaseTaken>({ max: MAX_QUEUED_UPDATES, onClose: () => this.subscribers.delete(entry) }),
    };
    this.subscribers.add(entry);
    return entry.queue;
  }

  taken(m: LeaseTaken): void {
    for (const { tenant, runnerId, queue } of this.subscribers)
      if (tenant === m.tenant && runnerId === m.runnerId) queue.push({ sessionId: m.sessionId, token: m.token, reason: m.reason });
  }

  count(): number {
    return this.subscribers.size;
  }

  close(): void {
    for (const { queue } of this.subscribers) queue.close();
  }
}
