import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { closerName, REFERENCE_LOG } from '../spec/reference-log.ts';

let app: TestApp;
let parentId: string;
const scope = { tenant: 'local' };

const FORK = `mutation($input: ForkSessionInput!) {
  forkSession(input: $input) {
    cutSeq
    session { id title eventCount turnCount status forkedAtSeq inheritedEventCount firstLiveSeq parent { id } }
    parent { id eventCount }
    syntheticEvents { seq type data inherited synthetic }
  }
}`;
const EVENTS = `query($id: ID!) { session(id: $id) { eventCount events(first: 500) { edges { node { id seq type data inherited synthetic createdAt } } } } }`;
const events = async (id: string) => (await app.ok(EVENTS, { id })).session.events.edges.map((e: any) => e.node);

beforeAll(async () => {
  app = await startTestApp();
  parentId = (await app.services.store.createSession(scope, {})).id;
  await app.services.store.append(parentId, REFERENCE_LOG);
});
afterAll(() => app.close());

// Every exact cut and every branch row of the contract: tests/graphql/fork-spec.test.ts.

describe('queued input inside an exact fork', () => {
  it('is pending input of the child, which its agent then answers (ordinary replay semantics)', async () => {
    const { forkSession: f } = await app.ok(FORK, { input: { sessionId: parentId, atSeq: 13 } });
    await app.services.host.idle();
    const child = await events(f.session.id);
    const own = child.slice(f.session.firstLiveSeq);
    expect(own.map((e: any) => e.type).slice(0, 2)).toEqual(['inbox/remove', 'turn/start']);
    expect(own[0].data).toEqual({ inputId: 'in_2', reason: 'taken' });
    expect(own[1].data).toEqual({ turn: 2, inputId: 'in_2' });
    expect(own.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });
});

describe('forkSession mid-step', () => {
  it('forks right after a tool call: counts, payload and wording; the parent is unchanged', async () => {
    const before = await events(parentId);
    const { forkSession: f } = await app.ok(FORK, { input: { sessionId: parentId, atSeq: 10, title: 'what if' } });
    expect(f.cutSeq).toBe(10);
    expect(f.parent).toEqual({ id: parentId, eventCount: REFERENCE_LOG.length });
    expect(f.session).toMatchObject({ title: 'what if', forkedAtSeq: 10, inheritedEventCount: 11, firstLiveSeq: 17, eventCount: 18, turnCount: 1 });
    expect(f.syntheticEvents.map((e: any) => [e.seq, e.type, e.data.status ?? e.data.reason])).toEqual([
      [12, 'tool/result', 'not-started'],
      [13, 'tool/result', 'not-started'],
      [14, 'tool/result', 'not-started'],
      [15, 'step/end', 'forked'],
      [16, 'turn/end', 'forked'],
    ]);
    expect(f.syntheticEvents[0].data.content).toContain(`forked at event 10 of session ${parentId}`);
    const child = await events(f.session.id);
    expect(child[17]).toMatchObject({ seq: 17, type: 'session/title', data: { title: 'what if' }, synthetic: false });
    expect(await events(parentId)).toEqual(before);
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { children(first: 100) { edges { node { id forkedAtSeq } } } } }`, { id: parentId });
    expect(session.children.edges.map((e: any) => e.node.id)).toContain(f.session.id);
  });

  it('a title is inherited through the cut unless the fork names one', async () => {
    const { forkSession: f } = await app.ok(FORK, { input: { sessionId: parentId, atSeq: 3 } });
    expect(f.session.title).toBe('reference');
  });

  it('atSeq omitted forks through the last turn/end', async () => {
    await app.services.store.append(parentId, [{ type: 'inbox/add', data: { inputId: 'in_3', text: 'later' } }]);
    const { forkSession: f } = await app.ok(FORK, { input: { sessionId: parentId } });
    expect(f.cutSeq).toBe(31);
    expect(f.syntheticEvents).toEqual([]);
    const child = await events(f.session.id);
    expect(child.map((e: any) => e.type).slice(-1)).toEqual(['session/end-seed']);
  });

  it('nested forks keep ancestor markers; the own marker is the last', async () => {
    const { forkSession: a } = await app.ok(FORK, { input: { sessionId: parentId, atSeq: 25 } });
    const { forkSession: b } = await app.ok(FORK, { input: { sessionId: a.session.id, atSeq: 26 } }); // at a's marker
    const child = await events(b.session.id);
    const markers = child.filter((e: any) => e.type === 'session/end-seed');
    expect(markers.map((m: any) => [m.seq, m.data.parentSessionId, m.inherited])).toEqual([
      [26, parentId, true],
      [27, a.session.id, false],
    ]);
    expect(b.syntheticEvents.map(closerName)).toEqual(['r:c6', 'r:c7', 'step:2/1', 'turn:2']);
  });
});

describe('forkSession rejects bad cuts with codes, never a 500', () => {
  it.each([
    ['-1', -1, 'SEQ_OUT_OF_RANGE'],
    ['eventCount', 'COUNT', 'SEQ_OUT_OF_RANGE'],
    ['a huge int', 2 ** 31 - 1, 'SEQ_OUT_OF_RANGE'],
    ['beyond Int', 2 ** 40, 'BAD_USER_INPUT'],
    ['a float', 2.5, 'BAD_USER_INPUT'],
    ['a string', '3', 'BAD_USER_INPUT'],
  ])('%s', async (_name, atSeq, code) => {
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: parentId });
    const r = await app.gql(FORK, { input: { sessionId: parentId, atSeq: atSeq === 'COUNT' ? session.eventCount : atSeq } });
    expect(r.status).toBeLessThan(500);
    expect(r.errors?.[0].extensions?.code).toBe(code);
  });

  it('unknown session', async () => {
    const r = await app.gql(FORK, { input: { sessionId: 'ses_unknown', atSeq: 0 } });
    expect(r.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
  });
});

describe('a fork of a live parent', () => {
  it('while another client appends 1,000 events, the child prefix equals the parent events 0..atSeq', async () => {
    const live = (await app.services.store.createSession(scope, { title: 'live' })).id;
    await app.services.store.append(live, REFERENCE_LOG.slice(1, 11)); // ends after a tool call (seq 10)
    const appender = (async () => {
      for (let i = 0; i < 100; i++) {
        await app.services.store.append(
          live,
          Array.from({ length: 10 }, (_, j) => ({ type: 'plugin/test/tick', data: { i, j } })),
        );
      }
    })();
    const forks: any[] = [];
    for (let k = 0; k < 10; k++) {
      const { session } = await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: live });
      const atSeq = session.eventCount - 1;
      forks.push({ atSeq, f: (await app.ok(FORK, { input: { sessionId: live, atSeq } })).forkSession });
    }
    await appender;
    const parentEvents = await app.services.store.log.page(live, -1, 5000);
    expect(parentEvents.length).toBe(1011);
    for (const { atSeq, f } of forks) {
      const child = await app.services.store.log.page(f.session.id, -1, 5000);
      const bytes = (es: any[]) => es.map((e) => JSON.stringify([e.seq, e.type, e.data, e.synthetic, e.createdAt]));
      expect(bytes(child.slice(0, atSeq + 1))).toEqual(bytes(parentEvents.slice(0, atSeq + 1)));
      expect(child[atSeq + 1].type).toBe('session/end-seed');
      // closers close the inherited open step exactly as for a cold parent
      expect(f.syntheticEvents.map(closerName)).toEqual(['r:c3', 'r:c4', 'r:c5', 'step:1/2', 'turn:1']);
      expect(child.length).toBe(f.session.eventCount);
    }
  });
});
