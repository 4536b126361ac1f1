// ForklineRunner: the TypeScript SDK for external runners (the raw
// protocol is docs/runners.md). A runner of a pool waits for sessions with
// work (runnableSessions), claims one (a lease), reads what its model should
// see (Session.modelRequest), writes the turn's events (appendEvents, checked
// by forkline's rules), streams text deltas (publishTurnUpdate), renews its
// lease in the background and releases it. Calls that failed for a lost
// connection or SERVICE_UNAVAILABLE are retried; an append retried after a
// lost answer checks whether its batch already went in.
//
//   const runner = new ForklineRunner({ url, pool: 'ext' });
//   await runner.run(async (session) => { const req = await session.modelRequest(); … await session.append(events); });
import { randomUUID } from 'node:crypto';
import {
  AppendStepDocument,
  AppendTurnEndDocument,
  ClaimSessionDocument,
  ClaimSessionsDocument,
  createForklineClient,
  ForklineClientError,
  ModelRequestDocument,
  PublishTurnUpdateDocument,
  ReleaseSessionDocument,
  RenewLeaseDocument,
  RunnableSessionsDocument,
  SessionEventsDocument,
  type ForklineClient,
  type ModelRequestQuery,
} from './client.ts';

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
  /** Sessions run at once by run() (default 4). */
  concurrency?: number;
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

const RETRYABLE = new Set(['SERVICE_UNAVAILABLE', 'NETWORK_ERROR']);
const isRetryable = (err: unknown) => err instanceof ForklineClientError && (RETRYABLE.has(err.code) || /^HTTP_5/.test(err.code));
const codeOf = (err: unknown) => (err instanceof ForklineClientError ? err.code : undefined);

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
  private readonly log: (msg: string, err?: unknown) => void;

  constructor(private readonly opts: ForklineRunnerOptions) {
    this.client = createForklineClient({ url: opts.url, token: opts.token, retryForMs: opts.retryForMs });
    this.runnerId = opts.runnerId ?? `runner-${randomUUID().slice(0, 8)}`;
    this.pool = opts.pool;
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.retryForMs = opts.retryForMs ?? 15_000;
    this.log = opts.log ?? (() => {});
  }

  /** Runs `fn`, again after a lost connection or SERVICE_UNAVAILABLE, with backoff, for up to retryForMs. */
  async retrying<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.retryForMs;
    for (let wait = 100; ; wait = Math.min(wait * 2, 2000)) {
      try {
        return await fn();
      } catch (err) {
        if (!isRetryable(err) || Date.now() + wait > deadline) throw err;
        const after = err instanceof ForklineClientError && err.retryAfter ? err.retryAfter * 1000 : wait;
        await new Promise((r) => setTimeout(r, after));
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

  /** Claims the session: its lease, or undefined when another runner holds it. */
  async claim(sessionId: string): Promise<RunnerSession | undefined> {
    try {
      const { claimSession } = await this.retrying(() => this.client.mutate(ClaimSessionDocument, { input: { sessionId, runnerId: this.runnerId, leaseMs: this.leaseMs } }));
      return this.held(claimSession);
    } catch (err) {
      if (codeOf(err) === 'SESSION_BUSY') return undefined;
      throw err;
    }
  }

  /** Claims up to `max` of the pool's sessions with work that nobody holds, in one call (none: an empty list). */
  async claimMany(max: number): Promise<RunnerSession[]> {
    const { claimSessions } = await this.retrying(() =>
      this.client.mutate(ClaimSessionsDocument, { input: { pool: this.pool, runnerId: this.runnerId, max, leaseMs: this.leaseMs } }),
    );
    return claimSessions.map((c) => this.held(c));
  }

  private held(claim: { session: { id: string; modelRequest: ModelRequest }; lease: { token: number } }): RunnerSession {
    const session = new RunnerSession(this, claim.session.id, claim.lease.token, this.leaseMs, this.log);
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
    const fill = async (): Promise<void> => {
      more = true;
      if (claiming) return;
      claiming = true;
      try {
        while (more && work.size < limit && !opts.signal?.aborted) {
          more = false;
          const room = limit - work.size;
          const sessions = await this.claimMany(room);
          if (sessions.length === room) more = true;
          for (const session of sessions) {
            const p: Promise<void> = this.serveClaimed(session, handle)
              .catch((err) => this.log(`session ${session.sessionId} failed`, err))
              .finally(() => {
                work.delete(p);
                if (more) void fill();
              });
            work.add(p);
          }
        }
      } catch (err) {
        this.log('claiming sessions failed', err);
      } finally {
        claiming = false;
      }
    };
    for (let wait = 500; !opts.signal?.aborted; wait = Math.min(wait * 2, 10_000)) {
      const stream = this.runnable();
      const stop = () => void stream.return?.();
      opts.signal?.addEventListener('abort', stop, { once: true });
      try {
        for await (const _ of stream) {
          wait = 500;
          if (opts.signal?.aborted) break;
          void fill();
        }
      } catch (err) {
        // The subscription ended with an error (a lost connection, a restart): subscribe again.
        this.log('runnableSessions failed; subscribing again', err);
      } finally {
        opts.signal?.removeEventListener('abort', stop);
      }
      if (!opts.signal?.aborted) await new Promise((r) => setTimeout(r, wait));
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
      await handle(session);
    } finally {
      await session.release();
    }
  }

  close(): Promise<void> {
    return this.client.close();
  }
}

/** A session this runner holds the lease of. */
export class RunnerSession {
  private readonly abort = new AbortController();
  private readonly renewal: NodeJS.Timeout;
  /** The log's length as this runner last saw it: the next append's expectedEventCount. */
  eventCount?: number;
  /** Deltas go out in order, one request at a time. */
  private deltas: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly runner: ForklineRunner,
    readonly sessionId: string,
    readonly leaseToken: number,
    private readonly leaseMs: number,
    private readonly log: (msg: string, err?: unknown) => void,
  ) {
    this.renewal = setInterval(() => void this.renew(), Math.max(100, Math.floor(leaseMs / 3)));
    this.renewal.unref();
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
    if (!this.abort.signal.aborted) this.abort.abort(new LeaseLostError(this.sessionId));
  }

  private async renew(): Promise<void> {
    try {
      await this.runner.retrying(() =>
        this.runner.client.mutate(RenewLeaseDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken, leaseMs: this.leaseMs } }),
      );
    } catch (err) {
      if (codeOf(err) === 'LEASE_LOST' || codeOf(err) === 'SESSION_NOT_FOUND') this.stop();
      else this.log(`renewing the lease on ${this.sessionId} failed`, err);
    }
  }

  /** A request that came with a claim or a turn's last append: the next modelRequest() returns it. */
  private prefetched?: ModelRequest;
  /** Whether the lease was given back by the turn's last append (the session had nothing left to run). */
  released = false;

  prefetch(request: ModelRequest): void {
    this.prefetched = request;
    this.eventCount = request.eventCount;
  }

  /**
   * What the session's next model call should be sent (turn and step null:
   * nothing to run). Once a turn's last append gave the lease back, the answer
   * is `turn: null` (with no messages), known without asking.
   */
  async modelRequest(): Promise<ModelRequest> {
    if (this.released) return { messages: [], tools: [], turn: null, step: null, inputId: null, inTurn: false, model: null, eventCount: this.eventCount! };
    const ready = this.prefetched;
    this.prefetched = undefined;
    if (ready && ready.eventCount === this.eventCount) return ready;
    const { session } = await this.runner.retrying(() => this.runner.client.query(ModelRequestDocument, { id: this.sessionId }));
    if (!session) this.lost();
    this.eventCount = session.modelRequest.eventCount;
    return session.modelRequest;
  }

  /**
   * Appends a batch after the log as last seen. A batch that ends a turn gives
   * the lease back when the session has nothing left to run (`released`), or
   * brings the next request (a message came meanwhile). A retry after a lost
   * answer finds its batch stored (the log grew by exactly it) and returns;
   * input queued meanwhile (inbox/add by sendMessage) moves the expected count on.
   */
  async append(events: RunnerEvent[]): Promise<Array<{ seq: number; type: string; data: unknown }>> {
    if (this.signal.aborted || this.released) this.lost();
    if (this.eventCount === undefined) await this.modelRequest();
    const endsTurn = events.some((e) => e.type === 'turn/end');
    // Deltas of the turn go out before a batch that may give the lease back.
    if (endsTurn) await this.deltas;
    for (let attempt = 0; ; attempt++) {
      const expected = this.eventCount!;
      try {
        const input = { sessionId: this.sessionId, leaseToken: this.leaseToken, expectedEventCount: expected, events };
        if (endsTurn) {
          const { appendEvents } = await this.runner.retrying(() => this.runner.client.mutate(AppendTurnEndDocument, { input: { ...input, release: true } }));
          this.eventCount = appendEvents.eventCount;
          if (appendEvents.released) this.letGo();
          else if (appendEvents.modelRequest) this.prefetch(appendEvents.modelRequest);
          return appendEvents.events;
        }
        const { appendEvents } = await this.runner.retrying(() => this.runner.client.mutate(AppendStepDocument, { input }));
        this.eventCount = appendEvents.eventCount;
        return appendEvents.events;
      } catch (err) {
        const code = codeOf(err);
        if (code !== 'SESSION_BUSY' && code !== 'LEASE_LOST') throw err;
        if (attempt >= 5) throw err;
        // Who wrote since? Only inbox/add (a message) or our own batch (an earlier attempt's answer was lost;
        // a releasing one then finds the lease given back: LEASE_LOST).
        const page = await this.runner.retrying(() => this.runner.client.query(SessionEventsDocument, { id: this.sessionId, afterSeq: expected - 1, first: events.length + 100 }));
        const since = (page.session?.events.edges ?? []).map((e) => e.node);
        const ours = since.filter((e) => e.type !== 'inbox/add');
        if (ours.length === events.length && ours.every((e, i) => e.type === events[i].type && e.seq >= expected)) {
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

  /** The lease was given back by an append: nothing more to renew or release. */
  private letGo(): void {
    this.released = true;
    this.prefetched = undefined;
    clearInterval(this.renewal);
  }

  /** A model text delta for live clients (sessionTurns); sent in order, not stored, failures only logged. */
  delta(turn: number, step: number, text: string): Promise<void> {
    const sent = this.deltas.then(() =>
      this.runner.client
        .mutate(PublishTurnUpdateDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken, turn, step, text } })
        .catch((err) => this.log(`a delta of ${this.sessionId} was not sent`, err)),
    );
    this.deltas = sent;
    return sent.then(() => {});
  }

  /** Gives the lease back (a lost lease is already given up). */
  async release(): Promise<void> {
    if (this.released) return;
    this.letGo();
    await this.deltas;
    if (this.abort.signal.aborted) return;
    try {
      await this.runner.retrying(() => this.runner.client.mutate(ReleaseSessionDocument, { input: { sessionId: this.sessionId, leaseToken: this.leaseToken } }));
    } catch (err) {
      if (codeOf(err) !== 'LEASE_LOST') throw err;
    }
  }
}
