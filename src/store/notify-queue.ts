// Notifications sent after the commit they announce, not inside it.
//
// A NOTIFY inside a writing transaction makes its commit take a database-wide
// lock (async.c: the notification queue's, so that queue entries keep commit
// order) and hold it through the commit's WAL flush: every transaction that
// notifies commits one after another, one flush each, and group commit is
// lost. The appends of the agent loop all notified (the events channel): with
// the turns bench's sessions, Postgres backends waited on that lock several at
// a time (pg_stat_activity `Lock:object`), and two processes ran slower than
// one. Sent from a
// transaction of its own that writes nothing, a NOTIFY holds the lock only
// while it queues its payloads (no flush: nothing to make durable).
//
// So appends sent while others of the process are in flight (append-batcher.ts)
// notify after they commit, through this queue: one statement in flight,
// everything posted meanwhile in the next, in order. A listener learns of such
// a commit a little later, never before it. The price: a process that dies
// between the commit and its notification leaves other processes' subscribers
// of that session to wake on its next event (its next owner appends within
// the lease expiry) or on a reconnect.
import type pg from 'pg';
import { statement } from './statements.ts';

/** Attempts of a batch before it is dropped (a log line says so): the database may be restarting. */
const ATTEMPTS = 5;
const RETRY_MS = 500;
/** Postgres refuses a NOTIFY payload of this many bytes or more (async.c NOTIFY_PAYLOAD_MAX_LENGTH). */
const MAX_PAYLOAD_BYTES = 8000;

/**
 * NOTIFYs each `[channel, payload]` of a JSON array, in its order. Prepared (statements.ts): it is sent 0.2–0.5 times
 * a turn, and unprepared Postgres parsed and planned it every time (docs/benchmarks.md, "Statements per turn").
 */
const notifyBatch = (prepare: boolean) => statement(prepare, 'notify_batch', 'SELECT pg_notify(n->>0, n->>1) FROM json_array_elements($1::json) AS n');

interface Batch {
  /** `[channel, payload]` pairs, in the order posted. */
  notifications: Array<[string, string]>;
  /** Settles once the batch was sent or dropped. */
  sent: Promise<void>;
  done(): void;
}

function newBatch(): Batch {
  let done!: () => void;
  const sent = new Promise<void>((r) => (done = r));
  return { notifications: [], sent, done };
}

export class NotifyQueue {
  private queued = newBatch();
  private sending?: Promise<void>;
  private closing = false;
  private readonly notify: ReturnType<typeof notifyBatch>;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log?: (msg: string, err?: unknown) => void,
    prepare = true,
  ) {
    this.notify = notifyBatch(prepare);
  }

  /**
   * Queues NOTIFY channel, payload: sent with whatever else is queued, in the
   * order posted. Resolves once sent (or dropped); never rejects.
   */
  post(channel: string, payload: string): Promise<void> {
    // One payload Postgres refuses fails its whole statement, every attempt: refused here alone, it cannot hold the
    // queue for the retries and take the other notifications of its batch with it (a UTF-16 unit is at most 3 bytes).
    if (payload.length * 3 >= MAX_PAYLOAD_BYTES && Buffer.byteLength(payload) >= MAX_PAYLOAD_BYTES) {
      this.log?.(`dropped a notification on ${channel} of ${Buffer.byteLength(payload)} bytes: Postgres takes under ${MAX_PAYLOAD_BYTES}`);
      return Promise.resolve();
    }
    const batch = this.queued;
    batch.notifications.push([channel, payload]);
    this.sending ??= this.send();
    return batch.sent;
  }

  /** Resolves once everything posted so far was sent (or dropped). */
  async drain(): Promise<void> {
    while (this.sending) await this.sending;
  }

  /** Sends what is queued without waiting to retry (shutdown has a deadline), then resolves. */
  async close(): Promise<void> {
    this.closing = true;
    await this.drain();
  }

  private async send(): Promise<void> {
    // Posts of the same tick (a batch of appends resolves together) go in one statement.
    await Promise.resolve();
    try {
      while (this.queued.notifications.length) {
        const batch = this.queued;
        this.queued = newBatch();
        for (let attempt = 1; ; attempt++) {
          try {
            // One JSON parameter, serialised natively: as text[] parameters, the pg client escaped each payload (itself JSON,
            // full of quotes) with two regular-expression replaces and copies, a turn's largest garbage after the events.
            await this.pool.query(this.notify([JSON.stringify(batch.notifications)]));
            break;
          } catch (err) {
            if (attempt >= ATTEMPTS || this.closing) {
              this.log?.(`dropped ${batch.notifications.length} notifications after ${attempt} attempt(s)`, err);
              break;
            }
            await new Promise((r) => setTimeout(r, RETRY_MS * attempt));
          }
        }
        batch.done();
      }
    } finally {
      this.sending = undefined;
    }
  }
}
