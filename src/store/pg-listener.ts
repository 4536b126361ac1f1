// One LISTEN connection per process, shared by every subscriber. Notifications
// are only wake-ups: the log in Postgres stays the source of truth, so after a
// reconnect listeners re-read what they may have missed.
//
// A connection can go silent without erroring (a NAT or firewall that dropped
// the flow, a partition without RST, a paused backend): TCP keepalives miss a
// backend that is paused, and take minutes for the rest. So every statement on
// it has a deadline, and its caller goes elsewhere once it is missed. A
// connection that is only slow (a statement queued behind a lock, a busy
// Postgres) must not be made again for that: a reconnect drops the
// notifications sent meanwhile, and some of them (a cancel) nothing makes up
// for. So a statement that missed its deadline is cancelled from another
// connection: a backend that is there answers at once (the statement's result,
// or its cancellation), and the connection is kept; one that answers nothing
// within DEADLINE_MS more counts dead: it is destroyed and made again, and
// listeners catch up as after any reconnect (docs/operations.md "The LISTEN
// connection"). The lease heartbeat's renewals are such statements; when
// nothing else ran on it for PROBE_MS, a probe is.
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { ALL_CHANNELS } from './channels.ts';
import { Backoff } from '../core/backoff.ts';

/** How long a connection may stay quiet before a probe asks whether it still answers. */
const PROBE_MS = 10_000;
/** How long connecting, LISTEN statements and probes may take before the connection counts as dead. */
const DEADLINE_MS = 5_000;

/** A statement on the LISTEN connection got no answer in time: the connection is being made again. */
class ListenerSilent extends Error {}

export class PgListener extends EventEmitter {
  private client?: pg.Client;
  private closed = false;
  /** Waits between reconnection attempts (core/backoff.ts). */
  private readonly backoff = new Backoff({ initialMs: 100, maxMs: 5000 });
  /** When a statement on the connection last answered (the probe runs when none did for PROBE_MS). */
  private lastAnswer = 0;
  private probe?: NodeJS.Timeout;
  /** The backend serving `client` (what a cancel names). */
  private pid?: number;
  /** The connection a statement that missed its deadline is being checked on (check): statements go elsewhere meanwhile. */
  private checking?: pg.Client;

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channels: readonly string[] = ALL_CHANNELS,
  ) {
    super();
    this.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const client = new pg.Client({ connectionTimeoutMillis: DEADLINE_MS, ...this.config });
    client.on('notification', (n) => this.emit(n.channel, n.payload ?? ''));
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    await client.connect();
    let pid: number;
    try {
      for (const ch of this.channels) await this.within(client, client.query(`LISTEN ${pg.escapeIdentifier(ch)}`), DEADLINE_MS);
      pid = (await this.within(client, client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'), DEADLINE_MS)).rows[0].pid;
    } catch (err) {
      void client.end().catch(() => {}); // not awaited: one that missed its deadline is being ended already (within)
      throw err;
    }
    this.pid = pid;
    this.client = client;
    this.lastAnswer = Date.now();
    this.backoff.reset();
    this.probe ??= setInterval(() => {
      if (this.client && Date.now() - this.lastAnswer >= PROBE_MS) this.query({ text: 'SELECT 1' }, DEADLINE_MS)?.catch(() => {});
    }, PROBE_MS).unref();
  }

  /**
   * One statement on the LISTEN connection: a session of the process's own,
   * outside the pool, lent to the lease heartbeat (store/leases.ts
   * ReservedConnection), a short statement that waits for no lock, so
   * notifications are held up by no more than its round trip. undefined while
   * the connection is being made again, or checked after a statement missed
   * its deadline. Without an answer within `deadlineMs` it fails with
   * ListenerSilent; the connection is checked (check), and made again only
   * when it is silent.
   */
  query<R extends pg.QueryResultRow>(q: pg.QueryConfig, deadlineMs: number): Promise<pg.QueryResult<R>> | undefined {
    const client = this.client;
    return client && this.checking !== client ? this.within(client, client.query<R>(q), deadlineMs) : undefined;
  }

  /**
   * `answer`, or ListenerSilent once `ms` passed without it: then `client`
   * is checked (check) when it serves, and dropped when it is still being made.
   */
  private within<T>(client: pg.Client, answer: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new ListenerSilent(`the LISTEN connection gave no answer within ${ms} ms`));
        if (this.client === client && this.pid !== undefined) void this.check(client, this.pid, answer);
        else this.drop(client);
      }, ms);
    });
    return Promise.race([answer.then((r) => ((this.lastAnswer = Date.now()), r)), late]).finally(() => clearTimeout(timer));
  }

  /**
   * A statement on `client` missed its deadline: slow, or silent? Its
   * backend (`pid`) is asked to cancel it, from a connection of its own. A
   * backend that is there answers at once, with the statement's result or its
   * cancellation: the connection is only slow and is kept, with the
   * notifications it holds. No answer within DEADLINE_MS more (the
   * connection went silent; a cancel that could not be sent, as when
   * Postgres has no connection to spare, still leaves it that long), or no
   * such backend any more: it is dropped and made again.
   */
  private async check(client: pg.Client, pid: number, answer: Promise<unknown>): Promise<void> {
    if (this.checking === client) return; // another statement's check decides
    this.checking = client;
    const answered = answer.then(
      () => true,
      () => true,
    );
    let timer: NodeJS.Timeout | undefined;
    const silent = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), DEADLINE_MS)));
    const cancelled = this.cancel(pid);
    try {
      const first = await Promise.race([answered.then(() => 'answered' as const), cancelled]);
      const alive = first === 'answered' || (first !== 'gone' && (await Promise.race([answered, silent])));
      if (alive) this.lastAnswer = Date.now();
      else this.drop(client);
    } finally {
      clearTimeout(timer);
      // Statements go elsewhere until the cancel was sent: one sent after a late answer must not cancel the next statement.
      void cancelled.finally(() => {
        if (this.checking === client) this.checking = undefined;
      });
    }
  }

  /** Asks Postgres to cancel what backend `pid` runs, on a connection of its own: `sent`, `gone` (no such backend), or `unsent`. */
  private async cancel(pid: number): Promise<'sent' | 'gone' | 'unsent'> {
    const side = new pg.Client({ connectionTimeoutMillis: DEADLINE_MS, ...this.config });
    side.on('error', () => {});
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'unsent'>((resolve) => (timer = setTimeout(() => resolve('unsent'), DEADLINE_MS)));
    const sent = (async () => {
      await side.connect();
      const { rows } = await side.query<{ sent: boolean }>('SELECT pg_cancel_backend($1) AS sent', [pid]);
      return rows[0].sent ? ('sent' as const) : ('gone' as const);
    })().catch(() => 'unsent' as const);
    try {
      return await Promise.race([sent, late]);
    } finally {
      clearTimeout(timer);
      void side.end().catch(() => {}); // not awaited: with a statement out, end() destroys the socket
    }
  }

  /** `client` is silent: it is made again. */
  private drop(client: pg.Client) {
    this.reconnect(client);
    // With a statement out, end() destroys the socket rather than waiting for a goodbye that cannot come.
    void client.end().catch(() => {});
  }

  private reconnect(client: pg.Client) {
    if (this.closed || this.client !== client) return;
    this.client = undefined;
    const retry = () => {
      if (this.closed) return;
      this.start().then(
        () => this.emit('reconnect'),
        () => setTimeout(retry, this.backoff.next()),
      );
    };
    setTimeout(retry, this.backoff.next());
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }
}
