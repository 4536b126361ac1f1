// sessions(changedSince:) and sessionCount: what a list that lost
// its connection asks for instead of reading every session again. Least
// recently changed first, cursor-safe while rows keep changing, each order's
// cursors its own, and served by the (tenant, updatedAt, id) index: a page
// scans its rows, not the tenant's sessions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { analyzed, planNodes, rowsReadBy, statementRecorder } from '../helpers/explain.ts';

let app: TestApp;
const onSession = statementRecorder(/FROM "Session"/);
const scope = { tenant: 'local' };

beforeAll(async () => {
  app = await startTestApp({ onQuery: onSession.onQuery });
});
afterAll(() => app.close());

const CHANGED = `query($since: DateTime!, $first: Int, $after: String) {
  sessions(changedSince: $since, first: $first, after: $after) {
    edges { cursor node { id title updatedAt } } pageInfo { hasNextPage endCursor } } }`;

// updatedAt has millisecond precision: a change made in the same millisecond as the last would tie (then id order decides).
const nextMillisecond = () => new Promise((r) => setTimeout(r, 2));
const create = async (title: string) =>
  (await nextMillisecond(), await app.ok('mutation($t: String!) { createSession(input: { title: $t }) { id updatedAt } }', { t: title })).createSession as {
    id: string;
    updatedAt: string;
  };
const rename = async (id: string, title: string) =>
  (await nextMillisecond(), await app.ok('mutation($id: ID!, $t: String!) { setSessionTitle(sessionId: $id, title: $t) { id updatedAt } }', { id, t: title }))
    .setSessionTitle as {
    id: string;
    updatedAt: string;
  };
/** Every session changed since `since`, read page by page (`between` runs after each page). */
async function changedSince(since: string, first: number, between?: (page: number) => Promise<void>) {
  const ids: string[] = [];
  let after: string | null = null;
  for (let page = 0; ; page++) {
    const { sessions }: any = await app.ok(CHANGED, { since, first, after });
    ids.push(...sessions.edges.map((e: any) => e.node.id));
    await between?.(page);
    if (!sessions.pageInfo.hasNextPage) return ids;
    after = sessions.pageInfo.endCursor;
  }
}
const later = (iso: string) => new Date(new Date(iso).getTime() + 1).toISOString();

describe('sessions(changedSince:)', () => {
  it('lists the sessions changed since a time, least recently changed first, and sessionCount counts them all', async () => {
    const before = await create('before');
    const quiet = await create('quiet');
    const renamed = await create('renamed');
    const since = later(quiet.updatedAt > renamed.updatedAt ? quiet.updatedAt : renamed.updatedAt);
    expect(await changedSince(since, 10)).toEqual([]);

    await rename(renamed.id, 'renamed, changed');
    const made = await create('made since');
    const { sessions }: any = await app.ok(CHANGED, { since, first: 10 });
    expect(sessions.edges.map((e: any) => [e.node.id, e.node.title])).toEqual([
      [renamed.id, 'renamed, changed'],
      [made.id, 'made since'],
    ]);
    // Inclusive: asking from a row's own updatedAt lists it.
    const edges = sessions.edges.map((e: any) => e.node);
    expect(await changedSince(edges[1].updatedAt, 10)).toEqual([made.id]);
    // A fork is a change of the session it creates, not of its parent.
    const { forkSession } = await app.ok('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0 }) { session { id } } }', { id: before.id });
    expect(await changedSince(since, 10)).toEqual([renamed.id, made.id, forkSession.session.id]);

    const { sessionCount } = await app.ok('{ sessionCount }');
    const all = await app.ok('{ sessions(first: 100) { edges { node { id } } } }');
    expect(sessionCount).toBe(all.sessions.edges.length);
    await app.ok('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: made.id });
    expect((await app.ok('{ sessionCount }')).sessionCount).toBe(sessionCount - 1);
    expect(await changedSince(since, 10)).toEqual([renamed.id, forkSession.session.id]);
  });

  it('pages without skipping a row that changes meanwhile: it moves to the end and comes again', async () => {
    const first = await create('p0');
    const rows = [first.id];
    for (let i = 1; i < 7; i++) rows.push((await create(`p${i}`)).id);
    const since = first.updatedAt;
    // After each page, the row the page started with changes again.
    const seen = await changedSince(since, 2, async (page) => {
      if (page < 3) await rename(rows[page * 2], `p${page * 2} again`);
    });
    // Every row once in creation order, then the three that changed while paging, in the order they changed.
    expect(seen).toEqual([...rows, rows[0], rows[2], rows[4]]);
  });

  it("refuses the other order's cursors, and a page after a deleted row's cursor starts right after it", async () => {
    const a = await create('c0');
    const b = await create('c1');
    const c = await create('c2');
    const timeCursor = (await app.ok('{ sessions(first: 1) { pageInfo { endCursor } } }')).sessions.pageInfo.endCursor;
    const bad = await app.gql(CHANGED, { since: a.updatedAt, first: 2, after: timeCursor });
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(bad.errors?.[0].message).toMatch(/cursor returned by this connection/);
    const { sessions }: any = await app.ok(CHANGED, { since: a.updatedAt, first: 2 });
    expect(sessions.edges.map((e: any) => e.node.id)).toEqual([a.id, b.id]);
    const changedCursor = sessions.pageInfo.endCursor as string;
    expect(changedCursor.startsWith('changed:')).toBe(true);
    const wrong = await app.gql('query($after: String) { sessions(first: 2, after: $after) { edges { node { id } } } }', { after: changedCursor });
    expect(wrong.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');

    await app.ok('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: b.id });
    const next = await app.ok(CHANGED, { since: a.updatedAt, first: 2, after: changedCursor });
    expect(next.sessions.edges.map((e: any) => e.node.id)).toEqual([c.id]);
  });

  it("is served by the (tenant, updatedAt, id) index: a page scans its rows, not the tenant's sessions", async () => {
    for (let i = 0; i < 30; i++) await Promise.all(Array.from({ length: 50 }, () => app.services.store.createSession(scope, { title: 'filler' })));
    const last = await create('last of the fillers');
    const since = later(last.updatedAt);
    const changed = [await create('x'), await create('y'), await create('z')];
    await app.db.pool.query('ANALYZE "Session"');

    let sessions: any;
    const statements = await onSession.during(async () => ({ sessions } = await app.ok(CHANGED, { since, first: 50 })));
    expect(sessions.edges.map((e: any) => e.node.id)).toEqual(changed.map((s) => s.id));
    const page = statements.filter((s) => /"updatedAt" >=/.test(s.sql));
    expect(page).toHaveLength(1);
    const scans = planNodes(await analyzed(app.db.pool, page[0].sql, page[0].params))
      .filter((n) => n['Relation Name'] === 'Session')
      .map((n) => ({ node: n['Node Type'], index: n['Index Name'], scanned: rowsReadBy(n) }));
    expect(scans).toEqual([{ node: expect.stringMatching(/Index/), index: 'Session_tenant_updatedAt_id_idx', scanned: 3 }]);
  });
});
