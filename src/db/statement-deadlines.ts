// What one request may make Postgres do, in time (docs/operations.md "Memory
// and time"). A request runs its work inside a statement scope: every
// statement the pool runs for it is bounded by the scope's timeout and its
// deadline, and is cancelled when the scope's client has gone. A statement
// past its bound is cancelled on the server (the wire protocol's
// CancelRequest, on a connection of its own: it needs no pool slot, and
// PgBouncer forwards it), so a slow statement does not keep a backend busy
// after its answer. Work outside a scope (the agent loop, recovery, leases)
// is not bounded here. Off unless FORKLINE_STATEMENT_BOUNDS=on (its request
// scope, an AsyncLocalStorage, makes every promise of the process dearer on Node 20).
import { AsyncLocalStorage } from 'node:async_hooks';
import net from 'node:net';
import type pg from 'pg';

/** The bounds of each class of work (docs/operations.md: FORKLINE_QUERY_TIMEOUT_MS and its neighbours). */
export interface StatementTimeouts {
  /** All of a query's statements, and each of a subscription's (ms; 0: none). */
  queryMs: number;
  /** All of a mutation's statements (ms; 0: none). */
  mutationMs: number;
  /** Each statement of a long mutation (ms; 0: none). */
  longStatementMs: number;
}

export const DEFAULT_STATEMENT_TIMEOUTS: StatementTimeouts = { queryMs: 60_000, mutationMs: 60_000, longStatementMs: 600_000 };

export interface StatementBound {
  /** The bound (ms; 0: none). */
  readonly timeoutMs: number;
  /** What it bounds: all the statements of the request together, or each statement on its own (a subscription's). */
  readonly per: 'request' | 'statement';
  /** Where the bound is set (an env var's name), for the error's message. */
  readonly setting: string;
}

/** Whether nobody waits for an answer any more (read when the pool looks: nothing is set up per request). */
export interface ClientGone {
  readonly aborted: boolean;
}

export interface StatementScope extends StatementBound {
  /** When every statement of the scope must be done (epoch ms; Infinity: none). */
  readonly deadline: number;
  /** Set when nobody waits for the answer any more: its statements are cancelled. */
  readonly gone?: ClientGone;
  /**
   * Set once the request has answered: work it started that is still running
   * (a turn it woke, a timer it set) is no longer bounded by it.
   */
  ended: boolean;
}

/** A scope starting now. */
export function statementScope(bound: StatementBound, gone?: ClientGone): StatementScope {
  const deadline = bound.per === 'request' && bound.timeoutMs > 0 ? Date.now() + bound.timeoutMs : Infinity;
  return { ...bound, deadline, gone, ended: false };
}

/** A statement stopped by its scope's bound: the request answers QUERY_TIMEOUT. */
export class StatementTimeoutError extends Error {
  readonly code = 'QUERY_TIMEOUT';
  constructor(
    readonly timeoutMs: number,
    setting: string,
  ) {
    super(`the request's database work took longer than ${timeoutMs} ms (${setting}) and was cancelled; narrow it (a smaller page, a shorter query) or retry`);
    this.name = 'StatementTimeoutError';
  }
}

/** A statement cancelled because its client went away (nobody reads the answer). */
export class StatementAbandonedError extends Error {
  readonly code = 'CLIENT_GONE';
  constructor() {
    super('the client went away; its database work was cancelled');
    this.name = 'StatementAbandonedError';
  }
}

const scopes = new AsyncLocalStorage<StatementScope>();

/** Runs `fn` (and everything it awaits) in `scope`. */
export function withStatementScope<T>(scope: StatementScope, fn: () => T): T {
  return scopes.run(scope, fn);
}

/** Runs `fn` in `scope` and ends the scope when `fn`'s answer is settled. */
export async function inStatementScope<T>(scope: StatementScope, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await scopes.run(scope, fn);
  } finally {
    scope.ended = true;
  }
}

/**
 * Runs `fn` outside any request's scope: work a request starts that outlives it
 * or serves others (a turn, a batch of appends) is not bounded by that request.
 */
export function outsideStatementScope<T>(fn: () => T): T {
  return scopes.exit(fn);
}

/** When a statement of `scope` starting at `now` must be done (epoch ms; Infinity: unbounded). */
function deadlineOf(scope: StatementScope, now: number): number {
  if (scope.timeoutMs <= 0) return Infinity;
  return scope.per === 'statement' ? now + scope.timeoutMs : scope.deadline;
}

/** A statement running in a scope, and how to stop it. */
interface Running {
  readonly scope: StatementScope;
  readonly deadline: number;
  why?: Error;
  cancel(reason: Error): void;
}

/**
 * The statements running in scopes, looked over every SWEEP_MS: one past its
 * deadline, or whose client has gone, is cancelled. A timer or a listener per
 * request cost more than a page read's own work (measured: server CPU a
 * request up by a third); a bound is kept within SWEEP_MS.
 */
const running = new Set<Running>();
const SWEEP_MS = 100;
let sweeper: NodeJS.Timeout | undefined;

function sweep(): void {
  if (running.size === 0) {
    clearInterval(sweeper);
    sweeper = undefined;
    return;
  }
  const now = Date.now();
  for (const r of running) {
    if (r.scope.gone?.aborted) r.cancel(new StatementAbandonedError());
    else if (now >= r.deadline) r.cancel(new StatementTimeoutError(r.scope.timeoutMs, r.scope.setting));
  }
}

function track(entry: Running): void {
  running.add(entry);
  if (!sweeper) (sweeper = setInterval(sweep, SWEEP_MS)).unref();
}

/** Sends Postgres's CancelRequest for `client`'s running statement; resolves once the server has taken it. */
function sendCancel(client: pg.PoolClient, config: pg.PoolConfig): Promise<void> {
  const { processID, secretKey } = client as unknown as { processID: number | null; secretKey: number | null };
  if (processID === null || secretKey === null) return Promise.resolve();
  return new Promise((resolve) => {
    const host = config.host ?? 'localhost';
    const port = config.port ?? 5432;
    const socket = host.startsWith('/') ? net.connect(`${host}/.s.PGSQL.${port}`) : net.connect(port, host);
    const packet = Buffer.alloc(16);
    packet.writeInt32BE(16, 0);
    packet.writeInt32BE(80877102, 4); // the CancelRequest code
    packet.writeInt32BE(processID, 8);
    packet.writeInt32BE(secretKey, 12);
    const done = () => (socket.destroy(), resolve());
    socket.setTimeout(5000, done);
    socket.once('connect', () => socket.write(packet));
    // The server closes the connection once it has signalled the backend.
    socket.once('close', done);
    socket.once('error', done);
  });
}

type Callback = (err: unknown, result?: unknown) => void;
const isSubmittable = (x: unknown) => typeof (x as { submit?: unknown } | null)?.submit === 'function';
const CLOSING = /^\s*(ROLLBACK|COMMIT)\b/i;

/**
 * Bounds every statement the pool's clients run inside a statement scope. A
 * cancel sent for a client is waited for before that client runs anything
 * else, so it can only reach the statement it was meant for (a backend that is
 * idle when a cancel arrives ignores it).
 */
export function boundStatements(pool: pg.Pool): void {
  const config = pool.options as pg.PoolConfig;
  // pg-pool hands a waiting caller its client from inside another's release:
  // the callback runs in the scope of the call that asked (or in none).
  const connect = pool.connect.bind(pool) as (cb?: Callback) => unknown;
  (pool as { connect: unknown }).connect = (cb?: Callback) => {
    if (typeof cb !== 'function') return connect();
    const scope = scopes.getStore();
    return connect((err, client) => scopes.run(scope as StatementScope, cb, err, client));
  };

  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
    let cancelling: Promise<void> | undefined;

    const bounded = (args: unknown[], scope: StatementScope): Promise<unknown> => {
      const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string })?.text ?? '');
      if (CLOSING.test(text)) return query(...args); // a transaction always ends, whatever its bound
      if (scope.gone?.aborted) return Promise.reject(new StatementAbandonedError());
      const now = Date.now();
      const deadline = deadlineOf(scope, now);
      if (now >= deadline) return Promise.reject(new StatementTimeoutError(scope.timeoutMs, scope.setting));
      const entry: Running = {
        scope,
        deadline,
        cancel(reason) {
          running.delete(entry);
          entry.why = reason;
          cancelling = sendCancel(client, config).finally(() => (cancelling = undefined));
        },
      };
      track(entry);
      return query(...args).then(
        (result) => (running.delete(entry), result),
        (err: unknown) => {
          running.delete(entry);
          // 57014 (query_canceled) after a cancel of ours: the reason we sent it.
          throw entry.why && (err as { code?: unknown })?.code === '57014' ? entry.why : err;
        },
      );
    };

    (client as { query: unknown }).query = (...args: unknown[]) => {
      const found = scopes.getStore();
      const scope = found?.ended ? undefined : found;
      // Streams and cursors (submittables) answer through themselves: not bounded here.
      if ((!scope && !cancelling) || isSubmittable(args[0])) return query(...args);
      const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as Callback) : undefined;
      // A cancel sent for this client is waited for before it runs anything else.
      const run = () => (scope ? bounded(args, scope) : query(...args));
      const out = cancelling ? cancelling.then(run) : run();
      if (!cb) return out;
      out.then(
        (r) => cb(null, r),
        (e) => cb(e),
      );
      return undefined;
    };
  });
}
