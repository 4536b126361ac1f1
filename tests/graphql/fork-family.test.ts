// The fork family the dashboard draws through GraphQL over HTTP and
// the real agent: Session.forkPoints (where children were forked, how many),
// children(forkedAtSeq), family (the whole tree, any depth) and lastTurn
// (a failed variant's turn says failed, with its error).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const create = async (title: string) =>
  (await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title } })).createSession.id as string;
const send = (id: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
const fork = async (sessionId: string, atSeq: number, title: string, message?: string) =>
  (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId, atSeq, title, message } })).forkSession
    .session.id as string;
const idle = () => app.services.host.idle();

describe('fork family', () => {
  it('lists fork points with counts, the children at one point, and the whole tree', async () => {
    const root = await create('family root');
    await send(root, 'one');
    await idle();
    await send(root, 'two');
    await idle();
    const a = await fork(root, 3, 'a');
    const b = await fork(root, 3, 'b');
    const c = await fork(root, 7, 'c');
    const grandchild = await fork(a, 2, 'a.1');
    const other = await create('another tree');

    const { session } = await app.ok(
      `query($id: ID!) { session(id: $id) {
        forkPoints { seq childCount }
        at3: children(first: 10, forkedAtSeq: 3) { edges { node { id forkedAtSeq } } }
        at5: children(first: 10, forkedAtSeq: 5) { edges { node { id } } }
        family(first: 50) { edges { node { id parent { id } } } }
      } }`,
      { id: root },
    );
    expect(session.forkPoints).toEqual([
      { seq: 3, childCount: 2 },
      { seq: 7, childCount: 1 },
    ]);
    expect(session.at3.edges.map((e: any) => e.node)).toEqual([
      { id: a, forkedAtSeq: 3 },
      { id: b, forkedAtSeq: 3 },
    ]);
    expect(session.at5.edges).toEqual([]);
    const family = session.family.edges.map((e: any) => e.node);
    expect(family).toEqual([
      { id: root, parent: null },
      { id: a, parent: { id: root } },
      { id: b, parent: { id: root } },
      { id: c, parent: { id: root } },
      { id: grandchild, parent: { id: a } },
    ]);
    expect(family.map((s: any) => s.id)).not.toContain(other);
    // A grandchild sees the same family; its parent's fork points are its own children's.
    const nested = await app.ok('query($id: ID!) { session(id: $id) { family(first: 50) { edges { node { id } } } forkPoints { seq childCount } } }', {
      id: grandchild,
    });
    expect(nested.session.family.edges.map((e: any) => e.node.id)).toEqual([root, a, b, c, grandchild]);
    expect(nested.session.forkPoints).toEqual([]);
  });

  it("model: the last session/model event, inherited or the fork's own; null for none", async () => {
    const plain = await create('no model');
    const q = 'query($id: ID!) { session(id: $id) { model { provider model } } }';
    expect((await app.ok(q, { id: plain })).session.model).toBeNull();
    const set = (
      await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title: 'm', model: { provider: 'scripted', model: 'm1' } } })
    ).createSession.id;
    expect((await app.ok(q, { id: set })).session.model).toEqual({ provider: 'scripted', model: 'm1' });
    const inherits = await fork(set, 1, 'inherits'); // seq 0 is its title, 1 its model
    expect((await app.ok(q, { id: inherits })).session.model).toEqual({ provider: 'scripted', model: 'm1' });
    const own = (
      await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
        i: { sessionId: set, atSeq: 0, model: { provider: 'scripted', model: 'm2' } },
      })
    ).forkSession.session.id;
    expect((await app.ok(q, { id: own })).session.model).toEqual({ provider: 'scripted', model: 'm2' });
  });

  it('lastTurn: the last turn with its reason, and a failed one with its error', async () => {
    const id = await create('turns');
    const none = await app.ok('query($id: ID!) { session(id: $id) { lastTurn { turn } } }', { id });
    expect(none.session.lastTurn).toBeNull();
    await send(id, 'fine');
    await idle();
    const q = 'query($id: ID!) { session(id: $id) { eventCount lastTurn { turn reason input startSeq endSeq error } } }';
    const ok = (await app.ok(q, { id })).session;
    expect(ok.lastTurn).toMatchObject({ turn: 1, reason: 'completed', input: 'fine', endSeq: ok.eventCount - 1, error: null });

    const failing = await fork(id, ok.eventCount - 1, 'failing variant', '!fail the model is down');
    await idle();
    const failed = (await app.ok(q, { id: failing })).session;
    expect(failed.lastTurn).toMatchObject({ turn: 2, reason: 'failed', input: '!fail the model is down', endSeq: failed.eventCount - 1 });
    expect(failed.lastTurn.error).toContain('the model is down');
    // A title set after the turn does not hide it.
    await app.ok('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "renamed") { id } }', { id: failing });
    expect((await app.ok(q, { id: failing })).session.lastTurn).toMatchObject({ turn: 2, reason: 'failed' });
  });
});
