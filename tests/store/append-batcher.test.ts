// Group commit (store/append-batcher.ts): appends of different sessions that
// wait together go out as one statement, each session's append isolated: a
// stale append stores nothing and its append is retried alone; a statement the
// server refuses is run again one append at a time; a lost connection fails
// every append in it and sends none twice.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { AppendBatcher, MAX_BATCH } from '../../src/store/append-batcher.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';

const scope = { tenant: 'local' };
let url: string;
let db: Database;
let store: SessionStore;
/** Statements the store sent, by text, and the names of the prepared ones. */
const sent: string[] = [];
const names: string[] = [];

beforeAll(async () => {
  url = await createTestDatabase();
  // Two connections: one append statement at a time (half the pool), so appends wait together.
  db = openDatabase(url, { max: 2 });
  const query = db.pool.query.bind(db.pool) as (...a: unknown[]) => unknown;
  (db.pool as { query: unknown }).query = (...a: unknown[]) => {
    const c = a[0] as string | { text: string; name?: string };
    sent.push(typeof c === 'string' ? c : c.text);
    if (typeof c !== 'string' && c.name) names.push(c.name);
    return query(...a);
  };
  store = new SessionStore(db.pool, toolEffectOf);
});
afterAll(() => db.close());

const note = (i: number) => ({ type: 'plugin/test/note', data: { i } });
const appendStatements = () => sent.filter((t) => t.includes('INSERT INTO "Event"'));
const seqsOf = async (id: string) =>
  (await db.pool.query<{ seq: number }>('SELECT seq FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [id])).rows.map((r) => r.seq);

describe('appends of several sessions in one statement', () => {
  it('16 sessions appended to at once: fewer statements than appends, each session its own events', async () => {
    const ids = await Promise.all(Array.from({ length: 16 }, async () => (await store.createSession(scope, {})).id));
    await Promise.all(ids.map((id) => store.append(id, [note(0)]))); // their tail states are now known: the next appends read nothing first
    sent.length = 0;
    const results = await Promise.all(ids.map((id, i) => store.append(id, [note(1), note(i)])));
    const statements = appendStatements();
    expect(statements.length).toBeLessThan(16);
    expect(statements.some((t) => t.includes('jsonb_to_recordset'))).toBe(true);
    // One statement whatever the batch's size (15 appends waited: one batch), with or without its NOTIFY:
    // a statement per size was planned by each connection, size by size.
    const batches = statements.filter((t) => t.includes('jsonb_to_recordset') || t.includes('UNION ALL'));
    for (const notifying of [true, false]) expect(new Set(batches.filter((t) => t.includes('pg_notify') === notifying)).size).toBeLessThanOrEqual(1);
    results.forEach((events, i) => {
      expect(events.map((e) => [e.sessionId, e.seq, (e.data as { i: number }).i])).toEqual([
        [ids[i], 1, 1],
        [ids[i], 2, i],
      ]);
    });
    for (const id of ids) expect(await seqsOf(id)).toEqual([0, 1, 2]);
  });

  it('MAX_BATCH + 1 sessions appended to at once: the MAX_BATCH that waited for the statement in flight go out together, in one', async () => {
    const ids = await Promise.all(Array.from({ length: MAX_BATCH + 1 }, async () => (await store.createSession(scope, {})).id));
    await Promise.all(ids.map((id) => store.append(id, [note(0)])));
    sent.length = 0;
    await Promise.all(ids.map((id, i) => store.append(id, [note(i)])));
    // The first alone (nothing else in flight), then one statement for the MAX_BATCH behind it (fewer commits a turn).
    expect(appendStatements()).toHaveLength(2);
    for (const id of ids) expect(await seqsOf(id)).toEqual([0, 1]);
  });

  it('without prepared statements (behind a transaction-mode pooler) too', async () => {
    const unprepared = new SessionStore(db.pool, toolEffectOf, { prepare: false });
    const ids = await Promise.all(Array.from({ length: 12 }, async () => (await unprepared.createSession(scope, {})).id));
    await Promise.all(ids.map((id) => unprepared.append(id, [note(0)])));
    sent.length = 0;
    names.length = 0;
    const results = await Promise.all(ids.map((id, i) => unprepared.append(id, [note(i)])));
    expect(appendStatements().some((t) => t.includes('jsonb_to_recordset'))).toBe(true);
    expect(names).toEqual([]);
    results.forEach((events, i) => expect(events.map((e) => [e.sessionId, e.seq])).toEqual([[ids[i], 1]]));
  });

  it('an append made stale by another writer stores nothing; its append is retried alone and lands once', async () => {
    const [a, b, busy] = await Promise.all([0, 1, 2].map(async () => (await store.createSession(scope, {})).id));
    for (const id of [a, b, busy]) await store.append(id, [note(0)]);
    // Another process appends to b: this store's state of b is now stale.
    const other = new SessionStore(new pg.Pool({ ...pgConfigFromUrl(url), max: 1 }), toolEffectOf);
    await other.append(b, [note(100)]);
    await other.pool.end();
    sent.length = 0;
    // busy takes the one append slot; a and b wait for it, then go out together.
    const [, ra, rb] = await Promise.all([store.append(busy, [note(1)]), store.append(a, [note(1)]), store.append(b, [note(1)])]);
    expect(appendStatements().some((t) => t.includes('jsonb_to_recordset'))).toBe(true);
    expect(ra.map((e) => e.seq)).toEqual([1]);
    expect(rb.map((e) => e.seq)).toEqual([2]); // after the other writer's event
    expect(await seqsOf(a)).toEqual([0, 1]);
    expect(await seqsOf(b)).toEqual([0, 1, 2]);
  });
});

describe('AppendBatcher failures', () => {
  // A toy append: one integer per append, cast by Postgres ('x' is refused).
  let pool: pg.Pool;
  let alone = 0;
  // Rows like an append's (k, seq); 'die' ends the connection running it, 'x' is refused (not an integer).
  const value = (t: string) => `CASE WHEN ${t} = 'die' THEN pg_terminate_backend(pg_backend_pid())::int ELSE NULLIF(${t}, 'die')::int END`;
  const sql = {
    single: (values: unknown[]) => (alone++, { text: `SELECT 0 AS k, 0 AS seq, ${value('$1::text')} AS v`, values }),
    batch: () => `SELECT c.k, 0 AS seq, ${value('c.t')} AS v FROM jsonb_to_recordset($1::jsonb) AS c(k int, t text)`,
    batchValues: (batch: unknown[][]) => [JSON.stringify(batch.map(([t], k) => ({ k, t })))],
    params: 1,
    prepare: false,
    name: 'die_test',
  };
  beforeAll(() => {
    pool = new pg.Pool({ ...pgConfigFromUrl(url), max: 3 });
    pool.on('error', () => {}); // the terminated connection
  });
  afterAll(() => pool.end());

  /** Runs `values` through one batcher, the first alone (it holds the one slot) and the rest together after it. */
  async function runBatched(values: string[]) {
    const batcher = new AppendBatcher(pool, sql, 1);
    return Promise.allSettled(values.map((v) => batcher.run([v])));
  }

  it('a statement the server refuses is run again one append at a time: only the bad append fails', async () => {
    alone = 0;
    const results = await runBatched(['1', '2', 'x', '4']);
    expect(results[0]).toMatchObject({ status: 'fulfilled', value: { rows: [{ k: 0, v: 1 }] } });
    expect(results[1]).toMatchObject({ status: 'fulfilled', value: { rows: [{ v: 2 }] } });
    expect(results[2]).toMatchObject({ status: 'rejected', reason: { code: '22P02' } });
    expect(results[3]).toMatchObject({ status: 'fulfilled', value: { rows: [{ v: 4 }] } });
    expect(alone).toBe(1 + 3); // the first, then the refused batch's three again, one by one
  });

  it('a lost connection fails every append of its statement, none is sent again', async () => {
    alone = 0;
    const results = await runBatched(['1', '2', 'die', '4']);
    expect(results[0].status).toBe('fulfilled');
    expect(results.slice(1).map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    expect((results[1] as PromiseRejectedResult).reason).toMatchObject({ code: '57P01' });
    expect(alone).toBe(1);
  });
});
