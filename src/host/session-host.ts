// SessionHost: runs session agents in this process, at most `maxActive` at a
// time. A session is run under its lease (store/leases.ts): claimed when input
// arrives here, or — for work nobody runs (a dead process's sessions, input
// queued where the receiving process was full) — claimed in batches that
// processes share through SKIP LOCKED, when notified and on a timer. Leases
// are renewed by one heartbeat per process; a runner whose lease is taken
// over stops. No tenant holds more than its share of the slots, and a tenant
// waiting for one goes before tenants holding more (fair claims: leases.ts);
// a turn past its time limit ends and frees its slot (SessionRunner).
// Runners stop on cancel, deletion or shutdown, wait and resume when the
// database is unreachable, and keep each session's fold between turns so a
// turn reads only the new events.
import type { SessionStore } from '../store/session-store.ts';
import { CONTROL_CHANNEL, DELETED_CHANNEL, WORK_CHANNEL, decodeCancel, decodeSessionsDeleted, encodeCancel } from '../store/channels.ts';
import type { PgListener } from '../store/pg-listener.ts';
import type { Lease, LeaseClaim, LeaseStore, TenantShare } from '../store/leases.ts';
import { SessionRunner, type CompactionResult, type RunnerDeps } from '../agent/session-runner.ts';
import { FoldCache, SessionFold } from '../agent/session-fold.ts';
import { ForklineError } from '../core/errors.ts';
import type { LogEvent } from '../core/events.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { Backoff } from '../core/backoff.ts';
import { sleep, systemClock, type Clock, type ClockTimer } from '../core/clock.ts';

export const DEFAULT_MAX_ACTIVE_SESSIONS = 100;

/**
 * The slots one tenant may hold in a process, unless configured: with several
 * tenants, half (one tenant's slow turns cannot take every slot);
 * with one (local mode, or a single token's tenant), all of them.
 */
export function defaultSlotsPerTenant(maxActive: number, tenants: number): number {
  return tenants > 1 ? Math.max(1, Math.floor(maxActive / 2)) : maxActive;
}
/** Logs shorter than this replay in a few tens of milliseconds: not worth building ahead. */
const PREWARM_MIN_EVENTS = 10_000;
/** Folds built ahead at once (each is a replay of a long log). */
const MAX_PREWARMING = 2;
const PREWARM_DELAY_MS = 1000;
const MAX_RETRY_MS = 10_000;
/** How long a manual compaction waits for a session another process runs. */
const COMPACT_WAIT_MS = 60_000;
/**
 * Claims and "work is waiting" announcements triggered within this window go
 * out as one: under a backlog every finished turn frees a slot and every
 * message arriving at a full process has work to announce, and one claim (a
 * scan of the runnable sessions) per event made the work grow with the square
 * of the backlog. A batching window on the real timers, not a duration the
 * host's clock governs: a test's clock that stands still must not stall claims.
 */
const COALESCE_MS = 10;

export interface HostOptions {
  listener?: PgListener;
  /** How often to claim sessions nobody runs (0: at start and when notified only). */
  sweepMs?: number;
  /** Sessions this process runs at once; the rest wait for a slot here or elsewhere. */
  maxActive?: number;
  /** Of those, the most one tenant's sessions may take (default: all). */
  maxActivePerTenant?: number;
  /** How many events apart a session's fold is checkpointed, at the end of a run (DEFAULT_FOLD_CHECKPOINT_EVENTS; 0: none). */
  foldCheckpointEvents?: number;
  /** What the folds kept between turns may hold, in estimated heap bytes (DEFAULT_FOLD_CACHE_BYTES). */
  foldCacheBytes?: number;
  log?: (msg: string, err?: unknown) => void;
  /** Heartbeats, sweeps, waits between retries and compaction deadlines (default: the system clock). */
  clock?: Clock;
}

interface Running {
  lease: Lease;
  /** Whose slot it takes. */
  tenant: string;
  /** A newer lease of ours for this session, claimed while it ran: the drive continues with it. */
  nextLease?: Lease;
  runner?: SessionRunner;
  /** Input arrived while running: look again before giving the lease up. */
  again: boolean;
  done: Promise<void>;
}

/**
 * A session's fold is checkpointed when a run leaves it this many events past
 * its last checkpoint (docs/long-sessions.md "Cold starts"): a cold start then
 * reads at most about this many events. A checkpoint holds the conversation
 * (about the log's text), so each costs its size to write.
 */
export const DEFAULT_FOLD_CHECKPOINT_EVENTS = 50_000;

export class SessionHost {
  private readonly running = new Map<string, Running>();
  /** Targeted claims in flight, with their tenant (they count against capacity). */
  private readonly claimingOne = new Map<string, string>();
  private readonly folds: FoldCache;
  /** Checkpoint writes in flight (idle() waits for them). */
  private readonly checkpointWrites = new Set<Promise<void>>();
  /** Folds being built ahead of a first message (prewarm), by session. */
  private readonly warming = new Map<string, { built: Promise<void>; startNow: () => void }>();
  private readonly maxActive: number;
  private readonly maxPerTenant: number;
  /** Manual compactions waiting for a slot (slotFreed). */
  private readonly slotWaiters = new Set<() => void>();
  private claimingBatch?: Promise<void>;
  private claimAgain = false;
  private claimTimer?: NodeJS.Timeout;
  private announceTimer?: NodeJS.Timeout;
  /** The last batch claim filled every free slot: more may be waiting. */
  private backlog = false;
  /** A heartbeat's renewal is out (heartbeat). */
  private renewing = false;
  private timers: ClockTimer[] = [];
  private stopped = false;
  private readonly clock: Clock;

  constructor(
    private readonly store: SessionStore,
    private readonly leases: LeaseStore,
    private readonly runnerDeps: Omit<RunnerDeps, 'store' | 'lease'>,
    private readonly opts: HostOptions = {},
  ) {
    this.maxActive = opts.maxActive ?? DEFAULT_MAX_ACTIVE_SESSIONS;
    this.folds = new FoldCache(undefined, opts.foldCacheBytes);
    this.clock = opts.clock ?? systemClock;
    this.maxPerTenant = Math.min(this.maxActive, opts.maxActivePerTenant ?? this.maxActive);
    const listener = opts.listener;
    // A cancel may arrive at any process; the one running the session acts on it.
    listener?.on(CONTROL_CHANNEL, (payload: string) => {
      const cancel = decodeCancel(payload);
      if (cancel !== undefined) this.running.get(cancel)?.runner?.stop('cancel');
      else this.ignored('control', payload);
    });
    listener?.on(DELETED_CHANNEL, (payload: string) => {
      const msg = decodeSessionsDeleted(payload);
      if (msg) this.deleted(msg.ids);
      else this.ignored('deletion', payload);
    });
    listener?.on(WORK_CHANNEL, () => this.scheduleClaim());
    // Notifications sent while the listener was down are lost: look for work, and for deletions.
    listener?.on('reconnect', () => {
      this.claimMore();
      void this.deletedMeanwhile();
    });
  }

  private ignored(what: string, payload: string) {
    this.opts.log?.(`ignored a malformed ${what} message: ${payload.slice(0, 100)}`);
  }

  /** Claims what a previous process left behind, then keeps renewing leases and looking for work. */
  async start(): Promise<void> {
    this.claimMore();
    await this.claimingBatch;
    const every = (ms: number, fn: () => void) => {
      const t = this.clock.setInterval(fn, ms);
      t.unref();
      this.timers.push(t);
    };
    every(Math.max(100, Math.floor(this.leases.ttlMs / 3)), () => void this.heartbeat());
    if (this.opts.sweepMs) every(this.opts.sweepMs, () => this.claimMore());
  }

  /** Manual compactions waiting for a free slot (tests wait for them). */
  get waitingForSlot(): number {
    return this.slotWaiters.size;
  }

  /** Sessions this process runs or is claiming (metrics, tests). */
  get active(): number {
    return this.running.size + this.claimingOne.size;
  }

  /** The slots each tenant takes here (running and being claimed). */
  private slotsHeld(): Map<string, number> {
    const held = new Map<string, number>();
    const take = (tenant: string) => held.set(tenant, (held.get(tenant) ?? 0) + 1);
    for (const r of this.running.values()) take(r.tenant);
    for (const tenant of this.claimingOne.values()) take(tenant);
    return held;
  }

  /** A slot is free here for the tenant: the process is not full and the tenant holds less than its share. */
  private hasRoomFor(tenant: string): boolean {
    return this.active < this.maxActive && (this.slotsHeld().get(tenant) ?? 0) < this.maxPerTenant;
  }

  /** Resolves when a slot frees here, or after `ms` (a slot taken by a claim elsewhere in this process is not announced). */
  private slotFreed(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        this.clock.clearTimeout(timer);
        this.slotWaiters.delete(done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, ms);
      this.slotWaiters.add(done);
    });
  }

  private slotFree(): void {
    for (const wake of [...this.slotWaiters]) wake();
  }

  /** Resolves when every runner of this process is idle and no fold is being built ahead (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size || this.claimingOne.size || this.claimingBatch || this.warming.size || this.checkpointWrites.size) {
      await Promise.all([...this.running.values()].map((r) => r.done));
      await Promise.all(this.checkpointWrites);
      await Promise.all([...this.warming.values()].map((w) => w.built));
      await this.claimingBatch;
      if (this.claimingOne.size) await new Promise((r) => setTimeout(r, 5));
    }
  }

  /**
   * Input arrived for the session: make sure an agent runs it — here when it
   * is free and there is room, else wherever it is held or there is room.
   */
  async wake(sessionId: string, tenant: string): Promise<void> {
    if (this.stopped) return;
    const current = this.running.get(sessionId);
    if (current) {
      current.again = true;
      return current.done;
    }
    if (this.claimingOne.has(sessionId)) return;
    if (!this.hasRoomFor(tenant)) {
      // Claimed when a slot frees here (adopt), or by a process with room for it.
      this.backlog = true;
      this.announceWork();
      return;
    }
    this.claimingOne.set(sessionId, tenant);
    let lease: Lease | null = null;
    try {
      lease = await this.leases.claim(sessionId);
    } catch (err) {
      this.opts.log?.(`could not claim session ${sessionId}`, err);
    } finally {
      this.claimingOne.delete(sessionId);
    }
    if (lease) return this.adopt(lease, tenant).done; // else: another process holds it and will see the input
  }

  /**
   * Input is about to be queued for the tenant's session: when this process has
   * room for the tenant and does not run it, a slot is kept for it and the caller's append claims
   * the lease with the input (SessionStore.queueInput), saving the claim's own
   * round trip; `claimSettled` tells how that went. Otherwise undefined: the
   * caller wakes the host once the input is stored.
   */
  reserveClaim(sessionId: string, tenant: string): LeaseClaim | undefined {
    if (this.stopped || this.running.has(sessionId) || this.claimingOne.has(sessionId) || !this.hasRoomFor(tenant)) return undefined;
    this.claimingOne.set(sessionId, tenant);
    return { owner: this.leases.owner, ttlMs: this.leases.ttlMs };
  }

  /**
   * The end of a reserved claim: the lease it took (the session runs here), or
   * none (its holder sees the input). `input`: the event the claiming statement
   * stored (inputQueued), after which the log was as long as the lease says.
   */
  claimSettled(sessionId: string, lease: Lease | undefined, input?: LogEvent): void {
    const tenant = this.claimingOne.get(sessionId);
    this.claimingOne.delete(sessionId);
    if (input) this.inputQueued(sessionId, input);
    if (lease && tenant !== undefined && !this.stopped) void this.adopt(input ? { ...lease, eventCount: input.seq + 1 } : lease, tenant);
    else if (lease) void this.leases.release(lease).catch(() => {}); // stopping: its turn is for another process
  }

  /**
   * An input this process queued: the cached fold takes it when it ends right
   * before it (a new fold, when the input starts the log), so a run claimed
   * with the log at that length reads nothing first (SessionFold.claimedAt).
   */
  inputQueued(sessionId: string, input: LogEvent): void {
    if (this.running.has(sessionId) || this.warming.has(sessionId)) return;
    const fold = this.folds.peek(sessionId) ?? (input.seq === 0 ? new SessionFold(sessionId) : undefined);
    if (fold?.continueWith(input)) this.folds.put(fold); // put again: the cache measures a fold when it is put
  }

  /**
   * Someone is watching the session's turns (a chat open on it): build its
   * fold ahead, so the first message's turn reads only the new events instead
   * of replaying the log (seconds on a million events). Only long logs, at
   * most MAX_PREWARMING at once, not while this process is full, and after
   * PREWARM_DELAY_MS: the page that just opened reads its first screen first
   * (replaying at once made a long session's first screen visibly slower).
   * A runner that needs the fold meanwhile starts the build at once and waits
   * for it rather than replaying alongside. The fold is a correct prefix
   * whoever runs the session later: the log is append-only.
   */
  prewarm(sessionId: string, eventCount: number): void {
    if (this.stopped || eventCount < PREWARM_MIN_EVENTS || this.warming.size >= MAX_PREWARMING) return;
    if (this.warming.has(sessionId) || this.running.has(sessionId) || this.folds.has(sessionId) || this.active >= this.maxActive) return;
    let startNow!: () => void;
    const due = new Promise<void>((resolve) => {
      startNow = resolve;
      this.clock.setTimeout(resolve, PREWARM_DELAY_MS).unref();
    });
    const fold = new SessionFold(sessionId);
    const built = due
      .then(async () => {
        if (this.stopped) return; // shutting down: nobody will use it here
        await fold.catchUpCold(this.store); // a long log: from its last compaction, if it has one
        if (!this.folds.has(sessionId)) this.folds.put(fold);
      })
      .catch((err) => {
        if (!isDatabaseUnavailable(err) && !(err instanceof ForklineError)) this.opts.log?.(`building the fold of session ${sessionId} failed`, err);
      })
      .finally(() => this.warming.delete(sessionId));
    this.warming.set(sessionId, { built, startNow });
  }

  /** A fold being built ahead for the session, started now if it was waiting: resolves when it is in the cache. */
  private async prewarmed(sessionId: string): Promise<void> {
    const w = this.warming.get(sessionId);
    if (!w) return;
    w.startNow();
    await w.built;
  }

  /** Tells every process (this one too) that input waits for a free slot: coalesced. */
  private announceWork() {
    this.announceTimer ??= setTimeout(() => {
      this.announceTimer = undefined;
      this.store.notify(WORK_CHANNEL, '').catch((err) => this.opts.log?.('could not announce queued work', err));
    }, COALESCE_MS);
  }

  /** claimMore, once for every request made within the coalescing window. */
  private scheduleClaim() {
    this.claimTimer ??= setTimeout(() => {
      this.claimTimer = undefined;
      this.claimMore();
    }, COALESCE_MS);
  }

  /** Claims runnable sessions nobody runs, up to the free slots and each tenant's share; one batch at a time. */
  claimMore(): void {
    if (this.stopped) return;
    if (this.claimingBatch) {
      this.claimAgain = true;
      return;
    }
    this.claimingBatch = (async () => {
      do {
        this.claimAgain = false;
        const room = this.maxActive - this.active;
        if (room <= 0) {
          this.backlog = true;
          return;
        }
        const held = this.slotsHeld();
        // A share as large as the process cannot bind: the plain claim, oldest first.
        const share: TenantShare | undefined = this.maxPerTenant < this.maxActive ? { perTenant: this.maxPerTenant, held } : undefined;
        const claimed = await this.leases.claimRunnable(room, [...this.running.keys(), ...this.claimingOne.keys()], share);
        for (const lease of claimed) {
          this.adopt(lease, lease.tenant);
          held.set(lease.tenant, (held.get(lease.tenant) ?? 0) + 1);
        }
        // Work may be left waiting: every free slot was taken, or a tenant is at its share — as the claim
        // counted them (a turn that ended while it ran does not make up for a share that limited it) or as they are now.
        this.backlog = claimed.length === room || [...held.values(), ...this.slotsHeld().values()].some((n) => n >= this.maxPerTenant);
      } while (this.claimAgain && !this.stopped);
    })()
      .catch((err) => {
        if (!isDatabaseUnavailable(err)) this.opts.log?.('claiming sessions failed', err);
      })
      .finally(() => (this.claimingBatch = undefined));
  }

  /**
   * Runs the session under `lease`: one drive per session. A lease claimed for
   * a session already running here (it was giving its lease back at that very
   * moment) goes to that drive.
   */
  private adopt(lease: Lease, tenant: string): Running {
    if (lease.lineage) this.store.log.rememberLineage(lease.lineage);
    const current = this.running.get(lease.sessionId);
    if (current) {
      current.nextLease = lease;
      current.again = true;
      return current;
    }
    if (lease.eventCount !== undefined && !this.warming.has(lease.sessionId)) this.folds.peek(lease.sessionId)?.claimedAt(lease.eventCount);
    const entry: Running = { lease, tenant, again: false, done: Promise.resolve() };
    this.running.set(lease.sessionId, entry);
    entry.done = this.drive(entry).finally(() => {
      if (this.running.get(lease.sessionId) === entry) this.running.delete(lease.sessionId);
      this.slotFree();
      // A slot is free and work was left waiting, or a claim running now counted this slot as taken.
      if (this.backlog || this.claimingBatch) this.scheduleClaim();
    });
    return entry;
  }

  /** The next lease of ours for this drive, if one was claimed while it ran. */
  private takeNextLease(entry: Running): boolean {
    if (!entry.nextLease || this.stopped) return false;
    entry.lease = entry.nextLease;
    entry.nextLease = undefined;
    return true;
  }

  /**
   * Stores a checkpoint of the fold (store/fold-checkpoints.ts) when it ran far
   * enough past its last one, outside any turn. The snapshot is taken now (the
   * fold moves on); its write does not hold the session up, and a failed one
   * only means a longer cold start.
   */
  private keepCheckpoint(fold: SessionFold): void {
    const every = this.opts.foldCheckpointEvents ?? DEFAULT_FOLD_CHECKPOINT_EVENTS;
    const seq = fold.nextSeq - 1;
    if (every <= 0 || fold.state.openTurn !== undefined || seq - fold.checkpointSeq < every) return;
    const state = fold.snapshot();
    fold.checkpointSeq = seq;
    const written = this.store.foldCheckpoints
      .keep(fold.sessionId, seq, state)
      .catch((err) => this.opts.log?.(`checkpointing session ${fold.sessionId} failed`, err));
    this.checkpointWrites.add(written);
    void written.finally(() => this.checkpointWrites.delete(written));
  }

  private async drive(entry: Running): Promise<void> {
    const { sessionId } = entry.lease;
    // While the database is unreachable (core/backoff.ts).
    const backoff = new Backoff({ initialMs: 500, maxMs: MAX_RETRY_MS });
    for (;;) {
      await this.prewarmed(sessionId); // a fold being built ahead: take it when ready
      const fold = this.folds.take(sessionId);
      const runner = new SessionRunner(fold, { ...this.runnerDeps, store: this.store, lease: entry.lease });
      entry.runner = runner;
      try {
        await runner.run();
        if (runner.stopReason === 'turn-limit') this.opts.log?.(`session ${sessionId}: ${runner.turnLimitMessage}`);
        if (runner.stopReason === 'deleted') return;
        // A runner whose last append gave the lease back did not lose it, whatever a heartbeat that crossed that append concluded.
        if (runner.stopReason === 'lease-lost' && !runner.released) {
          if (this.takeNextLease(entry)) continue;
          return;
        }
        this.folds.put(fold); // only a fold that ended in step with the log is kept
        this.keepCheckpoint(fold);
        const again = entry.again;
        entry.again = false;
        if (runner.released) {
          // The lease went back with the turn's last events; input that came since needs it again.
          if (this.takeNextLease(entry)) continue;
          if (!again || this.stopped) return;
          const lease = await this.leases.claim(sessionId);
          if (!lease) return; // another process took it, and the input with it
          entry.lease = lease;
          continue;
        }
        if (this.stopped) return await this.leases.release(entry.lease);
        if (this.takeNextLease(entry)) continue;
        if (!again && (await this.leases.releaseIfIdle(entry.lease)) !== 'busy') {
          // Input queued while the lease went back woke this drive (it was still here): it was not there for the
          // release to see, so the drive claims the session again for it rather than leave it to the next sweep.
          if (!entry.again || this.stopped) return;
          entry.again = false;
          const lease = await this.leases.claim(sessionId);
          if (!lease) return; // another process took it, and the input with it
          entry.lease = lease;
          continue;
        }
        backoff.reset();
      } catch (err) {
        if (isGone(err)) {
          // Deleted, or run by another process now: nothing of ours to close (unless we hold a newer lease).
          if (this.takeNextLease(entry)) continue;
          return;
        }
        if (!isDatabaseUnavailable(err) || this.stopped) {
          this.opts.log?.(`agent of session ${sessionId} failed`, err);
          if (!this.stopped) await this.closeFailedTurn(sessionId, runner, err);
          // Not run again here: an input that fails the same way would fail again at once. Its pending
          // input is taken by the next claim (a new message, or the periodic look for work).
          if (!runner.released) await this.leases.release(entry.lease).catch(() => {});
          return;
        }
        // The database is unreachable: keep the lease (the heartbeat renews it
        // once it is back), wait, and start again from the log.
        this.opts.log?.(`agent of session ${sessionId} waits for the database`, err);
        await sleep(this.clock, backoff.next());
      } finally {
        entry.runner = undefined;
      }
    }
  }

  /**
   * An agent that failed unexpectedly ends its open turn `failed` with the error
   * (docs/contract.md#agent-loop), so the session is idle instead of looking
   * stuck until a restart repairs it. When that cannot be written either, the
   * turn stays open for crash recovery, as before.
   */
  private async closeFailedTurn(sessionId: string, runner: SessionRunner, err: unknown): Promise<void> {
    const message = `the agent failed: ${err instanceof Error ? err.message : String(err)}`;
    try {
      await runner.closeFailed(message);
    } catch (closeErr) {
      if (!isGone(closeErr)) this.opts.log?.(`closing the failed turn of session ${sessionId} failed`, closeErr);
    }
  }

  /**
   * Manual compaction (compactSession): under the session's lease like a
   * turn, in one of the tenant's agent slots like a turn, and between turns —
   * a turn running here is waited for, a lease held by another process is
   * claimed once it is given back, a slot is waited for (all within
   * `COMPACT_WAIT_MS`, then SESSION_BUSY). Input that arrives meanwhile waits;
   * once the summary is written the session runs on here as after a turn
   * (its lease goes back when nothing waits).
   */
  async compact(sessionId: string, tenant: string, opts: { throughSeq?: number | null; instructions?: string | null }): Promise<CompactionResult> {
    const deadline = this.clock.now() + COMPACT_WAIT_MS;
    const backoff = new Backoff({ initialMs: 20, maxMs: 500 });
    for (;;) {
      if (this.stopped) throw new ForklineError('SERVICE_UNAVAILABLE', 'the server is shutting down');
      const current = this.running.get(sessionId);
      if (current) {
        await current.done.catch(() => {});
        continue;
      }
      if (this.claimingOne.has(sessionId)) {
        await sleep(this.clock, backoff.next());
        continue;
      }
      // A summary is a model call like a turn's: it takes an agent slot under
      // the same caps (the process's, the tenant's share), waiting for one.
      if (!this.hasRoomFor(tenant)) {
        if (this.clock.now() > deadline)
          throw new ForklineError('SESSION_BUSY', `no agent slot is free for this tenant (its share is ${this.maxPerTenant} of ${this.maxActive}); try again`);
        await this.slotFreed(backoff.next());
        continue;
      }
      this.claimingOne.set(sessionId, tenant);
      let lease: Lease | null;
      try {
        lease = await this.leases.claim(sessionId);
      } finally {
        this.claimingOne.delete(sessionId);
      }
      if (!lease) {
        if (this.clock.now() > deadline) throw new ForklineError('SESSION_BUSY', `session ${sessionId} is running elsewhere; try again`);
        await sleep(this.clock, backoff.next());
        continue;
      }
      if (this.running.has(sessionId)) {
        // A wake adopted the session between our check and our claim: it runs here now; wait for it.
        await this.leases.release(lease).catch(() => {});
        continue;
      }
      if (lease.lineage) this.store.log.rememberLineage(lease.lineage);
      let finished!: () => void;
      const entry: Running = { lease, tenant, again: false, done: new Promise<void>((r) => (finished = r)) };
      this.running.set(sessionId, entry);
      await this.prewarmed(sessionId);
      const fold = this.folds.take(sessionId);
      const runner = new SessionRunner(fold, { ...this.runnerDeps, store: this.store, lease });
      entry.runner = runner;
      try {
        return await runner.compactNow(opts);
      } finally {
        entry.runner = undefined;
        if (runner.stopReason !== 'deleted') this.folds.put(fold); // appends that failed left it as the log is
        this.running.delete(sessionId);
        finished();
        this.slotFree();
        // Runs on as after a turn: input that came meanwhile, then the lease goes back.
        const gone = runner.stopReason === 'deleted' || runner.stopReason === 'lease-lost';
        if (!gone && !this.stopped) this.adopt(entry.nextLease ?? lease, tenant);
        else if (!gone) await this.leases.release(lease).catch(() => {});
      }
    }
  }

  /**
   * Renews this process's leases; runners whose lease was taken over stop.
   * One renewal at a time: a tick that finds the last one still out skips
   * (another behind it would renew nothing sooner). A lease found not held is
   * lost only if its drive still runs under it: the runner's last append may
   * have given it back meanwhile (its drive then runs input that came since
   * under a lease claimed anew), and appends are fenced anyway — stopping a
   * runner here only saves a taken-over turn the work it could not store.
   */
  private async heartbeat(): Promise<void> {
    if (this.running.size === 0 || this.renewing) return;
    const entries = [...this.running.values()].map((e) => ({ e, lease: e.lease }));
    let kept: Set<string>;
    let cancels: Map<string, number>;
    this.renewing = true;
    try {
      ({ held: kept, cancels } = await this.leases.renew(entries.map((x) => x.lease)));
    } catch (err) {
      if (!isDatabaseUnavailable(err)) this.opts.log?.('renewing leases failed', err);
      return;
    } finally {
      this.renewing = false;
    }
    for (const { e, lease } of entries) {
      const cancel = cancels.get(lease.sessionId);
      // A cancel whose notification this process missed (its listener was down): the turn it names, if still running, stops.
      if (cancel !== undefined && this.running.get(lease.sessionId) === e && e.runner?.runningTurnCount === cancel) e.runner.stop('cancel');
      if (kept.has(lease.sessionId) || this.running.get(lease.sessionId) !== e || e.lease !== lease || e.runner?.released) continue;
      e.runner?.stop('lease-lost');
    }
  }

  /** Sessions deleted (here or by another process): their runners stop without writing, their folds and file workspaces go. */
  deleted(ids: readonly string[]): void {
    this.store.log.forget(ids);
    for (const id of ids) {
      this.running.get(id)?.runner?.stop('deleted');
      this.folds.forget(id);
      this.runnerDeps.workspaces?.discard(id).catch((err) => this.opts.log?.(`removing the file workspace of deleted session ${id} failed`, err));
    }
  }

  /**
   * The deletions announced while the listener was down went unheard: of the sessions this process runs or keeps
   * file workspaces of, those gone from the database are deleted here now (a runner stopped only at the next
   * heartbeat, as lease-lost, and the workspaces and cached folds stayed).
   */
  private async deletedMeanwhile(): Promise<void> {
    const ids = [...new Set([...this.running.keys(), ...(this.runnerDeps.workspaces?.sessionIds() ?? [])])];
    if (ids.length === 0) return;
    try {
      const present = new Set((await this.store.sessions.byIds(ids)).map((row) => row.id));
      const gone = ids.filter((id) => !present.has(id));
      if (gone.length > 0) this.deleted(gone);
    } catch (err) {
      if (!isDatabaseUnavailable(err)) this.opts.log?.('looking for sessions deleted while the listener was down failed', err);
    }
  }

  /**
   * Ends the running turn with `cancelled`, wherever it runs: kept on the
   * session's row first, which the running process reads at its next lease
   * renewal, then announced, which it hears at once unless its listener is down.
   */
  async cancel(sessionId: string): Promise<void> {
    await this.leases.requestCancel(sessionId);
    const local = this.running.get(sessionId)?.runner;
    if (local) local.stop('cancel');
    else await this.store.notify(CONTROL_CHANNEL, encodeCancel(sessionId));
  }

  isRunningHere(sessionId: string): boolean {
    return this.running.get(sessionId)?.runner !== undefined;
  }

  /** Graceful shutdown: running turns are closed as interrupted, leases released. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) this.clock.clearInterval(t);
    clearTimeout(this.claimTimer);
    clearTimeout(this.announceTimer);
    for (const r of this.running.values()) r.runner?.stop('shutdown');
    await this.claimingBatch;
    await Promise.all([...this.running.values()].map((r) => r.done));
    for (const w of this.warming.values()) w.startNow(); // those not started yet end at once
    await Promise.all([...this.warming.values()].map((w) => w.built));
  }
}

/** The session no longer exists, or its lease was taken over: the runner has nothing to close. */
function isGone(err: unknown): boolean {
  if (!(err instanceof ForklineError)) return false;
  return err.code === 'SESSION_NOT_FOUND' || (err.code === 'SESSION_BUSY' && err.details?.leaseLost === true);
}
