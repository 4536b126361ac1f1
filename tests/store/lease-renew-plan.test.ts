// The lease heartbeat (store/leases.ts renew) is one statement for all of a
// process's leases, every third of the lease's time to live. It must find each
// lease's row by its key, not scan "Session": a scan costs the heartbeat the
// whole table (tens of milliseconds at 50,000 sessions), again and again.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';

let url: string;
let db: Database;
let store: SessionStore;
/** The statements the pool was sent, with their values. */
const sent: pg.QueryConfig[] = [];

beforeAll(async () => {
  url = await createTestDatabase();
  db = openDatabase(url, { max: 2 });
  const query = db.pool.query.bind(db.pool) as (...a: unknown[]) => unknown;
  (db.pool as { query: unknown }).query = (...a: unknown[]) => {
    if (typeof a[0] === 'object') sent.push(a[0] as pg.QueryConfig);
    return query(...a);
  };
  store = new SessionStore(db.pool, toolEffectOf);
  // A table of a size a real store reaches in days: 30,000 root sessions, made as the turns bench makes them.
  await db.pool.query(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title)
       SELECT v, v, 'local', 'plan' FROM (SELECT 'ses_plan_' || lpad(i::text, 6, '0') AS v FROM generate_series(1, 30000) i) x RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s`,
  );
  await db.pool.query('ANALYZE "Session"');
}, 120_000);
afterAll(() => db.close());

describe('the lease heartbeat', () => {
  it('renews a process\'s leases by their keys: no scan of "Session", whatever the table holds', async () => {
    const leases = new LeaseStore(db.pool, 'a-process', 60_000, { trees: store.trees });
    const ids = Array.from({ length: 100 }, (_, i) => `ses_plan_${String(1 + i * 300).padStart(6, '0')}`);
    const held = await Promise.all(ids.map(async (id) => (await leases.claim(id))!));
    expect(held.every(Boolean)).toBe(true);
    const from = sent.length;
    expect((await leases.renew(held)).held).toEqual(new Set(ids));
    const renew = sent.slice(from).find((q) => q.text.includes('"leaseExpiresAt" = now()'))!;
    expect(renew).toBeDefined();
    // The plan Postgres makes for that statement with those values.
    const client = new pg.Client(pgConfigFromUrl(url));
    await client.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) ${renew.text}`, renew.values);
      await client.query('ROLLBACK');
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).not.toMatch(/Seq Scan on "Session"/);
      // Each lease's row read through the key: a few buffers each, not the table's 30,000 rows.
      const buffers = Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1] ?? NaN);
      expect(buffers).toBeLessThan(100 * 30);
    } finally {
      await client.end();
    }
  });
});
