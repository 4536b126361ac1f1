// What the statement-bound tests share (tests/security/statement-*.test.ts): a
// session imported with a few turns, and a connection of the test's own that
// holds the locks the service's statements are made to wait on (real
// statements, not sleeps), with a look at pg_stat_activity for those waiting.
import pg from 'pg';
import { expect } from 'vitest';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import type { TestApp } from './app.ts';
import { waitFor } from './wait.ts';

/** Imports a session of `turns` answered turns through POST /recordings (7 events a turn); its id. */
export async function importSession(app: TestApp, id: string, turns = 3): Promise<string> {
  const events: Array<[string, unknown]> = [];
  for (let turn = 1; turn <= turns; turn++) {
    events.push(['inbox/add', { text: `question ${turn}`, inputId: `in_${turn}` }]);
    events.push(['inbox/remove', { reason: 'taken', inputId: `in_${turn}` }]);
    events.push(['turn/start', { turn, inputId: `in_${turn}` }]);
    events.push(['step/start', { step: 1, turn }]);
    events.push(['model/message', { step: 1, turn, text: `answer ${turn}`, toolCalls: [] }]);
    events.push(['step/end', { step: 1, turn, reason: 'completed' }]);
    events.push(['turn/end', { turn, reason: 'completed' }]);
  }
  return importLog(app, id, events);
}

/** Imports a session of `events` (type, data) through POST /recordings; its id. */
export async function importLog(app: TestApp, id: string, events: ReadonlyArray<readonly [string, unknown]>): Promise<string> {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id, title: id } }];
  events.forEach(([type, data], seq) => lines.push({ seq, type, data }));
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: lines.map((l) => JSON.stringify(l)).join('\n') + '\n',
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { session: { id: string } }).session.id;
}

/**
 * A connection of the test's own that holds locks the service's statements wait on; a second one, once
 * `letThrough` is asked, to hold the lock again behind the statements waiting now.
 */
export async function locker(databaseUrl: string) {
  /** Our connections' backends: never counted as the service's. */
  const pidOf = new Map<pg.Client, number>();
  const connect = async () => {
    const c = new pg.Client(pgConfigFromUrl(databaseUrl));
    await c.connect();
    pidOf.set(c, (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    return c;
  };
  let holder = await connect();
  let next: pg.Client | undefined;
  let held = '';
  /**
   * The service's backends waiting on a lock now; with `table`, those waiting for that table's (pg_locks: a long
   * statement's text is cut in pg_stat_activity); with `text`, those whose statement holds it too.
   */
  const waiting = async (table?: string, text?: string): Promise<number> => {
    await holder.query('SELECT pg_stat_clear_snapshot()'); // inside our transaction the view is otherwise read once
    const { rows } = await holder.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity a
        WHERE datname = current_database() AND pid <> ALL($3::int[]) AND state = 'active' AND wait_event_type = 'Lock'
          AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted AND l.relation = to_regclass($1)))
          AND ($2::text IS NULL OR strpos(query, $2) > 0)`,
      [table === undefined ? null : `"${table}"`, text ?? null, [...pidOf.values()]],
    );
    return rows[0].n;
  };
  return {
    /** The connection holding the lock now. */
    get client() {
      return holder;
    },
    waiting,
    async lock(sql: string) {
      await holder.query('BEGIN');
      await holder.query(sql);
      held = sql;
    },
    /**
     * Lets the statements waiting on the lock now run, and holds it again before any statement after them can
     * take it: the second connection asks for the lock while they wait, so Postgres queues it behind them and
     * ahead of whatever comes next (the lock is granted in the order it was asked for).
     */
    async letThrough() {
      next ??= await connect();
      await next.query('BEGIN');
      const relocked = next.query(held);
      const queued = pidOf.get(next);
      await waitFor(
        async () => {
          await holder.query('SELECT pg_stat_clear_snapshot()');
          return (await holder.query(`SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'`, [queued])).rows.length > 0;
        },
        { what: 'our second connection queued for the lock' },
      );
      await holder.query('ROLLBACK');
      await relocked;
      [holder, next] = [next, holder];
    },
    release: () => holder.query('ROLLBACK'),
    end: async () => {
      await holder.end();
      await next?.end();
    },
  };
}
