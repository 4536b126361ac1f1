// Session rows are read with the columns their selection needs
// (graphql/session-columns.ts), the rows a page's parents are batched into
// included (graphql/session-loader.ts): `parent { id title }` on a sessions
// page reads the parents' titles, not their whole rows (inherited ranges,
// lease…). Two selections in one batch read what both need. Statements are
// taken from the service's pool (onQuery).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { SESSION_COLUMNS } from '../../src/store/session-rows.ts';

let app: TestApp;
let recording = false;
const statements: string[] = [];
let root: string;
let child: string;

beforeAll(async () => {
  app = await startTestApp({ onQuery: (sql) => recording && /FROM "Session"/.test(sql) && statements.push(sql) });
  const scope = { tenant: 'local' };
  root = (await app.services.store.createSession(scope, { title: 'the root' })).id;
  await app.services.store.append(root, [{ type: 'plugin/test/note', data: { n: 1 } }]);
  child = (await app.services.store.fork(scope, root, 1)).session.id;
});
afterAll(() => app?.close());

async function run(query: string, variables: Record<string, unknown> = {}) {
  statements.length = 0;
  recording = true;
  try {
    return { data: await app.ok(query, variables), sql: [...statements] };
  } finally {
    recording = false;
  }
}

/** The statement that read rows by id (the parents' batch). */
const byIds = (sql: string[]) => {
  const found = sql.filter((s) => s.includes('id = ANY('));
  expect(found.length, sql.join('\n')).toBe(1);
  return found[0];
};

describe("a page's parents", () => {
  it("`parent { id title }` reads the parents' titles, not their whole rows", async () => {
    const { data, sql } = await run('{ sessions(first: 10) { edges { node { id parent { id title } } } } }');
    const node = data.sessions.edges.map((e: any) => e.node).find((n: any) => n.id === child);
    expect(node.parent).toEqual({ id: root, title: 'the root' });
    const read = byIds(sql);
    expect(read).toContain('"title"');
    for (const column of ['inheritedRanges', 'leaseOwner', 'runner', 'modelName']) expect(read).not.toContain(`"${column}"`);
  });

  it("a parent's log fields read the columns of its log, and two selections in one batch read what both need", async () => {
    const { data, sql } = await run(
      `query($id: ID!) { session(id: $id) { a: parent { status } b: parent { eventCount events(first: 5) { edges { node { seq type } } } } } }`,
      { id: child },
    );
    expect(data.session.a).toEqual({ status: 'IDLE' });
    expect(data.session.b.eventCount).toBe(2);
    expect(data.session.b.events.edges.map((e: any) => e.node.type)).toEqual(['session/title', 'plugin/test/note']);
    const read = byIds(sql);
    for (const column of ['status', 'eventCount', 'inheritedRanges']) expect(read).toContain(`"${column}"`);
    expect(read).not.toContain('"leaseOwner"');
  });
});

describe("a page's rows", () => {
  // A page's rows are read in pg's array mode with timestamps parsed when read (store/session-rows.ts PageRow).
  it('hold what the session row holds: every column, the same values and types, timestamps as dates', async () => {
    const view = app.services.store.forTenant({ tenant: 'local' });
    const page = await view.sessions.page({ order: 'newest', limit: 50 });
    for (const id of [root, child]) {
      const row = page.find((r) => r.id === id)!;
      const own = (await view.getSession(id))!;
      for (const column of SESSION_COLUMNS) expect(row[column], column).toEqual(own[column]);
      for (const column of ['createdAt', 'updatedAt'] as const) expect(row[column]).toBeInstanceOf(Date);
      expect(row.leaseExpiresAt).toBeNull();
    }
    // With a column list: those columns and the keyset's, none other.
    const [some] = await view.sessions.page({ order: 'changed', limit: 1 }, ['title']);
    expect(SESSION_COLUMNS.filter((c) => some[c] !== undefined).sort()).toEqual(['createdAt', 'id', 'title', 'updatedAt']);
    expect(some.updatedAt).toBeInstanceOf(Date);
  });

  it("parse every timestamp column the catalog lists, by its result field's type (no hand list to fall behind the schema)", async () => {
    const { rows } = await app.db.pool.query<{ column_name: string }>(
      `SELECT column_name FROM information_schema.columns WHERE table_name = 'Session' AND data_type = 'timestamp with time zone'`,
    );
    const timestamps = rows.map((r) => r.column_name as (typeof SESSION_COLUMNS)[number]);
    expect(timestamps.length).toBeGreaterThan(0);
    const scope = { tenant: 'local' };
    const id = (await app.services.store.createSession(scope, { title: 'every timestamp set' })).id;
    // Each nullable one set too (a lease's expiry), so each is read as a value.
    await app.db.pool.query(`UPDATE "Session" SET ${timestamps.map((c) => `"${c}" = coalesce("${c}", now())`).join(', ')} WHERE id = $1`, [id]);
    try {
      const [row] = (await app.services.store.forTenant(scope).sessions.page({ order: 'newest', limit: 50 })).filter((r) => r.id === id);
      for (const column of timestamps) expect(row[column], column).toBeInstanceOf(Date);
    } finally {
      await app.db.pool.query(`UPDATE "Session" SET "leaseExpiresAt" = NULL WHERE id = $1`, [id]);
    }
  });

  it('answer a page with its dates and cursors as a row read alone does', async () => {
    const fields = 'id title status createdAt updatedAt eventCount turnCount lastTurnFailed forkedAtSeq inheritedEventCount firstLiveSeq parent { id }';
    const { sessions } = (await run(`{ sessions(first: 50) { edges { cursor node { ${fields} } } pageInfo { endCursor } } }`)).data;
    for (const id of [root, child]) {
      const edge = sessions.edges.find((e: any) => e.node.id === id);
      const { session } = (await run(`query($id: ID!) { session(id: $id) { ${fields} } }`, { id })).data;
      expect(edge.node).toEqual(session);
      expect(edge.cursor).toBe(`${session.createdAt}|${id}`);
    }
    expect(sessions.pageInfo.endCursor).toBe(sessions.edges.at(-1).cursor);
  });
});
