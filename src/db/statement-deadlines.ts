// What one request may make Postgres do, in time (docs/operations.md "Memory
// and time"). A request runs its work inside a statement scope: every
// statement the pool runs for it is bounded by the scope's timeout and its
// deadline, and is cancelled when the scope's client has gone. A statement
// past its bound is cancelled on the server (the wire protocol's
// CancelRequest, on a connection of its own: it needs no pool slot, and
// PgBouncer forwards it), so a slow statement does not keep a backend busy
// after its answer. Work outside a scope (the agent loop, recovery, leases)
// is not bounded here.
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

export interface StatementScope extends StatementBound {
  /** When every statement of the scope must be done (epoch ms; Infinity: none). */
  readonly deadline: number;
  /** Aborted when nobody waits for the answer any more: its statements are cancelled. */
  readonly gone?: AbortSignal;
  /**
   * Set once the request has answered: work it started that is still running
   * (a turn it woke, a timer it set) is no longer bounded by it.
   */
  ended: boolean;
}

/** A scope starting now. */
export function statementScope(bound: StatementBound, gone?: AbortSignal): StatementScope {
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

/** The scope's timeout for a statement starting now (ms; undefined: unbounded). */
function boundOf(scope: StatementScope, now: number): number | undefined {
  if (scope.timeoutMs <= 0) return undefined;
  return scope.per === 'statement' ? scope.timeoutMs : Math.max(0, scope.deadline - now);
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
  // the callback keeps the context of the call that asked.
  const connect = pool.connect.bind(pool) as (cb?: Callback) => unknown;
  (pool as { connect: unknown }).connect = (cb?: Callback) => connect(typeof cb === 'function' ? AsyncLocalStorage.bind(cb) : undefined);

  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    let cancelling: Promise<void> | undefined;

    const run = async (args: unknown[], scope: StatementScope | undefined): Promise<unknown> => {
      if (cancelling) await cancelling;
      if (!scope) return query(...args);
      const text = typeof args[0] === 'string' ? args[0] : ((args[0] as { text?: string })?.text ?? '');
      const closing = CLOSING.test(text); // a transaction always ends, whatever its bound
      const bound = closing ? undefined : boundOf(scope, Date.now());
      if (!closing && scope.gone?.aborted) throw new StatementAbandonedError();
      if (bound === 0) throw new StatementTimeoutError(scope.timeoutMs, scope.setting);
      let why: Error | undefined;
      const cancel = (reason: Error) => {
        if (why) return;
        why = reason;
        cancelling = sendCancel(client, config).finally(() => (cancelling = undefined));
      };
      const timer = bound === undefined ? undefined : setTimeout(() => cancel(new StatementTimeoutError(scope.timeoutMs, scope.setting)), bound);
      const onGone = () => cancel(new StatementAbandonedError());
      if (!closing) scope.gone?.addEventListener('abort', onGone);
      try {
        return await query(...args);
      } catch (err) {
        // 57014 (query_canceled) after a cancel of ours: the reason we sent it.
        if (why && (err as { code?: unknown })?.code === '57014') throw why;
        throw err;
      } finally {
        clearTimeout(timer);
        scope.gone?.removeEventListener('abort', onGone);
      }
    };

    (client as { query: unknown }).query = (...args: unknown[]) => {
      const found = scopes.getStore();
      const scope = found?.ended ? undefined : found;
      // Streams and cursors (submittables) answer through themselves: not bounded here.
      if ((!scope && !cancelling) || isSubmittable(args[0])) return query(...args);
      const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as Callback) : undefined;
      const out = run(args, scope);
      if (!cb) return out;
      out.then(
        (r) => cb(null, r),
        (e) => cb(e),
      );
      return undefined;
    };
  });
}
