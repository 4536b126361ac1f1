// What one request may make Postgres do, in time (docs/operations.md "Memory
// and time"). Every statement a bounded pool runs has a bound, read from its
// connection when the statement is looked at, never set up per statement:
//   - by default, each statement: the query bound;
//   - in a transaction (store/transaction.ts), each statement: the mutation
//     bound, or the long bound for work that is legitimately long (a fork,
//     a deletion, an import);
//   - a request's reads that name its scope (passed explicitly, from the
//     GraphQL context or an HTTP door, http/door-statements.ts, to the store:
//     `scopedPool`): the request's deadline, and cancelled as soon as its
//     client has gone.
// A statement past its bound is cancelled on the server (the wire protocol's
// CancelRequest, on a connection of its own: it needs no pool slot, and
// PgBouncer forwards it), so a slow statement does not keep a backend busy
// after its answer. Nothing here runs per request or per statement: one sweep
// every SWEEP_MS looks at the pools' busy connections (an async context per
// request, AsyncLocalStorage, made every promise of the process dearer on
// Node 20; a timer or a listener per request cost more than a page read's
// own work).
import net from 'node:net';
import pg from 'pg';

/** The bounds of each class of work (docs/operations.md: FORKLINE_QUERY_TIMEOUT_MS and its neighbours). */
export interface StatementTimeouts {
  /** All of a query's scoped statements together, and each other statement (ms; 0: none). */
  queryMs: number;
  /** Each statement of a transaction (ms; 0: none). */
  mutationMs: number;
  /** Each statement of a long transaction (ms; 0: none). */
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

/** Whether nobody waits for an answer any more (read when the sweep looks: nothing is set up per request). */
export interface ClientGone {
  readonly aborted: boolean;
}

export interface StatementScope extends StatementBound {
  /** When every statement of the scope must be done (epoch ms; Infinity: none). */
  readonly deadline: number;
  /** Set when nobody waits for the answer any more: its statements are cancelled. */
  readonly gone?: ClientGone;
}

/** A scope starting now (one per operation: its fields written out, as V8 makes `{ ...bound, deadline }` by a runtime call). */
export function statementScope(bound: StatementBound, gone?: ClientGone): StatementScope {
  const deadline = bound.per === 'request' && bound.timeoutMs > 0 ? Date.now() + bound.timeoutMs : Infinity;
  return { timeoutMs: bound.timeoutMs, per: bound.per, setting: bound.setting, deadline, gone };
}

/** A statement stopped by its bound: the request answers QUERY_TIMEOUT. */
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

/** What a connection's statements are held to now: set by its holder for as long as it holds it. */
type Hold = StatementScope | 'transaction' | 'long';
const HOLD = Symbol('statement bound');
const CANCELLING = Symbol('cancelling');

interface Connection extends pg.PoolClient {
  [HOLD]?: Hold;
  [CANCELLING]?: Promise<void>;
}

/** pg's statement in flight on a connection (pg 8.23's Client#_getActiveQuery; a plain statement is a pg.Query). */
interface Statement {
  readonly text?: string;
  handleError(err: unknown, connection: unknown): unknown;
}
const CLOSING = /^\s*(ROLLBACK|COMMIT)\b/i;
const activeStatement = (client: pg.PoolClient): Statement | undefined => {
  const q = (client as unknown as { _getActiveQuery(): unknown })._getActiveQuery();
  // Cursors and streams (an export, an import's COPY) live across many reads: not bounded here.
  if (!(q instanceof pg.Query)) return undefined;
  const statement = q as unknown as Statement;
  // A transaction always ends, whatever its bound.
  return CLOSING.test(statement.text ?? '') ? undefined : statement;
};

/**
 * Holds `client`'s statements to `hold` until the function it returns is
 * called (which puts back what held them before): a transaction's holder
 * (store/transaction.ts), a read for a request on a connection it checked out.
 */
export function holdStatements(client: pg.PoolClient, hold: Hold): () => void {
  const c = client as Connection;
  const before = c[HOLD];
  c[HOLD] = hold;
  return () => void (c[HOLD] = before);
}

/** A bounded pool: its connections and their bounds. */
interface Bounded {
  readonly pool: pg.Pool;
  readonly config: pg.PoolConfig;
  readonly timeouts: StatementTimeouts;
  readonly clients: Set<Connection>;
}

/**
 * Every bounded pool's connections, looked over every SWEEP_MS: a statement
 * past its bound, or whose client has gone, is cancelled. A bound is kept
 * within SWEEP_MS; a statement's own bound counts from when the sweep first
 * saw it running.
 */
const pools = new Set<Bounded>();
const SWEEP_MS = 100;
let sweeper: NodeJS.Timeout | undefined;
/** When the sweep first saw each statement running. */
const seen = new WeakMap<Statement, number>();

const queryBound = (t: StatementTimeouts): StatementBound => ({ timeoutMs: t.queryMs, per: 'statement', setting: 'FORKLINE_QUERY_TIMEOUT_MS' });
const boundOf = (hold: Hold | undefined, t: StatementTimeouts): StatementBound | StatementScope => {
  if (hold === undefined) return queryBound(t);
  if (hold === 'transaction') return { timeoutMs: t.mutationMs, per: 'statement', setting: 'FORKLINE_MUTATION_TIMEOUT_MS' };
  if (hold === 'long') return { timeoutMs: t.longStatementMs, per: 'statement', setting: 'FORKLINE_LONG_STATEMENT_TIMEOUT_MS' };
  return hold;
};

function sweep(): void {
  const now = Date.now();
  for (const b of pools) {
    for (const client of b.clients) {
      if (client[CANCELLING]) continue;
      const statement = activeStatement(client);
      if (!statement) continue;
      let since = seen.get(statement);
      if (since === undefined) seen.set(statement, (since = now));
      const bound = boundOf(client[HOLD], b.timeouts);
      if ((bound as StatementScope).gone?.aborted) cancel(b, client, statement, new StatementAbandonedError());
      else if (bound.timeoutMs > 0) {
        const deadline = bound.per === 'request' ? (bound as StatementScope).deadline : since + bound.timeoutMs;
        if (now >= deadline) cancel(b, client, statement, new StatementTimeoutError(bound.timeoutMs, bound.setting));
      }
    }
  }
}

/**
 * Cancels `statement` on the server: it fails with `reason` instead of
 * Postgres's query_canceled. Until the server has taken the cancel, the
 * connection runs nothing else (a backend that is idle when a cancel arrives
 * ignores it): so it can only reach the statement it was meant for.
 */
function cancel(b: Bounded, client: Connection, statement: Statement, reason: Error): void {
  const handleError = statement.handleError;
  // 57014 (query_canceled) after a cancel of ours: the reason we sent it.
  statement.handleError = function (this: Statement, err, connection) {
    return handleError.call(this, (err as { code?: unknown })?.code === '57014' ? reason : err, connection);
  };
  const query = Object.prototype.hasOwnProperty.call(client, 'query') ? client.query : undefined;
  const run = client.query.bind(client) as (...args: unknown[]) => unknown;
  const cancelling = (client[CANCELLING] = sendCancel(client, b.config));
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const cb = typeof args[args.length - 1] === 'function' ? (args.pop() as (err: unknown, r?: unknown) => void) : undefined;
    const out = cancelling.then(() => run(...args));
    if (!cb) return out;
    out.then(
      (r) => cb(null, r),
      (e) => cb(e),
    );
    return undefined;
  };
  void cancelling.then(() => {
    client[CANCELLING] = undefined;
    if (query) (client as { query: unknown }).query = query;
    else delete (client as { query?: unknown }).query;
  });
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

/** Bounds every statement `pool`'s connections run (see above); `timeouts`: the bounds by default. */
export function boundStatements(pool: pg.Pool, timeouts: StatementTimeouts): void {
  // The sweep reads pg's statement in flight through a method pg does not document: another pg fails here, at start.
  if (typeof (pg.Client.prototype as unknown as Record<string, unknown>)._getActiveQuery !== 'function')
    throw new Error("statement bounds need pg's Client#_getActiveQuery (pg 8.23): set FORKLINE_STATEMENT_BOUNDS=off or use the pg version package.json pins");
  const b: Bounded = { pool, config: pool.options as pg.PoolConfig, timeouts, clients: new Set() };
  pools.add(b);
  pool.on('connect', (client) => {
    const c = client as Connection;
    [c[HOLD], c[CANCELLING]] = [undefined, undefined]; // every connection of the pool has them from the start: one shape
    b.clients.add(c);
  });
  pool.on('remove', (client) => b.clients.delete(client));
  const end = pool.end.bind(pool);
  pool.end = ((...args: unknown[]) => (pools.delete(b), (end as (...a: unknown[]) => unknown)(...args))) as typeof pool.end;
  if (!sweeper) (sweeper = setInterval(sweep, SWEEP_MS)).unref();
}

type Callback = (err: unknown, result?: unknown) => void;

/**
 * `pool` as one request reads through it: each statement runs on a
 * connection held to `scope` (its deadline; cancelled once its client has
 * gone), and none starts once the scope is over. Its statements are what
 * pool.query would run, with the same callbacks (no promise of its own).
 */
function scopedPool(pool: pg.Pool, scope: StatementScope): Pick<pg.Pool, 'query'> {
  return new ScopedPool(pool, scope) as unknown as Pick<pg.Pool, 'query'>;
}

/**
 * A class, its method on the prototype: nothing is made per read but the
 * object (tsx, esbuild's keepNames, names a closure assigned to a variable
 * with an Object.defineProperty call each time it is made).
 */
class ScopedPool {
  constructor(
    private readonly pool: pg.Pool,
    private readonly scope: StatementScope,
  ) {}

  query(...args: unknown[]): Promise<unknown> | undefined {
    const last = args[args.length - 1];
    if (typeof last === 'function') return void runScoped(this.pool, this.scope, args.slice(0, -1), last as Callback);
    return new Promise((resolve, reject) => runScoped(this.pool, this.scope, args, (err, result) => (err ? reject(err) : resolve(result))));
  }
}

function runScoped(pool: pg.Pool, scope: StatementScope, args: unknown[], cb: Callback): void {
  if (scope.gone?.aborted) return cb(new StatementAbandonedError());
  if (Date.now() >= scope.deadline) return cb(new StatementTimeoutError(scope.timeoutMs, scope.setting));
  pool.connect((err, client, release) => {
    if (err || !client) return cb(err);
    const c = client as Connection;
    c[HOLD] = scope;
    (c.query as (...a: unknown[]) => void)(...args, (qerr: unknown, result: unknown) => {
      c[HOLD] = undefined;
      // A statement's error leaves its connection fine; anything else (a lost connection) discards it.
      release((qerr as { code?: unknown } | undefined)?.code === undefined ? (qerr as Error | undefined) : undefined);
      cb(qerr, result);
    });
  });
}

/** `pool`, or the pool as `scope` reads through it. */
export const readingFor = (pool: pg.Pool, scope: StatementScope | undefined): Pick<pg.Pool, 'query'> => (scope ? scopedPool(pool, scope) : pool);
