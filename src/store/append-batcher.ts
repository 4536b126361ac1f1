// Group commit: appends of different sessions that wait for a connection go
// out together, one statement (one round trip, one commit) for up to
// MAX_BATCH sessions, each session's append a row of its own
// (append.ts appendBatch). At most `maxInFlight` append statements run
// at once (MAX_IN_FLIGHT, and never more than half the pool, so the rest of the
// pool stays free for reads); an append that finds a slot free goes out at once, alone. One commit for many
// sessions' appends saves Postgres a commit (and a WAL flush) each: the
// `turns` bench shows the turns/s and the Postgres CPU per turn. Rows are locked in session id order (byte order) in every batch,
// so batches never wait on each other in a cycle (the lease heartbeat waits for no
// row lock at all: leases.ts renew; when it waited, the two deadlocked now and then, 1 s each).
//
// A block whose conditions fail (stale length, lost lease) stores nothing and
// returns no rows: its caller sees exactly what a lone append would. A batch
// the server refused (an error response: nothing of it was committed) is run
// again one append at a time, so only the append that caused it fails. A batch
// whose outcome is unknown (the connection was lost) fails every append in it,
// as a lone append would: they are never sent twice.
//
// Notifications (notify-queue.ts): a statement sent while no other append
// statement of this process is in flight NOTIFYs from within (one round trip:
// a lone writer pays nothing more); one sent beside others leaves it to its
// callers after the commit, so concurrent commits do not queue on Postgres's
// notification lock one WAL flush at a time. Both halves were measured (the
// `append` bench's lone writer, the `turns` bench's two processes): each
// choice alone made one of them slower.
//
// A batch is one statement whatever its size (append.ts appendBatch: the
// appends' parameters in one jsonb array), not a block of SQL per append: a
// connection plans it once (a prepared statement's five custom plans and its
// generic one), not once per batch size, and runs 2 appends with the executor
// set-up of one.
import type pg from 'pg';
import { statement } from './statements.ts';

/**
 * Sessions per statement at most. One process's 100 running turns keep about as many appends waiting as the
 * statements in flight can hold: with 5 in flight at 8 each, every statement was full (`turns` window, 7.95 appends a
 * statement, 0.63 append statements a turn); at 16 each, 0.25–0.3. Fewer statements, commits and round trips a turn:
 * `npm run bench:turn-alternation`, 24 rounds against 8 on a loaded machine, Postgres CPU per turn lower in 20
 * (per-round ratio medians 0.83–0.86), the server's in 16. With 2 in flight (MAX_IN_FLIGHT) at 32 each the turn's
 * statements fell again (below); 64 filled no further and was not cheaper.
 */
export const MAX_BATCH = 32;

/**
 * Append statements in flight at most. Each statement is a commit (a WAL flush) and an executor set-up for
 * its UPDATE and INSERT (the indexes of `Session` and `Event` opened) whatever its size, so appends that
 * wait longer together cost Postgres and the pg client less: in the `turns` window (one process,
 * 1,000 sessions after 3,000 warm-up turns, `pg_stat_statements`), 5 in flight at 16 each made 0.62–0.82
 * statements a turn, 2 at 32 each 0.45–0.52; alternated over 12 rounds on a loaded machine, Postgres CPU per
 * turn lower in 10 (per-round ratio medians 0.79 and 0.92), the server's in 10 (0.97 and 0.93). Two keep
 * Postgres busy while the process gathers the next batch (one would leave it idle between commits).
 */
export const MAX_IN_FLIGHT = 2;

type Row = Record<string, unknown> & { k: number };

/** What a statement stored for one append, and whether the statement notified it already. */
export interface Appended {
  rows: Row[];
  notified: boolean;
}

interface Waiting {
  params: unknown[];
  resolve(appended: Appended): void;
  reject(err: unknown): void;
}

/** SQLSTATE classes whose error response may come with a lost connection (08: connection, 57: operator intervention). */
const OUTCOME_UNKNOWN = /^(08|57)/;

/** The server answered the statement with an error: it was not committed. */
function refusedByServer(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && code.length === 5 && !OUTCOME_UNKNOWN.test(code);
}

export class AppendBatcher {
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;
  /** Batch statements, with and without NOTIFY, built once each. */
  private readonly statements = new Map<string, ReturnType<typeof statement>>();

  constructor(
    private readonly pool: pg.Pool,
    private readonly sql: {
      /** A lone append's query (prepared or not, as the store's); with `notify`, it NOTIFYs what it stored. */
      single(params: unknown[], notify: boolean): pg.QueryConfig;
      /** Several appends' statement: a row of what each stored (as `single`'s), tagged `k` (its place in the batch); with `notify`, it NOTIFYs them. */
      batch(notify: boolean): string;
      /** That statement's values for the appends' parameters, in the batch's order. */
      batchValues(batch: unknown[][]): unknown[];
      /** Values one append takes. */
      params: number;
      prepare: boolean;
      /** The prepared batches' names start with it (one per statement text on a connection). */
      name: string;
    },
    private readonly maxInFlight: number,
  ) {}

  /** Runs one session's append; resolves with its rows (tagged `k`) and whether its statement notified them. */
  run(params: unknown[]): Promise<Appended> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ params, resolve, reject });
      this.pump();
    });
  }

  private pump() {
    while (this.inFlight < this.maxInFlight && this.waiting.length) {
      const batch = this.takeBatch();
      const notify = this.inFlight === 0; // alone in flight: no commit of ours waits behind its NOTIFY
      this.inFlight++;
      void this.execute(batch, notify).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  /** The oldest waiting appends, one per session: two of one session in one statement would both check the same length. */
  private takeBatch(): Waiting[] {
    const batch: Waiting[] = [];
    const sessions = new Set<unknown>();
    for (let i = 0; i < this.waiting.length && batch.length < MAX_BATCH;) {
      const w = this.waiting[i];
      if (sessions.has(w.params[0])) {
        i++;
        continue;
      }
      sessions.add(w.params[0]);
      batch.push(w);
      this.waiting.splice(i, 1);
    }
    return batch;
  }

  private async execute(batch: Waiting[], notify: boolean): Promise<void> {
    if (batch.length === 1) return this.alone(batch[0], notify);
    // Session rows are locked in id order in every batch: two batches never wait on each other in a cycle.
    batch.sort((a, b) => (String(a.params[0]) < String(b.params[0]) ? -1 : 1));
    let rows: Row[];
    try {
      rows = (await this.pool.query<Row>(this.statement(batch, notify))).rows;
    } catch (err) {
      if (refusedByServer(err)) {
        await Promise.all(batch.map((w) => this.alone(w, false)));
      } else {
        for (const w of batch) w.reject(err);
      }
      return;
    }
    const per: Row[][] = batch.map(() => []);
    for (const r of rows) per[r.k].push(r);
    batch.forEach((w, i) => w.resolve({ rows: per[i], notified: notify }));
  }

  private async alone(w: Waiting, notify: boolean): Promise<void> {
    try {
      w.resolve({ rows: (await this.pool.query<Row>(this.sql.single(w.params, notify))).rows, notified: notify });
    } catch (err) {
      w.reject(err);
    }
  }

  private statement(batch: Waiting[], notify: boolean): pg.QueryConfig {
    const name = `${this.sql.name}_batch${notify ? '_notify' : ''}`;
    let query = this.statements.get(name);
    if (!query) this.statements.set(name, (query = statement(this.sql.prepare, name, this.sql.batch(notify))));
    if (batch.some((w) => w.params.length !== this.sql.params)) throw new Error(`an append takes ${this.sql.params} values`);
    return query(this.sql.batchValues(batch.map((w) => w.params)));
  }
}
