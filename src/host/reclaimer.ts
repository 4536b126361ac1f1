// The reclaimer: runs deletions' reclaim chunks (store/reclaim.ts) in the
// background, one at a time, until none is left. Woken by every deletion (its
// NOTIFY reaches each process: whichever takes a deletion's row reclaims it,
// the others find it locked and skip it), at start (what a stopped process
// left) and every `sweepMs` (what a process that died mid-chunk left: its
// transaction rolled back and released the row).
import type { DeletionReclaim } from '../store/reclaim.ts';
import { DELETED_CHANNEL } from '../store/channels.ts';
import type { PgListener } from '../store/pg-listener.ts';
import { systemClock, type Clock } from '../core/clock.ts';

/** How often a process looks for deletions nobody is reclaiming (FORKLINE_DELETE_SWEEP_MS). */
export const DEFAULT_RECLAIM_SWEEP_MS = 60_000;
/** Finished deletions are pruned at most this often. */
const PRUNE_EVERY_MS = 60 * 60 * 1000;

export interface ReclaimerOptions {
  listener?: PgListener;
  /** A wait between chunks, leaving the database to requests (FORKLINE_DELETE_PAUSE_MS; default none). */
  pauseMs?: number;
  sweepMs?: number;
  clock?: Clock;
  log?: (msg: string, err?: unknown) => void;
}

export class Reclaimer {
  private running: Promise<void> | undefined;
  /** Woken while running: look again when the run ends. */
  private again = false;
  private stopped = false;
  private sweep: ReturnType<Clock['setInterval']> | undefined;
  private lastPrune = 0;
  private readonly onDeleted = () => this.wake();

  constructor(
    private readonly reclaim: DeletionReclaim,
    private readonly opts: ReclaimerOptions = {},
  ) {}

  start(): void {
    const clock = this.opts.clock ?? systemClock;
    this.opts.listener?.on(DELETED_CHANNEL, this.onDeleted);
    this.opts.listener?.on('reconnect', this.onDeleted);
    this.sweep = clock.setInterval(() => this.wake(), this.opts.sweepMs ?? DEFAULT_RECLAIM_SWEEP_MS);
    this.wake();
  }

  /** Reclaims until nothing is left to take (a run in progress looks again when it ends). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.run().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /** Resolves when no run is in progress (tests wait on it). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Stops after the chunk in progress: what is left stays in Postgres for the next process. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.opts.listener?.off(DELETED_CHANNEL, this.onDeleted);
    this.opts.listener?.off('reconnect', this.onDeleted);
    if (this.sweep) (this.opts.clock ?? systemClock).clearInterval(this.sweep);
    await this.running;
  }

  private async run(): Promise<void> {
    try {
      while (!this.stopped && (await this.reclaim.reclaimChunk())) {
        if (this.opts.pauseMs) await new Promise((r) => setTimeout(r, this.opts.pauseMs));
      }
      const now = Date.now();
      if (!this.stopped && now - this.lastPrune >= PRUNE_EVERY_MS) {
        this.lastPrune = now;
        await this.reclaim.prune();
      }
    } catch (err) {
      // Tried again at the next deletion or sweep: the chunk rolled back whole.
      this.opts.log?.('reclaiming deleted sessions failed (tried again later)', err);
    }
  }
}
