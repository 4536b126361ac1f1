// Where a token's bytes, or anything computed from them alone, may end up
// (docs/operations.md "API tokens"): an environment token is chosen by the
// operator and may be as short as 16 characters, so its unsalted digest (even a
// prefix of it) in a session's log is an offline guessing oracle for anyone who
// reads that log — a read-only token of the tenant, or whoever is handed an
// exported recording. A decision's `by` names the token without it.
import { createHash } from 'node:crypto';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeSse, subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

// A weak operator token: 16 characters from a guessable pattern.
const WEAK = 'alpha-admin-0042';
const OTHER = 'beta-token-0123456789abcdef0';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

let app: TestApp;
/** Everything the service logged: messages, errors with every property, fields. */
const logged: string[] = [];
beforeAll(async () => {
  app = await startTestApp({
    approvalTools: ['note_write'],
    log: (msg, err, fields) => void logged.push(msg, inspect(err, { depth: 8, showHidden: true }), inspect(fields, { depth: 8 })),
    security: {
      rateLimit: false,
      authFailures: false,
      apiTokens: new Map([
        [OTHER, 'beta'],
        [WEAK, 'alpha'],
      ]),
    },
  });
});
afterAll(() => app?.close());

describe("an environment token's digest", () => {
  it('is nowhere in the log a read token reads or in an exported recording; `by` still tells which token decided', async () => {
    const as = (token: string) => (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, bearer(token));
    const admin = as(WEAK);
    const id = (await admin('mutation { createSession(input: { title: "approve me" }) { id } }')).data.createSession.id as string;
    await admin('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
      i: { sessionId: id, text: '!call note_write {"key": "k", "value": "v"}' },
    });
    await app.services.host.idle();
    const waiting = await admin('query($id: ID!) { session(id: $id) { pendingApprovals { callId } } }', { id });
    const approved = await admin('mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { id } }', {
      i: { sessionId: id, callId: waiting.data.session.pendingApprovals[0].callId },
    });
    expect(approved.errors).toBeUndefined();
    await app.services.host.idle();

    // The attacker: a read-only token of the tenant, and whoever is handed its export.
    const created = await admin('mutation($i: CreateApiTokenInput!) { createApiToken(input: $i) { secret } }', { i: { name: 'viewer', scopes: ['READ'] } });
    const reader = as(created.data.createApiToken.secret as string);
    const read = await reader('query($id: ID!) { session(id: $id) { recording events(first: 100) { edges { node { type data } } } } }', { id });
    expect(read.errors).toBeUndefined();
    const decision = read.data.session.events.edges.find((e: { node: { type: string } }) => e.node.type === 'tool/approval').node.data;
    const seen = JSON.stringify(read.data);

    // What the old `by` (env-token:<12 hex of its sha-256>) gave away: a guess checked offline in nanoseconds.
    const digest = sha256(WEAK);
    const guessed = Array.from({ length: 10_000 }, (_, n) => `alpha-admin-${String(n).padStart(4, '0')}`).find((g) => seen.includes(sha256(g).slice(0, 12)));
    expect(guessed).toBeUndefined();
    for (let at = 0; at + 8 <= digest.length; at++) expect(seen).not.toContain(digest.slice(at, at + 8));
    expect(seen).not.toContain(WEAK);
    // The decision still names an environment token, by its place in FORKLINE_API_TOKENS (the second).
    expect(decision.by).toBe('env-token:2');
  });
});

/** A graphql-ws connection_init with this authorization: the close code and reason the socket ends with. */
function connectWs(authorization: unknown, url = app.url): Promise<{ code: number; reason: string }> {
  const ws = new WebSocket(url.replace(/^http/, 'ws'), 'graphql-transport-ws');
  ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization } })));
  ws.on('message', (m) => {
    if (JSON.parse(String(m)).type === 'connection_ack') ws.close(1000, 'acked');
  });
  return new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: String(reason) })));
}

describe('a stored token sent wrong, or after its revocation', () => {
  it('is refused at every door, and neither it nor its digest is in any answer, log line or /metrics', async () => {
    const created = await app.gql(
      'mutation($i: CreateApiTokenInput!) { createApiToken(input: $i) { secret token { id } } }',
      { i: { name: 'bot', scopes: ['WRITE'] } },
      bearer(WEAK),
    );
    const secret = created.data.createApiToken.secret as string;
    const digest = sha256(secret);
    const seen: string[] = [];
    const base = app.url.replace(/\/graphql$/, '');
    const session = (await app.gql('mutation { createSession(input: { title: "t" }) { id } }', {}, bearer(secret))).data.createSession.id as string;

    // The scheme and the token, bent: only `Bearer <token>` (any case of the scheme) is a credential.
    const refusedHeaders = [
      `Basic ${secret}`,
      `Token ${secret}`,
      secret,
      `Bearer ${secret}x`,
      `Bearer ${secret.toUpperCase()}`,
      `Bearer ${secret} ${secret}`,
      `Bearer ${secret.slice(0, -1)}`,
    ];
    for (const authorization of refusedHeaders) {
      const res = await fetch(app.url, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: '{"query":"{ __typename }"}' });
      seen.push(await res.text());
      expect(res.status, authorization).toBe(401);
    }
    for (const authorization of [`bearer ${secret}`, `BEARER  ${secret}`]) {
      const res = await fetch(app.url, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: '{"query":"{ __typename }"}' });
      expect(res.status, authorization).toBe(200);
    }
    // Over graphql-ws the value is any JSON: a trailing NUL, a zero-width space, look-alike letters, a non-string.
    const lookAlike = secret.replace(/[a-z]/, (c) => String.fromCodePoint(c.codePointAt(0)! - 0x61 + 0xff41)); // fullwidth
    for (const authorization of [
      `Bearer ${secret}\u0000`,
      `Bearer ${secret}\u200b`,
      `Bearer ${lookAlike}`,
      `Bearer ${secret.normalize('NFKD')}x`,
      [`Bearer ${secret}`],
      { token: secret },
    ]) {
      const closed = await connectWs(authorization);
      seen.push(closed.reason);
      expect(closed.code, JSON.stringify(authorization)).toBe(4401);
    }
    expect((await connectWs(`Bearer ${secret}`)).code).toBe(1000);

    // In a URL it is no credential at any door that reads one.
    const inUrl = [
      `/recordings?session=${session}&token=${secret}`,
      `/sessions/${session}/events?token=${secret}`,
      `/sessions/${session}/events?access_token=${secret}`,
      `/graphql?query=${encodeURIComponent('{ __typename }')}&token=${secret}`,
    ];
    for (const path of inUrl) {
      const res = await fetch(base + path);
      seen.push(await res.text());
      expect(res.status, path).toBe(401);
    }

    // Revoked: its next request and socket are refused the same way.
    await app.gql('mutation($id: ID!) { revokeApiToken(id: $id) { id } }', { id: created.data.createApiToken.token.id }, bearer(WEAK));
    const after = await fetch(app.url, {
      method: 'POST',
      headers: { ...bearer(secret), 'content-type': 'application/json' },
      body: '{"query":"{ __typename }"}',
    });
    seen.push(await after.text());
    expect(after.status).toBe(401);
    const revoked = await connectWs(`Bearer ${secret}`);
    seen.push(revoked.reason);
    expect(revoked.code).toBe(4401);

    seen.push(await (await fetch(`${base}/metrics`)).text(), ...logged);
    const all = seen.join('\n');
    expect(all).not.toContain(secret.slice(4, 16));
    for (let at = 0; at + 8 <= digest.length; at++) expect(all).not.toContain(digest.slice(at, at + 8));
  });
});

describe("the dashboard's ?token= link", () => {
  it('is answered with no-store and no-referrer: the token is in the URL, which no cache keeps and no link target is sent', async () => {
    const base = app.url.replace(/\/graphql$/, '');
    for (const path of [`/?token=${WEAK}`, `/sessions/ses_1?token=${WEAK}`]) {
      const res = await fetch(base + path);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type'), path).toMatch(/^text\/html/);
      expect(res.headers.get('cache-control'), path).toMatch(/\bno-store\b/);
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
    }
    // Without one the shell stays revalidated, not kept from the cache.
    expect((await fetch(`${base}/`)).headers.get('cache-control')).toBe('no-cache');
  });
});

describe('a stored token that expires while its streams are open', () => {
  it('closes its graphql-ws socket (4401) and ends its SSE stream, with nobody revoking it', async () => {
    const expiresAt = new Date(Date.now() + 2000).toISOString();
    const created = await app.gql(
      'mutation($i: CreateApiTokenInput!) { createApiToken(input: $i) { secret } }',
      { i: { name: 'short', scopes: ['READ'], expiresAt } },
      bearer(WEAK),
    );
    const secret = created.data.createApiToken.secret as string;
    const session = (await app.gql('mutation { createSession(input: { title: "watched" }) { id } }', {}, bearer(WEAK))).data.createSession.id as string;
    const EVENTS = 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }';
    let closed: (e: { code: number; reason: string }) => void = () => {};
    const wsClosed = new Promise<{ code: number; reason: string }>((resolve) => (closed = resolve));
    const client = wsClient(app.url, { connectionParams: bearer(secret), on: { closed: (e: any) => closed(e) } } as any);
    const ws = subscribeWs(app.url, EVENTS, { id: session }, client);
    const sse = subscribeSse(app.url, EVENTS, { id: session }, bearer(secret));
    await Promise.all([ws.count(1), sse.count(1)]);
    // Open past its expiry: the next verification (every second) finds it gone.
    expect(await wsClosed).toMatchObject({ code: 4401, reason: expect.stringMatching(/revoked or expired/) });
    await waitFor(() => sse.errors.length > 0 || sse.completed, { what: 'the SSE stream to end', timeoutMs: 15_000 });
    expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(expiresAt));
    await client.dispose();
  }, 30_000);
});
