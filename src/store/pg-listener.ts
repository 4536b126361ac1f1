// One LISTEN connection per process, shared by every subscriber. Notifications
// are only wake-ups: the log in Postgres stays the source of truth, so after a
// reconnect listeners re-read what they may have missed.
//
// A connection can go silent without erroring (a NAT or firewall that dropped
// the flow, a partition without RST, a paused backend): TCP keepalives miss a
// backend that is paused, and take minutes for the rest. So every statement on
// it has a deadline, and a statement that misses it counts the connection
// dead: it is destroyed and made again, and listeners catch up as after any
// reconnect (docs/operations.md "The LISTEN connection"). The lease heartbeat's
// renewals are such statements; when nothing else ran on it for PROBE_MS, a
// probe is.
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
    try {
      for (const ch of this.channels) await this.within(client, client.query(`LISTEN ${pg.escapeIdentifier(ch)}`), DEADLINE_MS);
    } catch (err) {
      void client.end().catch(() => {}); // not awaited: one that missed its deadline is being ended already (within)
      throw err;
    }
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
   * the connection is being made again. Without an answer within
   * `deadlineMs` it fails with ListenerSilent, and the connection is made again.
   */
  query<R extends pg.QueryResultRow>(q: pg.QueryConfig, deadlineMs: number): Promise<pg.QueryResult<R>> | undefined {
    const client = this.client;
    return client && this.within(client, client.query<R>(q), deadlineMs);
  }

  /** `answer`, or ListenerSilent once `ms` passed without it: then `client` is dropped and made again. */
  private within<T>(client: pg.Client, answer: Promise<T>, ms: number): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new ListenerSilent(`the LISTEN connection gave no answer within ${ms} ms`));
        this.reconnect(client);
        // With a statement out, end() destroys the socket rather than waiting for a goodbye that cannot come.
        void client.end().catch(() => {});
      }, ms);
    });
    return Promise.race([answer.then((r) => ((this.lastAnswer = Date.now()), r)), late]).finally(() => clearTimeout(timer));
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
