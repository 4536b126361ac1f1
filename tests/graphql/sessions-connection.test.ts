// Sessions pages read on prepared statements (store/session-rows.ts): keyset
// cursors both ways, children oldest first, the columns a query selects, and
// what each page costs in statements.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getNamedType, type GraphQLObjectType } from 'graphql';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { schema } from '../../src/graphql/schema.ts';
import { COLUMNS_BY_FIELD } from '../../src/graphql/session-columns.ts';
import { sessionsConnection } from '../../src/graphql/sessions-connection.ts';

let app: TestApp;
const statements: string[] = [];
const scope = { tenant: 'local' };
beforeAll(async () => {
  app = await startTestApp({ onQuery: (sql) => statements.push(sql) });
});
afterAll(() => app.close());

async function costOf<T>(run: () => Promise<T>): Promise<{ result: T; sql: string[] }> {
  statements.length = 0;
  const result = await run();
  return { result, sql: [...statements] };
}

const PAGE = `query($first: Int, $after: String, $last: Int, $before: String, $parentId: ID) {
  sessions(first: $first, after: $after, last: $last, before: $before, parentId: $parentId) {
    edges { cursor node { id title } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } }`;

describe('sessions connection', () => {
  it('pages forwards and backwards with the same cursors, and a cursor outlives its session', async () => {
    const root = (await app.services.store.createSession(scope, { title: 'root' })).id;
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await app.services.store.fork(scope, root, 0, { title: `c${i}` })).session.id);
    const newestFirst = [...ids].reverse();

    const forward: string[] = [];
    let after: string | null = null;
    for (;;) {
      const { sessions }: any = await app.ok(PAGE, { first: 3, after, parentId: root });
      forward.push(...sessions.edges.map((e: any) => e.node.id));
      expect(sessions.pageInfo.hasPreviousPage).toBe(after !== null);
      if (!sessions.pageInfo.hasNextPage) break;
      after = sessions.pageInfo.endCursor;
    }
    expect(forward).toEqual(newestFirst);

    const backward: string[] = [];
    let before: string | null = null;
    for (;;) {
      const { sessions }: any = await app.ok(PAGE, { last: 3, before, parentId: root });
      backward.unshift(...sessions.edges.map((e: any) => e.node.id));
      expect(sessions.pageInfo.hasNextPage).toBe(before !== null);
      if (!sessions.pageInfo.hasPreviousPage) break;
      before = sessions.pageInfo.startCursor;
    }
    expect(backward).toEqual(newestFirst);

    // The page after c4's cursor, once c4 itself is deleted, still starts right after where c4 was.
    const { sessions: upToC4 }: any = await app.ok(PAGE, { first: 3, parentId: root });
    const c4 = upToC4.edges[2];
    expect(c4.node.id).toBe(ids[4]);
    await app.services.controller.deleteSession(scope, ids[4], false);
    const { sessions: rest }: any = await app.ok(PAGE, { first: 10, after: c4.cursor, parentId: root });
    expect(rest.edges.map((e: any) => e.node.id)).toEqual(newestFirst.slice(3));

    // A session's children: oldest first.
    const { session }: any = await app.ok(`query($id: ID!) { session(id: $id) { children(first: 2) { edges { node { id } } pageInfo { hasNextPage } } } }`, {
      id: root,
    });
    expect(session.children.edges.map((e: any) => e.node.id)).toEqual(ids.slice(0, 2));
    expect(session.children.pageInfo.hasNextPage).toBe(true);
  });

  it('refuses cursors it did not make and contradictory arguments', async () => {
    for (const args of [
      { after: 'ses_x' },
      { after: '2026-01-01T00:00:00.000Z' },
      { first: 1, before: '2026-01-01T00:00:00.000Z|ses_x' },
      { last: 1, after: '2026-01-01T00:00:00.000Z|ses_x' },
    ]) {
      const r = await app.gql(PAGE, args);
      expect(r.errors?.[0]?.extensions?.code, JSON.stringify(args)).toBe('BAD_USER_INPUT');
    }
  });

  it('a page of 50 with parents is one statement when only their ids are asked, two with more, whatever the page size', async () => {
    const root = (await app.services.store.createSession(scope, { title: 'p' })).id;
    for (let i = 0; i < 60; i++) await app.services.store.fork(scope, root, 0, { title: `f${i}` });
    const ids = await costOf(() => app.ok(`{ sessions(first: 50) { edges { node { id title eventCount turnCount parent { id } } } } }`));
    expect(ids.result.sessions.edges.filter((e: any) => e.node.parent?.id === root)).toHaveLength(50);
    expect(ids.sql).toHaveLength(1);
    expect(ids.sql[0]).toMatch(/^SELECT "createdAt", "eventCount", "id", "parentId", "title", "turnCount" FROM "Session"/);
    const titles = await costOf(() => app.ok(`{ sessions(first: 50) { edges { node { id parent { id title eventCount } } } } }`));
    expect(titles.result.sessions.edges[0].node.parent).toEqual({ id: root, title: 'p', eventCount: 1 });
    expect(titles.sql).toHaveLength(2);
    const small = await costOf(() => app.ok(`{ sessions(first: 3) { edges { node { id parent { id title eventCount } } } } }`));
    expect(small.sql).toHaveLength(2);
  });

  it("each session's model is a column of its row: appends, forks at any cut and imports keep it, and a page of 50 reads no log for it", async () => {
    const m = (model: string) => ({ provider: 'scripted', model });
    const root = (await app.services.store.createSession(scope, { title: 'models', model: m('m1') })).id; // 0 title, 1 model
    const before = (await app.services.store.fork(scope, root, 1, { title: 'at m1' })).session.id;
    await app.services.store.append(root, [{ type: 'session/model', data: m('m2') }]); // 2
    const atEnd = (await app.services.store.fork(scope, root, 2, { title: 'at m2' })).session.id;
    const earlier = (await app.services.store.fork(scope, root, 1, { title: 'still m1' })).session.id;
    const own = (await app.services.store.fork(scope, root, 2, { title: 'own', model: m('m3') })).session.id;
    const none = (await app.services.store.fork(scope, root, 0, { title: 'none' })).session.id;
    const grandchild = (await app.services.store.fork(scope, earlier, 1, { title: 'grandchild' })).session.id;
    const recording = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: atEnd })).session.recording as string;
    const imported = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording })).importRecording.id;
    const expected: Record<string, string | null> = {
      [root]: 'm2',
      [before]: 'm1',
      [atEnd]: 'm2',
      [earlier]: 'm1',
      [own]: 'm3',
      [none]: null,
      [grandchild]: 'm1',
      [imported]: 'm2',
    };

    const page = await costOf(() =>
      app.ok(`{ sessions(first: 50) { edges { node { id title status eventCount turnCount model { provider model } parent { id title } } } } }`),
    );
    expect(page.sql).toHaveLength(2); // the page and its parents, as without the model
    const listed = new Map(page.result.sessions.edges.map((e: any) => [e.node.id, e.node.model?.model ?? null]));
    for (const [id, model] of Object.entries(expected)) expect(listed.get(id), id).toBe(model);
    // The same as the log says (its last session/model, inherited or its own).
    for (const [id, model] of Object.entries(expected)) {
      const log = await app.services.store.log.lastOfType(
        app.services.store.log.remember((await app.services.store.requireSession(scope, id))!),
        'session/model',
      );
      expect((log?.data as { model?: string } | undefined)?.model ?? null, id).toBe(model);
    }
    // The migration that added the columns fills them the same from the logs (its statements after the ALTER TABLE).
    const migration = fs.readFileSync(path.join(PROJECT_ROOT, 'prisma/migrations/20261211040000_session_model/migration.sql'), 'utf8');
    await app.db.pool.query(`UPDATE "Session" SET "modelProvider" = NULL, "modelName" = NULL`);
    await app.db.pool.query(migration.slice(migration.indexOf(';') + 1));
    const backfilled = await app.ok(`{ sessions(first: 50) { edges { node { id model { provider model } } } } }`);
    const after = new Map(backfilled.sessions.edges.map((e: any) => [e.node.id, e.node.model?.model ?? null]));
    for (const [id, model] of Object.entries(expected)) expect(after.get(id), `backfilled ${id}`).toBe(model);
  });

  it('an events page is two statements (the session, the page), whatever its size or place', async () => {
    const s = (await app.services.store.createSession(scope, { title: 'log' })).id;
    for (let i = 0; i < 6; i++)
      await app.services.store.append(
        s,
        Array.from({ length: 100 }, (_, j) => ({ type: 'plugin/test/x', data: { i: i * 100 + j } })),
      );
    await app.services.store.notifications.drain(); // the appends' notifications are not the page's statements
    const Q = `query($id: ID!, $after: Int, $first: Int) { session(id: $id) { eventCount events(afterSeq: $after, first: $first) { edges { node { id seq type data createdAt } } pageInfo { hasNextPage } } } }`;
    for (const [after, first] of [
      [-1, 10],
      [250, 100],
      [100, 500],
      [590, 100],
    ]) {
      const { result, sql } = await costOf(() => app.ok(Q, { id: s, after, first }));
      expect(result.session.events.edges[0].node.seq).toBe(after + 1);
      expect(sql, `${after} ${first}`).toHaveLength(2);
    }
  });

  it('knows the columns of every Session field (a field it does not know reads them all)', () => {
    const fields = Object.keys((getNamedType(schema.getType('Session')) as GraphQLObjectType).getFields());
    expect(fields.filter((f) => !(f in COLUMNS_BY_FIELD))).toEqual([]);
  });

  it('builds a page without per-page closures: cursors are prototype getters, not own accessors', async () => {
    // Getters of an object literal are closures over the page held from V8's old
    // generation: each page's rows then outlived their request until a full GC
    // (GC pauses 0.8 -> 2.1 ms, server CPU +20% on the readThroughput sessions page).
    const root = (await app.services.store.createSession(scope, { title: 'accessors' })).id;
    for (let i = 0; i < 3; i++) await app.services.store.fork(scope, root, 0, { title: `a${i}` });
    const page = await sessionsConnection(app.services.store.forTenant(scope).sessions, { parentId: root, order: 'oldest' }, { first: 2 });
    const ownAccessors = (o: object) =>
      Object.entries(Object.getOwnPropertyDescriptors(o))
        .filter(([, d]) => d.get || d.set)
        .map(([k]) => k);
    expect(ownAccessors(page.pageInfo)).toEqual([]);
    for (const edge of page.edges) expect(ownAccessors(edge)).toEqual([]);
    // The getters still answer: the cursors are the first and last edges'.
    expect(page.pageInfo.startCursor).toBe(page.edges[0].cursor);
    expect(page.pageInfo.endCursor).toBe(page.edges[1].cursor);
    expect(page.pageInfo.hasNextPage).toBe(true);
  });
});
