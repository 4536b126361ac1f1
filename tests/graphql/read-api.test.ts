import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id title status formatVersion eventCount turnCount inheritedEventCount firstLiveSeq parent { id } createdAt updatedAt } }`;

describe('GraphQL read API over HTTP', () => {
  it('createSession records title and model as events', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 'hello', model: { provider: 'scripted', model: 'echo' } } });
    expect(s).toMatchObject({
      title: 'hello',
      status: 'IDLE',
      formatVersion: 4,
      eventCount: 2,
      turnCount: 0,
      inheritedEventCount: 0,
      firstLiveSeq: 0,
      parent: null,
    });
    expect(s.id).toMatch(/^ses_/);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { events { edges { node { seq type data inherited synthetic } } } } }`, { id: s.id });
    expect(session.events.edges.map((e: any) => e.node)).toEqual([
      { seq: 0, type: 'session/title', data: { title: 'hello' }, inherited: false, synthetic: false },
      { seq: 1, type: 'session/model', data: { provider: 'scripted', model: 'echo' }, inherited: false, synthetic: false },
    ]);
  });

  it('sessions paginates with first/after and pageInfo, newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await app.ok(CREATE, { input: { title: `page-${i}` } })).createSession.id);
    const Q = `query($first: Int, $after: String) { sessions(first: $first, after: $after) { edges { cursor node { id title } } pageInfo { hasNextPage endCursor } } }`;
    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 10; page++) {
      const { sessions }: any = await app.ok(Q, { first: 2, after });
      seen.push(...sessions.edges.map((e: any) => e.node.id));
      expect(sessions.edges.length).toBeLessThanOrEqual(2);
      if (!sessions.pageInfo.hasNextPage) break;
      after = sessions.pageInfo.endCursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    const mine = seen.filter((id) => ids.includes(id));
    expect(mine).toEqual([...ids].reverse());
  });

  it('pages a session log by afterSeq and first', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 't0' } });
    for (let i = 1; i < 10; i++) {
      await app.services.store.append(s.id, [{ type: 'session/title', data: { title: `t${i}` } }]);
    }
    const Q = `query($id: ID!, $afterSeq: Int, $first: Int) { session(id: $id) { eventCount events(afterSeq: $afterSeq, first: $first) { edges { node { seq } } pageInfo { hasNextPage } } } }`;
    const { session } = await app.ok(Q, { id: s.id, afterSeq: 3, first: 4 });
    expect(session.eventCount).toBe(10);
    expect(session.events.edges.map((e: any) => e.node.seq)).toEqual([4, 5, 6, 7]);
    expect(session.events.pageInfo.hasNextPage).toBe(true);
    const rest = await app.ok(Q, { id: s.id, afterSeq: 7 });
    expect(rest.session.events.edges.map((e: any) => e.node.seq)).toEqual([8, 9]);
    expect(rest.session.events.pageInfo.hasNextPage).toBe(false);
  });

  it('node() resolves sessions and events by id; unknown ids give null', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 'node' } });
    const r = await app.ok(`query($id: ID!) { node(id: $id) { __typename ... on Session { title events { edges { node { id } } } } } }`, { id: s.id });
    expect(r.node).toMatchObject({ __typename: 'Session', title: 'node' });
    const eventId = r.node.events.edges[0].node.id;
    const ev = await app.ok(`query($id: ID!) { node(id: $id) { __typename ... on Event { seq type } } }`, { id: eventId });
    expect(ev.node).toEqual({ __typename: 'Event', seq: 0, type: 'session/title' });
    expect((await app.ok(`{ session(id: "ses_nope") { id } }`)).session).toBeNull();
    expect((await app.ok(`{ node(id: "ses_nope") { id } }`)).node).toBeNull();
  });

  it('a session id clients kept is its global id: node() and nodes() find it, in order, with null for the rest', async () => {
    const a = (await app.ok(CREATE, { input: { title: 'kept a' } })).createSession.id as string;
    const b = (await app.ok(CREATE, { input: { title: 'kept b' } })).createSession.id as string;
    expect(a).toMatch(/^ses_/); // the ids clients hold: node ids are the same strings, no encoding
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { id events(first: 1) { edges { node { id } } } } }`, { id: a });
    expect(session.id).toBe(a);
    const eventId = session.events.edges[0].node.id;
    const { node } = await app.ok(`query($id: ID!) { node(id: $id) { id __typename ... on Session { title status eventCount createdAt } } }`, { id: a });
    expect(node).toMatchObject({ id: a, __typename: 'Session', title: 'kept a', status: 'IDLE', eventCount: 1 });
    const { nodes } = await app.ok(`query($ids: [ID!]!) { nodes(ids: $ids) { id __typename ... on Session { title } ... on Event { seq } } }`, {
      ids: [b, 'ses_missing', eventId, a, b],
    });
    expect(nodes).toEqual([
      { id: b, __typename: 'Session', title: 'kept b' },
      null,
      { id: eventId, __typename: 'Event', seq: 0 },
      { id: a, __typename: 'Session', title: 'kept a' },
      { id: b, __typename: 'Session', title: 'kept b' },
    ]);
  });

  it('filters sessions by status and parentId', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 'running' } });
    await app.services.store.append(s.id, [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'x' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
    ]);
    const { sessions } = await app.ok(`{ sessions(first: 50, status: RUNNING) { edges { node { id status turnCount } } } }`);
    expect(sessions.edges.map((e: any) => e.node)).toEqual([{ id: s.id, status: 'RUNNING', turnCount: 1 }]);
    const none = await app.ok(`query($p: ID) { sessions(parentId: $p) { edges { node { id } } } }`, { p: s.id });
    expect(none.sessions.edges).toEqual([]);
  });

  it('bad arguments give BAD_USER_INPUT, never a 500', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 'args' } });
    const bad = [
      `{ sessions(first: -1) { edges { node { id } } } }`,
      `{ sessions(first: "x") { edges { node { id } } } }`,
      `{ sessions(first: 100000) { edges { node { id } } } }`,
      `{ sessions(after: 12) { edges { node { id } } } }`,
      `{ session(id: "${s.id}") { events(afterSeq: -5) { edges { node { id } } } } }`,
      `{ session(id: "${s.id}") { events(after: "x") { edges { node { id } } } } }`,
      `{ session(id: "${s.id}") { events(first: 501) { edges { node { id } } } } }`,
      `{ session(id: "${s.id}") { events(last: -1) { edges { node { id } } } } }`,
      `mutation { createSession(input: { title: 5 }) { id } }`,
      `mutation { createSession(input: { model: { provider: "", model: "m" } }) { id } }`,
      `{ nope }`,
    ];
    for (const q of bad) {
      const r = await app.gql(q);
      expect(r.status, q).toBeLessThan(500);
      expect(r.errors?.[0]?.extensions?.code, q).toBe('BAD_USER_INPUT');
    }
  });

  it('a variable the request leaves out takes its default, even a non-null one (as graphql-js does)', async () => {
    const { createSession: s } = await app.ok(CREATE, { input: { title: 'defaults', model: { provider: 'scripted', model: 'echo' } } });
    const Q = `query($id: ID!, $withTitle: Boolean! = false, $first: Int! = 1) {
      session(id: $id) { id title @include(if: $withTitle) events(first: $first) { edges { node { seq } } } }
    }`;
    // Twice: the first request compiles the query, the second runs the cached compiled query.
    for (let i = 0; i < 2; i++) {
      expect((await app.ok(Q, { id: s.id })).session).toEqual({ id: s.id, events: { edges: [{ node: { seq: 0 } }] } });
      expect((await app.ok(Q, { id: s.id, withTitle: true, first: 2 })).session).toEqual({
        id: s.id,
        title: 'defaults',
        events: { edges: [{ node: { seq: 0 } }, { node: { seq: 1 } }] },
      });
    }
    // A non-null variable sent as null is still refused, default or not.
    const r = await app.gql(Q, { id: s.id, withTitle: null });
    expect(r.errors?.[0]?.message).toMatch(/withTitle.*must not be null/);
  });
});

describe('no N+1', () => {
  it('a sessions page with counts and parents costs the same number of SQL queries at 3 and 30 sessions', async () => {
    const queries: string[] = [];
    const counted = await startTestApp({ onQuery: (q) => queries.push(q) });
    try {
      const Q = `{ sessions(first: 50) { edges { node { id title eventCount turnCount status parent { id title eventCount } } } } }`;
      const make = async (n: number) => {
        for (let i = 0; i < n; i++) {
          const { createSession: s } = await counted.ok(CREATE, { input: { title: `p${i}` } });
          await counted.services.store.fork({ tenant: 'local' }, s.id, 0, { title: `child${i}` });
        }
      };
      const measure = async () => {
        queries.length = 0;
        const r = await counted.ok(Q);
        return { n: r.sessions.edges.length, queries: queries.length };
      };
      await make(2);
      const small = await measure();
      await make(13);
      const large = await measure();
      expect(small.n).toBe(4);
      expect(large.n).toBe(30);
      expect(large.queries).toBe(small.queries);
      expect(large.queries).toBeLessThanOrEqual(3);
    } finally {
      await counted.close();
    }
  });
});
