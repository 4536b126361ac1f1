// API tokens as data: an environment token (the bootstrap admin)
// creates, lists and revokes its tenant's stored tokens over GraphQL; scopes
// hold on every door; an expired token is a 401; a revoked token's open
// graphql-ws socket and SSE stream close within seconds — on another process
// too — and its next request is a 401.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TOKEN_A, TOKEN_B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { subscribeSse, subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const codes = (r: { errors?: Array<{ extensions?: Record<string, unknown> }> }) => r.errors?.map((e) => e.extensions?.code);

const CREATE = `mutation($input: CreateApiTokenInput!) {
  createApiToken(input: $input) { secret token { id name scopes status createdAt expiresAt revokedAt } }
}`;
const LIST = '{ apiTokens { id name scopes status revokedAt } }';
const REVOKE = 'mutation($id: ID!) { revokeApiToken(id: $id) { id status revokedAt } }';

let app: TestApp;
let sessionA: string;

const as = (token: string) => (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, bearer(token));
async function createToken(admin: string, input: Record<string, unknown>, on: TestApp = app): Promise<{ secret: string; id: string }> {
  const r = await on.gql(CREATE, { input }, bearer(admin));
  expect(r.errors).toBeUndefined();
  return { secret: r.data.createApiToken.secret, id: r.data.createApiToken.token.id };
}

beforeAll(async () => {
  app = await startTwoTenantApp();
  sessionA = (await as(TOKEN_A)('mutation { createSession(input: { title: "alpha work" }) { id } }')).data.createSession.id;
});
afterAll(() => app?.close());

describe('managing tokens over GraphQL', () => {
  it('an admin creates a token (its secret answered once), lists it without secrets, and it works for its tenant', async () => {
    const r = await as(TOKEN_A)(CREATE, { input: { name: 'ci', scopes: ['WRITE'] } });
    expect(r.errors).toBeUndefined();
    const { secret, token } = r.data.createApiToken;
    expect(secret).toMatch(/^fkt_[A-Za-z0-9_-]{43}$/);
    expect(token).toMatchObject({ name: 'ci', scopes: ['READ', 'WRITE'], status: 'ACTIVE', expiresAt: null, revokedAt: null });

    const listed = await as(TOKEN_A)('{ apiTokens { id name scopes status lastUsedAt } }');
    expect(listed.data.apiTokens).toContainEqual({ id: token.id, name: 'ci', scopes: ['READ', 'WRITE'], status: 'ACTIVE', lastUsedAt: null });
    expect(JSON.stringify(listed)).not.toContain(secret);
    // Nothing in the database holds the secret.
    const dump = await app.db.pool.query(`SELECT row_to_json(t)::text AS row FROM "ApiToken" t`);
    expect(dump.rows.map((x) => x.row).join('\n')).not.toContain(secret.slice(4));

    // The new token is alpha's: it sees alpha's session.
    const read = await as(secret)('query($id: ID!) { session(id: $id) { title } }', { id: sessionA });
    expect(read.data).toEqual({ session: { title: 'alpha work' } });
    // Another tenant's admin neither sees nor revokes it.
    expect((await as(TOKEN_B)(LIST)).data.apiTokens).toEqual([]);
    const foreign = await as(TOKEN_B)(REVOKE, { id: token.id });
    expect(codes(foreign)).toEqual(['BAD_USER_INPUT']);
    expect((await as(secret)('{ __typename }')).status).toBe(200);
    // Its use is recorded (by the next refresh, at most once a minute).
    await waitFor(async () => (await as(TOKEN_A)('{ apiTokens { id lastUsedAt } }')).data.apiTokens.find((k: any) => k.id === token.id).lastUsedAt, {
      what: 'lastUsedAt',
    });
  });

  it('a read token queries, subscribes and resumes a chat; mutations, AG-UI runs, chat messages and uploads are FORBIDDEN, and nothing is written', async () => {
    const { secret } = await createToken(TOKEN_A, { name: 'reader', scopes: ['READ'] });
    const read = as(secret);
    expect((await read('query($id: ID!) { session(id: $id) { title } }', { id: sessionA })).data.session.title).toBe('alpha work');
    const sub = subscribeWs(
      app.url,
      'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }',
      { id: sessionA },
      wsClient(app.url, { connectionParams: bearer(secret) }),
    );
    await sub.count(1);
    await sub.close();

    for (const [query, variables] of [
      ['mutation { createSession(input: { title: "by a reader" }) { id } }', {}],
      ['mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "hi" }) { inputId } }', { id: sessionA }],
      [CREATE, { input: { name: 'escalate', scopes: ['ADMIN'] } }],
    ] as const) {
      const r = await read(query, variables);
      expect(codes(r), query).toEqual(['FORBIDDEN']);
      expect(r.data ?? null).toBeNull();
    }
    expect((await read(LIST)).errors?.[0].extensions?.code).toBe('FORBIDDEN');

    const upload = await fetch(app.url.replace('/graphql', '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson', ...bearer(secret) },
      body: '{"format":"forkline.recording","version":4,"session":{"id":"x","title":"t"}}\n',
    });
    expect(upload.status).toBe(403);
    const agui = await fetch(app.url.replace('/graphql', '/agui'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(secret) },
      body: JSON.stringify({
        threadId: sessionA,
        runId: 'r1',
        messages: [{ id: 'm1', role: 'user', content: 'hi' }],
        tools: [],
        context: [],
        state: {},
        forwardedProps: {},
      }),
    });
    expect(agui.status).toBe(403);
    await agui.body?.cancel();
    // useChat's door: sending is a write; resuming an answer is a read.
    const chat = await fetch(app.url.replace('/graphql', '/chat'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...bearer(secret) },
      body: JSON.stringify({ id: sessionA, messages: [{ id: 'm1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], trigger: 'submit-message' }),
    });
    expect(chat.status).toBe(403);
    await chat.body?.cancel();
    expect((await fetch(app.url.replace('/graphql', `/chat/${sessionA}/stream`), { headers: bearer(secret) })).status).toBe(204);

    const titles = (await as(TOKEN_A)('{ sessions(first: 100) { edges { node { title eventCount } } } }')).data.sessions.edges.map((e: any) => e.node);
    expect(titles).toEqual([{ title: 'alpha work', eventCount: 1 }]);
  });

  it('a write token runs mutations but does not manage tokens', async () => {
    const { secret } = await createToken(TOKEN_A, { name: 'writer', scopes: ['WRITE'] });
    const created = await as(secret)('mutation { createSession(input: { title: "by a writer" }) { id } }');
    expect(created.errors).toBeUndefined();
    for (const [query, variables] of [
      [LIST, {}],
      [CREATE, { input: { name: 'x', scopes: ['READ'] } }],
      [REVOKE, { id: 'tok_x' }],
    ] as const) {
      expect(codes(await as(secret)(query, variables)), query).toEqual(['FORBIDDEN']);
    }
  });

  it('refuses bad input: no name, no scope, an expiry in the past', async () => {
    for (const input of [
      { name: ' ', scopes: ['READ'] },
      { name: 'x', scopes: [] },
      { name: 'x', scopes: ['READ'], expiresAt: new Date(Date.now() - 1000).toISOString() },
    ]) {
      expect(codes(await as(TOKEN_A)(CREATE, { input })), JSON.stringify(input)).toEqual(['BAD_USER_INPUT']);
    }
  });
});

describe('expiry and revocation', () => {
  it('an expired token is a 401 over HTTP and a 4401 over graphql-ws', async () => {
    const expiresAt = new Date(Date.now() + 1500);
    const { secret, id } = await createToken(TOKEN_A, { name: 'short-lived', scopes: ['READ'], expiresAt: expiresAt.toISOString() });
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt.getTime() - Date.now() + 50)));
    const r = await as(secret)('{ __typename }');
    expect(r.status).toBe(401);
    expect(codes(r)).toEqual(['UNAUTHENTICATED']);
    const closed = await new Promise<{ code: number }>((resolve) => {
      const client = wsClient(app.url, { connectionParams: bearer(secret), on: { closed: (e: any) => resolve(e) } } as any);
      subscribeWs(app.url, 'subscription { sessionsChanged { id } }', {}, client);
    });
    expect(closed.code).toBe(4401);
    const listed = (await as(TOKEN_A)(LIST)).data.apiTokens.find((k: any) => k.id === id);
    expect(listed).toMatchObject({ status: 'EXPIRED', revokedAt: null });
  });

  it("a revoked token's open graphql-ws subscription and SSE stream close, and its next request is a 401", async () => {
    const { secret, id } = await createToken(TOKEN_A, { name: 'to revoke', scopes: ['READ'] });
    let closed: ((e: { code: number; reason: string }) => void) | undefined;
    const wsClosed = new Promise<{ code: number; reason: string }>((resolve) => (closed = resolve));
    const client = wsClient(app.url, { connectionParams: bearer(secret), on: { closed: (e: any) => closed?.(e) } } as any);
    const ws = subscribeWs(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionA }, client);
    const sse = subscribeSse(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionA }, bearer(secret));
    await Promise.all([ws.count(1), sse.count(1)]);
    expect((await as(secret)('{ __typename }')).status).toBe(200);

    const revoked = await as(TOKEN_A)(REVOKE, { id });
    expect(revoked.data.revokeApiToken).toMatchObject({ id, status: 'REVOKED' });
    const { code, reason } = await wsClosed;
    expect(code).toBe(4401);
    expect(reason).toMatch(/revoked or expired/);
    await waitFor(() => sse.errors.length > 0 || sse.completed, { what: 'the SSE stream to end' });

    const next = await as(secret)('{ __typename }');
    expect(next.status).toBe(401);
    expect(codes(next)).toEqual(['UNAUTHENTICATED']);
    // Revoking again keeps the first date.
    const again = await as(TOKEN_A)(REVOKE, { id });
    expect(again.data.revokeApiToken.revokedAt).toBe(revoked.data.revokeApiToken.revokedAt);
    await client.dispose();
  });

  it('a revocation on one process closes the sockets of another; stored tokens alone turn authentication on', async () => {
    // A second process on the same database, without environment tokens.
    const other = await startTestApp({ databaseUrl: app.db.url, security: { rateLimit: false } });
    try {
      expect((await other.gql('{ __typename }')).status).toBe(401);
      const { secret, id } = await createToken(TOKEN_A, { name: 'elsewhere', scopes: ['READ'] });
      let closed: ((e: { code: number }) => void) | undefined;
      const wsClosed = new Promise<{ code: number }>((resolve) => (closed = resolve));
      const client = wsClient(other.url, { connectionParams: bearer(secret), on: { closed: (e: any) => closed?.(e) } } as any);
      const ws = subscribeWs(other.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id: sessionA }, client);
      await ws.count(1);
      expect((await other.gql('{ __typename }', undefined, bearer(secret))).status).toBe(200);

      await as(TOKEN_A)(REVOKE, { id });
      expect((await wsClosed).code).toBe(4401);
      expect((await other.gql('{ __typename }', undefined, bearer(secret))).status).toBe(401);
      await client.dispose();
    } finally {
      await other.close();
    }
  });
});

describe('the cap on live tokens per tenant', () => {
  it('refuses a token past the cap with a clear BAD_USER_INPUT, counts only live ones, and holds under concurrent creations', async () => {
    const CAP = 3;
    const capped = await startTestApp({
      databaseUrl: app.db.url,
      security: {
        apiTokens: new Map([
          ['gamma-bootstrap-0123456789abcdef', 'gamma'],
          ['delta-bootstrap-0123456789abcdef', 'delta'],
        ]),
        rateLimit: false,
        maxApiTokensPerTenant: CAP,
      },
    });
    const admin = 'gamma-bootstrap-0123456789abcdef';
    try {
      const made = [];
      for (let i = 0; i < CAP; i++) made.push(await createToken(admin, { name: `t${i}`, scopes: ['READ'] }, capped));
      const over = await capped.gql(CREATE, { input: { name: 'one too many', scopes: ['READ'] } }, bearer(admin));
      expect(over.data).toBeNull();
      expect(over.errors).toEqual([
        expect.objectContaining({
          message: `this tenant has ${CAP} live API tokens, its limit: revoke one (revokeApiToken) or let one expire first`,
          extensions: { code: 'BAD_USER_INPUT', limit: CAP },
        }),
      ]);
      // Another tenant has its own count.
      await createToken('delta-bootstrap-0123456789abcdef', { name: 'delta', scopes: ['READ'] }, capped);

      // A revoked token frees its place; concurrent creations for the last place: exactly one gets it.
      expect((await capped.gql(REVOKE, { id: made[0].id }, bearer(admin))).errors).toBeUndefined();
      const racing = await Promise.all(
        Array.from({ length: 5 }, (_, i) => capped.gql(CREATE, { input: { name: `race${i}`, scopes: ['READ'] } }, bearer(admin))),
      );
      expect(racing.filter((r) => !r.errors).length).toBe(1);
      expect(racing.filter((r) => r.errors).map(codes)).toEqual(Array(4).fill(['BAD_USER_INPUT']));
      const listed = (await capped.gql(LIST, undefined, bearer(admin))).data.apiTokens;
      expect(listed.filter((t: { status: string }) => t.status === 'ACTIVE')).toHaveLength(CAP);

      // An expired token frees its place too.
      const revokedAll = await Promise.all(
        listed
          .filter((t: { status: string }) => t.status === 'ACTIVE')
          .slice(1)
          .map((t: { id: string }) => capped.gql(REVOKE, { id: t.id }, bearer(admin))),
      );
      expect(revokedAll.every((r) => !r.errors)).toBe(true);
      await createToken(admin, { name: 'short-lived', scopes: ['READ'], expiresAt: new Date(Date.now() + 1500).toISOString() }, capped);
      await createToken(admin, { name: 'filler', scopes: ['READ'] }, capped);
      expect(codes(await capped.gql(CREATE, { input: { name: 'waits', scopes: ['READ'] } }, bearer(admin)))).toEqual(['BAD_USER_INPUT']);
      await waitFor(async () => !(await capped.gql(CREATE, { input: { name: 'after expiry', scopes: ['READ'] } }, bearer(admin))).errors, {
        what: 'a place freed by the expiry',
        intervalMs: 250,
      });
    } finally {
      await capped.close();
    }
  });
});
