// Finding things in one session over real HTTP: Session.search
// (full-text, in seq order, the inherited prefix included, keyset pages of
// seqs) and Session.events filtered by type and origin, paged by the server
// forward and backward.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { textTurn } from '../helpers/text-turn.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

const SEARCH = `query($id: ID!, $q: String!, $first: Int, $after: String) { session(id: $id) { search(query: $q, first: $first, after: $after) {
  edges { cursor node { seq kind snippet rank event { seq type inherited } } } pageInfo { hasNextPage hasPreviousPage endCursor } } } }`;
const EVENTS = `query($id: ID!, $types: [String!], $origin: EventOrigin, $first: Int, $after: String, $last: Int, $before: String) {
  session(id: $id) { events(types: $types, origin: $origin, first: $first, after: $after, last: $last, before: $before) {
    edges { node { seq type inherited synthetic } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`;

/** Completed turns; every 10th answer names a heron. Returns the seqs written, by type. */
async function turns(sessionId: string, from: number, count: number) {
  const events: NewEvent[] = [];
  for (let n = from; n < from + count; n++) {
    events.push(...textTurn(n, `question ${n}`, n % 10 === 0 ? `answer ${n}: a grey heron waded by` : `answer ${n}`));
  }
  return app.services.store.append(sessionId, events);
}

describe('Session.search and filtered events', () => {
  let root: string;
  let child: string;
  let herons: number[];
  let childHerons: number[];
  let forkSeq: number;

  beforeAll(async () => {
    root = (await app.ok('mutation { createSession(input: { title: "Birds" }) { id } }')).createSession.id;
    const written = await turns(root, 1, 60);
    herons = written.filter((e) => e.type === 'model/message' && JSON.stringify(e.data).includes('heron')).map((e) => e.seq);
    // A fork mid-turn (after turn 30's answer, inside its step): repair closes the turn with synthetic events, then it writes turns of its own.
    forkSeq = written.find((e) => e.type === 'model/message' && (e.data as { turn: number }).turn === 30)!.seq;
    child = (await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: root, atSeq: forkSeq } }))
      .forkSession.session.id;
    const own = await turns(child, 31, 20);
    childHerons = own.filter((e) => e.type === 'model/message' && JSON.stringify(e.data).includes('heron')).map((e) => e.seq);
  });

  it('finds matches in seq order, pages by seq, with snippets and the events', async () => {
    const seen: any[] = [];
    let after: string | undefined;
    for (;;) {
      const r = (await app.ok(SEARCH, { id: root, q: 'heron', first: 4, after })).session.search;
      expect(r.pageInfo.hasPreviousPage).toBe(after !== undefined);
      seen.push(...r.edges.map((e: any) => e.node));
      if (!r.pageInfo.hasNextPage) break;
      after = r.pageInfo.endCursor;
    }
    expect(seen.map((h) => h.seq)).toEqual(herons);
    expect(seen[0]).toMatchObject({ kind: 'MESSAGE', event: { seq: herons[0], type: 'model/message', inherited: false } });
    expect(seen[0].snippet).toContain('⟦heron⟧');
    expect(seen[0].rank).toBeGreaterThan(0);
    // Stemming and the input side: "questions" matches every input.
    const inputs = (await app.ok(SEARCH, { id: root, q: 'questions', first: 3 })).session.search.edges.map((e: any) => e.node);
    expect(inputs.map((h: any) => h.kind)).toEqual(['INPUT', 'INPUT', 'INPUT']);
  });

  it("a fork's search includes its inherited prefix, read where it is stored, then its own events", async () => {
    const r = (await app.ok(SEARCH, { id: child, q: 'grey heron', first: 50 })).session.search.edges.map((e: any) => e.node);
    expect(r.map((h: any) => h.seq)).toEqual([...herons.filter((s) => s <= forkSeq), ...childHerons]);
    expect(r.map((h: any) => h.event.inherited)).toEqual([...herons.filter((s) => s <= forkSeq).map(() => true), ...childHerons.map(() => false)]);
    // Words the session never saw.
    expect((await app.ok(SEARCH, { id: child, q: 'albatross' })).session.search.edges).toEqual([]);
  });

  it('filters events by type, forward and backward, paged by the server', async () => {
    const first = (await app.ok(EVENTS, { id: root, types: ['model/message', 'turn/end'], first: 5 })).session.events;
    expect(first.edges.map((e: any) => e.node.type)).toEqual(['model/message', 'turn/end', 'model/message', 'turn/end', 'model/message']);
    expect(first.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
    const next = (await app.ok(EVENTS, { id: root, types: ['model/message', 'turn/end'], first: 5, after: first.pageInfo.endCursor })).session.events;
    expect(next.edges[0].node.seq).toBeGreaterThan(Number(first.pageInfo.endCursor));
    expect(next.pageInfo.hasPreviousPage).toBe(true);
    // The latest matches, backward from the end.
    const last = (await app.ok(EVENTS, { id: root, types: ['inbox/add'], last: 3 })).session.events;
    const inputs = (await app.services.store.log.ofTypes(root, ['inbox/add'], { fromSeq: 0, toSeq: 2 ** 31 - 1, limit: 100 })).map((e) => e.seq);
    expect(last.edges.map((e: any) => e.node.seq)).toEqual(inputs.slice(-3));
    expect(last.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = (await app.ok(EVENTS, { id: root, types: ['inbox/add'], last: 3, before: last.pageInfo.startCursor })).session.events;
    expect(before.edges.map((e: any) => e.node.seq)).toEqual(inputs.slice(-6, -3));
  });

  it('filters by origin: inherited, own and synthetic, alone or with types', async () => {
    const all = async (vars: Record<string, unknown>) => {
      const out: any[] = [];
      let after: string | undefined;
      for (;;) {
        const r = (await app.ok(EVENTS, { id: child, first: 50, after, ...vars })).session.events;
        out.push(...r.edges.map((e: any) => e.node));
        if (!r.pageInfo.hasNextPage) return out;
        after = r.pageInfo.endCursor;
      }
    };
    const everything = await all({});
    const inherited = await all({ origin: 'INHERITED' });
    expect(inherited.map((e) => e.seq)).toEqual(everything.filter((e) => e.inherited).map((e) => e.seq));
    expect(inherited.length).toBe(forkSeq + 1);
    const own = await all({ origin: 'OWN' });
    expect(own.map((e) => e.seq)).toEqual(everything.filter((e) => !e.inherited).map((e) => e.seq));
    const synthetic = await all({ origin: 'SYNTHETIC' });
    expect(synthetic.length).toBeGreaterThan(0);
    expect(synthetic.map((e) => e.seq)).toEqual(everything.filter((e) => e.synthetic).map((e) => e.seq));
    const ownAnswers = await all({ origin: 'OWN', types: ['model/message'] });
    expect(ownAnswers.map((e) => e.seq)).toEqual(everything.filter((e) => !e.inherited && e.type === 'model/message').map((e) => e.seq));
  });

  it('refuses a bad cursor or too many types with BAD_USER_INPUT', async () => {
    const codes = (r: any) => r.errors?.map((e: any) => e.extensions?.code);
    expect(codes(await app.gql(SEARCH, { id: root, q: 'heron', after: 'nope' }))).toEqual(['BAD_USER_INPUT']);
    expect(codes(await app.gql(SEARCH, { id: root, q: '' }))).toEqual(['BAD_USER_INPUT']);
    expect(codes(await app.gql(EVENTS, { id: root, types: Array.from({ length: 21 }, (_, i) => `t${i}`) }))).toEqual(['BAD_USER_INPUT']);
  });
});
