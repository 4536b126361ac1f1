// One token of a tenant, as an attacker holding it (a leaked CI bot's token,
// or a buggy bot) would use it: it opens streams through every door until
// its own cap, and the tenant's other tokens (its dashboards) keep theirs.
// Per-tenant caps alone let one token take every place of its tenant.
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { tokenDigest } from '../../src/store/api-tokens.ts';

const ADMIN = 'alpha-bootstrap-0123456789abcdef';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const EVENTS = 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }';
const CREATE = 'mutation($input: CreateApiTokenInput!) { createApiToken(input: $input) { secret } }';
/** Caps small enough to fill: the tenant's, and each token's within it. */
const TENANT_CAPS = { connections: 4, subscriptions: 6 };
const TOKEN_CAPS = { connections: 2, subscriptions: 3 };

type Outcome = { connected: true } | { connected: false; code: number; reason: string };

/** A graphql-ws connection opened at once: acknowledged, or how it was closed. */
function connect(url: string, token: string) {
  let settle: ((o: Outcome) => void) | undefined;
  const outcome = new Promise<Outcome>((r) => (settle = r));
  const client = createClient({
    url: url.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    lazy: false,
    retryAttempts: 0,
    connectionParams: bearer(token),
    onNonLazyError: () => {},
    on: {
      connected: () => settle!({ connected: true }),
      closed: (e: any) => settle!({ connected: false, code: e.code, reason: e.reason }),
    },
  });
  return { client, outcome };
}

let app: TestApp;
let session: string;
let bot: string;
let dashboard: string;
const held = (token: string) => app.server.tenantConnections!.heldByToken(tokenDigest(token));
/** A value of forkline_rejected_requests_total (0 when absent). */
async function rejected(reason: string): Promise<number> {
  const text = await (await fetch(app.url.replace(/\/graphql$/, '/metrics'))).text();
  const line = text.split('\n').find((l) => l.startsWith(`forkline_rejected_requests_total{reason="${reason}"}`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

beforeAll(async () => {
  app = await startTestApp({
    security: { apiTokens: new Map([[ADMIN, 'alpha']]), rateLimit: false, connectionCaps: TENANT_CAPS, tokenConnectionCaps: TOKEN_CAPS },
  });
  const as = (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, bearer(ADMIN));
  session = (await as('mutation { createSession(input: { title: "dashboards" }) { id } }')).data.createSession.id;
  // The bot may write (its AG-UI runs and /chat answers); the dashboard only reads.
  bot = (await as(CREATE, { input: { name: 'ci-bot', scopes: ['WRITE'] } })).data.createApiToken.secret;
  dashboard = (await as(CREATE, { input: { name: 'dashboard', scopes: ['READ'] } })).data.createApiToken.secret;
});
afterAll(() => app?.close());
afterEach(() =>
  waitFor(() => Object.values(app.server.tenantConnections!.heldBy('alpha')).every((n) => n === 0), { what: 'everything released', timeoutMs: 10_000 }),
);

describe('a per-token cap under the tenant cap', () => {
  it("stops one token's sockets and SSE streams at its cap (4429 / 429 TOO_MANY_CONNECTIONS); the tenant's dashboard still connects; counted in /metrics", async () => {
    const before = { token: await rejected('token_connections'), tenant: await rejected('tenant_connections') };
    const sockets = [connect(app.url, bot), connect(app.url, bot)];
    for (const s of sockets) expect(await s.outcome).toEqual({ connected: true });
    // The attack: the bot keeps opening. Under the tenant cap alone it would take all four places.
    const third = connect(app.url, bot);
    sockets.push(third);
    const refused = await third.outcome;
    expect(refused).toMatchObject({ connected: false, code: 4429 });
    expect((refused as { reason: string }).reason).toMatch(/^TOO_MANY_CONNECTIONS: this API token has 2 open WebSocket connections and SSE streams/);
    const sse = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(bot) },
      body: JSON.stringify({ query: EVENTS, variables: { id: session } }),
    });
    expect(sse.status).toBe(429);
    const body = JSON.parse(
      (await sse.text())
        .split('\n')
        .find((l) => l.startsWith('data:'))!
        .slice(5),
    );
    expect(body.errors[0]).toMatchObject({ extensions: { code: 'TOO_MANY_CONNECTIONS' }, message: expect.stringMatching(/^this API token has 2 /) });
    expect(held(bot)).toEqual({ connections: 2, subscriptions: 0 });

    // The dashboard's token has its own places; the tenant's cap still holds over all its tokens.
    const mine = [connect(app.url, dashboard), connect(app.url, dashboard)];
    sockets.push(...mine);
    for (const s of mine) expect(await s.outcome).toEqual({ connected: true });
    const admin = connect(app.url, ADMIN);
    sockets.push(admin);
    const full = await admin.outcome;
    expect(full).toMatchObject({ connected: false, code: 4429 });
    expect((full as { reason: string }).reason).toMatch(/^TOO_MANY_CONNECTIONS: this tenant has 4 /);

    expect(await rejected('token_connections')).toBe(before.token + 2);
    expect(await rejected('tenant_connections')).toBe(before.tenant + 1);
    await Promise.all(sockets.map((s) => s.client.dispose()));
    await waitFor(() => held(bot).connections === 0 && held(dashboard).connections === 0, { what: 'the sockets released' });
  });

  it("stops one token's subscriptions on one socket at its cap (TOO_MANY_SUBSCRIPTIONS); the dashboard still subscribes", async () => {
    const botSocket = wsClient(app.url, { connectionParams: bearer(bot) });
    const subs = Array.from({ length: TOKEN_CAPS.subscriptions + 1 }, () => subscribeWs(app.url, EVENTS, { id: session }, botSocket));
    await waitFor(() => subs.every((s) => s.items.length > 0 || s.errors.length > 0), { what: 'every answer' });
    const refused = subs.filter((s) => s.errors.length > 0);
    expect(refused).toHaveLength(1);
    expect(JSON.stringify(refused[0].errors)).toContain('TOO_MANY_SUBSCRIPTIONS');
    expect(JSON.stringify(refused[0].errors)).toContain('this API token has 3 active subscriptions');
    expect(held(bot)).toEqual({ connections: 1, subscriptions: 3 });

    const dashSocket = wsClient(app.url, { connectionParams: bearer(dashboard) });
    const watching = Array.from({ length: 3 }, () => subscribeWs(app.url, EVENTS, { id: session }, dashSocket));
    await Promise.all(watching.map((s) => s.count(1)));
    await botSocket.dispose();
    await dashSocket.dispose();
  });

  it("counts every stream door per token: AG-UI runs, /chat answers, GET subscriptions, recording downloads; the dashboard's SSE still opens", async () => {
    const base = app.url.replace(/\/graphql$/, '');
    const aborts: AbortController[] = [];
    const slowRun = (runId: string) => {
      const abort = new AbortController();
      aborts.push(abort);
      return fetch(`${base}/agui`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(bot) },
        body: JSON.stringify({
          threadId: `token-caps-${runId}`,
          runId,
          state: {},
          messages: [{ id: `m-${runId}`, role: 'user', content: `${'word '.repeat(20)}\n!slow 1000` }],
          tools: [],
          context: [],
          forwardedProps: {},
        }),
        signal: abort.signal,
      });
    };
    try {
      // The bot holds its two places with runs that stream for a while (the scripted model waits between words).
      expect((await slowRun('one')).status).toBe(200);
      expect((await slowRun('two')).status).toBe(200);
      await waitFor(() => held(bot).connections === 2, { what: "the bot's runs counted" });

      const answers: Array<[string, Response]> = [
        ['AG-UI run', await slowRun('three')],
        [
          '/chat answer',
          await fetch(`${base}/chat`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', ...bearer(bot) },
            body: JSON.stringify({
              id: 'token-caps-chat',
              trigger: 'submit-message',
              messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
            }),
          }),
        ],
        [
          'GET subscription over SSE',
          await fetch(`${app.url}?query=${encodeURIComponent(EVENTS)}&variables=${encodeURIComponent(JSON.stringify({ id: session }))}`, {
            headers: { accept: 'text/event-stream', ...bearer(bot) },
          }),
        ],
        ['recording download', await fetch(`${base}/recordings?session=${encodeURIComponent(session)}`, { headers: bearer(bot) })],
      ];
      for (const [door, res] of answers) {
        const text = await res.text();
        expect(res.status, door).toBe(429);
        expect(text, door).toContain('TOO_MANY_CONNECTIONS');
        expect(text, door).toContain('this API token has 2 open');
      }
      expect(held(bot)).toEqual({ connections: 2, subscriptions: 2 });
      // A subscription over multipart HTTP is not served at all (406), whoever asks.
      const multipart = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'multipart/mixed', ...bearer(dashboard) },
        body: JSON.stringify({ query: EVENTS, variables: { id: session } }),
      });
      expect(multipart.status).toBe(406);
      await multipart.body?.cancel();

      // The dashboard's token is not locked out of its tenant by the bot.
      const abort = new AbortController();
      aborts.push(abort);
      const mine = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(dashboard) },
        body: JSON.stringify({ query: EVENTS, variables: { id: session } }),
        signal: abort.signal,
      });
      expect(mine.status).toBe(200);
      // A download the dashboard reads whole frees its place.
      const download = await fetch(`${base}/recordings?session=${encodeURIComponent(session)}`, { headers: bearer(dashboard) });
      expect(download.status).toBe(200);
      expect(await download.text()).toContain('forkline.recording');
    } finally {
      for (const a of aborts) a.abort();
    }
    await waitFor(() => held(bot).connections === 0 && held(dashboard).connections === 0, { what: 'every stream released' });
  });
});

describe('the default per-token cap', () => {
  it("refuses a token's 26th socket (the tenant's cap is 100); another token of the tenant still connects", async () => {
    const plain = await startTestApp({ databaseUrl: app.db.url, security: { apiTokens: new Map([[ADMIN, 'alpha']]), rateLimit: false } });
    const open: ReturnType<typeof connect>[] = [];
    try {
      for (let i = 0; i < 25; i++) open.push(connect(plain.url, bot));
      expect((await Promise.all(open.map((c) => c.outcome))).every((o) => o.connected)).toBe(true);
      const extra = connect(plain.url, bot);
      open.push(extra);
      const refused = await extra.outcome;
      expect(refused).toMatchObject({ connected: false, code: 4429 });
      expect((refused as { reason: string }).reason).toMatch(/this API token has 25 /);
      const other = connect(plain.url, dashboard);
      open.push(other);
      expect(await other.outcome).toEqual({ connected: true });
    } finally {
      await Promise.all(open.map((c) => c.client.dispose()));
      await plain.close();
    }
  });
});

describe('a token that expires while its streams are open', () => {
  it('closes its graphql-ws socket (4401), ends its SSE subscription and cuts its AG-UI run; its next request is a 401', async () => {
    const base = app.url.replace(/\/graphql$/, '');
    // Long enough to open everything on a loaded machine (6 s left little room); each stream is checked open before the expiry.
    const expiresAt = new Date(Date.now() + 12_000);
    // Two tokens of the same expiry, each within its cap of 2 connections: a reader (a socket, an SSE stream) and a writer (an AG-UI run).
    const expiring = async (name: string, scope: string): Promise<string> =>
      (await app.gql(CREATE, { input: { name, scopes: [scope], expiresAt: expiresAt.toISOString() } }, bearer(ADMIN))).data.createApiToken.secret;
    const token = await expiring('short-lived reader', 'READ');
    const writer = await expiring('short-lived bot', 'WRITE');

    let wsClosed: ((e: { code: number; reason: string }) => void) | undefined;
    const closed = new Promise<{ code: number; reason: string }>((r) => (wsClosed = r));
    const client = createClient({
      url: app.url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: bearer(token),
      on: { closed: (e: any) => wsClosed!(e) },
    });
    const ws = subscribeWs(app.url, EVENTS, { id: session }, client);
    const sseAbort = new AbortController();
    const sse = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(token) },
      body: JSON.stringify({ query: EVENTS, variables: { id: session } }),
      signal: sseAbort.signal,
    });
    const run = await fetch(`${base}/agui`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...bearer(writer) },
      body: JSON.stringify({
        threadId: 'token-expiry',
        runId: 'expiring',
        state: {},
        // 40 s of words: ended within the 20 s this test waits only when the expiry cuts it.
        messages: [{ id: 'm-expiring', role: 'user', content: `${'word '.repeat(40)}\n!slow 1000` }],
        tools: [],
        context: [],
        forwardedProps: {},
      }),
    });
    expect([sse.status, run.status]).toEqual([200, 200]);
    await ws.count(1);
    const tenantHeld = () => app.server.tenantConnections!.heldBy('alpha').connections;
    await waitFor(() => tenantHeld() === 3, { what: 'three streams open' });
    expect(Date.now()).toBeLessThan(expiresAt.getTime());

    /** Reads a stream to its end: true when the server ended it (cleanly or cut) within `ms`, false when the test gave up. */
    const ends = async (res: Response, ms: number) => {
      const reader = res.body!.getReader();
      let gaveUp = false;
      const deadline = setTimeout(() => ((gaveUp = true), void reader.cancel('still open')), ms);
      try {
        while (!(await reader.read()).done);
      } catch {
        // cut
      } finally {
        clearTimeout(deadline);
      }
      return !gaveUp;
    };
    const [wsClose, sseEnded, runEnded] = await Promise.all([closed, ends(sse, 20_000), ends(run, 20_000)]);
    expect(wsClose.code).toBe(4401);
    expect(wsClose.reason).toMatch(/revoked or expired/);
    expect([sseEnded, runEnded]).toEqual([true, true]);
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt.getTime());
    expect((await app.gql('{ __typename }', undefined, bearer(token))).status).toBe(401);
    expect((await app.gql('{ __typename }', undefined, bearer(writer))).status).toBe(401);
    await waitFor(() => tenantHeld() === 0, { what: "the expired token's places released" });
    sseAbort.abort();
    await client.dispose();
  });
});

describe('a token anywhere but the Authorization header (or connection_init)', () => {
  it('is no credential: a GET subscription over SSE with ?token= or ?access_token= is a 401, a WebSocket URL with ?token= a 4401', async () => {
    const query = `query=${encodeURIComponent(EVENTS)}&variables=${encodeURIComponent(JSON.stringify({ id: session }))}`;
    for (const param of ['token', 'access_token', 'authorization']) {
      const res = await fetch(`${app.url}?${query}&${param}=${encodeURIComponent(param === 'authorization' ? `Bearer ${bot}` : bot)}`, {
        headers: { accept: 'text/event-stream' },
      });
      const text = await res.text();
      expect(res.status, param).toBe(401);
      expect(text, param).toContain('UNAUTHENTICATED');
      expect(text, param).not.toContain('sessionEvents');
    }
    const ws = new WebSocket(`${app.url.replace(/^http/, 'ws')}?token=${encodeURIComponent(bot)}`, 'graphql-transport-ws');
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.once('open', () => ws.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    expect(await closed).toBe(4401);
  });
});

describe("another tenant's session at the download door", () => {
  it('is not there for a stored token of this tenant: GET /recordings is 404 SESSION_NOT_FOUND, as for an id no session has, and nothing of it is sent', async () => {
    const theirs = (await app.services.store.createSession({ tenant: 'beta' }, { title: 'beta secret plans' })).id;
    const base = app.url.replace(/\/graphql$/, '');
    const answers = await Promise.all(
      [theirs, `ses_${'0'.repeat(32)}`].map(async (id) => {
        const res = await fetch(`${base}/recordings?session=${encodeURIComponent(id)}`, { headers: bearer(bot) });
        return { status: res.status, text: (await res.text()).replace(id, '<id>') };
      }),
    );
    expect(answers[0]).toEqual(answers[1]);
    expect(answers[0].status).toBe(404);
    expect(answers[0].text).toContain('SESSION_NOT_FOUND');
    expect(answers[0].text).not.toContain('beta secret plans');
  });
});
