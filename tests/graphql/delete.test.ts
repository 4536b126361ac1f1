// deleteSession (retention): a session with children is refused; a subtree
// goes whole, from every read, list and subscription; no surviving session
// ever loses an inherited event; a running agent stops without writing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe, subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';

let app: TestApp;
const logged: string[] = [];
const scope = { tenant: 'local' };

const DELETE = `mutation($id: ID!, $all: Boolean) { deleteSession(id: $id, withDescendants: $all) { deletedSessionIds } }`;
const exportOf = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
const fork = async (id: string, atSeq: number, own = 3) => {
  const f = await app.services.store.fork(scope, id, atSeq);
  await app.services.store.append(
    f.session.id,
    Array.from({ length: own }, (_, i) => ({ type: 'plugin/test/own', data: { i } })),
  );
  return f.session.id;
};
const rowsOf = async (ids: string[]) =>
  (
    await app.db.pool.query<{ sessions: number; events: number }>(
      `SELECT (SELECT count(*)::int FROM "Session" WHERE id = ANY($1)) AS sessions, (SELECT count(*)::int FROM "Event" WHERE "sessionId" = ANY($1)) AS events`,
      [ids],
    )
  ).rows[0];

beforeAll(async () => {
  app = await startTestApp({ log: (m) => logged.push(m) });
});
afterAll(() => app.close());

/** root → a → (a1, a2); root → b → b1: three levels, two branches. */
async function tree() {
  const root = (await app.services.store.createSession(scope, { title: 'root' })).id;
  await app.services.store.append(root, REFERENCE_LOG);
  const a = await fork(root, 10);
  const a1 = await fork(a, 13);
  const a2 = await fork(a, 5);
  const b = await fork(root, 25);
  const b1 = await fork(b, 28);
  return { root, a, a1, a2, b, b1 };
}

describe('deleteSession', () => {
  it('refuses a session with children (SESSION_HAS_CHILDREN) and deletes nothing', async () => {
    const t = await tree();
    const before = await rowsOf(Object.values(t));
    for (const id of [t.root, t.a]) {
      const r = await app.gql(DELETE, { id });
      expect(r.errors?.[0].extensions).toMatchObject({ code: 'SESSION_HAS_CHILDREN', sessionId: id });
      expect(r.errors?.[0].message).toMatch(/withDescendants/);
    }
    expect(await rowsOf(Object.values(t))).toEqual(before);
    // The database refuses it too: the parent key does not let a parent go alone.
    await expect(app.db.pool.query(`DELETE FROM "Session" WHERE id = $1`, [t.b])).rejects.toThrow();
  });

  it('deleting one branch of a three-level tree leaves every other log byte for byte unchanged', async () => {
    const t = await tree();
    const kept = [t.root, t.b, t.b1];
    const exports = await Promise.all(kept.map(exportOf));
    const leaf = await app.ok(DELETE, { id: t.a2 }); // a leaf needs no flag
    expect(leaf.deleteSession.deletedSessionIds).toEqual([t.a2]);
    const r = await app.ok(DELETE, { id: t.a, all: true });
    expect(new Set(r.deleteSession.deletedSessionIds)).toEqual(new Set([t.a, t.a1]));
    expect(r.deleteSession.deletedSessionIds[0]).toBe(t.a);
    await reclaimed(app);
    expect(await rowsOf([t.a, t.a1, t.a2])).toEqual({ sessions: 0, events: 0 });
    expect(await Promise.all(kept.map(exportOf))).toEqual(exports);
    // Gone from every read and list.
    for (const id of [t.a, t.a1, t.a2]) {
      expect((await app.ok(`query($id: ID!) { session(id: $id) { id } node(id: $id) { id } }`, { id })).session).toBeNull();
      const send = await app.gql(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "x" }) { inputId } }`, { id });
      expect(send.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
      const again = await app.gql(DELETE, { id });
      expect(again.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
    }
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { children(first: 10) { edges { node { id } } } } }`, { id: t.root });
    expect(session.children.edges.map((e: any) => e.node.id)).toEqual([t.b]);
    const list = await app.ok(`{ sessions(first: 500) { edges { node { id } } } }`);
    expect(list.sessions.edges.map((e: any) => e.node.id)).not.toContain(t.a);
    // The survivors still fork and read through their ranges.
    const child = await fork(t.b1, 27, 0);
    expect(await exportOf(child)).toContain('"session/end-seed"');
  });

  it('a whole tree goes with withDescendants; subscribers are told', async () => {
    const t = await tree();
    const ids = Object.values(t);
    const deletions = subscribeWs(app.url, `subscription { sessionsDeleted { deletedSessionIds } }`);
    const events = subscribe('sse', app.url, `subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }`, { id: t.b1 });
    const turns = subscribe('ws', app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind } }`, { id: t.a1 });
    await events.count(30);
    await waitFor(() => app.services.live.stats().deletions === 1 && app.services.live.stats().turns === 1, { what: 'registered' });
    const r = await app.ok(DELETE, { id: t.root, all: true });
    expect(new Set(r.deleteSession.deletedSessionIds)).toEqual(new Set(ids));
    await reclaimed(app);
    expect(await rowsOf(ids)).toEqual({ sessions: 0, events: 0 });
    const [told] = await deletions.count(1);
    expect(new Set(told.sessionsDeleted.deletedSessionIds)).toEqual(new Set(ids));
    await waitFor(() => events.completed && turns.completed, { what: 'subscriptions of deleted sessions completed' });
    await deletions.close();
    await waitFor(() => app.services.live.stats().events === 0, { what: 'cleanup' });
  });

  it('deleting a session while its agent runs a turn stops the agent without writing or failing', async () => {
    const id = (await app.services.store.createSession(scope, { title: 'busy' })).id;
    await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!slow 100\\nwords to stream slowly one at a time" }) { inputId } }`, { id });
    await waitFor(async () => (await app.services.store.getSession(scope, id))?.status === 'RUNNING', { what: 'turn running' });
    logged.length = 0;
    await app.ok(DELETE, { id });
    await app.services.host.idle();
    await reclaimed(app);
    expect(await rowsOf([id])).toEqual({ sessions: 0, events: 0 });
    expect(logged.filter((m) => m.includes(id))).toEqual([]);
    expect(app.services.host.isRunningHere(id)).toBe(false);
  });

  it("a descendant's append committing while its tree is deleted leaves none of its events behind (events have no key to their session)", async () => {
    const { root, b1 } = await tree();
    // The append to b1 holds b1's row until its transaction ends; the deletion locks only the root before deleting.
    let commit!: () => void;
    const held = new Promise<void>((resolve) => (commit = resolve));
    let appended!: () => void;
    const written = new Promise<void>((resolve) => (appended = resolve));
    const append = app.services.store.transaction(async (client) => {
      await app.services.store.append(b1, [{ type: 'plugin/test/late', data: {} }], { client });
      appended();
      await held;
    });
    await written;
    const deletion = app.services.store.deleteSession(scope, root, { withDescendants: true });
    await waitFor(
      async () =>
        (await app.db.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM "Session"%'`))
          .rows[0].n > 0,
      { what: "the deletion waiting for b1's row" },
    );
    commit();
    await append;
    await deletion;
    await reclaimed(app);
    const { rows } = await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1`, [b1]);
    expect(rows[0].n).toBe(0);
  });

  it('rejects bad ids as BAD_USER_INPUT and unknown ones as SESSION_NOT_FOUND', async () => {
    expect((await app.gql(DELETE, { id: '' })).errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await app.gql(DELETE, { id: 'ses_nope' })).errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
  });
});
