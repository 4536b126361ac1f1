// What the statement-bound tests share (tests/security/statement-*.test.ts): a
// session imported with a few turns, and a connection of the test's own that
// holds the locks the service's statements are made to wait on (real
// statements, not sleeps), with a look at pg_stat_activity for those waiting.
import pg from 'pg';
import { expect } from 'vitest';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import type { TestApp } from './app.ts';

/** Imports a session of `turns` answered turns through POST /recordings (7 events a turn); its id. */
export async function importSession(app: TestApp, id: string, turns = 3): Promise<string> {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id, title: id } }];
  let seq = 0;
  const add = (type: string, data: unknown) => lines.push({ seq: seq++, type, data });
  for (let turn = 1; turn <= turns; turn++) {
    add('inbox/add', { text: `question ${turn}`, inputId: `in_${turn}` });
    add('inbox/remove', { reason: 'taken', inputId: `in_${turn}` });
    add('turn/start', { turn, inputId: `in_${turn}` });
    add('step/start', { step: 1, turn });
    add('model/message', { step: 1, turn, text: `answer ${turn}`, toolCalls: [] });
    add('step/end', { step: 1, turn, reason: 'completed' });
    add('turn/end', { turn, reason: 'completed' });
  }
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: lines.map((l) => JSON.stringify(l)).join('\n') + '\n',
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { session: { id: string } }).session.id;
}

/** A connection of the test's own that holds locks the service's statements wait on. */
export async function locker(databaseUrl: string) {
  const client = new pg.Client(pgConfigFromUrl(databaseUrl));
  await client.connect();
  return {
    client,
    /** The service's backends waiting on a lock now (its pool's connections; not ours); with `table`, those whose statement names it. */
    async waiting(table?: string): Promise<number> {
      await client.query('SELECT pg_stat_clear_snapshot()'); // inside our transaction the view is otherwise read once
      const { rows } = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'active' AND wait_event_type = 'Lock'
            AND ($1::text IS NULL OR strpos(query, $1) > 0)`,
        [table === undefined ? null : `"${table}"`],
      );
      return rows[0].n;
    },
    async lock(sql: string) {
      await client.query('BEGIN');
      await client.query(sql);
    },
    release: () => client.query('ROLLBACK'),
    end: () => client.end(),
  };
}
