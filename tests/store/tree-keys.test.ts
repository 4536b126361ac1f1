// Fork trees as the unit of placement (issue 34, docs/operations.md "Sharding"):
// the keys a distributed Postgres needs, checked on the migrated schema, and
// the store's statements on session data, recorded while the log and fork
// contract rows run against it, each naming the tree (Session.treeId) it
// touches, so a distributed Postgres can route it to one shard.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { importRecording } from '../../src/store/recordings.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
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
      await store.deleteSession(scope, s.id, { withDescendants: true });
    }
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
    expect(tables.map((t) => t.table)).toEqual(['Event', 'FileTreeCheckpoint', 'Session', 'SessionBlob']);
    for (const t of tables) expect(t.pk, t.table).toContain('treeId');
    const { rows: references } = await check.pool.query<{ name: string; columns: string[] }>(
      `SELECT con.conname AS name, array_agg(a.attname::text ORDER BY a.attname) AS columns
         FROM pg_constraint con JOIN unnest(con.conkey) AS k(n) ON true
         JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n
        WHERE con.contype = 'f' AND con.confrelid = '"Session"'::regclass
        GROUP BY con.conname ORDER BY 1`,
    );
    expect(references.map((r) => r.name)).toEqual(['Event_sessionId_treeId_fkey', 'FileTreeCheckpoint_sessionId_treeId_fkey', 'SessionBlob_sessionId_treeId_fkey', 'Session_parentId_treeId_fkey']);
    for (const r of references) expect(r.columns, r.name).toContain('treeId');
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

  it('the statements that find a session by id alone are the ones docs/operations.md lists', () => {
    // What a client names by id alone (a session's row, its lineage: cached
    // after), the tail state an append checks against, and deletion: on a
    // distributed Postgres these run on every shard, as the docs say. A new
    // statement fails here until it names the tree or is listed there.
    // (An INSERT carries its tree as a value: it is routed by it.)
    const byIdAlone = new Set(
      statements
        .filter((s) => /"Session"/.test(s) && !/"Event"/.test(s) && !/^WITH s0 AS/.test(s) && !/^INSERT INTO "Session"/.test(s) && !s.includes('"treeId" = '))
        .map((s) => s.replace(/\s+/g, ' ').slice(0, 40)),
    );
    expect([...byIdAlone].sort()).toEqual([
      'DELETE FROM "Session" WHERE id = ANY($1:', // deletion
      'SELECT "eventCount", "pendingInputCount"', // tail-states.ts: an append's check, when not cached
      'SELECT "id", "tenant", "treeId", "title"', // session-rows.ts: a session by id (requireSession)
      'SELECT 1 FROM "Session" WHERE id = $1 AN', // deletion
      'SELECT id, "treeId", "inheritedRanges", ', // session-log.ts: a lineage by id, then cached
      'WITH RECURSIVE subtree AS ( SELECT id FR', // deletion
    ]);
  });
});
