// One LISTEN connection per process, shared by every subscriber. Notifications
// are only wake-ups: the log in Postgres stays the source of truth, so after a
// reconnect listeners re-read what they may have missed.
import { EventEmitter } from 'node:events';
import pg from 'pg';
import { ALL_CHANNELS } from './channels.ts';
import { Backoff } from '../core/backoff.ts';

export class PgListener extends EventEmitter {
  private client?: pg.Client;
  private closed = false;
  /** Waits between reconnection attempts (core/backoff.ts). */
  private readonly backoff = new Backoff({ initialMs: 100, maxMs: 5000 });

  constructor(
    private readonly config: pg.ClientConfig,
    private readonly channels: readonly string[] = ALL_CHANNELS,
  ) {
    super();
    this.setMaxListeners(0);
  }

  async start(): Promise<void> {
    const client = new pg.Client(this.config);
    client.on('notification', (n) => this.emit(n.channel, n.payload ?? ''));
    client.on('error', () => this.reconnect(client));
    client.on('end', () => this.reconnect(client));
    await client.connect();
    for (const ch of this.channels) await client.query(`LISTEN ${pg.escapeIdentifier(ch)}`);
    this.client = client;
    this.backoff.reset();
  }

  /**
   * One statement on the LISTEN connection: a session of the process's own,
   * outside the pool, lent to the lease heartbeat (store/leases.ts
   * ReservedConnection), a short statement that waits for no lock, so
   * notifications are held up by no more than its round trip. undefined while
   * the connection is being made again.
   */
  query<R extends pg.QueryResultRow>(q: pg.QueryConfig): Promise<pg.QueryResult<R>> | undefined {
    return this.client?.query<R>(q);
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
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
  }
}
