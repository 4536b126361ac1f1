// Connections, through the real doors: per-tenant caps on
// WebSocket sockets, SSE streams and subscriptions; failed token attempts
// throttled per client address (HTTP and WebSocket alike); connection_init
// counted against the token's rate; idle HTTP connections and WebSockets that
// never send connection_init cut off.
import http from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';
import { addressKey } from '../../src/http/auth-throttle.ts';

const TOKEN_A = 'alpha-token-0123456789abcdef';
const TOKEN_B = 'beta-token-0123456789abcdef0';
const A = { authorization: `Bearer ${TOKEN_A}` };
const B = { authorization: `Bearer ${TOKEN_B}` };
const TOKENS = new Map([
  [TOKEN_A, 'alpha'],
  [TOKEN_B, 'beta'],
]);
/** The default number of failed attempts an address may make a minute (docs/operations.md). */
const AUTH_FAILURES = 20;
const EVENTS = 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }';

type Outcome = { connected: true } | { connected: false; code: number; reason: string };

/** A WebSocket class whose connections leave from `localAddress` (another client address on loopback). */
const wsFrom = (localAddress: string) =>
  class extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { localAddress });
    }
  };

/** Opens a graphql-ws connection (connection_init with `headers`): acknowledged, or how it was closed. */
function connect(url: string, headers: Record<string, string>, from?: string) {
  let closed: ((o: Outcome) => void) | undefined;
  const outcome = new Promise<Outcome>((r) => (closed = r));
  const client = createClient({
    url: url.replace(/^http/, 'ws'),
    webSocketImpl: from ? wsFrom(from) : WebSocket,
    lazy: false,
    retryAttempts: 0,
    connectionParams: headers,
    onNonLazyError: () => {},
    on: {
      connected: () => closed!({ connected: true }),
      closed: (e: any) => closed!({ connected: false, code: e.code, reason: e.reason }),
    },
  });
  return { client, outcome };
}

/** A POST over SSE held open: its status, and the (first) result when it was refused. */
async function openSse(url: string, headers: Record<string, string>, query: string, variables: Record<string, unknown>) {
  const abort = new AbortController();
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query, variables }),
    signal: abort.signal,
  });
  const text = res.status === 200 ? undefined : await res.text();
  const data = text?.split('\n').find((l) => l.startsWith('data:'));
  const body = text === undefined ? undefined : JSON.parse(data ? data.slice(5) : text);
  return { status: res.status, body, close: () => abort.abort() };
}

/** POST { __typename } from a client address of our choosing (loopback: 127.0.0.0/8). */
function postFrom(url: string, localAddress: string, headers: Record<string, string>) {
  return new Promise<{ status: number; retryAfter?: string; body: any }>((resolve, reject) => {
    const req = http.request(url, { method: 'POST', localAddress, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end('{"query":"{ __typename }"}');
  });
}

describe('per-tenant caps on connections and subscriptions', () => {
  let app: TestApp;
  let sessionA: string;
  let sessionB: string;

  beforeAll(async () => {
    app = await startTestApp({ security: { apiTokens: TOKENS, rateLimit: false, connectionCaps: { connections: 3, subscriptions: 5 } } });
    const session = async (who: Record<string, string>) => {
      const id = (await app.gql('mutation { createSession(input: { title: "caps" }) { id } }', undefined, who)).data.createSession.id;
      await app.gql('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "caps!") { id } }', { id }, who);
      return id as string;
    };
    sessionA = await session(A);
    sessionB = await session(B);
  });
  afterAll(() => app?.close());
  // Each test starts with nothing held.
  afterEach(() =>
    waitFor(() => ['alpha', 'beta'].every((t) => Object.values(app.server.tenantConnections!.heldBy(t)).every((n) => n === 0)), {
      what: 'everything released',
    }),
  );

  it("refuses a tenant's WebSocket past its cap at connection_init (4429 TOO_MANY_CONNECTIONS) and an SSE stream with 429; others unaffected; a closed socket frees its place", async () => {
    const open = [connect(app.url, A), connect(app.url, A), connect(app.url, A)];
    for (const c of open) expect(await c.outcome).toEqual({ connected: true });
    const fourth = connect(app.url, A);
    const refused = await fourth.outcome;
    expect(refused).toMatchObject({ connected: false, code: 4429 });
    expect((refused as { reason: string }).reason).toMatch(/^TOO_MANY_CONNECTIONS: this tenant has 3 open WebSocket connections and SSE streams/);
    await fourth.client.dispose();

    const sse = await openSse(app.url, A, EVENTS, { id: sessionA });
    expect(sse.status).toBe(429);
    expect(sse.body.errors[0].extensions.code).toBe('TOO_MANY_CONNECTIONS');

    const other = connect(app.url, B);
    expect(await other.outcome).toEqual({ connected: true });
    await other.client.dispose();

    await open.pop()!.client.dispose();
    await waitFor(() => app.server.tenantConnections!.heldBy('alpha').connections === 2, { what: 'the socket released' });
    // SSE streams are connections too: the third place, then none.
    const stream = await openSse(app.url, A, EVENTS, { id: sessionA });
    expect(stream.status).toBe(200);
    const refusedToo = connect(app.url, A);
    expect(await refusedToo.outcome).toMatchObject({ connected: false, code: 4429 });
    await refusedToo.client.dispose();
    stream.close();
    const again = await waitFor(
      async () => {
        const c = connect(app.url, A);
        const o = await c.outcome;
        if (o.connected) return c;
        await c.client.dispose();
        return undefined;
      },
      { what: 'a place freed by the closed socket', timeoutMs: 5000 },
    );
    open.push(again);
    await Promise.all(open.map((c) => c.client.dispose()));
    await waitFor(() => app.server.tenantConnections!.heldBy('alpha').connections === 0, { what: 'every socket released' });
  });

  it("refuses a tenant's subscription past its cap (TOO_MANY_SUBSCRIPTIONS over WebSocket; 429 over SSE); completing one frees its place, closing the socket frees all", async () => {
    const client = wsClient(app.url, { connectionParams: A });
    const subs = Array.from({ length: 6 }, () => subscribeWs(app.url, EVENTS, { id: sessionA }, client));
    // Each accepted subscription starts with the log's catch-up; the refused one answers an error.
    await waitFor(() => subs.filter((s) => s.items.length > 0 || s.errors.length > 0).length === 6, { what: 'six answers' });
    const refused = subs.filter((s) => s.errors.length > 0);
    expect(refused).toHaveLength(1);
    expect(JSON.stringify(refused[0].errors)).toContain('TOO_MANY_SUBSCRIPTIONS');
    expect(subs.filter((s) => s.items.length > 0)).toHaveLength(5);

    const sse = await openSse(app.url, A, EVENTS, { id: sessionA });
    expect(sse.status).toBe(429);
    expect(sse.body.errors[0].extensions.code).toBe('TOO_MANY_SUBSCRIPTIONS');
    const otherTenant = subscribeWs(app.url, EVENTS, { id: sessionB }, wsClient(app.url, { connectionParams: B }));
    await otherTenant.count(1);
    await otherTenant.close();

    await subs.find((s) => s.items.length > 0)!.close();
    await waitFor(
      async () => {
        const s = subscribeWs(app.url, EVENTS, { id: sessionA }, client);
        await waitFor(() => s.items.length > 0 || s.errors.length > 0, { what: 'an answer' });
        if (s.items.length) return true;
        await s.close();
        return false;
      },
      { what: 'a place freed by the completed subscription', timeoutMs: 5000 },
    );

    await client.dispose();
    await waitFor(() => app.server.tenantConnections!.heldBy('alpha').subscriptions === 0, { what: 'every subscription released' });
    await waitFor(
      async () => {
        const next = wsClient(app.url, { connectionParams: A });
        const fresh = Array.from({ length: 5 }, () => subscribeWs(app.url, EVENTS, { id: sessionA }, next));
        await waitFor(() => fresh.every((s) => s.items.length > 0 || s.errors.length > 0), { what: 'five answers' });
        const ok = fresh.every((s) => s.errors.length === 0);
        await next.dispose();
        return ok;
      },
      { what: 'every place freed by the closed socket', timeoutMs: 5000 },
    );
  });

  it('counts an AG-UI run as an SSE stream: a connection and a subscription while it runs, 429 TOO_MANY_CONNECTIONS past the cap', async () => {
    const agui = app.url.replace(/\/graphql$/, '/agui');
    const run = (who: Record<string, string>, runId: string, text: string) => {
      const abort = new AbortController();
      const input = {
        threadId: `caps-${runId}`,
        runId,
        state: {},
        messages: [{ id: `m-${runId}`, role: 'user', content: text }],
        tools: [],
        context: [],
        forwardedProps: {},
      };
      const res = fetch(agui, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...who },
        body: JSON.stringify(input),
        signal: abort.signal,
      });
      return { res, abort: () => abort.abort() };
    };
    const held = (tenant: string) => app.server.tenantConnections!.heldBy(tenant);
    // A run that streams for a while (the scripted model waits between words).
    const long = run(A, 'long', `${'word '.repeat(20)}\n!slow 1000`);
    expect((await long.res).status).toBe(200);
    await waitFor(() => held('alpha').connections === 1 && held('alpha').subscriptions === 1, { what: 'the run counted' });
    const sockets = [connect(app.url, A), connect(app.url, A)];
    for (const c of sockets) expect(await c.outcome).toEqual({ connected: true });
    const third = connect(app.url, A);
    expect(await third.outcome).toMatchObject({ connected: false, code: 4429 });
    await third.client.dispose();

    const refused = await run(A, 'refused', 'hello').res;
    expect(refused.status).toBe(429);
    expect((await refused.json()).errors[0]).toMatchObject({
      extensions: { code: 'TOO_MANY_CONNECTIONS' },
      message: expect.stringMatching(/this tenant has 3 open/),
    });
    // Another tenant runs; its run is released when it finishes.
    const other = await run(B, 'other', 'hello').res;
    expect(other.status).toBe(200);
    expect(await other.text()).toContain('RUN_FINISHED');
    await waitFor(() => held('beta').connections === 0, { what: "the other tenant's run released" });

    long.abort();
    await waitFor(() => held('alpha').connections === 2 && held('alpha').subscriptions === 0, { what: 'the aborted run released' });
    const again = await run(A, 'again', 'hello').res;
    expect(again.status).toBe(200);
    expect(await again.text()).toContain('RUN_FINISHED');
    await Promise.all(sockets.map((c) => c.client.dispose()));
  });

  it('counts a /chat answer and its resumed stream as SSE streams: 429 TOO_MANY_CONNECTIONS past the cap, released when they end', async () => {
    const chatUrl = app.url.replace(/\/graphql$/, '/chat');
    const ask = (chatId: string, text: string) => {
      const abort = new AbortController();
      const res = fetch(chatUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...A },
        body: JSON.stringify({ id: chatId, trigger: 'submit-message', messages: [{ id: `u-${chatId}`, role: 'user', parts: [{ type: 'text', text }] }] }),
        signal: abort.signal,
      });
      return { res, abort: () => abort.abort() };
    };
    const held = () => app.server.tenantConnections!.heldBy('alpha');
    await waitFor(() => held().connections === 0, { what: 'nothing held before' });
    // Answers that stream for a while (the scripted model waits between words).
    const slow = `${'word '.repeat(20)}\n!slow 1000`;
    const first = ask('caps-chat-1', slow);
    const second = ask('caps-chat-2', slow);
    expect([(await first.res).status, (await second.res).status]).toEqual([200, 200]);
    const resumeAbort = new AbortController();
    const resumed = await fetch(`${chatUrl}/caps-chat-1/stream`, { headers: A, signal: resumeAbort.signal });
    expect(resumed.status).toBe(200);
    await waitFor(() => held().connections === 3, { what: 'three streams counted' });

    const refused = await ask('caps-chat-3', 'hello').res;
    expect(refused.status).toBe(429);
    expect((await refused.json()).errors[0]).toMatchObject({ extensions: { code: 'TOO_MANY_CONNECTIONS' } });
    // Refused before anything was written: no chat session made, no message sent (no model turn) for it.
    const titles = (await app.gql('{ sessions(first: 100) { edges { node { title } } } }', undefined, A)).data.sessions.edges.map((e: any) => e.node.title);
    expect(titles).toContain('Chat caps-chat-1');
    expect(titles).not.toContain('Chat caps-chat-3');

    first.abort();
    second.abort();
    resumeAbort.abort();
    await waitFor(() => held().connections === 0 && held().subscriptions === 0, { what: 'the streams released' });
    const again = await ask('caps-chat-3', 'hello').res;
    expect(again.status).toBe(200);
    expect(await again.text()).toContain('[DONE]');
  });

  it('releases what an HTTP subscription held when its response ends, also one answered 406', async () => {
    for (let i = 0; i < 8; i++) {
      const res = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json', ...A },
        body: JSON.stringify({ query: EVENTS, variables: { id: sessionA } }),
      });
      await res.text();
      expect(res.status).toBe(406);
    }
    const streams = await Promise.all(Array.from({ length: 3 }, () => openSse(app.url, A, EVENTS, { id: sessionA })));
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    for (const s of streams) s.close();
    await waitFor(() => app.server.tenantConnections!.heldBy('alpha').subscriptions === 0, { what: 'every stream released' });
  });

  it('holds the default caps without configuration: the 101st socket of a tenant is refused (25 from each of four tokens, then a fifth token)', async () => {
    // Each token holds at most 25 (the per-token default, tests/security/token-streams.test.ts): the tenant's 100 take four.
    const alphas = Array.from({ length: 5 }, (_, i) => `alpha-token-${i}-0123456789abcdef`);
    const plain = await startTestApp({ security: { apiTokens: new Map([...TOKENS, ...alphas.map((t) => [t, 'alpha'] as const)]), rateLimit: false } });
    const open: ReturnType<typeof connect>[] = [];
    try {
      for (let i = 0; i < 100; i++) open.push(connect(plain.url, { authorization: `Bearer ${alphas[i % 4]}` }));
      expect((await Promise.all(open.map((c) => c.outcome))).every((o) => o.connected)).toBe(true);
      const extra = connect(plain.url, { authorization: `Bearer ${alphas[4]}` });
      open.push(extra);
      const refused = await extra.outcome;
      expect(refused).toMatchObject({ connected: false, code: 4429 });
      expect((refused as { reason: string }).reason).toMatch(/this tenant has 100 /);
    } finally {
      await Promise.all(open.map((c) => c.client.dispose()));
      await plain.close();
    }
  });
});

describe('operations in flight on one graphql-ws socket, in every mode', () => {
  const cappedAt = (n: number) => `this WebSocket has ${n} operations in flight, its limit (FORKLINE_MAX_OPERATIONS_PER_SOCKET); complete some first`;
  const TOO_MANY = (n: number) => [{ message: cappedAt(n), extensions: { code: 'TOO_MANY_OPERATIONS' } }];
  const answered = (s: { items: unknown[]; errors: unknown[] }) => s.items.length > 0 || s.errors.length > 0;

  it('local mode (no tokens): past the cap an operation is refused TOO_MANY_OPERATIONS, a query too; another socket is not; a completed one frees its place (before: every one ran)', async () => {
    const app = await startTestApp({ security: { maxOperationsPerSocket: 3 } });
    try {
      const id = (await app.ok('mutation { createSession(input: { title: "ops" }) { id } }')).createSession.id as string;
      const client = wsClient(app.url);
      const subs = Array.from({ length: 5 }, () => subscribeWs(app.url, EVENTS, { id }, client));
      await waitFor(() => subs.every(answered), { what: 'five answers' });
      expect(subs.filter((s) => s.items.length > 0)).toHaveLength(3);
      const refused = subs.filter((s) => s.errors.length > 0);
      expect(refused.map((s) => s.errors)).toEqual([[TOO_MANY(3)], [TOO_MANY(3)]]);
      // A query takes a place while it runs, as a subscription does: none is left.
      const query = subscribeWs(app.url, '{ __typename }', {}, client);
      await waitFor(() => answered(query), { what: 'the query answered' });
      expect(query.errors).toEqual([TOO_MANY(3)]);

      const other = subscribeWs(app.url, EVENTS, { id }, wsClient(app.url));
      await other.count(1);
      await other.close();

      await subs.find((s) => s.items.length > 0)!.close();
      await waitFor(
        async () => {
          const s = subscribeWs(app.url, EVENTS, { id }, client);
          await waitFor(() => answered(s), { what: 'an answer' });
          if (s.items.length) return true;
          await s.close();
          return false;
        },
        { what: 'a place freed by the completed subscription', timeoutMs: 5000 },
      );
      await client.dispose();
    } finally {
      await app.close();
    }
  });

  it('holds the default without configuration: one socket runs 250 operations, the 251st is refused (before: a socket started as many as it sent)', async () => {
    const app = await startTestApp();
    try {
      const id = (await app.ok('mutation { createSession(input: { title: "ops" }) { id } }')).createSession.id as string;
      const client = wsClient(app.url);
      const subs = Array.from({ length: 251 }, () => subscribeWs(app.url, EVENTS, { id }, client));
      await waitFor(() => subs.every(answered), { what: '251 answers', timeoutMs: 30_000 });
      expect(subs.filter((s) => s.items.length > 0)).toHaveLength(250);
      expect(subs.filter((s) => s.errors.length > 0).map((s) => s.errors)).toEqual([[TOO_MANY(250)]]);
      await client.dispose();
    } finally {
      await app.close();
    }
  });
});

describe('failed authentication attempts, per client address', () => {
  let app: TestApp;
  beforeAll(async () => {
    // Default throttle (20 failures a minute); per-token rate limit off so only the throttle answers 429.
    app = await startTestApp({ security: { apiTokens: TOKENS, rateLimit: false } });
  });
  afterAll(() => app?.close());

  it('answers 429 RATE_LIMITED with Retry-After after 20 bad tokens from one address, to every credential from it; other addresses unaffected', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < AUTH_FAILURES + 5; i++) {
      statuses.push((await postFrom(app.url, '127.0.0.2', { authorization: `Bearer wrong-token-number-${i}-xxxxxxxx` })).status);
    }
    expect(statuses.slice(0, AUTH_FAILURES)).toEqual(Array(AUTH_FAILURES).fill(401));
    expect(statuses.slice(AUTH_FAILURES)).toEqual([429, 429, 429, 429, 429]);

    const blocked = await postFrom(app.url, '127.0.0.2', A);
    expect(blocked.status).toBe(429);
    expect(blocked.body.errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(blocked.body.errors[0].message).toMatch(/too many failed authentication attempts from this address/);
    expect(Number(blocked.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(blocked.retryAfter)).toBeLessThanOrEqual(60);

    // The same address over WebSocket: connection_init refused with 4429.
    const ws = connect(app.url, A, '127.0.0.2');
    const o = await ws.outcome;
    expect(o).toMatchObject({ connected: false, code: 4429 });
    expect((o as { reason: string }).reason).toMatch(/^RATE_LIMITED: too many failed authentication attempts/);
    await ws.client.dispose();

    // Another address is unaffected.
    expect((await postFrom(app.url, '127.0.0.3', A)).status).toBe(200);
  });

  it('counts failed WebSocket connection_inits too, and blocks that address over HTTP afterwards', async () => {
    const codes: number[] = [];
    for (let i = 0; i < AUTH_FAILURES + 2; i++) {
      const c = connect(app.url, { authorization: `Bearer wrong-ws-token-${i}-xxxxxxxx` }, '127.0.0.4');
      const o = await c.outcome;
      codes.push(o.connected ? 0 : o.code);
      await c.client.dispose();
    }
    expect(codes).toEqual([...Array(AUTH_FAILURES).fill(4401), 4429, 4429]);
    expect((await postFrom(app.url, '127.0.0.4', A)).status).toBe(429);
    expect((await postFrom(app.url, '127.0.0.5', A)).status).toBe(200);
  });
});

describe('connection_init counts against the rate limit', () => {
  it("takes a token from its caller's bucket: past the burst, connection_init is refused with 4429 RATE_LIMITED", async () => {
    const app = await startTestApp({ security: { apiTokens: TOKENS, rateLimit: { perSecond: 0.01, burst: 3 } } });
    const open: ReturnType<typeof connect>[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        open.push(connect(app.url, A));
        expect(await open[i].outcome).toEqual({ connected: true });
      }
      const fourth = connect(app.url, A);
      open.push(fourth);
      const o = await fourth.outcome;
      expect(o).toMatchObject({ connected: false, code: 4429 });
      expect((o as { reason: string }).reason).toMatch(/^RATE_LIMITED: rate limit exceeded for this API token/);
      // The bucket is the token's, whatever the door.
      expect((await app.gql('{ __typename }', undefined, A)).status).toBe(429);
      expect((await app.gql('{ __typename }', undefined, B)).status).toBe(200);
    } finally {
      await Promise.all(open.map((c) => c.client.dispose()));
      await app.close();
    }
  });
});

describe('idle connections', () => {
  const IDLE_MS = 400;
  let app: TestApp;
  let port: number;
  beforeAll(async () => {
    app = await startTestApp({ security: { timeouts: { headersMs: 300, requestMs: 1000, keepAliveMs: 300, wsInitMs: 300, wsIdleMs: IDLE_MS } } });
    port = Number(new URL(app.url).port);
  });
  afterAll(() => app?.close());

  /** A raw TCP connection that writes `payload` and then nothing: what it received before the server closed it. */
  function rawConnection(payload: string) {
    const socket = net.connect(port, '127.0.0.1', () => payload && socket.write(payload));
    let received = '';
    let closed = false;
    socket.on('data', (d) => (received += d.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => (closed = true));
    return { closed: () => closed, received: () => received, destroy: () => socket.destroy() };
  }

  it('closes a connection that sends nothing, and one whose headers never finish, with 408', async () => {
    for (const payload of ['', 'GET /healthz HTTP/1.1\r\nHost: localhost\r\n']) {
      const c = rawConnection(payload);
      try {
        await waitFor(() => c.closed(), { what: `server closing ${JSON.stringify(payload)}`, timeoutMs: 5000 });
        expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
      } finally {
        c.destroy();
      }
    }
  });

  it('closes a request whose body never finishes, and a kept-alive connection idle after its answer', async () => {
    const slow = rawConnection('POST /graphql HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"query"');
    const kept = rawConnection('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n');
    try {
      await waitFor(() => slow.closed(), { what: 'server closing the slow body', timeoutMs: 5000 });
      expect(slow.received()).toMatch(/^HTTP\/1\.1 408 /);
      await waitFor(() => kept.closed(), { what: 'server closing the idle keep-alive connection', timeoutMs: 5000 });
      expect(kept.received()).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      slow.destroy();
      kept.destroy();
    }
  });

  it('closes a WebSocket past connection_init that runs no operation (1000), and never one whose subscription runs', async () => {
    const closes: Array<{ code: number; reason: string }> = [];
    let connects = 0;
    /** A graphql-ws client that connects at once (not lazily) and records how its sockets close. */
    const client = createClient({
      url: app.url.replace(/^http/, 'ws'),
      webSocketImpl: WebSocket,
      lazy: false,
      retryAttempts: 0,
      onNonLazyError: () => {},
      on: { connected: () => void connects++, closed: (e: any) => void closes.push({ code: e.code, reason: e.reason }) },
    });
    const IDLE = { code: 1000, reason: `idle: no operation for ${IDLE_MS / 1000} s; connect again when needed` };
    try {
      // Never subscribes: closed once idle (the client then connects again, as graphql-ws clients do after 1000).
      await waitFor(() => closes.length === 1, { what: 'the idle socket closed', timeoutMs: 5000 });
      expect(closes[0]).toEqual(IDLE);
      await waitFor(() => connects === 2, { what: 'the client connected again' });

      // With a subscription running, the socket stays open through several idle periods and delivers.
      const id = (await app.services.store.createSession({ tenant: 'local' }, { title: 'idle' })).id;
      const sub = subscribeWs(app.url, EVENTS, { id }, client);
      await sub.count(1);
      const closedBefore = closes.length;
      await new Promise((r) => setTimeout(r, 3 * IDLE_MS));
      await app.services.store.append(id, [{ type: 'plugin/test/n', data: {} }]);
      await sub.count(2);
      expect(closes.length).toBe(closedBefore);
      // Its subscription completed, the socket is idle again: closed.
      await sub.close();
      await waitFor(() => closes.length === closedBefore + 1, { what: 'the socket closed once idle again', timeoutMs: 5000 });
      expect(closes.at(-1)).toEqual(IDLE);
    } finally {
      await client.dispose();
    }
  });

  it('cuts a WebSocket that never sends connection_init (and never answers the close frame)', async () => {
    const c = rawConnection(
      'GET /graphql HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
        'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n',
    );
    try {
      await waitFor(() => c.closed(), { what: 'server cutting the uninitialised socket', timeoutMs: 5000 });
      expect(c.received()).toMatch(/^HTTP\/1\.1 101 /);
      expect(c.received()).toContain('Connection initialisation timeout');
    } finally {
      c.destroy();
    }
  });
});

describe('configuration', () => {
  it('reads the caps, the throttle and the timeouts from the environment (0: off)', () => {
    const sec = securityOptions(
      loadConfig({
        FORKLINE_MAX_CONNECTIONS_PER_TENANT: '7',
        FORKLINE_MAX_SUBSCRIPTIONS_PER_TENANT: '0',
        FORKLINE_MAX_CONNECTIONS_PER_TOKEN: '0',
        FORKLINE_MAX_SUBSCRIPTIONS_PER_TOKEN: '40',
        FORKLINE_AUTH_FAILURES_PER_ADDRESS: '9',
        FORKLINE_AUTH_FAILURE_WINDOW_S: '30',
        FORKLINE_HTTP_HEADERS_TIMEOUT_MS: '1500',
        FORKLINE_WS_INIT_TIMEOUT_MS: '2500',
      }),
    );
    expect(sec.connectionCaps).toEqual({ connections: 7, subscriptions: Infinity });
    expect(sec.tokenConnectionCaps).toEqual({ connections: Infinity, subscriptions: 40 });
    expect(sec.authFailures).toEqual({ max: 9, windowMs: 30_000 });
    expect(sec.timeouts).toEqual({
      headersMs: 1500,
      requestMs: 300_000,
      keepAliveMs: 5000,
      wsInitMs: 2500,
      wsIdleMs: 60_000,
      bodyMinBytesPerSecond: 8192,
      bodyRateWindowMs: 10_000,
      responseStallMs: 60_000,
    });
    expect(securityOptions(loadConfig({ FORKLINE_WS_IDLE_TIMEOUT_MS: '0' })).timeouts?.wsIdleMs).toBe(0);
    expect(() => loadConfig({ FORKLINE_WS_IDLE_TIMEOUT_MS: '50' })).toThrow(/FORKLINE_WS_IDLE_TIMEOUT_MS/);
    const defaults = securityOptions(loadConfig({}));
    expect(defaults.connectionCaps).toEqual({ connections: 100, subscriptions: 1000 });
    expect(defaults.tokenConnectionCaps).toEqual({ connections: 25, subscriptions: 250 });
    expect(defaults.maxOperationsPerSocket).toBe(250);
    expect(securityOptions(loadConfig({ FORKLINE_MAX_OPERATIONS_PER_SOCKET: '40' })).maxOperationsPerSocket).toBe(40);
    expect(securityOptions(loadConfig({ FORKLINE_MAX_CONNECTIONS_PER_TOKEN: '0', FORKLINE_MAX_SUBSCRIPTIONS_PER_TOKEN: '0' })).tokenConnectionCaps).toBe(false);
    expect(defaults.authFailures).toEqual({ max: 20, windowMs: 60_000 });
    expect(defaults.maxApiTokensPerTenant).toBe(100);
    expect(securityOptions(loadConfig({ FORKLINE_MAX_API_TOKENS_PER_TENANT: '5' })).maxApiTokensPerTenant).toBe(5);
    expect(securityOptions(loadConfig({ FORKLINE_MAX_API_TOKENS_PER_TENANT: '0' })).maxApiTokensPerTenant).toBe(false);
    expect(
      securityOptions(
        loadConfig({ FORKLINE_AUTH_FAILURES_PER_ADDRESS: '0', FORKLINE_MAX_CONNECTIONS_PER_TENANT: '0', FORKLINE_MAX_SUBSCRIPTIONS_PER_TENANT: '0' }),
      ),
    ).toMatchObject({
      authFailures: false,
      connectionCaps: false,
    });
  });

  it('counts an IPv6 client by its /64 and an IPv4-mapped one as IPv4', () => {
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe(addressKey('2001:0db8:0001:0002:bbbb:cccc:dddd:eeee'));
    expect(addressKey('2001:db8:1:2::1')).not.toBe(addressKey('2001:db8:1:3::1'));
    expect(addressKey('::ffff:127.0.0.2')).toBe('127.0.0.2');
    expect(addressKey('127.0.0.2')).not.toBe(addressKey('127.0.0.3'));
  });
});
