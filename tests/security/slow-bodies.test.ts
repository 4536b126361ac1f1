// No side door around the connection caps (docs/operations.md "Threat
// model"), with real sockets: a request refused before its body was read
// closes its connection at once however slowly the body dribbles on; an
// authenticated body slower than the minimum rate is answered 408 and cut, at
// every door that reads one, and so is one promised by Expect: 100-continue
// that never comes;
// connections past the per-address cap are refused as they are accepted.
// Small limits configured for the test: a 300 ms rate window at 1,000 bytes/s.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';
import { longRecordingLines } from '../fixtures/recordings/recordings.ts';
import { waitFor } from '../helpers/wait.ts';

const TOKEN = 'slow-bodies-token-0123456789';
const WINDOW_MS = 300;
/**
 * The documented bound here is the refused body's window (≤ 1 s) or the rate window, plus a timer tick; this allows
 * ten times that, for a loaded 2-core machine running the whole suite. A connection held until its body ends is
 * still open when the dribble stops (DRIBBLE_MS, three times this bound).
 */
const CLOSED_WITHIN_MS = 10_000;
const DRIBBLE_MS = 3 * CLOSED_WITHIN_MS;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({
    security: {
      apiTokens: new Map([[TOKEN, 'acme']]),
      rateLimit: false,
      authFailures: false,
      timeouts: { bodyMinBytesPerSecond: 1000, bodyRateWindowMs: WINDOW_MS },
    },
  });
});
afterAll(() => app?.close());

interface Dribbler {
  socket: net.Socket;
  /** Everything the server sent. */
  answer(): string;
  /** Resolves with ms from `since` when the server closed the connection (ends or resets it). */
  closed: Promise<number>;
}

/** Sends `head` and then one byte of body every 50 ms until the server closes the connection (or DRIBBLE_MS pass). */
function dribble(head: string): Dribbler {
  const { hostname, port } = new URL(app.url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  let answer = '';
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
  socket.on('error', () => {});
  const since = Date.now();
  const closed = new Promise<number>((resolve) => {
    const done = () => resolve(Date.now() - since);
    socket.once('end', done).once('close', done);
  });
  socket.once('connect', () => {
    socket.write(head);
    const timer = setInterval(() => {
      if (socket.destroyed || socket.writableEnded || Date.now() - since > DRIBBLE_MS) return clearInterval(timer);
      socket.write('x');
    }, 50);
    socket.once('close', () => clearInterval(timer));
  });
  return { socket, answer: () => answer, closed };
}

const post = (path: string, headers: Record<string, string>) =>
  `POST ${path} HTTP/1.1\r\nhost: localhost\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

describe('a request refused before its body is read', () => {
  it.each([
    ['401 at /graphql (no token)', post('/graphql', { 'content-type': 'application/json', 'content-length': '1000000' }), 401],
    ['401 at /agui (no token)', post('/agui', { 'content-type': 'application/json', 'content-length': '1000000' }), 401],
    ['401 at /chat (no token)', post('/chat', { 'content-type': 'application/json', 'content-length': '1000000' }), 401],
    ['401 at /recordings (no token)', post('/recordings', { 'content-type': 'application/x-ndjson', 'content-length': '1000000' }), 401],
    [
      '413 for a body announced over the limit',
      post('/recordings', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson', 'content-length': String(8 * 1024 ** 4) }),
      413,
    ],
    [
      '413 at /chat for a body announced over the limit',
      post('/chat', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': String(64 * 1024 ** 3) }),
      413,
    ],
    ['415 before the body is read', post('/recordings', { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain', 'content-length': '1000000' }), 415],
  ])('%s: answered with Connection: close, and closed while the body still dribbles', async (_name, head, status) => {
    const d = dribble(head);
    const ms = await Promise.race([d.closed, new Promise<number>((r) => setTimeout(() => r(Infinity), DRIBBLE_MS))]);
    d.socket.destroy();
    expect(d.answer()).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(d.answer().toLowerCase()).toContain('\r\nconnection: close\r\n');
    expect(ms).toBeLessThan(CLOSED_WITHIN_MS);
  });
});

describe('an authenticated body slower than the minimum rate', () => {
  it.each([
    ['POST /recordings', post('/recordings', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson', 'content-length': '1000000' })],
    ['POST /graphql', post('/graphql', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '1000000' })],
    ['POST /agui', post('/agui', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '1000000' })],
    // /chat: a useChat request whose body never ends (approval responses included) holds nothing past the window.
    ['POST /chat', post('/chat', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': '1000000' })],
    [
      'POST /chat, chunked',
      post('/chat', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }) + '100000\r\n',
    ],
    [
      'POST /graphql, chunked',
      post('/graphql', { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' }) + '100000\r\n',
    ],
  ])('%s: 408 and the connection cut within the window', async (_name, head) => {
    const d = dribble(head);
    const ms = await Promise.race([d.closed, new Promise<number>((r) => setTimeout(() => r(Infinity), DRIBBLE_MS))]);
    d.socket.destroy();
    expect(d.answer()).toMatch(/^HTTP\/1\.1 408 /);
    expect(d.answer()).toContain('REQUEST_TIMEOUT');
    expect(ms).toBeLessThan(CLOSED_WITHIN_MS);
  });

  it('fifty at once from one token: each answered and cut, a fair request answered meanwhile, and the uploads cut let go of their places (before: held for good)', async () => {
    const heads = ['/graphql', '/recordings', '/agui', '/chat', '/graphql'].map((door) =>
      post(door, {
        authorization: `Bearer ${TOKEN}`,
        'content-type': door === '/recordings' ? 'application/x-ndjson' : 'application/json',
        'content-length': '1000000',
      }),
    );
    const many = Array.from({ length: 50 }, (_, i) => dribble(heads[i % heads.length]));
    const fair = await fetch(app.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(await fair.json()).toEqual({ data: { __typename: 'Query' } });
    const closed = await Promise.all(many.map((d) => Promise.race([d.closed, new Promise<number>((r) => setTimeout(() => r(Infinity), DRIBBLE_MS))])));
    for (const d of many) d.socket.destroy();
    expect(closed.filter((ms) => !(ms < CLOSED_WITHIN_MS))).toEqual([]);
    // 408 once its window passed, or 429 at once past the tenant's uploads at a time (FORKLINE_MAX_UPLOADS_PER_TENANT).
    expect(many.map((d) => d.answer().slice(0, 12)).filter((status) => status !== 'HTTP/1.1 408' && status !== 'HTTP/1.1 429')).toEqual([]);
    // The uploads cut let go of the tenant's places: a recording is read again (its lines refused, not its upload).
    await waitFor(
      async () =>
        (
          await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
            method: 'POST',
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/x-ndjson' },
            body: 'not a recording\n',
          })
        ).status === 400,
      { timeoutMs: CLOSED_WITHIN_MS, what: 'the cut uploads let go of their places' },
    );
  });

  it('a body at a fair rate is read whole and answered', async () => {
    const body = JSON.stringify({ query: '{ __typename }' });
    const res = await fetch(app.url, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body });
    expect(await res.json()).toEqual({ data: { __typename: 'Query' } });
  });
});

describe('a body sent to a door that reads none (GET, OPTIONS, DELETE)', () => {
  let sessionId: string;
  beforeAll(async () => {
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: 'mutation { createSession(input: { title: "slow" }) { id } }' }),
    });
    sessionId = ((await res.json()) as { data: { createSession: { id: string } } }).data.createSession.id;
  });
  const request = (method: string, path: string) =>
    `${method} ${path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n`;
  it.each([
    ['GET /sessions/<id>/events (the history page)', () => request('GET', `/sessions/${sessionId}/events`), 200],
    ['GET /sessions/<id>/events of a session not found', () => request('GET', '/sessions/ses_missing/events'), 404],
    ['GET /recordings (a download)', () => request('GET', `/recordings?session=${sessionId}`), 200],
    ['GET /chat/<id>/stream (nothing to resume)', () => request('GET', `/chat/${sessionId}/stream`), 204],
    ['GET /healthz', () => request('GET', '/healthz'), 200],
    ['GET /graphql', () => request('GET', '/graphql?query=%7B__typename%7D'), 408],
    ['OPTIONS /graphql', () => request('OPTIONS', '/graphql'), 408],
    ['DELETE /graphql', () => request('DELETE', '/graphql'), 408],
    ['PUT /recordings', () => request('PUT', '/recordings'), 405],
  ])('%s: answered and closed while the body still dribbles', async (_name, head, status) => {
    const d = dribble(head());
    const ms = await Promise.race([d.closed, new Promise<number>((r) => setTimeout(() => r(Infinity), DRIBBLE_MS))]);
    d.socket.destroy();
    expect(d.answer()).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    expect(ms).toBeLessThan(CLOSED_WITHIN_MS);
  });
});

describe('Expect: 100-continue and then no body', () => {
  it.each(['/agui', '/chat', '/recordings', '/graphql'])('%s: 100 Continue, then 408 and the connection cut within the window', async (door) => {
    const { hostname, port } = new URL(app.url);
    const socket = net.connect({ host: hostname, port: Number(port) });
    let answer = '';
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')));
    socket.on('error', () => {});
    const type = door === '/recordings' ? 'application/x-ndjson' : 'application/json';
    socket.write(post(door, { authorization: `Bearer ${TOKEN}`, 'content-type': type, 'content-length': '1000', expect: '100-continue' }));
    const since = Date.now();
    const ms = await Promise.race([
      new Promise<number>((r) => socket.once('close', () => r(Date.now() - since))),
      new Promise<number>((r) => setTimeout(() => r(Infinity), DRIBBLE_MS)),
    ]);
    socket.destroy();
    expect(answer).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 408 /);
    expect(ms).toBeLessThan(CLOSED_WITHIN_MS);
  });
});

describe('connections per client address', () => {
  let capped: TestApp;
  beforeAll(async () => {
    capped = await startTestApp({ security: { maxConnectionsPerAddress: 3 } });
  });
  afterAll(() => capped?.close());

  const open = () =>
    new Promise<{ socket: net.Socket; closed: Promise<void> }>((resolve, reject) => {
      const { hostname, port } = new URL(capped.url);
      const socket = net.connect({ host: hostname, port: Number(port) });
      socket.on('error', () => {});
      const closed = new Promise<void>((r) => socket.once('close', () => r()));
      socket.once('connect', () => resolve({ socket, closed }));
      socket.once('close', () => reject(new Error('closed before connecting')));
    });

  it('refuses one past the cap as it is accepted; a slot frees when one closes', async () => {
    const held = [await open(), await open(), await open()];
    const extra = await open(); // the kernel completes the handshake; the server destroys it on accept
    const refusedIn = await Promise.race([extra.closed.then(() => 'closed'), new Promise((r) => setTimeout(() => r('still open'), 5_000))]);
    expect(refusedIn).toBe('closed');
    for (const h of held) expect(h.socket.destroyed).toBe(false);

    held.pop()!.socket.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const res = await fetch(capped.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    expect(await res.json()).toEqual({ data: { __typename: 'Query' } });
    for (const h of held) h.socket.destroy();
  });
});

describe('configuration', () => {
  it('reads the body rate and the per-address cap from the environment (0: off), with their defaults', () => {
    const set = securityOptions(
      loadConfig({ FORKLINE_HTTP_BODY_MIN_BYTES_PER_S: '0', FORKLINE_HTTP_BODY_RATE_WINDOW_MS: '2000', FORKLINE_MAX_CONNECTIONS_PER_ADDRESS: '0' }),
    );
    expect([set.timeouts?.bodyMinBytesPerSecond, set.timeouts?.bodyRateWindowMs, set.maxConnectionsPerAddress]).toEqual([0, 2000, 0]);
    const defaults = securityOptions(loadConfig({}));
    expect([defaults.timeouts?.bodyMinBytesPerSecond, defaults.timeouts?.bodyRateWindowMs, defaults.maxConnectionsPerAddress]).toEqual([8192, 10_000, 1024]);
    expect(() => loadConfig({ FORKLINE_HTTP_BODY_RATE_WINDOW_MS: '10' })).toThrow(/FORKLINE_HTTP_BODY_RATE_WINDOW_MS/);
  });
});

describe('a body at a fair rate that takes longer than FORKLINE_HTTP_REQUEST_TIMEOUT_MS', () => {
  const REQUEST_MS = 1500;
  let slow: TestApp;
  beforeAll(async () => {
    slow = await startTestApp({
      // Parts every 300 ms: each rate window of a second sees several. Short headers: node looks at its connections'
      // deadlines every quarter of it (the default, every 5 s, would let a 3 s request pass any deadline).
      security: { rateLimit: false, timeouts: { headersMs: 1000, requestMs: REQUEST_MS, bodyMinBytesPerSecond: 1000, bodyRateWindowMs: 1000 } },
    });
  });
  afterAll(() => slow?.close());

  /** Posts `body` in ten parts over about twice the request deadline (well above the minimum rate): status and answer. */
  async function sendSlowly(path: string, type: string, body: string): Promise<{ status: number; text: string }> {
    const bytes = Buffer.from(body);
    const parts = 10;
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        for (let i = 0; i < parts; i++) {
          controller.enqueue(bytes.subarray(Math.floor((i * bytes.length) / parts), Math.floor(((i + 1) * bytes.length) / parts)));
          await new Promise((r) => setTimeout(r, (2 * REQUEST_MS) / parts));
        }
        controller.close();
      },
    });
    try {
      const res = await fetch(slow.url.replace(/\/graphql$/, path), {
        method: 'POST',
        headers: { 'content-type': type, 'content-length': String(bytes.length) },
        body: stream,
        duplex: 'half',
      } as RequestInit);
      return { status: res.status, text: await res.text() };
    } catch (err) {
      return { status: 0, text: String((err as Error).cause ?? err) };
    }
  }

  it('a recording upload is read whole and imported (its size, not a clock, sets how long it takes: the rate alone bounds it)', async () => {
    const lines = longRecordingLines(300, 'slow link');
    const r = await sendSlowly('/recordings', 'application/x-ndjson', `${lines.join('\n')}\n`);
    expect(r.status, r.text.slice(0, 300)).toBe(201);
    expect(JSON.parse(r.text).session).toMatchObject({ eventCount: lines.length - 1, title: 'slow link' });
  });

  it('a GraphQL body is still cut at the deadline: 408', async () => {
    const r = await sendSlowly('/graphql', 'application/json', JSON.stringify({ query: '{ __typename }', variables: { pad: 'x'.repeat(20_000) } }));
    expect(r.status, r.text.slice(0, 300)).toBe(408);
    expect(r.text).not.toContain('FORKLINE_HTTP_BODY_MIN_BYTES_PER_S'); // the deadline's 408, not the rate's
  });
});
