// Fuzz-style robustness: well over 1,000 malformed requests — broken
// JSON, wrong types, bad seqs, deep and wide queries, huge strings, junk
// queries, wrong content types, bad methods, broken HTTP — must all be answered
// without a 5xx and without an unexpected (masked) error, and the server must
// still work afterwards.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';

interface Probe {
  kind: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Uint8Array;
}

// Deterministic: a failure names a probe that can be replayed.
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(9);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
const int = (lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));

// JSON responses only: a subscription sent as a plain POST would otherwise stream.
const JSON_CT = { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' };
const gqlBody = (query: unknown, variables?: unknown, extra: Record<string, unknown> = {}) => JSON.stringify({ query, variables, ...extra });
const post = (kind: string, body: string | Uint8Array, headers: Record<string, string> = JSON_CT): Probe => ({ kind, method: 'POST', headers, body });

const BAD_NUMBERS = ['-2', '-1', '0.5', '-0.0', '1e10', '2147483648', '-2147483649', '9007199254740993', '1e308', '"1"', 'true', 'null', '[]', '{}', '"NaN"'];
const BAD_VALUES: unknown[] = [
  -2,
  -1,
  0.5,
  1e10,
  2 ** 31,
  -(2 ** 31) - 1,
  Number.MAX_SAFE_INTEGER + 2,
  1e308,
  '1',
  true,
  null,
  [],
  {},
  [1, 2],
  { a: 1 },
  '',
  'nul\u0000char',
  '\ud800',
];
const NAMES = ['session', 'sessions', 'node', 'events', 'parent', 'children', 'id', 'seq', 'data', '__typename', '__schema', 'forkSession', 'x', 'é', '🙂'];
const PUNCT = ['{', '}', '(', ')', '[', ']', ':', '$', '!', '@', '...', '=', '|', '&', '"', '"""', '#', ',', '\\', '\u0000'];

function junkQuery(): string {
  let q = '';
  for (let i = int(1, 60); i > 0; i--) q += random() < 0.5 ? pick(PUNCT) : ` ${pick(NAMES)} `;
  return q;
}

function nested(depth: number, leaf = 'id'): string {
  return `{ session(id: "x") {${' parent {'.repeat(depth)} ${leaf}${' }'.repeat(depth)} } }`;
}

function probes(ids: { session: string; event: string }): Probe[] {
  const out: Probe[] = [];
  const valid = gqlBody('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 1 }) { cutSeq } }', { id: ids.session });

  // Broken JSON.
  for (let i = 0; i < 120; i++) out.push(post('truncated json', valid.slice(0, int(0, valid.length - 1))));
  for (const b of [
    '{',
    '}',
    '[]',
    '[{}]',
    'null',
    '"x"',
    '0',
    'true',
    '{"query":}',
    '{"query":"{__typename}",}',
    "{'query':'{__typename}'}",
    '\uFEFF{"query":"{ __typename }"}',
    '{"query":"{ __typename }"}{"query":"x"}',
  ]) {
    out.push(post('broken json', b));
  }
  out.push(post('deep json', `{"query":"{ __typename }","variables":{"v":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`));
  out.push(post('deep json', `{"query":${'['.repeat(50_000)}`));
  for (let i = 0; i < 40; i++)
    out.push(
      post(
        'random bytes',
        Uint8Array.from({ length: int(1, 400) }, () => int(0, 255)),
      ),
    );
  out.push(post('invalid utf-8', Uint8Array.from([0x7b, 0x22, 0x71, 0xff, 0xfe, 0xc3, 0x28, 0x7d])));

  // Wrong types in the request envelope.
  for (const query of [123, [], {}, null, true, '', ' ']) out.push(post('wrong query type', JSON.stringify({ query })));
  for (const variables of ['x', [1], 1, true]) out.push(post('wrong variables type', JSON.stringify({ query: '{ __typename }', variables })));
  for (const operationName of [1, {}, [], 'Missing']) out.push(post('wrong operationName', JSON.stringify({ query: '{ __typename }', operationName })));
  for (const extensions of ['x', 1, [], { persistedQuery: { sha256Hash: 'x' } }])
    out.push(post('wrong extensions', JSON.stringify({ query: '{ __typename }', extensions })));
  out.push(post('batch', JSON.stringify([{ query: '{ __typename }' }, { query: '{ __typename }' }])));

  // Seqs and page sizes: negative, huge, float, wrong type — as literals and as variables.
  for (const n of BAD_NUMBERS) {
    out.push(post('seq literal', gqlBody(`mutation { forkSession(input: { sessionId: "${ids.session}", atSeq: ${n} }) { cutSeq } }`)));
    out.push(post('seq literal', gqlBody(`mutation { branchSession(input: { sessionId: "${ids.session}", anchorSeq: ${n} }) { cutSeq } }`)));
    out.push(post('page literal', gqlBody(`{ session(id: "${ids.session}") { events(afterSeq: ${n}, first: ${n}) { edges { node { seq } } } } }`)));
    out.push(
      post(
        'page literal',
        gqlBody(
          `{ sessions(first: ${n}) { edges { node { id } } } children: session(id: "${ids.session}") { children(first: ${n}) { edges { node { id } } } } }`,
        ),
      ),
    );
  }
  for (let i = 0; i < 300; i++) {
    const v = pick(BAD_VALUES);
    const w = pick(BAD_VALUES);
    out.push(
      pick([
        post('seq variable', gqlBody('mutation($s: Int) { forkSession(input: { sessionId: "' + ids.session + '", atSeq: $s }) { cutSeq } }', { s: v })),
        post(
          'seq variable',
          gqlBody('mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq } }', { i: { sessionId: pick([ids.session, v]), atSeq: w } }),
        ),
        post(
          'seq variable',
          gqlBody('mutation($i: BranchSessionInput!) { branchSession(input: $i) { cutSeq } }', { i: { sessionId: ids.session, anchorSeq: v, title: w } }),
        ),
        post(
          'page variable',
          gqlBody('query($id: ID!, $a: Int, $f: Int) { session(id: $id) { events(afterSeq: $a, first: $f) { edges { node { seq } } } } }', {
            id: pick([ids.session, v]),
            a: v,
            f: w,
          }),
        ),
        post(
          'page variable',
          gqlBody('query($f: Int, $after: String, $s: SessionStatus) { sessions(first: $f, after: $after, status: $s) { edges { node { id } } } }', {
            f: v,
            after: w,
            s: pick(['IDLE', 'BUSY', 1, null]),
          }),
        ),
        post(
          'input variable',
          gqlBody('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
            i: { sessionId: pick([ids.session, v, 'ses_missing']), text: w },
          }),
        ),
        post(
          'input variable',
          gqlBody('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', {
            i: { title: v, model: pick([w, { provider: v, model: w }, { provider: 'scripted', model: 'm', settings: v }]) },
          }),
        ),
        post(
          'input variable',
          gqlBody('mutation($r: String!) { importRecording(recording: $r) { id } }', {
            r: pick([
              v,
              '{"format":"forkline.recording","version":99}',
              '\n\n\n',
              `{"format":"forkline.recording","version":4,"session":{"id":"x"}}\n{"seq":0,"type":"turn/end","data":{"turn":-1}}`,
            ]),
          }),
        ),
        post(
          'id variable',
          gqlBody('query($id: ID!) { node(id: $id) { id } session(id: $id) { id } }', {
            id: pick([v, '', 'ses_', 'evt_', '\u0000', 'x'.repeat(5000), ids.event + "'; DROP TABLE", '%00']),
          }),
        ),
      ]),
    );
  }

  // Deep and wide documents (within and beyond the token, depth, alias and cost limits).
  for (const d of [11, 13, 20, 50, 200, 600, 999, 1500, 5000]) out.push(post('deep query', gqlBody(nested(d))));
  out.push(post('deep query', gqlBody(`{${'{'.repeat(3000)}${'}'.repeat(3000)}}`)));
  out.push(
    post(
      'deep fragments',
      gqlBody(
        `{ ...F0 } ${Array.from({ length: 60 }, (_, i) => `fragment F${i} on Query { session(id: "x") { parent { ...F${i + 1} } } }`).join(' ')} fragment F60 on Query { __typename }`,
      ),
    ),
  );
  out.push(post('fragment cycle', gqlBody('{ ...A } fragment A on Query { ...B } fragment B on Query { ...A }')));
  for (const n of [31, 100, 400])
    out.push(post('wide aliases', gqlBody(`{ ${Array.from({ length: n }, (_, i) => `a${i}: session(id: "x") { id }`).join(' ')} }`)));
  for (const n of [200, 1000, 5000]) out.push(post('wide fields', gqlBody(`{ ${'sessions { edges { node { id } } } '.repeat(n)} }`)));
  out.push(
    post(
      'costly',
      gqlBody('{ sessions(first: 500) { edges { node { children(first: 500) { edges { node { events(first: 500) { edges { node { id } } } } } } } } } }'),
    ),
  );
  out.push(post('many operations', gqlBody(Array.from({ length: 300 }, (_, i) => `query Q${i} { __typename }`).join(' '))));
  out.push(post('many variables', gqlBody(`query(${Array.from({ length: 600 }, (_, i) => `$v${i}: Int`).join(' ')}) { __typename }`)));
  for (let i = 0; i < 30; i++)
    out.push(post('random depth', gqlBody(nested(int(0, 40), pick(['id', 'title', 'events { edges { node { seq } } }', 'recording'])))));

  // Huge strings.
  out.push(
    post(
      '2 MB message',
      gqlBody('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: ids.session, text: 'm'.repeat(2_000_000) } }),
    ),
  );
  out.push(post('huge title', gqlBody('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: 't'.repeat(1_000_000) })));
  out.push(post('huge literal', gqlBody(`{ session(id: "${'i'.repeat(1_000_000)}") { id } }`)));
  out.push(post('huge whitespace', gqlBody(`${' '.repeat(1_000_000)}{ __typename }`)));
  out.push(post('huge comment', gqlBody(`#${'c'.repeat(1_000_000)}\n{ __typename }`)));
  out.push(
    post(
      'huge recording',
      gqlBody('mutation($r: String!) { importRecording(recording: $r) { id } }', {
        r: `{"format":"forkline.recording","version":4,"session":{"id":"x","title":"${'r'.repeat(3_000_000)}"}}\n`,
      }),
    ),
  );
  out.push(post('huge variable name', gqlBody('{ __typename }', { ['k'.repeat(100_000)]: 1 })));

  // Junk queries.
  for (let i = 0; i < 300; i++) out.push(post('junk query', gqlBody(junkQuery())));
  for (const q of [
    'subscription { sessionsChanged { id } }',
    'mutation { __typename }',
    '{ __schema { types { name } } }',
    'query { session }',
    'query($x: Unknown) { __typename }',
    '{ node(id: "evt_x") { ... on Event { seq } ... on Session { title } } }',
    '{ session(id: 1) { id } }',
    'query Q { __typename } query Q { __typename }',
    '{ __typename @skip }',
    '{ __typename @include(if: "yes") }',
    '{ __typename @deprecated }',
  ]) {
    out.push(post('invalid query', gqlBody(q)));
  }

  // Content types.
  const csrf = { 'x-graphql-yoga-csrf': '1' };
  for (const ct of [
    'text/plain',
    'application/xml',
    'application/x-www-form-urlencoded',
    'multipart/form-data',
    'multipart/form-data; boundary=zz',
    'application/graphql',
    'application/graphql+json',
    'application/json; charset=latin1',
    'image/png',
    '*/*',
    ';;;',
    '',
  ]) {
    for (const body of [
      gqlBody('{ __typename }'),
      '{ __typename }',
      'query=%7B__typename%7D',
      '--zz\r\nContent-Disposition: form-data; name="operations"\r\n\r\n{bad\r\n--zz--\r\n',
      'junk',
    ]) {
      out.push(post('content type', body, { 'content-type': ct }));
      out.push(post('content type + csrf header', body, { 'content-type': ct, ...csrf }));
    }
  }

  // Streamed recordings (POST /recordings): junk bodies and content types.
  for (const ct of ['application/x-ndjson', 'application/jsonl', 'text/plain', 'application/json', '']) {
    for (const body of [
      '',
      'junk',
      '{"format":"forkline.recording","version":4}',
      '{"format":"forkline.recording","version":4,"session":{"id":"s"}}\n{"seq":"0"}',
      '\u0000\n\n',
      '[]\n{}\n',
      'x'.repeat(100_000),
    ]) {
      out.push({ kind: 'recording upload', method: 'POST', path: '/recordings', body, headers: { 'content-type': ct } });
    }
  }

  // Methods, query strings and paths.
  for (const method of ['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']) {
    for (const path of [
      '/graphql',
      '/recordings',
      '/graphql?query=%7B__typename%7D',
      '/graphql?query=%ZZ',
      '/graphql?variables=%7Bbad',
      '/graphql?query=mutation%7BcreateSession(input:%7B%7D)%7Bid%7D%7D',
      '/graphql?extensions=1&query=x',
      '/healthz',
      '/readyz',
      '/metrics',
      '/nope',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/graphql/../graphql',
    ]) {
      out.push({ kind: 'method/path', method, path, headers: method === 'GET' ? csrf : {} });
    }
  }
  return out;
}

// Broken HTTP that fetch cannot send.
const RAW_REQUESTS = [
  'GARBAGE\r\n\r\n',
  'GET\r\n\r\n',
  'GET /graphql HTTP/9.9\r\n\r\n',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\nnot hex\r\n0\r\n\r\n',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nContent-Type: application/json\r\n\r\n0\r\n\r\n',
  'POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"query":',
  `GET /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'h'.repeat(40_000)}\r\n\r\n`,
  'TRACE /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
  'CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n',
  'GET /graphql HTTP/1.1\r\nHost: evil.example\r\nx-graphql-yoga-csrf: 1\r\n\r\n',
  'GET /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
  'GET /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: bad\r\nSec-WebSocket-Version: 13\r\n\r\n',
];

/** Sends raw bytes; resolves with the status of the first response (or null when the server just closed). */
function raw(port: number, text: string): Promise<number | null> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = () => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(buf);
      resolve(m ? Number(m[1]) : null);
      socket.destroy();
    };
    socket.on('data', (c) => {
      buf += c.toString('latin1');
      if (buf.includes('\r\n\r\n')) done();
    });
    socket.on('error', done);
    socket.on('close', done);
    socket.setTimeout(3000, done); // an incomplete body may simply wait for more bytes
    socket.write(text);
  });
}

let app: TestApp;
const unexpected: unknown[] = [];

beforeAll(async () => {
  app = await startTestApp({ log: (msg, err) => unexpected.push({ msg, err: String(err) }) });
});
afterAll(() => app?.close());

describe('malformed requests', () => {
  it('answers 1,000+ malformed requests without a 5xx or a masked internal error, then still works', async () => {
    const s = await app.ok('mutation { createSession(input: { title: "target" }) { id } }');
    await app.ok('mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "t2") { id } }', { id: s.createSession.id });
    const ev = await app.ok('query($id: ID!) { session(id: $id) { events { edges { node { id } } } } }', { id: s.createSession.id });
    const all = probes({ session: s.createSession.id, event: ev.session.events.edges[0].node.id });
    expect(all.length).toBeGreaterThanOrEqual(1000);

    const failures: string[] = [];
    const byStatus = new Map<number, number>();
    let next = 0;
    const worker = async () => {
      while (next < all.length) {
        const i = next++;
        const p = all[i];
        try {
          const res = await fetch(`${app.url.replace(/\/graphql$/, '')}${p.path ?? '/graphql'}`, {
            method: p.method ?? 'GET',
            headers: p.headers,
            body: p.body as BodyInit | undefined,
            signal: AbortSignal.timeout(5000),
          });
          const text = await res.text();
          byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
          if (res.status >= 500 || (p.path !== '/metrics' && text.includes('INTERNAL_SERVER_ERROR')))
            failures.push(`#${i} ${p.kind} ${p.method} ${p.path ?? ''}: ${res.status} ${text.slice(0, 300)}`);
        } catch (err) {
          failures.push(`#${i} ${p.kind}: request failed: ${String(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));

    const port = Number(new URL(app.url).port);
    const rawStatuses = await Promise.all(RAW_REQUESTS.map((r) => raw(port, r)));
    rawStatuses.forEach((status, i) => {
      if (status !== null && status >= 500) failures.push(`raw #${i}: ${status}`);
    });

    // WebSocket junk: bad frames and protocol violations close that socket only.
    for (const messages of [
      ['not json'],
      ['{"type":"subscribe","id":"1","payload":{"query":"{ __typename }"}}'],
      [
        '{"type":"connection_init"}',
        '{"type":"subscribe","id":"1","payload":{"query":"subscription {"}}',
        '{"type":"subscribe","id":"2","payload":{"query":123}}',
        '{"type":"connection_init"}',
      ],
    ]) {
      const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
      await new Promise((r) => ws.once('open', r));
      for (const m of messages) ws.send(m);
      await new Promise((r) => {
        ws.once('close', r);
        setTimeout(() => (ws.close(), r(undefined)), 500);
      });
    }

    expect(failures).toEqual([]);
    expect(unexpected).toEqual([]);
    expect(byStatus.get(200)).toBeGreaterThan(100); // most GraphQL errors are ordinary responses

    // Still serving.
    expect((await fetch(app.url.replace('/graphql', '/healthz'))).status).toBe(200);
    const after = await app.ok('mutation { createSession(input: { title: "still here" }) { id title } }');
    expect(after.createSession.title).toBe('still here');
    const target = await app.ok('query($id: ID!) { session(id: $id) { title } }', { id: s.createSession.id });
    expect(target.session.title).toBe('t2');
  });
});
