// ForklineRunner: the TypeScript SDK for external runners (the raw
// protocol is docs/runners.md). A runner of a pool waits for sessions with
// work (runnableSessions), claims one (a lease), reads what its model should
// see (Session.modelRequest), writes the turn's events (appendEvents, checked
// by forkline's rules), streams text deltas (publishTurnUpdate), renews its
// lease in the background and releases it. While it serves, it listens for
// the leases the service takes from it (runnerLeasesTaken: a user's cancel, a
// step's time limit) and aborts that session's work at once. Calls that
// failed for a lost connection or SERVICE_UNAVAILABLE are retried; an append
// retried after a lost answer checks whether its batch already went in (its
// events stored exactly as sent). A runner declares the tools it runs with their effects
// (declareTools), and writes each turn with a TurnWriter: a step's start
// before its model call, the model's message with its calls before any tool
// runs, each result as it comes (docs/runners.md "Why the call goes first").
//
//   const runner = new ForklineRunner({ url, pool: 'ext' });
//   await runner.run(async (session) => { const req = await session.modelRequest(); const turn = session.turn(req); … });
import { randomUUID } from 'node:crypto';
import {
  AppendStepDocument,
  Backoff,
  sleep,
  AppendTurnEndDocument,
  ClaimSessionDocument,
  ClaimSessionsDocument,
  createForklineClient,
  DeclareRunnerToolsDocument,
  ForklineClientError,
  ModelRequestDocument,
  PublishTurnUpdateDocument,
  ReleaseSessionDocument,
  RenewLeaseDocument,
  RunnableSessionsDocument,
  RunnerLeasesTakenDocument,
  SessionEventsDocument,
  type ForklineClient,
  type ModelRequestQuery,
} from '@forkline/client';
import { boundedResult, DEFAULT_MAX_RESULT_BYTES, storableText, type ToolResultContent } from './tool-output.ts';
import { isRefusal } from './refusal.ts';
import { resultIdOf } from './call-ids.ts';

export interface ForklineRunnerOptions {
  /** The GraphQL endpoint, e.g. http://127.0.0.1:4000/graphql. */
  url: string;
  /** The runner pool this runner serves (createSession(input: {runner})). */
  pool: string;
  /** This runner's id, shown as the holder of the sessions it claims (default: a random one). */
  runnerId?: string;
  token?: string;
  /** Lease length asked for at each claim and renewal (default 30 s); renewed every third of it. */
  leaseMs?: number;
  /** How long to keep retrying a call that failed for a lost connection or SERVICE_UNAVAILABLE (default 15 s). */
  retryForMs?: number;
  /** The typed client's bounds on an answer (ForklineClientOptions: default 128 MiB, 60 s; docs/api.md). */
  maxResponseBytes?: number;
  responseTimeoutMs?: number;
  /**
   * Bytes of a tool's output a result stores (default 1,000,000): a longer one is an `error` result saying the
   * tool ran and how big its output was, instead of a batch the server refuses (docs/runners.md).
   */
  maxResultBytes?: number;
  /** Sessions run at once by run() (default 4). */
  concurrency?: number;
  /** The tools this runner runs, declared on each session it claims before its work starts (adapters declare theirs too). */
  tools?: RunnerToolDeclaration[];
  /**
   * Claims write the next turn's opening (its input taken, turn/start, step 1's start) in the same request
   * (claimSessions `startTurn`): one append fewer per claimed turn. For functions that write turns with
   * session.turn() (TurnWriter; the adapters do), which reads the started step from the request (`stepOpen`).
   * Default false.
   */
  startTurns?: boolean;
  log?: (msg: string, err?: unknown) => void;
}

export type ModelRequest = NonNullable<ModelRequestQuery['session']>['modelRequest'];
/** A message of ModelRequest.messages (OpenAI chat format). */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface RunnerEvent {
  type: string;
  data: Record<string, unknown>;
}

/** What running a tool may do to the world: what a fork or crash repair tells the model about a call it cut off. */
export type ToolEffect = 'read-only' | 'idempotent' | 'side-effects';

/** A tool the runner runs, as it declares it (declareRunnerTools). */
export interface RunnerToolDeclaration {
  name: string;
  description?: string;
  /** JSON Schema of its arguments object. */
  inputSchema?: Record<string, unknown>;
  effect: ToolEffect;
}

/** A tool call as the model produced it (arguments: JSON text). */
export interface RunnerToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** What a model answered in one step. */
export interface StepMessage {
  text: string;
  toolCalls: RunnerToolCall[];
  usage?: { inputTokens?: number; outputTokens?: number };
}

/** The most text one publishTurnUpdate carries (the server takes up to 200,000 characters): joined deltas stop there. */
const MAX_DELTA_CHARS = 100_000;
/** Delta text waiting to be sent past which more is dropped (logged): deltas are not stored, and a slow server must not make the runner hold a model's whole output. */
const MAX_QUEUED_DELTA_CHARS = 4_000_000;
// RESPONSE_TIMEOUT: an answer that did not come whole in time is a lost connection (an append retried with its batch is written once).
// A 429 (RATE_LIMITED: the token's rate) was refused before anything was done, as the Python SDK also retries it.
const RETRYABLE = new Set(['SERVICE_UNAVAILABLE', 'NETWORK_ERROR', 'RESPONSE_TIMEOUT']);
const isRetryable = (err: unknown) => err instanceof ForklineClientError && (RETRYABLE.has(err.code) || /^HTTP_5/.test(err.code) || err.status === 429);
const codeOf = (err: unknown) => (err instanceof ForklineClientError ? err.code : undefined);
const errorMessage = (err: unknown) => (err instanceof Error ? err.message : String(err));
/**
 * Why a turn failed whose model answer ended before the provider said why (a connection cut between two events): it
 * is not a whole answer, so none of its calls is stored or runs, as for forkline's own agent (docs/runners.md, "A call
 * the model gets wrong").
 */
export const INCOMPLETE_ANSWER =
  "the provider's response ended before the answer did (no finish reason came): the answer is incomplete, so none of its calls ran";
/**
 * Whether a call's arguments are JSON. A framework answers a call whose arguments are not with its own parse error,
 * before any tool code of the adapter's: such a call (a refused one too) is stored with that answer (docs/runners.md,
 * "A call the model gets wrong").
 */
export const parsesAsJson = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};
/** The result of a call that never started because the run was cancelled first (docs/runners.md, "Cancelling"). */
export const cancelledBeforeStart = (reason: unknown): string => `the call did not run: the run was cancelled before it started (${errorMessage(reason)})`;
/** The result of a call whose tool had started, and not returned, when the run was cancelled (docs/runners.md, "Cancelling"). */
export const cancelledWhileRunning = (reason: unknown): string =>
  `the run was cancelled (${errorMessage(reason)}) while the tool ran: it may have run, and may still be running: its effect is unknown.`;
/** The wait the server asked for (Retry-After of a 429 or 503), in ms. */
const retryAfterOf = (err: unknown) => (err instanceof ForklineClientError && err.retryAfter ? err.retryAfter * 1000 : undefined);

/** The lease is no longer this runner's: it must stop writing (another runner may run the session now). */
export class LeaseLostError extends Error {
  constructor(readonly sessionId: string) {
    super(`the lease on session ${sessionId} was lost`);
    this.name = 'LeaseLostError';
  }
}

export class ForklineRunner {
  readonly client: ForklineClient;
  readonly runnerId: string;
  readonly pool: string;
  private readonly leaseMs: number;
  private readonly retryForMs: number;
  /** Bytes of a tool's output a result stores (ForklineRunnerOptions.maxResultBytes). */
  readonly maxResultBytes: number;
  private readonly log: (msg: string, err?: unknown) => void;
  /** The sessions held now, by `<sessionId> <token>`: a lease the service takes (runnerLeasesTaken) stops its session. */
  private readonly holding = new Map<string, RunnerSession>();
  /** What keeps the runnerLeasesTaken subscription open: run() loops, and sessions held. */
  private watchers = 0;
  private watchStop?: AbortController;

  constructor(private readonly opts: ForklineRunnerOptions) {
    this.client = createForklineClient({
      url: opts.url,
      token: opts.token,
      retryForMs: opts.retryForMs,
      maxResponseBytes: opts.maxResponseBytes,
      responseTimeoutMs: opts.responseTimeoutMs,
    });
    this.runnerId = opts.runnerId ?? `runner-${randomUUID().slice(0, 8)}`;
    this.pool = opts.pool;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.retryForMs = opts.retryForMs ?? 15_000;
    this.maxResultBytes = opts.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    this.log = opts.log ?? (() => {});
  }

  /** Runs `fn`, again after a lost connection, SERVICE_UNAVAILABLE or a 429 (after its Retry-After, else with backoff), for up to retryForMs. */
  async retrying<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.retryForMs;
    const backoff = new Backoff({ initialMs: 100, maxMs: 2000, jitter: 0.5 });
    for (;;) {
      try {
        return await fn();
      } catch (err) {
        const wait = backoff.next(retryAfterOf(err));
        if (!isRetryable(err) || Date.now() + wait > deadline) throw err;
        await sleep(wait);
      }
    }
  }

  /** Sessions of the pool with work nobody holds, as they come (a session may come more than once). */
  runnable(): AsyncIterableIterator<{ id: string }> {
    const stream = this.client.subscribe(RunnableSessionsDocument, { pool: this.pool });
    const it: AsyncIterableIterator<{ id: string }> = {
      next: async () => {
        const r = await stream.next();
        return r.done ? r : { done: false, value: r.value.runnableSessions };
      },
      // Ends a next() waiting for the server too (an async generator would queue the return behind it).
      return: async () => (await stream.return?.(), { done: true, value: undefined }),
      [Symbol.asyncIterator]: () => it,
    };
    return it;
  }

  /**
   * A session now held (`held`: true) or no longer (false), as its RunnerSession tells (not for callers). The first
   * holder (or run()) opens the runnerLeasesTaken subscription, the last one to let go closes it.
   */
  holds(session: RunnerSession, held: boolean): void {
    const key = `${session.sessionId} ${session.leaseToken}`;
    if (held === this.holding.has(key)) return;
    if (held) this.holding.set(key, session);
    else this.holding.delete(key);
    this.watching(held ? 1 : -1);
  }

  private watching(delta: number): void {
    this.watchers += delta;
    if (this.watchers > 0 && !this.watchStop) {
      this.watchStop = new AbortController();
      void this.watchLeases(this.watchStop.signal);
    } else if (this.watchers <= 0 && this.watchStop) {
      this.watchStop.abort();
      this.watchStop = undefined;
    }
  }

  /**
   * Listens for the leases the service takes from this runner (a user's cancel, a step's time limit): the session
   * holding one stops at once, its signal aborted as a refused renewal aborts it, so a tool given the signal stops
   * rather than running on until the next write. Subscribes again after a lost connection; a push missed meanwhile
   * is no loss beyond time: the next write or renewal answers LEASE_LOST all the same.
   */
  private async watchLeases(signal: AbortSignal): Promise<void> {
    const backoff = new Backoff({ initialMs: 500, maxMs: 10_000, jitter: 0.5 });
    while (!signal.aborted) {
      const stream = this.client.subscribe(RunnerLeasesTakenDocument, { runnerId: this.runnerId });
      const stop = () => void stream.return?.();
      signal.addEventListener('abort', stop, { once: true });
      try {
        for await (const { runnerLeasesTaken: taken } of stream) {
          backoff.reset();
          this.holding.get(`${taken.sessionId} ${taken.leaseToken}`)?.taken(taken.reason);
        }
      } catch (err) {
        // Refused as asked (a server without the subscription): the same request would be. A taken lease is learnt at the next write, as before.
        if (codeOf(err) === 'BAD_USER_INPUT') return this.log('runnerLeasesTaken refused: a lease taken is learnt at the next write', err);
        if (!signal.aborted) this.log('runnerLeasesTaken failed; subscribing again', err);
      } finally {
        signal.removeEventListener('abort', stop);
      }
      if (!signal.aborted) await sleep(backoff.next(), signal);
    }
  }

  /** Claims the session: its lease, or undefined when another runner holds it. */
  async claim(sessionId: string): Promise<RunnerSession | undefined> {
    const sentAt = performance.now();
    try {
      const { claimSession } = await this.retrying(() =>
        this.client.mutate(ClaimSessionDocument, { input: { sessionId, runnerId: this.runnerId, leaseMs: this.leaseMs, startTurn: this.opts.startTurns } }),
      );
      return this.held(claimSession, sentAt);
    } catch (err) {
      if (codeOf(err) === 'SESSION_BUSY') return undefined;
      throw err;
    }
  }

  /** Claims up to `max` of the pool's sessions with work that nobody holds, in one call (none: an empty list). */
  async claimMany(max: number): Promise<RunnerSession[]> {
    const sentAt = performance.now();
    const { claimSessions } = await this.retrying(() =>
      this.client.mutate(ClaimSessionsDocument, {
        input: { pool: this.pool, runnerId: this.runnerId, max, leaseMs: this.leaseMs, startTurn: this.opts.startTurns },
      }),
    );
    return claimSessions.map((c) => this.held(c, sentAt));
  }

  /** `sentAt`: when the claim was sent (performance.now()), which its lease's end is counted from. */
  private held(claim: { session: { id: string; modelRequest: ModelRequest }; lease: { token: number } }, sentAt: number): RunnerSession {
    const session = new RunnerSession(this, claim.session.id, claim.lease.token, this.leaseMs, this.log, sentAt);
    session.prefetch(claim.session.modelRequest);
    return session;
  }

  /**
   * Serves the pool until `signal` aborts: runnableSessions wakes the runner,
   * which claims as many sessions as it has room for (claimSessions) and hands
   * each to `handle` (which runs its work: modelRequest, append, …); a session
   * whose last turn gave its lease back needs no release, any other is
   * released afterwards. Errors of one session are logged; the loop goes on.
   */
  async run(handle: (session: RunnerSession) => Promise<void>, opts: { signal?: AbortSignal } = {}): Promise<void> {
    const limit = this.opts.concurrency ?? 4;
    const work = new Set<Promise<void>>();
    // One claim at a time; a wake-up during it, or a claim that filled every free slot, means: claim again when there is room.
    let claiming = false;
    let more = false;
    // A session that failed is released and offered again at once: claimed again at once it fails the
    // same way, in a tight loop. Consecutive failures (sessions, claims) pause the next claim; a success resets.
    const failures = new Backoff({ initialMs: 500, maxMs: 30_000, jitter: 0.5 });
    let resumeAt = 0;
    const failed = (err: unknown) => (resumeAt = Math.max(resumeAt, Date.now() + failures.next(retryAfterOf(err))));
    const fill = async (): Promise<void> => {
      more = true;
      if (claiming) return;
      claiming = true;
      try {
        while (more && work.size < limit && !opts.signal?.aborted) {
          if (resumeAt > Date.now()) await sleep(resumeAt - Date.now(), opts.signal);
          more = false;
          const room = limit - work.size;
          let sessions: RunnerSession[];
          try {
            sessions = await this.claimMany(room);
          } catch (err) {
            this.log('claiming sessions failed', err);
            failed(err);
            more = true; // claim again after the pause
            continue;
          }
          if (sessions.length === room) more = true;
          for (const session of sessions) {
            const p: Promise<void> = this.serveClaimed(session, handle)
              .then(
                () => failures.reset(),
                (err) => {
                  this.log(`session ${session.sessionId} failed`, err);
                  if (!(err instanceof LeaseLostError)) failed(err);
                },
              )
              .finally(() => {
                work.delete(p);
                if (more) void fill();
              });
            work.add(p);
          }
        }
      } finally {
        claiming = false;
      }
    };
    const resubscribe = new Backoff({ initialMs: 500, maxMs: 10_000, jitter: 0.5 });
    this.watching(1); // listening for leases taken before the first claim
    try {
      while (!opts.signal?.aborted) {
        const stream = this.runnable();
        const stop = () => void stream.return?.();
        opts.signal?.addEventListener('abort', stop, { once: true });
        try {
          for await (const _ of stream) {
            resubscribe.reset();
            if (opts.signal?.aborted) break;
            void fill();
          }
        } catch (err) {
          // The subscription ended with an error (a lost connection, a restart): subscribe again.
          this.log('runnableSessions failed; subscribing again', err);
        } finally {
          opts.signal?.removeEventListener('abort', stop);
        }
        if (!opts.signal?.aborted) await sleep(resubscribe.next(), opts.signal);
      }
    } finally {
      this.watching(-1); // the sessions still held keep it open
    }
    while (work.size) await Promise.all(work);
  }

  /** Claims the session and runs `handle` on it while it has work, then releases it. */
  async serve(sessionId: string, handle: (session: RunnerSession) => Promise<void>): Promise<boolean> {
    const session = await this.claim(sessionId);
    if (!session) return false;
    await this.serveClaimed(session, handle);
    return true;
  }

  private async serveClaimed(session: RunnerSession, handle: (session: RunnerSession) => Promise<void>): Promise<void> {
    try {
      if (this.opts.tools) await session.declareTools(this.opts.tools);
      await handle(session);
    } finally {
      await session.release();
    }
  }

  close(): Promise<void> {
    this.watchStop?.abort();
    this.watchStop = undefined;
    this.watchers = 0;
    this.holding.clear();
    return this.client.close();
  }
}

const GRAPHQL_EFFECT = { 'read-only': 'READ_ONLY', idempotent: 'IDEMPOTENT', 'side-effects': 'SIDE_EFFECTS' } as const;
const EFFECT_OF = { READ_ONLY: 'read-only', IDEMPOTENT: 'idempotent', SIDE_EFFECTS: 'side-effects' } as const;

/**
 * A tool set as a model request lists it, in one spelling: order does not
 * matter, an absent description is an empty one and an absent schema an
 * empty object's (ModelRequest.tools says no more), so two sets with one key
 * describe the same tools to the model and to repair.
 */
function toolSetKey(tools: ReadonlyArray<{ name: string; description?: string | null; inputSchema?: unknown; effect: ToolEffect }>): string {
  const sorted = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return canonicalJson(sorted.map((t) => [t.name, t.effect, t.description ?? '', t.inputSchema ?? { type: 'object' }]));
}

/** JSON with object keys in one order (Postgres's jsonb keeps its own). */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .filter((k) => o[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v ?? null);
}

/**
 * Whether a stored event is the one sent: its type, its data (forkline fills
 * in a call's declared effect where the call had none, and nothing else) and
 * not synthetic (the runner SDK writes none).
 */
function isStoredAsSent(stored: { type: string; data: unknown; synthetic: boolean }, sent: RunnerEvent): boolean {
  if (stored.type !== sent.type || stored.synthetic) return false;
  // A stored event read back over GraphQL: JSON, compared field by field below.
  let data = stored.data as Record<string, unknown>;
  if (sent.type === 'model/message' && Array.isArray(data?.toolCalls) && Array.isArray(sent.data.toolCalls)) {
    const sentCalls = sent.data.toolCalls as Array<Record<string, unknown>>;
    const toolCalls = (data.toolCalls as Array<Record<string, unknown>>).map((c, i) =>
      sentCalls[i] && sentCalls[i].effect === undefined ? { ...c, effect: undefined } : c,
    );
    data = { ...data, toolCalls };
  }
  return canonicalJson(data) === canonicalJson(sent.data);
}

/**
 * A batch as stored: the whole batch went in, ending at `eventCount`. The
 * answer carries only the log's length (the lighter answer: no events sent
 * back); the data is the batch's as sent (forkline adds a call's declared
 * effect where none was sent, and nothing else).
 */
function asStored(events: RunnerEvent[], eventCount: number): Array<{ seq: number; type: string; data: unknown }> {
  const first = eventCount - events.length;
  return events.map((e, i) => ({ seq: first + i, type: e.type, data: e.data }));
}

/**
 * A session this runner holds the lease of. The lease ends at the server's
 * clock; this runner counts its end from when the claim or the last renewal
 * was sent (a monotonic clock, which runs on while the process is paused), so
 * its own count ends first: once it has, the lease is taken as lost
 * (docs/runners.md "When the lease ends").
 */
export class RunnerSession {
  private readonly abort = new AbortController();
  private readonly renewal: NodeJS.Timeout;
  /** When the lease ends by this runner's count (performance.now() time). */
  private leaseEnd: number;
  /** Fires at leaseEnd: a lease not renewed by then is given up. */
  private expiry?: NodeJS.Timeout;
  /** The log's length as this runner last saw it: the next append's expectedEventCount. */
  eventCount?: number;
  /**
   * Deltas not sent yet, in order: one request is out at a time, and what the model streams meanwhile is joined
   * into one (a model streams far more pieces a second than a token's rate allows requests: docs/runners.md).
   */
  private readonly deltaQueue: Array<{ turn: number; step: number; text: string }> = [];
  private queuedDeltaChars = 0;
  /** Resolves when deltaQueue has been sent; undefined when nothing is being sent. */
  private deltasSent?: Promise<void>;

  constructor(
    private readonly runner: ForklineRunner,
    readonly sessionId: string,
    readonly leaseToken: number,
    private readonly leaseMs: number,
    private readonly log: (msg: string, err?: unknown) => void,
    /** When the claim was sent (performance.now()); default: now (a session made after its claim answered counts from later than the server). */
    claimSentAt = performance.now(),
  ) {
    this.renewal = setInterval(() => void this.renew(), Math.max(100, Math.floor(leaseMs / 3)));
    this.renewal.unref();
    this.leaseEnd = claimSentAt + leaseMs;
    this.armExpiry();
    runner.holds(this, true);
  }

  /** The service took the lease (runnerLeasesTaken: a user's cancel, a step's time limit): the work stops now. */
  taken(reason: string): void {
    if (this.abort.signal.aborted || this.released) return;
    this.log(`the lease on ${this.sessionId} was taken by the service (${reason}): stopping its work`);
    this.stop();
  }

  /** Gives the lease up when leaseEnd passes with no renewal. */
  private armExpiry(): void {
    clearTimeout(this.expiry);
    this.expiry = setTimeout(() => this.assertHeldQuietly(), Math.max(0, this.leaseEnd - performance.now()));
    this.expiry.unref();
  }

  private assertHeldQuietly(): void {
    try {
      this.assertHeld();
    } catch {
      // given up: signal aborted
    }
  }

  /**
   * The check at the act: throws LeaseLostError once the lease is lost or
   * given back, or has run out by this runner's count (a pause past it: GC,
   * SIGSTOP). Call it right before running a tool whose call is stored (the
   * adapters and settleOpenCalls do): the server refuses every write after
   * the lease's end, but cannot stop a tool the runner starts, while another
   * runner may already have claimed the session and repaired the call as
   * one in flight.
   */
  assertHeld(): void {
    if (!this.abort.signal.aborted && !this.released && performance.now() >= this.leaseEnd) {
      this.log(`the lease on ${this.sessionId} ran out before it was renewed: giving the session up`);
      this.stop();
    }
    if (this.abort.signal.aborted || this.released) this.lost();
  }

  /** Bytes of a tool's output a result stores (ForklineRunnerOptions.maxResultBytes). */
  get maxResultBytes(): number {
    return this.runner.maxResultBytes;
  }

  /** Aborted when the lease is lost (the work must stop: nothing more of it will be written). */
  get signal(): AbortSignal {
    return this.abort.signal;
  }

  private lost(): never {
    this.stop();
    throw new LeaseLostError(this.sessionId);
  }

  private stop() {
    clearInterval(this.renewal);
    clearTimeout(this.expiry);
    this.runner.holds(this, false);
    if (!this.abort.signal.aborted) this.abort.abort(new LeaseLostError(this.sessionId));
  }

  private async renew(): Promise<void> {
    // Counted from before the first attempt: the server's new end is at least this late.
    const sentAt = performance.now();
    try {
      await this.runner.retrying(() =>
        this.runner.client.mutate(RenewLeaseDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken, leaseMs: this.leaseMs } }),
      );
      if (this.abort.signal.aborted || this.released) return;
      this.leaseEnd = Math.max(this.leaseEnd, sentAt + this.leaseMs);
      this.armExpiry();
    } catch (err) {
      if (codeOf(err) === 'LEASE_LOST' || codeOf(err) === 'SESSION_NOT_FOUND') {
        this.log(`the lease on ${this.sessionId} is lost: ${errorMessage(err)}`);
        this.stop();
      } else this.log(`renewing the lease on ${this.sessionId} failed`, err);
    }
  }

  /** The tools declared on the session by this runner (as sent), with each one's effect by name. */
  private declared?: { key: string; effects: Map<string, ToolEffect> };
  /** The set the session holds (its last request's `tools`, in one spelling); undefined: not known. */
  private held?: string;
  /** A declaration not stored yet: it goes first in the next append. */
  private pendingTools?: RunnerEvent;

  /**
   * Declares the tools this runner runs for the session, with their effects.
   * When the set differs from the one the session holds (its request's
   * `tools`), a session/runner-tools event goes first in the next append —
   * before any call of them, with no round trip of its own; the same set
   * writes nothing. The calls a TurnWriter writes carry these effects.
   */
  async declareTools(tools: RunnerToolDeclaration[]): Promise<void> {
    const key = JSON.stringify(tools);
    if (this.declared?.key === key) return;
    if (this.signal.aborted || this.released) this.lost();
    const effects = new Map(tools.map((t) => [t.name, t.effect]));
    if (this.held === undefined) {
      // No request read yet (a session not claimed through the runner): declareRunnerTools writes it only when it changed.
      const input = {
        sessionId: this.sessionId,
        leaseToken: this.leaseToken,
        tools: tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, effect: GRAPHQL_EFFECT[t.effect] })),
      };
      try {
        const { declareRunnerTools } = await this.runner.retrying(() => this.runner.client.mutate(DeclareRunnerToolsDocument, { input }));
        this.eventCount = declareRunnerTools.eventCount;
      } catch (err) {
        if (codeOf(err) === 'LEASE_LOST') this.lost();
        throw err;
      }
      this.held = toolSetKey(tools);
    } else if (toolSetKey(tools) !== this.held) {
      const declared = tools.map((t) => ({
        name: t.name,
        effect: t.effect,
        ...(t.description !== undefined ? { description: t.description } : {}),
        ...(t.inputSchema !== undefined ? { inputSchema: t.inputSchema } : {}),
      }));
      this.pendingTools = { type: 'session/runner-tools', data: { tools: declared } };
    } else {
      this.pendingTools = undefined;
    }
    this.declared = { key, effects };
  }

  /**
   * Stores a declaration not stored yet now, in a batch of its own: a request
   * read after it lists the tools (their wire names among them,
   * docs/runners.md#wire-names). Nothing when none waits.
   */
  async storeDeclaredTools(): Promise<void> {
    if (this.pendingTools) await this.append([]);
  }

  /** The effect this runner declared for a tool (undefined: not declared). */
  effectOf(name: string): ToolEffect | undefined {
    return this.declared?.effects.get(name);
  }

  /** A writer for the turn `request` runs (the next one, or the rest of the open one): see TurnWriter. */
  turn(request: ModelRequest): TurnWriter {
    return new TurnWriter(this, request);
  }

  /** A request that came with a claim or a turn's last append: the next modelRequest() returns it. */
  private prefetched?: ModelRequest;
  /** Whether the lease was given back by the turn's last append (the session had nothing left to run). */
  released = false;

  prefetch(request: ModelRequest): void {
    this.prefetched = request;
    this.read(request);
  }

  /** What a request read tells: the log's length, and the tool set the session holds. */
  private read(request: ModelRequest): void {
    this.eventCount = request.eventCount;
    this.held = toolSetKey(request.tools.map((t) => ({ ...t, effect: EFFECT_OF[t.effect] })));
  }

  /**
   * What the session's next model call should be sent (turn and step null:
   * nothing to run). Once a turn's last append gave the lease back, the answer
   * is `turn: null` (with no messages), known without asking.
   */
  async modelRequest(): Promise<ModelRequest> {
    if (this.released)
      return {
        messages: [],
        tools: [],
        wireToolNames: [],
        turn: null,
        step: null,
        inputId: null,
        inTurn: false,
        stepOpen: false,
        model: null,
        eventCount: this.eventCount!,
        compaction: null,
        openCalls: [],
        approvalRequired: [],
      };
    const ready = this.prefetched;
    this.prefetched = undefined;
    if (ready && ready.eventCount === this.eventCount) return ready;
    const { session } = await this.runner.retrying(() => this.runner.client.query(ModelRequestDocument, { id: this.sessionId }));
    if (!session) this.lost();
    this.read(session.modelRequest);
    return session.modelRequest;
  }

  /**
   * Appends a batch after the log as last seen. A batch that ends a turn gives
   * the lease back when the session has nothing left to run (`released`), or
   * brings the next request (a message came meanwhile). A retry after a lost
   * answer finds its batch stored (the log grew by exactly it) and returns;
   * input queued meanwhile (inbox/add by sendMessage) moves the expected count on.
   */
  async append(batch: RunnerEvent[]): Promise<Array<{ seq: number; type: string; data: unknown }>> {
    if (this.signal.aborted || this.released) this.lost();
    if (this.eventCount === undefined) await this.modelRequest();
    // A declaration not stored yet goes first (before any call of its tools); the caller gets back its own events.
    const declaration = this.pendingTools;
    const events = declaration ? [declaration, ...batch] : batch;
    const stored = await this.appendBatch(events);
    if (declaration) {
      if (this.pendingTools === declaration) this.pendingTools = undefined;
      this.held = toolSetKey((declaration.data.tools as RunnerToolDeclaration[]) ?? []);
    }
    return declaration ? stored.slice(1) : stored;
  }

  private async appendBatch(events: RunnerEvent[]): Promise<Array<{ seq: number; type: string; data: unknown }>> {
    // A turn's end, or a call asked for approval (the session then waits for a person), gives the lease back when nothing is left to run.
    const endsTurn = events.some((e) => e.type === 'turn/end' || e.type === 'tool/approval-request');
    // Deltas of the turn go out before a batch that may give the lease back.
    if (endsTurn) await this.deltasSent;
    for (let attempt = 0; ; attempt++) {
      const expected = this.eventCount!;
      try {
        const input = { sessionId: this.sessionId, leaseToken: this.leaseToken, expectedEventCount: expected, events };
        if (endsTurn) {
          const { appendEvents } = await this.runner.retrying(() => this.runner.client.mutate(AppendTurnEndDocument, { input: { ...input, release: true } }));
          this.eventCount = appendEvents.eventCount;
          if (appendEvents.released) this.letGo();
          else if (appendEvents.modelRequest) this.prefetch(appendEvents.modelRequest);
          return asStored(events, appendEvents.eventCount);
        }
        const { appendEvents } = await this.runner.retrying(() => this.runner.client.mutate(AppendStepDocument, { input }));
        this.eventCount = appendEvents.eventCount;
        return asStored(events, appendEvents.eventCount);
      } catch (err) {
        const code = codeOf(err);
        if (code !== 'SESSION_BUSY' && code !== 'LEASE_LOST') throw err;
        if (attempt >= 5) throw err;
        // Who wrote since? Only inbox/add (a message) or our own batch (an earlier attempt's answer was lost;
        // a releasing one then finds the lease given back: LEASE_LOST). Ours means exactly what we sent:
        // a new holder's repair writes events of the same types (its synthetic closers), which are not.
        const page = await this.runner.retrying(() =>
          this.runner.client.query(SessionEventsDocument, { id: this.sessionId, afterSeq: expected - 1, first: events.length + 100 }),
        );
        const since = (page.session?.events.edges ?? []).map((e) => e.node);
        const ours = since.filter((e) => e.type !== 'inbox/add');
        if (ours.length === events.length && ours.every((e, i) => e.seq >= expected && isStoredAsSent(e, events[i]))) {
          this.eventCount = page.session!.eventCount;
          if (code === 'LEASE_LOST') this.letGo();
          return ours;
        }
        if (code === 'LEASE_LOST') this.lost();
        if (ours.length > 0) throw err; // someone else wrote: not ours to continue
        this.eventCount = page.session!.eventCount;
      }
    }
  }

  /**
   * Ends the open turn `failed` after the server refused one of its batches
   * (`BAD_USER_INPUT`, `413`): the refused batch is not in the log, so what
   * closes the turn is read from the log as it is — the open step's calls
   * without a result (their tools may have run: the refused batch may have
   * held their results), the step's end, the error and the turn's end — and
   * the session is not left with a turn open until a repair. A turn whose
   * opening was refused is opened first when its input is still waiting.
   * Whether anything was written.
   */
  async failRefusedTurn(turnRequest: ModelRequest, message: string): Promise<boolean> {
    this.prefetched = undefined;
    const now = await this.modelRequest();
    const events: RunnerEvent[] = [];
    let turn = now.turn;
    let step = Math.max(1, (now.step ?? 1) - (now.stepOpen ? 0 : 1));
    if (!now.inTurn) {
      // The turn's opening was refused: its input would be taken and fail the same way again and again.
      if (turnRequest.inTurn || now.inputId == null || now.inputId !== turnRequest.inputId) return false;
      events.push(
        { type: 'inbox/remove', data: { inputId: now.inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn: now.turn, inputId: now.inputId } },
      );
      step = 1;
    } else if (now.stepOpen) {
      for (const call of now.openCalls) {
        if (call.approval === 'pending') return false; // the session waits for a person: nothing to close
        events.push({
          type: 'tool/result',
          data: {
            turn,
            step: now.step,
            callId: call.id,
            resultId: resultIdOf(this.sessionId, call.id),
            status: 'error',
            content: `the runner could not record this call's result (the server refused its batch: ${message}); the tool may have run`,
            name: call.name,
          },
        });
      }
      events.push({ type: 'step/end', data: { turn, step: now.step, reason: 'failed' } });
    }
    turn ??= turnRequest.turn;
    events.push(
      { type: 'plugin/agent/error', data: { turn, step, message: `the server refused the runner's batch: ${message}`.slice(0, 10_000) } },
      { type: 'turn/end', data: { turn, reason: 'failed' } },
    );
    await this.appendBatch(events);
    return true;
  }

  /** The lease was given back by an append: nothing more to renew or release. */
  private letGo(): void {
    this.released = true;
    this.prefetched = undefined;
    clearInterval(this.renewal);
    clearTimeout(this.expiry);
    this.runner.holds(this, false);
  }

  /**
   * A model text delta for live clients (sessionTurns): sent in order, not stored, failures only logged. While one
   * request is out, the deltas that follow are joined (per turn and step, up to MAX_DELTA_CHARS) and go as one when
   * it is answered; past MAX_QUEUED_DELTA_CHARS waiting, it is dropped (logged). Resolves once the deltas queued
   * with it are sent (or their failure logged).
   */
  delta(turn: number, step: number, text: string): Promise<void> {
    if (this.queuedDeltaChars + text.length > MAX_QUEUED_DELTA_CHARS) {
      this.log(`a delta of ${this.sessionId} was dropped: ${this.queuedDeltaChars} characters wait to be sent`);
      return this.deltasSent ?? Promise.resolve();
    }
    this.queuedDeltaChars += text.length;
    const last = this.deltaQueue.at(-1);
    if (last && last.turn === turn && last.step === step && last.text.length + text.length <= MAX_DELTA_CHARS) last.text += text;
    else this.deltaQueue.push({ turn, step, text });
    this.deltasSent ??= this.sendDeltas();
    return this.deltasSent;
  }

  private async sendDeltas(): Promise<void> {
    for (;;) {
      const d = this.deltaQueue.shift();
      if (!d) return void (this.deltasSent = undefined); // at once, so a delta that comes next starts a sender
      this.queuedDeltaChars -= d.text.length;
      await this.runner.client
        .mutate(PublishTurnUpdateDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken, turn: d.turn, step: d.step, text: d.text } })
        .catch((err) => this.log(`a delta of ${this.sessionId} was not sent`, err));
    }
  }

  /** Gives the lease back (a lost lease is already given up). */
  async release(): Promise<void> {
    if (this.released) return;
    this.letGo();
    await this.deltasSent;
    if (this.abort.signal.aborted) return;
    try {
      await this.runner.retrying(() =>
        this.runner.client.mutate(ReleaseSessionDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken } }),
      );
    } catch (err) {
      if (codeOf(err) !== 'LEASE_LOST') throw err;
    }
  }
}

/**
 * Writes one turn as it happens, so the log always says what the runner is
 * doing (docs/runners.md "Why the call goes first"):
 *
 *   startStep()  before the model is called: the step's start (the turn's
 *                opening with the first: the input taken, turn/start), so
 *                the session reads RUNNING and the step's time is its own
 *   message()    as soon as the model finished: its text and its tool calls,
 *                each with the effect this runner declared for the tool —
 *                stored before any tool runs (a call without tools waits for
 *                the step's end: nothing happens in between)
 *   result()     each call's result as it comes (the step's last one with
 *                what follows it: the step's end and the next start)
 *   endStep()    the step's end, written with what comes next (the next
 *                step's start or the turn's end)
 *   end()        the turn's end (`failed` with the error recorded), with the
 *                lease given back when nothing is left to run
 *
 * Writes go out in order, one at a time; once one failed (the lease lost),
 * every later one fails with the same error.
 */
export class TurnWriter {
  readonly turn: number;
  /** The open step (0: none started yet). */
  step: number;
  private stepOpen: boolean;
  private turnOpen: boolean;
  /** Events written with the next write (a step's end; an answer without calls). */
  private carry: RunnerEvent[] = [];
  private writes: Promise<unknown> = Promise.resolve();
  private failure: unknown;
  private ended = false;
  private waiting = false;
  /** Whether the open step has its model message. */
  private answered = false;
  /** The open step's calls with no result written yet. */
  private unanswered = new Map<string, { id: string; name: string }>();

  constructor(
    readonly session: RunnerSession,
    private readonly request: ModelRequest,
  ) {
    if (request.turn == null || request.step == null) throw new Error(`session ${session.sessionId} has nothing to run`);
    this.turn = request.turn;
    // Inside an open turn the request's step is the next one to start (an open step is closed by the repair of a cut, never left to continue),
    // unless it is already started (a claim with startTurn wrote it): then its message comes first.
    this.stepOpen = request.inTurn && request.stepOpen === true;
    this.step = this.stepOpen ? request.step : request.step - 1;
    this.turnOpen = request.inTurn;
    // A step taken up after a person's decision: its message is stored, its open calls wait to be settled (settleOpenCalls).
    for (const c of this.stepOpen ? request.openCalls : []) this.unanswered.set(c.id, { id: c.id, name: c.name });
    this.answered = this.unanswered.size > 0;
  }

  /** The step's events, when this writer opened the turn: the input taken and turn/start go first. */
  private opening(): RunnerEvent[] {
    if (this.turnOpen) return [];
    this.turnOpen = true;
    return [
      { type: 'inbox/remove', data: { inputId: this.request.inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: this.turn, inputId: this.request.inputId } },
    ];
  }

  private write(events: RunnerEvent[]): Promise<void> {
    const batch = [...this.carry, ...events];
    this.carry = [];
    const done = this.writes.then(async () => {
      if (this.failure) throw this.failure;
      if (batch.length === 0) return;
      try {
        await this.session.append(batch);
      } catch (err) {
        this.failure ??= err;
        throw err;
      }
    });
    this.writes = done.catch(() => {});
    return done;
  }

  /** Starts the next step, before its model call; returns its number. A step still waiting for its message stays open (a retried model call). */
  async startStep(): Promise<number> {
    if (this.stepOpen && !this.answered) return this.step;
    if (this.stepOpen) this.endStep();
    this.answered = false;
    this.step++;
    this.stepOpen = true;
    await this.write([...this.opening(), { type: 'step/start', data: { turn: this.turn, step: this.step } }]);
    return this.step;
  }

  /** The open step's model answer: with tool calls, stored before this returns (run the tools after it). */
  async message(m: StepMessage): Promise<void> {
    const toolCalls = m.toolCalls.map((c) => {
      const effect = this.session.effectOf(c.name);
      // The model's arguments are outside input: stored as forkline's own agent stores them (a NUL or an unpaired surrogate
      // becomes U+FFFD, docs/agents.md), or the log refuses the answer and the turn fails.
      return { id: c.id, name: c.name, arguments: storableText(c.arguments), ...(effect ? { effect } : {}) };
    });
    this.answered = true;
    for (const c of toolCalls) this.unanswered.set(c.id, c);
    const event: RunnerEvent = {
      type: 'model/message',
      data: { turn: this.turn, step: this.step, text: storableText(m.text), toolCalls, ...(m.usage ? { usage: m.usage } : {}) },
    };
    if (toolCalls.length === 0) {
      this.carry.push(event);
      return;
    }
    await this.write([event]);
  }

  /**
   * A call's result (`error`: the tool failed; the content says how). While
   * other calls of the step still run it is stored before this returns; the
   * step's last result goes with what comes next (the step's end and the
   * next step's start, or the turn's end): nothing happens in between.
   * Resolves with the result as stored (held to maxResultBytes, made storable).
   */
  result(call: { id: string; name: string }, status: 'ok' | 'error', content: string): Promise<ToolResultContent> {
    this.unanswered.delete(call.id);
    // Held to maxResultBytes: a batch over the server's body limit would lose the result and every write after it.
    const bounded = boundedResult({ status, content }, this.session.maxResultBytes);
    const event: RunnerEvent = {
      type: 'tool/result',
      data: {
        turn: this.turn,
        step: this.step,
        callId: call.id,
        resultId: resultIdOf(this.session.sessionId, call.id),
        status: bounded.status,
        content: bounded.content,
        name: call.name,
      },
    };
    if (this.unanswered.size === 0) {
      this.carry.push(event);
      // A write before it that failed (the lease lost) fails this too.
      return this.writes.then(() => {
        if (this.failure) throw this.failure;
        return bounded;
      });
    }
    return this.write([event]).then(() => bounded);
  }

  /**
   * Answers each call of the open step that has no result as one that never started: the run was cancelled
   * (docs/runners.md, "Cancelling") and the framework, which waits for the tools it started, started none of them.
   * end() would say only that no result was recorded.
   */
  async cancelUnstarted(reason: unknown): Promise<void> {
    for (const call of [...this.unanswered.values()]) await this.result(call, 'error', cancelledBeforeStart(reason));
  }

  /** Closes the open step; its end is written with what comes next. */
  endStep(reason: 'completed' | 'failed' = 'completed'): void {
    if (!this.stepOpen) return;
    this.stepOpen = false;
    // A call the framework never ran (a tool the runner lacks, a run that failed first) is answered as such: results pair with calls.
    for (const call of this.unanswered.values()) {
      this.carry.push({
        type: 'tool/result',
        data: {
          turn: this.turn,
          step: this.step,
          callId: call.id,
          resultId: resultIdOf(this.session.sessionId, call.id),
          status: 'error',
          content: 'the runner recorded no result for this call (it did not run it)',
          name: call.name,
        },
      });
    }
    this.unanswered.clear();
    this.carry.push({ type: 'step/end', data: { turn: this.turn, step: this.step, reason } });
  }

  /** A text delta of the open step for live clients (not stored). */
  delta(text: string): Promise<void> {
    return this.session.delta(this.turn, Math.max(1, this.step), text);
  }

  /** Whether end() was called. */
  get isEnded(): boolean {
    return this.ended;
  }

  /** Whether the turn stopped for a person's decision (requestApproval): it is not to be ended. */
  get isWaiting(): boolean {
    return this.waiting;
  }

  /**
   * Asks for a person's decision on calls of the open step (stored, not run):
   * `tool/approval-request` for each, in call order, with the lease given back
   * — the session is WAITING, and its pool is offered it again once every
   * call is decided (docs/contract.md#tool-approval). The turn stays open.
   */
  async requestApproval(calls: ReadonlyArray<{ id: string }>): Promise<void> {
    if (calls.length === 0) return;
    this.waiting = true;
    await this.write(calls.map((c) => ({ type: 'tool/approval-request', data: { turn: this.turn, step: this.step, callId: c.id } })));
  }

  /**
   * Stored right before an approved call runs (plugin/agent/approved-call-start):
   * a runner that dies while it runs leaves a call the next claim repairs as
   * one in flight, never hands over to run again.
   */
  approvedCallStart(call: { id: string }): Promise<void> {
    return this.write([{ type: 'plugin/agent/approved-call-start', data: { turn: this.turn, step: this.step, callId: call.id } }]);
  }

  /** Writes what waits for the next write (a step's end) now: the next modelRequest() then reads past it. */
  flush(): Promise<void> {
    return this.write([]);
  }

  /**
   * Ends the turn: the open step closed (`failed` with the turn), the error
   * recorded (plugin/agent/error), turn/end; a turn whose input was never
   * taken is opened first (else it would be run again and again).
   */
  async end(reason: 'completed' | 'failed', error?: string): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    // Wait for the writes before: a failed one (the lease lost) fails this one too.
    await this.writes;
    if (this.failure) {
      // A batch the server refused (not a lost lease): the turn ends failed from the log as it is, instead of staying open until a repair.
      if (isRefusal(this.failure) && !this.session.signal.aborted) {
        this.carry = [];
        if (await this.session.failRefusedTurn(this.request, errorMessage(this.failure)).catch(() => false)) return;
      }
      throw this.failure;
    }
    const events = this.opening();
    this.endStep(reason);
    if (error) events.push({ type: 'plugin/agent/error', data: { turn: this.turn, step: Math.max(1, this.step), message: error.slice(0, 10_000) } });
    events.push({ type: 'turn/end', data: { turn: this.turn, reason } });
    await this.write(events);
  }
}

export { resumeDecidedStep, settleOpenCalls, deniedContent, sessionRequiresApproval, type OpenCall, type SettleOpenCalls } from './approvals.ts';
export { summaryPrompt, writeRunnerCompaction, type RunnerCompaction, type Summarize } from './compaction.ts';
export { requestedModel, unservableModel, type RequestedModel } from './requested-model.ts';
export { handedResultText, toolResultContent, DEFAULT_MAX_RESULT_BYTES, type ToolResultContent } from './tool-output.ts';
export { RequestWireNames, needsWireNames } from './wire-names.ts';
export { RunCallIds, type AdmittedCall } from './call-ids.ts';
