// Two tenants on one server: tenant B cannot read, list, fork,
// branch, send to, export or subscribe to tenant A's sessions; to B they do
// not exist. Authentication over HTTP, SSE and WebSocket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, TOKEN_A, TOKEN_B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { openSubscriptions, subscribeSse, subscribeWs, subscriptionsOpened, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
let sessionA: string;
let childA: string;
let eventA: string;

const as = (who: Record<string, string>) => async (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, who);
const asA = as(A);
const asB = as(B);
const codes = (r: { errors?: Array<{ extensions?: Record<string, unknown> }> }) => r.errors?.map((e) => e.extensions?.code);

beforeAll(async () => {
  app = await startTwoTenantApp();
  const created = await asA('mutation { createSession(input: { title: "A private" }) { id } }');
  sessionA = created.data.createSession.id;
  await asA('mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "hello" }) { inputId } }', { id: sessionA });
  await waitFor(async () => {
    const r = await asA('query($id: ID!) { session(id: $id) { status turnCount } }', { id: sessionA });
    return r.data.session.status === 'IDLE' && r.data.session.turnCount === 1;
  });
  const fork = await asA('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 1 }) { session { id } } }', { id: sessionA });
  childA = fork.data.forkSession.session.id;
  const ev = await asA('query($id: ID!) { session(id: $id) { events(first: 1) { edges { node { id } } } } }', { id: sessionA });
  eventA = ev.data.session.events.edges[0].node.id;
});
afterAll(() => app?.close());

describe('authentication', () => {
  it('rejects a missing, unknown or malformed token with 401 UNAUTHENTICATED before executing anything', async () => {
    for (const headers of [
      {} as Record<string, string>,
      { authorization: 'Bearer nope-not-a-token-at-all' },
      { authorization: TOKEN_A },
      { authorization: `Basic ${TOKEN_A}` },
    ]) {
      const r = await app.gql('mutation { createSession(input: { title: "x" }) { id } }', undefined, headers);
      expect(r.status).toBe(401);
      expect(codes(r)).toEqual(['UNAUTHENTICATED']);
    }
    const get = await fetch(`${app.url}?query=${encodeURIComponent('{ __typename }')}`);
    expect(get.status).toBe(401);
    expect(get.headers.get('www-authenticate')).toBe('Bearer');
    // Nothing was created by the rejected mutations.
    const list = await asA('{ sessions(first: 100) { edges { node { title } } } }');
    expect(list.data.sessions.edges.map((e: any) => e.node.title)).not.toContain('x');
  });

  it('still serves the GraphiQL page (static) without a token', async () => {
    const res = await fetch(app.url, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('forkline');
  });

  it('accepts GET queries with a token (the header also satisfies CSRF prevention)', async () => {
    const res = await fetch(`${app.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: A });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ data: { __typename: 'Query' } });
  });

  it('SSE subscriptions need the token too', async () => {
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({ query: 'subscription { sessionsChanged { id } }' }),
    });
    expect(res.status).toBe(401);
    await res.body?.cancel();
  });

  it('WebSocket connections without a valid connectionParams.authorization are closed with 4401', async () => {
    for (const connectionParams of [undefined, { authorization: 'Bearer wrong-token-wrong-token' }, { authorization: TOKEN_A }]) {
      let closed: { code: number; reason: string } | undefined;
      const client = wsClient(app.url, { connectionParams, on: { closed: (e: any) => (closed ??= { code: e.code, reason: e.reason }) } } as any);
      const sub = subscribeWs(app.url, 'subscription { sessionsChanged { id } }', {}, client);
      await waitFor(() => closed, { what: 'ws rejection' });
      expect(closed!.code).toBe(4401);
      expect(closed!.reason).toMatch(/Unauthorized/);
      expect(sub.items).toEqual([]);
      await sub.close();
      await client.dispose();
    }
  });

  it('WebSocket authenticates with connectionParams.authorization', async () => {
    const client = wsClient(app.url, { connectionParams: A });
    const sub = subscribeWs(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type } }', { id: sessionA }, client);
    await sub.count(3);
    expect(sub.items[0].sessionEvents.seq).toBe(0);
    await sub.close();
    await client.dispose();
  });
});

describe("another tenant's sessions do not exist", () => {
  it('B cannot read them: session(), node(), sessions, parentId filter, recording', async () => {
    expect((await asA('query($id: ID!) { session(id: $id) { id } }', { id: sessionA })).data.session).toEqual({ id: sessionA });
    expect((await asB('query($id: ID!) { session(id: $id) { id recording } }', { id: sessionA })).data).toEqual({ session: null });
    const nodes = await asB('query($s: ID!, $c: ID!, $e: ID!) { s: node(id: $s) { id } c: node(id: $c) { id } e: node(id: $e) { id } }', {
      s: sessionA,
      c: childA,
      e: eventA,
    });
    expect(nodes.errors).toBeUndefined();
    expect(nodes.data).toEqual({ s: null, c: null, e: null });
    const list = await asB('query($p: ID) { all: sessions(first: 500) { edges { node { id } } } children: sessions(parentId: $p) { edges { node { id } } } }', {
      p: sessionA,
    });
    expect(list.data).toEqual({ all: { edges: [] }, children: { edges: [] } });
  });

  it('B cannot fork, branch, send to, cancel, retitle, re-model or delete them: SESSION_NOT_FOUND, nothing written', async () => {
    const before = (await asA('query($id: ID!) { session(id: $id) { eventCount title children { edges { node { id } } } } }', { id: sessionA })).data.session;
    const attempts: Array<[string, Record<string, unknown>]> = [
      ['mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0 }) { session { id } } }', { id: sessionA }],
      ['mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 99999 }) { session { id } } }', { id: sessionA }],
      ['mutation($id: ID!) { branchSession(input: { sessionId: $id }) { session { id } } }', { id: sessionA }],
      ['mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }', { id: childA }],
      ['mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "let me in" }) { inputId } }', { id: sessionA }],
      ['mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }', { id: sessionA }],
      ['mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "mine now") { id } }', { id: sessionA }],
      ['mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "scripted", model: "x" }) { id } }', { id: sessionA }],
      ['mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: childA }],
      ['mutation($id: ID!) { deleteSession(id: $id, withDescendants: true) { deletedSessionIds } }', { id: sessionA }],
    ];
    for (const [query, variables] of attempts) {
      const r = await asB(query, variables);
      expect(codes(r), query).toEqual(['SESSION_NOT_FOUND']);
      expect(r.data ?? null, query).toBeNull();
    }
    const after = (await asA('query($id: ID!) { session(id: $id) { eventCount title children { edges { node { id } } } } }', { id: sessionA })).data.session;
    expect(after).toEqual(before);
    expect((await asA('query($id: ID!) { session(id: $id) { id } }', { id: childA })).data.session).toEqual({ id: childA });
  });

  it('sessionsDeleted tells each tenant of its own deletions only', async () => {
    const clients = [TOKEN_A, TOKEN_B].map((t) => wsClient(app.url, { connectionParams: { authorization: `Bearer ${t}` } }));
    const [a, b] = clients.map((c) => subscribeWs(app.url, 'subscription { sessionsDeleted { deletedSessionIds } }', {}, c));
    await waitFor(() => app.services.live.stats().deletions === 2, { what: 'registered' });
    const mine = (await asA('mutation { createSession(input: { title: "A temporary" }) { id } }')).data.createSession.id;
    const theirs = (await asB('mutation { createSession(input: { title: "B temporary" }) { id } }')).data.createSession.id;
    await asA('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: mine });
    await asB('mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }', { id: theirs });
    expect((await a.count(1)).map((x) => x.sessionsDeleted.deletedSessionIds)).toEqual([[mine]]);
    expect((await b.count(1)).map((x) => x.sessionsDeleted.deletedSessionIds)).toEqual([[theirs]]);
    await new Promise((r) => setTimeout(r, 100));
    expect(a.items.length + b.items.length).toBe(2);
    await Promise.all(clients.map((c) => c.dispose()));
    // A deletion's progress is its tenant's alone: another tenant reads none (docs/contract.md#deletion).
    const progress = 'query($id: ID!) { sessionDeletion(sessionId: $id) { sessionCount } }';
    expect((await asA(progress, { id: mine })).data.sessionDeletion).toEqual({ sessionCount: 1 });
    expect((await asB(progress, { id: mine })).data.sessionDeletion).toBeNull();
  });

  it("A sees its own fork through parent and children; B's own sessions are B's alone", async () => {
    const r = await asA('query($id: ID!, $p: ID!) { session(id: $id) { parent { id } } parent: session(id: $p) { children { edges { node { id } } } } }', {
      id: childA,
      p: sessionA,
    });
    expect(r.data.session.parent.id).toBe(sessionA);
    expect(r.data.parent.children.edges.map((e: any) => e.node.id)).toEqual([childA]);

    const exported = (await asA('query($id: ID!) { session(id: $id) { recording } }', { id: sessionA })).data.session.recording as string;
    const imported = await asB('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: exported });
    const importedId = imported.data.importRecording.id;
    expect((await asA('query($id: ID!) { session(id: $id) { id } }', { id: importedId })).data.session).toBeNull();
    const forkB = await asB('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0 }) { session { id parent { id } } } }', { id: importedId });
    expect(forkB.data.forkSession.session.parent.id).toBe(importedId);
    expect((await asA('query($id: ID!) { session(id: $id) { id } }', { id: forkB.data.forkSession.session.id })).data.session).toBeNull();
    const listB = await asB('{ sessions { edges { node { id } } } }');
    expect(listB.data.sessions.edges.map((e: any) => e.node.id).sort()).toEqual([importedId, forkB.data.forkSession.session.id].sort());
  });

  it("B cannot subscribe to them over WebSocket or SSE; sessionsChanged and sessionListChanges carry only B's sessions", async () => {
    const clientB = wsClient(app.url, { connectionParams: B });
    const wsEvents = subscribeWs(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionA }, clientB);
    const wsTurns = subscribeWs(app.url, 'subscription($id: ID!) { sessionTurns(sessionId: $id) { kind } }', { id: sessionA }, clientB);
    const sseEvents = subscribeSse(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionA }, B);
    for (const sub of [wsEvents, wsTurns, sseEvents]) {
      await waitFor(() => sub.errors.length > 0 || sub.items.length > 0, { what: 'subscription answer' });
      expect(sub.items).toEqual([]);
      expect(JSON.stringify(sub.errors)).toContain('SESSION_NOT_FOUND');
      await sub.close();
    }

    const open = await openSubscriptions(app.url);
    const changedB = subscribeWs(app.url, 'subscription { sessionsChanged { id title } }', {}, clientB);
    const changedSseB = subscribeSse(app.url, 'subscription { sessionsChanged { id title } }', {}, B);
    const listB = subscribeWs(app.url, 'subscription { sessionListChanges { session { id title } } }', {}, clientB);
    await subscriptionsOpened(app.url, open, 3); // all three subscriptions are listening
    await asA('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "A again") { id } }', { id: sessionA });
    await asA('mutation { createSession(input: { title: "A new" }) { id } }');
    const own = (await asB('mutation { createSession(input: { title: "B marker" }) { id } }')).data.createSession.id;
    await changedB.until((items) => items.some((i) => i.sessionsChanged.id === own), 'B marker over ws');
    await changedSseB.until((items) => items.some((i) => i.sessionsChanged.id === own), 'B marker over sse');
    await listB.until((items) => items.some((i) => i.sessionListChanges.session?.id === own), 'B marker in the list');
    for (const sub of [changedB, changedSseB]) {
      expect(sub.items.map((i) => i.sessionsChanged.title)).not.toContain('A again');
      expect(sub.items.map((i) => i.sessionsChanged.title)).not.toContain('A new');
      await sub.close();
    }
    expect(listB.items.map((i) => i.sessionListChanges.session?.title)).not.toContain('A again');
    expect(listB.items.map((i) => i.sessionListChanges.session?.title)).not.toContain('A new');
    await listB.close();
    await clientB.dispose();
  });
});

describe('sessionsChanged startWith', () => {
  it("sends the named sessions first as they are once it listens: B's own, never A's, and no more than 50 named", async () => {
    const own = (await asB('mutation { createSession(input: { title: "B start" }) { id } }')).data.createSession.id;
    const clientB = wsClient(app.url, { connectionParams: B });
    const first = subscribeWs(app.url, 'subscription($s: [ID!]) { sessionsChanged(startWith: $s) { id title } }', { s: [sessionA, own, own] }, clientB);
    await first.count(1);
    expect(first.items).toEqual([{ sessionsChanged: { id: own, title: 'B start' } }]);
    // Once it is there, a change reaches it.
    await asB('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "B changed") { id } }', { id: own });
    await first.until((items) => items.some((i) => i.sessionsChanged.title === 'B changed'), 'the change');
    expect(first.items.map((i) => i.sessionsChanged.id)).not.toContain(sessionA);
    await first.close();

    const tooMany = subscribeWs(app.url, 'subscription($s: [ID!]) { sessionsChanged(startWith: $s) { id } }', { s: Array(51).fill(own) }, clientB);
    await waitFor(() => tooMany.errors.length > 0, { what: 'the refusal' });
    expect(JSON.stringify(tooMany.errors)).toContain('BAD_USER_INPUT');
    await tooMany.close();
    await clientB.dispose();
  });
});

describe('rate limiting per token', () => {
  it('answers 429 RATE_LIMITED with Retry-After once a token spends its burst; other tokens are unaffected', async () => {
    const limited = await startTwoTenantApp({
      security: {
        rateLimit: { perSecond: 1, burst: 5 },
      },
    });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) statuses.push((await limited.gql('{ __typename }', undefined, A)).status);
      expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200]);
      expect(statuses.slice(5)).toEqual([429, 429, 429]);
      const res = await fetch(limited.url, { method: 'POST', headers: { 'content-type': 'application/json', ...A }, body: '{"query":"{ __typename }"}' });
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect((await res.json()).errors[0].extensions.code).toBe('RATE_LIMITED');
      expect((await limited.gql('{ __typename }', undefined, B)).status).toBe(200);

      // WebSocket operations of the same token draw from the same bucket, connection_init included (4429).
      let closed: { code: number; reason: string } | undefined;
      const client = wsClient(limited.url, { connectionParams: A, on: { closed: (e: any) => (closed ??= { code: e.code, reason: e.reason }) } } as any);
      const sub = subscribeWs(limited.url, 'subscription { sessionsChanged { id } }', {}, client);
      await waitFor(() => closed, { what: 'rate-limited connection_init' });
      expect(closed).toMatchObject({ code: 4429, reason: expect.stringMatching(/^RATE_LIMITED: /) });
      await sub.close();
      await client.dispose();
    } finally {
      await limited.close();
    }
  });
});
