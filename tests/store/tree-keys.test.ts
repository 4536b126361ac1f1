// Fork trees as the unit of placement (docs/operations.md "Sharding"):
// the keys a distributed Postgres needs, checked on the migrated schema, and
// the store's statements on session data, recorded while the log and fork
// contract rows, leases and deletion run against it, each naming the tree
// (Session.treeId) it touches, so a distributed Postgres can route it to one
// shard. The one lookup by id alone is the directory of trees (SessionTree),
// read once per session and process.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { importRecording } from '../../src/store/recordings.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { LeaseStore, RunnerLeases } from '../../src/store/leases.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { logSpec } from '../spec/log-spec.ts';
import { storeForkSpec, storeLogSpec } from '../helpers/store-specs.ts';
import { forkSpec } from '../spec/fork-spec.ts';
import { FIXTURES, readFixture } from '../fixtures/recordings/recordings.ts';

const scope = { tenant: 'local' };
/** Every statement the store ran in this file, as sent. */
const statements: string[] = [];
let url: string;
let db: Database;
let store: SessionStore;

beforeAll(async () => {
  url = await createTestDatabase();
});

const open = () => {
  db = openDatabase(url, { max: 5, onQuery: (sql) => statements.push(sql) });
  // As on a distributed Postgres (DATABASE_DISTRIBUTED): append.test.ts covers one Postgres's first append by id.
  store = new SessionStore(db.pool, toolEffectOf, { byTree: true });
};

const openRecorded = async () => {
  open();
  const opened = db;
  return { store, close: () => opened.close() };
};

logSpec('SessionStore, every statement recorded', storeLogSpec(openRecorded));
forkSpec('SessionStore, every statement recorded', storeForkSpec(openRecorded));

describe('reads of a fork of an imported recording, and its deletion', () => {
  beforeAll(open);
  afterAll(() => db.close());

  it('reads the log every way the store does', async () => {
    for (const name of FIXTURES) {
      const s = await importRecording(store, scope, readFixture(name));
      const child = (await store.fork(scope, s.id, s.eventCount - 1)).session;
      for (const id of [s.id, child.id]) {
        await store.log.workspace(id, 10);
        await store.log.workspaceEntry(id, 'k');
        await store.files.tree(id);
        await store.log.inboxAddOf(id, 'in_none');
        await store.log.pendingInputCountAt(id, 1);
        await store.log.lastOfType(id, 'turn/end');
        expect((await store.log.page(id, -1, 1000)).length).toBe((await store.requireSession(scope, id)).eventCount);
      }
      expect((await store.sessions.byIds([s.id, child.id, 'ses_none'])).map((r) => r.id).sort()).toEqual([s.id, child.id].sort());
      expect(await store.sessions.tenantOf(child.id)).toBe(scope.tenant);
      expect((await store.sessions.page({ tenant: scope.tenant, parentId: s.id, order: 'oldest', limit: 10 })).map((r) => r.id)).toEqual([child.id]);
      expect((await store.sessions.forkPoints(scope.tenant, s.id)).map((p) => p.childCount)).toEqual([1]);
      await expect(store.deleteSession(scope, s.id)).rejects.toThrow(/descendant/);
      expect(await store.deleteSession(scope, s.id, { withDescendants: true })).toEqual([s.id, child.id]);
      await expect(store.requireSession(scope, child.id)).rejects.toThrow(/not found/i);
    }
  });

  it("takes, renews and gives back a session's lease, forkline's own and an external runner's", async () => {
    const own = await store.createSession(scope, { title: 'leased' });
    const leases = new LeaseStore(db.pool, 'a-process', 60_000, { trees: store.trees });
    const lease = (await leases.claim(own.id))!;
    expect(lease.lineage?.treeId).toBe(own.id);
    expect(await leases.claim(own.id)).toBeNull();
    expect((await leases.renew([lease])).held).toEqual(new Set([own.id]));
    expect(await leases.releaseIfIdle(lease)).toBe('released');
    const again = (await leases.claim(own.id))!;
    await leases.release(again);
    expect((await store.requireSession(scope, own.id)).leaseOwner).toBeNull();

    const external = await store.createSession(scope, { title: 'external', runner: 'pool-a' });
    const runners = new RunnerLeases(db.pool, { trees: store.trees });
    const claim = await runners.claim(scope.tenant, external.id, 'r1', 60_000);
    expect((await runners.renew(scope.tenant, external.id, claim.lease.token, 60_000)).token).toBe(claim.lease.token);
    expect((await runners.held(scope.tenant, external.id, claim.lease.token)).leaseOwner).toBe('runner:r1');
    await runners.release(scope.tenant, external.id, claim.lease.token);
    await expect(runners.held(scope.tenant, external.id, claim.lease.token)).rejects.toThrow(/not yours/);
    await expect(runners.claim(scope.tenant, 'ses_none', 'r1', 60_000)).rejects.toThrow(/not found/i);
    expect(await leases.claim('ses_none')).toBeNull();
  });

  it('a process that never saw a session looks its tree up once, then never again', async () => {
    const made = await store.createSession(scope, { title: 'seen elsewhere' });
    await store.append(made.id, [{ type: 'inbox/add', data: { inputId: 'in_1', text: 'hi' } }]);
    const from = statements.length;
    // Another process: caches of its own, on the same database.
    const other = new SessionStore(db.pool, toolEffectOf, { byTree: true });
    const leases = new LeaseStore(db.pool, 'another-process', 60_000, { trees: other.trees });
    expect((await other.requireSession(scope, made.id)).eventCount).toBe(2);
    await other.log.page(made.id, -1, 10);
    await other.queueInput(made.id, 'again', { scope });
    const lease = (await leases.claim(made.id))!;
    await other.appendReleasingIfIdle(made.id, [{ type: 'inbox/remove', data: { inputId: 'in_1', reason: 'cancelled' } }], lease, { scope });
    await leases.renew([lease]);
    await other.requireSession(scope, made.id);
    const lookups = statements.slice(from).filter((q) => /"SessionTree"/.test(q));
    expect(lookups).toEqual(['SELECT "treeId" FROM "SessionTree" WHERE id = $1']);
  });
});

describe('keys and statements a distributed Postgres (distributed by treeId) can hold and route', () => {
  let check: Database;
  beforeAll(() => {
    check = openDatabase(url, { max: 1 });
  });
  afterAll(() => check.close());

  it('every table of session data has treeId in its primary key, and every reference between them carries it', async () => {
    const { rows: tables } = await check.pool.query<{ table: string; pk: string[] }>(
      `SELECT c.table_name AS table, array_agg(k.column_name::text ORDER BY k.ordinal_position) AS pk
         FROM information_schema.table_constraints c
         JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name AND k.table_name = c.table_name
        WHERE c.table_schema = 'public' AND c.constraint_type = 'PRIMARY KEY'
          AND (c.table_name = 'Session' OR EXISTS (SELECT 1 FROM information_schema.columns x
                WHERE x.table_schema = 'public' AND x.table_name = c.table_name AND x.column_name = 'sessionId'))
        GROUP BY c.table_name ORDER BY 1`,
    );
    expect(tables.map((t) => t.table)).toEqual([
      'DeletedSession',
      'Deletion',
      'Event',
      'FileTreeCheckpoint',
      'FoldCheckpoint',
      'Session',
      'SessionBlob',
      'SessionTitle',
      'TotalsCheckpoint',
    ]);
    for (const t of tables) expect(t.pk, t.table).toContain('treeId');
    const { rows: references } = await check.pool.query<{ name: string; columns: string[] }>(
      `SELECT con.conname AS name, array_agg(a.attname::text ORDER BY a.attname) AS columns
         FROM pg_constraint con JOIN unnest(con.conkey) AS k(n) ON true
         JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n
        WHERE con.contype = 'f' AND con.confrelid = '"Session"'::regclass
        GROUP BY con.conname ORDER BY 1`,
    );
    // Events have none (migration 20261214010002_event_without_session_key): none is left without its session, below.
    expect(references.map((r) => r.name)).toEqual([
      'FileTreeCheckpoint_sessionId_treeId_fkey',
      'FoldCheckpoint_sessionId_treeId_fkey',
      'SessionBlob_sessionId_treeId_fkey',
      'SessionTitle_sessionId_treeId_fkey',
      'Session_parentId_treeId_fkey',
      'TotalsCheckpoint_sessionId_treeId_fkey',
    ]);
    for (const r of references) expect(r.columns, r.name).toContain('treeId');
    // The directory of trees: every session is in it under its own tree (Session's reference), and
    // nothing else is (deletion removes the entries with the rows); ids are unique there alone. A deleted
    // session's events wait for their reclaim (store/reclaim.ts), recorded with it.
    const {
      rows: [directory],
    } = await check.pool.query<{ sessions: number; entries: number; orphans: number; orphanEvents: number }>(
      `SELECT (SELECT count(*)::int FROM "Session") AS sessions, (SELECT count(*)::int FROM "SessionTree") AS entries,
              (SELECT count(*)::int FROM "SessionTree" t WHERE NOT EXISTS (SELECT 1 FROM "Session" s WHERE s.id = t.id AND s."treeId" = t."treeId")) AS orphans,
              (SELECT count(*)::int FROM "Event" e WHERE NOT EXISTS (SELECT 1 FROM "Session" s WHERE s.id = e."sessionId" AND s."treeId" = e."treeId")
                 AND NOT EXISTS (SELECT 1 FROM "DeletedSession" d WHERE d."sessionId" = e."sessionId" AND d."treeId" = e."treeId")) AS "orphanEvents"`,
    );
    expect(directory.sessions).toBeGreaterThan(10);
    expect(directory).toMatchObject({ entries: directory.sessions, orphans: 0, orphanEvents: 0 });
    const { rows: unique } = await check.pool.query<{ table: string; columns: string }>(
      `SELECT t.relname AS table, pg_get_indexdef(i.indexrelid) AS columns FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid
        WHERE i.indisunique AND t.relname IN ('Session', 'SessionTree') ORDER BY 1, 2`,
    );
    expect(unique.map((u) => u.columns.replace(/^.* USING btree /, `${u.table} `)).sort()).toEqual([
      'Session (id, "treeId")',
      'SessionTree (id)',
      'SessionTree (id, "treeId")',
    ]);
  });

  it('every statement on events names the tree, and so does every append and file-blob record', () => {
    const onEvents = statements.filter((s) => /"Event"/.test(s));
    expect(onEvents.length).toBeGreaterThan(100);
    expect(onEvents.filter((s) => !s.includes('"treeId"'))).toEqual([]);
    const appends = statements.filter((s) => /^WITH s0 AS/.test(s));
    expect(appends.length).toBeGreaterThan(10);
    expect(appends.filter((s) => !/WHERE id = \$1 AND "treeId" = \$15/.test(s))).toEqual([]);
    expect(statements.filter((s) => /INSERT INTO "SessionBlob"/.test(s) && !s.includes('"treeId"'))).toEqual([]);
  });

  it("the statements that find a session by id alone are the directory's, as docs/operations.md lists", () => {
    // Every other statement on session data names the tree ("treeId" = …):
    // a session's row, its lineage, the tail state an append checks against,
    // leases, children and fork points, deletion. On a distributed Postgres
    // the directory (SessionTree) is a reference table, a copy on every node,
    // so these read or write it there, not on every shard. A new statement
    // fails here until it names the tree or is listed there. (An INSERT
    // carries its tree as a value: it is routed by it.)
    const byIdAlone = new Set(
      statements
        .filter((s) => /"(Session|Event|SessionBlob|FileTreeCheckpoint|SessionTree)"/.test(s) && !/^\s*INSERT INTO/.test(s) && !s.includes('"treeId" = '))
        .map((s) => s.replace(/\s+/g, ' ').slice(0, 48)),
    );
    expect([...byIdAlone].sort()).toEqual([
      'DELETE FROM "SessionTree" WHERE id = ANY($1::tex', // deletion: the deleted sessions' entries
      'SELECT "treeId" FROM "SessionTree" WHERE id = $1', // session-trees.ts: a session's tree, then cached
      'SELECT id, "treeId" FROM "SessionTree" WHERE id ', // session-trees.ts: several sessions' trees (byIds, a lease heartbeat), then cached
    ]);
  });
});
