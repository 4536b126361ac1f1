// Session's children and tree indexes hold forks only (migration
// 20261217080001_session_fork_indexes_partial): every append updates its
// session's row, which is never a HOT update, so a root session in them got an
// entry in each at every append. Checked here: after roots and forks are
// appended to and vacuumed, each index has one entry per fork and none per
// root; and the reads that need them (a session's children, a tree's
// sessions, fork points, deletion's subtree) still find every fork and the
// root, through those indexes (EXPLAIN), not by scanning the table.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate } from '../../src/db/migrate.ts';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { createTestDatabase } from '../helpers/db.ts';

const scope = { tenant: 'local' };
const QUIET_ROOTS = 3_000;
const ROOTS = 20;
const FORKS = 6;
let db: Database;
let store: SessionStore;
let recording = false;
const statements: Array<{ sql: string; params: unknown[] }> = [];
let root: string;
const forks: string[] = [];

const turn = (n: number): NewEvent[] => [
  { type: 'inbox/add', data: { inputId: `in_${n}`, text: `question ${n}` } },
  { type: 'inbox/remove', data: { inputId: `in_${n}`, reason: 'taken' } },
  { type: 'turn/start', data: { turn: n, inputId: `in_${n}` } },
  { type: 'step/start', data: { turn: n, step: 1 } },
  { type: 'model/message', data: { turn: n, step: 1, text: `answer ${n}`, toolCalls: [] } },
  { type: 'step/end', data: { turn: n, step: 1, reason: 'completed' } },
  { type: 'turn/end', data: { turn: n, reason: 'completed' } },
];

beforeAll(async () => {
  const url = await createTestDatabase();
  await migrate(url);
  db = openDatabase(url, { max: 4, onQuery: (sql, _rows, params) => recording && /"Session"/.test(sql) && statements.push({ sql, params }) });
  store = new SessionStore(db.pool, toolEffectOf);
  // Many roots, as a store has: a whole tree read by a scan of the table would show.
  await db.pool.query(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title)
       SELECT v, v, 'local', 'quiet' FROM (SELECT 'ses_quiet_' || n AS v FROM generate_series(1, $1) n) x RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s`,
    [QUIET_ROOTS],
  );
  for (let i = 0; i < ROOTS; i++) {
    const s = await store.createSession(scope, { title: `root ${i}` });
    if (i === 0) root = s.id;
    // Several appends each: several row versions a root once left in every index.
    for (const e of turn(1)) await store.append(s.id, [e]);
  }
  for (let i = 0; i < FORKS; i++) {
    const child = await store.fork(scope, i < FORKS / 2 ? root : forks[0], undefined, { title: `fork ${i}` });
    forks.push(child.session.id);
    await store.append(child.session.id, turn(i < FORKS / 2 ? 2 : 3));
  }
  await db.pool.query('VACUUM (ANALYZE) "Session"');
});
afterAll(() => db?.close());

it('the children and tree indexes have an entry per fork and none per root', async () => {
  const { rows } = await db.pool.query<{ index: string; entries: number }>(
    `SELECT c.relname AS index, c.reltuples::int AS entries FROM pg_class c
      WHERE c.relname IN ('Session_parentId_createdAt_idx', 'Session_treeId_id_idx', 'Session_pkey') ORDER BY c.relname`,
  );
  expect(rows).toEqual([
    { index: 'Session_parentId_createdAt_idx', entries: FORKS },
    { index: 'Session_pkey', entries: QUIET_ROOTS + ROOTS + FORKS },
    { index: 'Session_treeId_id_idx', entries: FORKS },
  ]);
});

async function indexesRead(sql: string, params: unknown[]): Promise<string[]> {
  const { rows } = await db.pool.query(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const read: string[] = [];
  const walk = (n: any) => {
    // Bitmap index scans name their index without the relation: every index, and the table's sequential scans.
    if (n['Index Name']) read.push(n['Index Name']);
    else if (n['Relation Name'] === 'Session') read.push(n['Node Type']);
    for (const c of n.Plans ?? []) walk(c);
  };
  walk(rows[0]['QUERY PLAN'][0].Plan);
  return read;
}

it("a session's children, its tree, its fork points and its subtree are read through those indexes, every fork found", async () => {
  recording = true;
  let children, tree, points, grandchildren;
  try {
    children = await store.sessions.page({ tenant: 'local', parentId: root, order: 'oldest', limit: 50 });
    tree = await store.sessions.page({ tenant: 'local', treeId: root, order: 'oldest', limit: 50 });
    points = await store.sessions.forkPoints('local', root);
    grandchildren = await store.sessions.page({ tenant: 'local', parentId: forks[0], order: 'oldest', limit: 50 });
  } finally {
    recording = false;
  }
  expect(children.map((s) => s.id)).toEqual(forks.slice(0, FORKS / 2));
  expect(grandchildren.map((s) => s.id)).toEqual(forks.slice(FORKS / 2));
  expect(tree.map((s) => s.id)).toEqual([root, ...forks]);
  expect(points).toEqual([{ seq: 7, childCount: FORKS / 2 }]);
  expect(statements.length).toBeGreaterThanOrEqual(4);
  for (const s of statements) {
    const read = await indexesRead(s.sql, s.params);
    expect(read, s.sql).not.toContain('Seq Scan');
    if (/"parentId" =/.test(s.sql)) expect(read, s.sql).toContain('Session_parentId_createdAt_idx');
    else expect(read, s.sql).toContain('Session_treeId_id_idx');
  }
});

it('deleting a root with its descendants deletes every fork (the subtree read through the children index)', async () => {
  await expect(store.deleteSession(scope, root)).rejects.toMatchObject({ code: 'SESSION_HAS_CHILDREN' });
  const deleted = await store.deleteSession(scope, root, { withDescendants: true });
  expect([...deleted].sort()).toEqual([root, ...forks].sort());
  const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM "Session" WHERE "treeId" = $1', [root]);
  expect(rows[0].n).toBe(0);
});
