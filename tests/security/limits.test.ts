// Limits and browser protections: query tokens/depth/aliases/cost,
// page sizes, request body, the 2 MB message, CSRF, CORS, cross-site
// WebSockets, DNS rebinding, local-mode binding, error masking.
import http from 'node:http';
import { Writable } from 'node:stream';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';
import { DEFAULT_LIMITS, assertSafeBinding, isLoopbackHost } from '../../src/http/security.ts';
import { MAX_STRING_RECORDING_BYTES } from '../../src/core/recording.ts';
import { createLogger } from '../../src/logger.ts';

let app: TestApp;
let sessionId: string;
const logLines: any[] = [];

const codeOf = (r: { errors?: Array<{ extensions?: Record<string, unknown> }> }) => r.errors?.[0]?.extensions?.code;
const nested = (depth: number) => `query($id: ID!) { session(id: $id) {${' parent {'.repeat(depth)} id${' }'.repeat(depth)} } }`;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) logLines.push(JSON.parse(line));
      done();
    },
  });
  app = await startTestApp({ log: undefined, logger: createLogger('info', { destination: sink }) });
  sessionId = (await app.ok('mutation { createSession(input: { title: "limits" }) { id } }')).createSession.id;
});
afterAll(() => app?.close());

describe('query shape', () => {
  it('rejects documents deeper than the depth limit (BAD_USER_INPUT) and accepts the limit', async () => {
    // session + parent×n + id: depth n + 2.
    expect((await app.gql(nested(DEFAULT_LIMITS.maxDepth - 2), { id: sessionId })).errors).toBeUndefined();
    const r = await app.gql(nested(DEFAULT_LIMITS.maxDepth - 1), { id: sessionId });
    expect(codeOf(r)).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toMatch(/depth limit of 12 exceeded/);
    expect(r.data).toBeUndefined();
  });

  it('rejects too many aliases and too many tokens', async () => {
    const aliases = (n: number) => `{ ${Array.from({ length: n }, (_, i) => `a${i}: sessions(first: 1) { edges { node { id } } }`).join(' ')} }`;
    expect((await app.gql(aliases(DEFAULT_LIMITS.maxAliases))).errors).toBeUndefined();
    const r = await app.gql(aliases(DEFAULT_LIMITS.maxAliases + 1));
    expect(codeOf(r)).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toMatch(/Aliases limit of 30 exceeded/);
    const tokens = await app.gql(`{ ${'__typename '.repeat(DEFAULT_LIMITS.maxTokens + 1)}}`);
    expect(tokens.errors![0].message).toMatch(/Token limit of 2000 exceeded/);
    expect(tokens.errors![0].extensions!.code).toBeTruthy();
    // Nesting that would overflow graphql-js's parser is stopped by the token limit.
    const deep = await app.gql(`{${' session(id: "x") {'.repeat(5000)} id${' }'.repeat(5000)} }`);
    expect(deep.errors![0].message).toMatch(/Token limit/);
  });

  it('rejects a query whose estimated cost (page sizes multiplied through nesting) is over the limit', async () => {
    const r = await app.gql('{ sessions(first: 500) { edges { node { events(first: 500) { edges { node { id data } } } } } } }');
    expect(codeOf(r)).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toMatch(/Cost limit of 100000 exceeded/);
    // A full page of sessions with the dashboard's fields is fine.
    expect((await app.gql('{ sessions(first: 500) { edges { node { id title status eventCount turnCount parent { id title } } } } }')).errors).toBeUndefined();
  });

  it('caps every connection at 500 per page, as literal or variable', async () => {
    for (const [query, vars] of [
      ['{ sessions(first: 501) { edges { node { id } } } }', {}],
      ['query($f: Int) { sessions(first: $f) { edges { node { id } } } }', { f: 10_000 }],
      ['query($id: ID!, $f: Int) { session(id: $id) { events(first: $f) { edges { node { id } } } } }', { id: sessionId, f: 501 }],
      ['query($id: ID!, $f: Int) { session(id: $id) { children(first: $f) { edges { node { id } } } } }', { id: sessionId, f: 501 }],
      ['query($id: ID!, $f: Int) { session(id: $id) { events(first: $f) { edges { node { id } } } } }', { id: sessionId, f: -1 }],
    ] as const) {
      const r = await app.gql(query, vars);
      expect(codeOf(r), query).toBe('BAD_USER_INPUT');
    }
    const ok = await app.gql(
      'query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq } } } } sessions(first: 500) { edges { node { id } } } }',
      { id: sessionId },
    );
    expect(ok.errors).toBeUndefined();
  });

  it('keeps introspection on for GraphiQL in local mode', async () => {
    const r = await app.gql('{ __schema { queryType { name } types { name fields { name type { name ofType { name ofType { name } } } } } } }');
    expect(r.errors).toBeUndefined();
    expect(r.data.__schema.queryType.name).toBe('Query');
  });
});

describe('text Postgres cannot store', () => {
  it('rejects NUL and lone surrogates in variables, literals and recordings with BAD_USER_INPUT, writing nothing', async () => {
    const count = async () => (await app.ok('{ sessions(first: 500) { edges { node { id } } } }')).sessions.edges.length;
    const before = await count();
    for (const t of ['a\u0000b', 'a\ud800b', '\udc00']) {
      const r = await app.gql('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t });
      expect(codeOf(r)).toBe('BAD_USER_INPUT');
      expect(r.errors![0].message).toMatch(/well-formed Unicode without NUL/);
    }
    expect(codeOf(await app.gql('mutation { createSession(input: { title: "a\\u0000b" }) { id } }'))).toBe('BAD_USER_INPUT');
    for (const bad of ['\\u0000', '\\ud800']) {
      const recording = `{"format":"forkline.recording","version":4,"session":{"id":"x","title":"t"}}\n{"seq":0,"type":"session/title","data":{"title":"a${bad}b"}}\n`;
      const r = await app.gql('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: recording });
      expect(codeOf(r)).toBe('BAD_USER_INPUT');
    }
    expect(await count()).toBe(before);
  });
});

describe('request size', () => {
  it('rejects a 2 MB message with a clear error and writes nothing', async () => {
    const before = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: sessionId })).session.eventCount;
    const r = await app.gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text: 'x'.repeat(2 * 1024 * 1024) } });
    expect(r.status).toBe(200);
    expect(codeOf(r)).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toBe('text: Too big: expected string to have <=200000 characters');
    expect((await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: sessionId })).session.eventCount).toBe(before);
  });

  it('sizes the body limit for an 8 MiB recording string (larger ones stream to POST /recordings), to the field limits', async () => {
    expect(DEFAULT_LIMITS.maxBodyBytes).toBeGreaterThanOrEqual(2 * MAX_STRING_RECORDING_BYTES);
    const r = await app.gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text: 'x'.repeat(12 * 1024 * 1024) } });
    expect(r.status).toBe(200);
    expect(r.errors![0].message).toMatch(/text: Too big/);
    const big = await app.gql('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: 'x'.repeat(MAX_STRING_RECORDING_BYTES + 1) });
    expect(big.errors![0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(big.errors![0].message).toMatch(/limited to 8388608 bytes .* POST \/recordings/);
  });

  it('answers 413 REQUEST_ENTITY_TOO_LARGE past the body limit, by Content-Length or while streaming', async () => {
    const small = await startTestApp({ security: { maxBodyBytes: 64 * 1024 } });
    try {
      const big = await small.gql('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: 'x'.repeat(100 * 1024) });
      expect(big.status).toBe(413);
      expect(codeOf(big)).toBe('REQUEST_ENTITY_TOO_LARGE');
      const chunks = [JSON.stringify({ query: '{ __typename }', variables: { pad: 'p'.repeat(100 * 1024) } })];
      const streamed = await fetch(small.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: new ReadableStream({ start: (c) => (chunks.forEach((s) => c.enqueue(new TextEncoder().encode(s))), c.close()) }),
        duplex: 'half',
      } as RequestInit);
      expect(streamed.status).toBe(413);
      expect((await small.gql('{ __typename }')).data).toEqual({ __typename: 'Query' });
    } finally {
      await small.close();
    }
  });
});

describe('browsers', () => {
  it('requires a CSRF header on requests a cross-site form could send (GET, text/plain, form encodings)', async () => {
    const get = await fetch(`${app.url}?query=${encodeURIComponent('{ __typename }')}`);
    expect(get.status).toBe(403);
    expect((await get.json()).errors[0].extensions.code).toBe('FORBIDDEN');
    const plain = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: JSON.stringify({ query: 'mutation { createSession(input: {}) { id } }' }),
    });
    expect(plain.status).toBe(403);
    const form = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'query=mutation%7BcreateSession(input%3A%7B%7D)%7Bid%7D%7D',
    });
    expect(form.status).toBe(403);
    const withHeader = await fetch(`${app.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { 'x-graphql-yoga-csrf': '1' } });
    expect(await withHeader.json()).toEqual({ data: { __typename: 'Query' } });
  });

  it('sends no CORS grant to other origins (local mode); configured origins get one', async () => {
    const preflight = (url: string, origin: string) =>
      fetch(url, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' } });
    const denied = await preflight(app.url, 'https://evil.example');
    expect(denied.headers.get('access-control-allow-origin')).toBeNull();
    const post = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example' },
      body: '{"query":"{ __typename }"}',
    });
    expect(post.headers.get('access-control-allow-origin')).toBeNull();

    const open = await startTestApp({ security: { corsOrigins: ['https://dash.example'] } });
    try {
      expect((await preflight(open.url, 'https://dash.example')).headers.get('access-control-allow-origin')).toBe('https://dash.example');
    } finally {
      await open.close();
    }
  });

  it('refuses cross-site WebSocket upgrades; same-origin and non-browser clients connect', async () => {
    const url = app.url.replace(/^http/, 'ws');
    const attempt = (headers: Record<string, string>) =>
      new Promise<string>((resolve) => {
        const ws = new WebSocket(url, 'graphql-transport-ws', { headers });
        ws.once('open', () => (ws.close(), resolve('open')));
        ws.once('unexpected-response', (_req, res) => resolve(String(res.statusCode)));
        ws.once('error', () => resolve('error'));
      });
    const { host } = new URL(app.url);
    expect(await attempt({ origin: 'https://evil.example' })).toBe('403');
    expect(await attempt({ origin: `http://${host}` })).toBe('open');
    expect(await attempt({})).toBe('open');
  });

  it('local mode answers only to loopback Host names (DNS rebinding)', async () => {
    const request = (host: string) =>
      new Promise<number>((resolve, reject) => {
        const u = new URL(app.url);
        const req = http.request(
          { host: u.hostname, port: u.port, path: '/graphql', method: 'POST', headers: { host, 'content-type': 'application/json' } },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
        req.end('{"query":"{ __typename }"}');
      });
    expect(await request('attacker.example:4000')).toBe(403);
    expect(await request(`localhost:${new URL(app.url).port}`)).toBe(200);
    expect(await request(`127.0.0.1:${new URL(app.url).port}`)).toBe(200);
  });
});

describe('configuration', () => {
  it('refuses a non-loopback HOST without tokens unless FORKLINE_ALLOW_INSECURE=1', () => {
    expect(() => assertSafeBinding('0.0.0.0', {})).toThrow(
      /refusing to listen on HOST=0.0.0.0 without authentication.*FORKLINE_API_TOKENS.*FORKLINE_ALLOW_INSECURE=1/,
    );
    expect(() => assertSafeBinding('192.168.1.5', {})).toThrow(/refusing/);
    expect(() => assertSafeBinding('example.com', {})).toThrow(/refusing/);
    expect(() => assertSafeBinding('0.0.0.0', { allowInsecure: true })).not.toThrow();
    expect(() => assertSafeBinding('0.0.0.0', { apiTokens: new Map([['t'.repeat(16), 'a']]) })).not.toThrow();
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]']) expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'localhost.example.com']) expect(isLoopbackHost(h), h).toBe(false);
  });

  it('parses FORKLINE_API_TOKENS and explains bad values without echoing tokens', () => {
    const config = loadConfig({ FORKLINE_API_TOKENS: 'aaaaaaaaaaaaaaaa1=alpha, bbbbbbbbbbbbbbbb2=beta', FORKLINE_RATE_LIMIT_RPS: '0' });
    const sec = securityOptions(config);
    expect([...sec.apiTokens!]).toEqual([
      ['aaaaaaaaaaaaaaaa1', 'alpha'],
      ['bbbbbbbbbbbbbbbb2', 'beta'],
    ]);
    expect(sec.rateLimit).toBe(false);
    expect(securityOptions(loadConfig({})).apiTokens).toBeUndefined();
    expect(() => loadConfig({ FORKLINE_API_TOKENS: 'short=alpha' })).toThrow(/FORKLINE_API_TOKENS: a token is shorter than 16 characters/);
    expect(() => loadConfig({ FORKLINE_API_TOKENS: 'aaaaaaaaaaaaaaaa1' })).toThrow(/not token=tenant/);
    expect(() => loadConfig({ FORKLINE_API_TOKENS: 'aaaaaaaaaaaaaaaa1=bad tenant' })).toThrow(/tenant "bad tenant"/);
    expect(() => loadConfig({ FORKLINE_API_TOKENS: 'aaaaaaaaaaaaaaaa1=a,aaaaaaaaaaaaaaaa1=b' })).toThrow(/two tenants/);
    // Refused at start: no Authorization header could carry them (graphql-ws's connectionParams would).
    for (const token of ['aaaaaaaa aaaaaaaa1', 'aaaaaaaaaaaaaaaa\u00e91', 'aaaaaaaaaaaaaaaa\u04301', 'aaaaaaaaaaaaaaaa\u200b1', 'aaaaaaaaaaaaaaaa\u007f1'])
      expect(() => loadConfig({ FORKLINE_API_TOKENS: `${token}=alpha` })).toThrow(/a token holds whitespace or a character outside visible ASCII/);
    try {
      loadConfig({ FORKLINE_API_TOKENS: 'secretsecretsecret1=bad tenant' });
    } catch (err) {
      expect(String(err)).not.toContain('secretsecretsecret1');
    }
  });
});

describe('errors', () => {
  it('masks unexpected errors (no message, stack or SQL) and logs them as JSON with the request id', async () => {
    const store = app.services.store;
    const original = store.queueInput;
    store.queueInput = async () => {
      throw new Error('relation "Session" exploded: SELECT * FROM "Session" WHERE secret');
    };
    try {
      const r = await app.gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text: 'hi' } });
      expect(r.status).toBe(200);
      expect(r.errors).toHaveLength(1);
      const e = r.errors![0];
      expect(e.message).toBe('Unexpected error.');
      expect(e.extensions!.code).toBe('INTERNAL_SERVER_ERROR');
      expect(JSON.stringify(r)).not.toMatch(/SELECT|exploded|stack|at /);
      const logged = logLines.find((l) => l.requestId === e.extensions!.requestId);
      expect(logged).toMatchObject({ level: 50, msg: 'unexpected error', service: 'forkline' });
      expect(logged.err.message).toContain('exploded');
      expect(logged.err.stack).toContain('Error');
    } finally {
      store.queueInput = original;
    }
  });
});
