// A client that opens a stream and never reads it (docs/operations.md "Memory
// and time"), with real sockets: an AG-UI run's response, a resumed /chat
// answer and a recording download are cut once their client has not taken what is queued for it
// within FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS (1 s here) — before, each was
// held until the client read or left, however long — and the run's turn goes
// on to its end in the log. A server shutting down does not wait on such a
// response, a WebSocket or an SSE stream either. Only what is asserted is
// timed, with wide margins.
import type http from 'node:http';
import net from 'node:net';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { livenessOptions, loadConfig, securityOptions } from '../../src/config.ts';

const TOKEN = 'stalled-readers-token-0123456789';
const TENANT = 'acme';
const STALL_MS = 1000;
/** Turns of a session whose log is ~15 MB: any door that sends it sends more than the socket buffers of both ends hold. */
const BIG_TURNS = 40;
const BIG_TEXT = 'x'.repeat(190_000);

let app: TestApp;
let bigSession: string;
beforeAll(async () => {
  app = await startTestApp({
    security: { apiTokens: new Map([[TOKEN, TENANT]]), rateLimit: false, timeouts: { responseStallMs: STALL_MS } },
  });
  bigSession = (await app.services.store.createSession({ tenant: TENANT }, { title: 'big' })).id;
  for (let n = 1; n <= BIG_TURNS; n++) await app.services.store.append(bigSession, textTurn(n, BIG_TEXT, BIG_TEXT));
}, 120_000);
afterAll(() => app?.close());

/** Sends a request by hand and reads nothing of the answer (the socket is paused from the start). */
function sendAndNeverRead(target: TestApp, method: string, path: string, body = ''): net.Socket {
  const { hostname, port } = new URL(target.url);
  const socket = net.connect({ host: hostname, port: Number(port) });
  socket.on('error', () => {});
  socket.pause();
  const fields = [`host: localhost`, `authorization: Bearer ${TOKEN}`, 'accept: text/event-stream'];
  if (body) fields.push('content-type: application/json', `content-length: ${Buffer.byteLength(body)}`);
  socket.write(`${method} ${path} HTTP/1.1\r\n${fields.join('\r\n')}\r\n\r\n${body}`);
  return socket;
}

/** Streams (SSE, AG-UI runs, /chat answers, recording downloads) and WebSockets the tenant holds open. */
const held = (target: TestApp) => target.server.tenantConnections!.heldBy(TENANT).connections;

/** The server's response to the next request for `path`, as the router got it. */
function nextResponseTo(target: TestApp, path: string): Promise<http.ServerResponse> {
  return new Promise((resolve) => {
    const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url !== path) return;
      target.server.httpServer.off('request', onRequest);
      resolve(res);
    };
    target.server.httpServer.on('request', onRequest);
  });
}

/** Resolves with whether the response was cut (closed before all of it was sent) once it closes; 'held' if it is still open after `ms`. */
const outcome = (res: http.ServerResponse, ms: number) =>
  new Promise<'cut' | 'sent' | 'held'>((resolve) => {
    const timer = setTimeout(() => resolve('held'), ms);
    const done = () => (clearTimeout(timer), resolve(res.writableFinished ? 'sent' : 'cut'));
    if (res.destroyed) done();
    else res.once('close', done);
  });

/** Sends a request to `app` and reads nothing of its answer: what came of the response (the socket destroyed after). */
async function neverRead(method: string, path: string, body = ''): Promise<'cut' | 'sent' | 'held'> {
  const res = nextResponseTo(app, path);
  const socket = sendAndNeverRead(app, method, path, body);
  try {
    return await outcome(await res, 30 * STALL_MS + 30_000);
  } finally {
    socket.destroy();
  }
}

/** forkline_http_stalled_responses_total, as /metrics shows it. */
const stalledCount = async () => Number(/^forkline_http_stalled_responses_total (\d+)$/m.exec(await app.metrics.registry.metrics())?.[1]);

const runInput = (threadId: string, runId: string) =>
  JSON.stringify({ threadId, runId, state: {}, messages: [{ id: `u-${runId}`, role: 'user', content: 'hello' }], tools: [], context: [], forwardedProps: {} });

describe('a response whose client never reads', () => {
  it('an AG-UI run (a thread of megabytes): cut after the stall bound; the run goes on to its end in the log', async () => {
    const res = nextResponseTo(app, '/agui');
    const socket = sendAndNeverRead(app, 'POST', '/agui', runInput(bigSession, 'run-never-reads'));
    try {
      expect(await outcome(await res, 30 * STALL_MS + 30_000)).toBe('cut');
      await waitFor(async () => (await app.services.store.log.page(bigSession, 7 * BIG_TURNS - 1, 100)).some((e) => e.type === 'turn/end'), {
        timeoutMs: 90_000,
        what: "the run's turn ended in the log",
      });
    } finally {
      socket.destroy();
    }
  }, 180_000);

  it('a recording download (megabytes): cut after the stall bound', async () => {
    expect(await neverRead('GET', `/recordings?session=${bigSession}`)).toBe('cut');
    expect(await stalledCount()).toBeGreaterThan(0);
  }, 120_000);
});

describe('a resumed /chat answer whose client never reads', () => {
  it('is cut after the stall bound', async () => {
    // A chat whose last turn a restart interrupted, after an answer of megabytes: GET /chat/<id>/stream replays it.
    const chat = (await app.services.store.createSession({ tenant: TENANT }, { title: 'interrupted chat' })).id;
    const answer = 'y'.repeat(8_000_000);
    await app.services.store.append(chat, [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'talk' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: answer, toolCalls: [] } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'interrupted' } },
    ]);
    expect(await neverRead('GET', `/chat/${chat}/stream`)).toBe('cut');
  }, 120_000);
});

describe('a subscriber that never reads', () => {
  it('a GraphQL subscription over SSE replaying a log of megabytes: cut after the stall bound', async () => {
    const query = `subscription { sessionEvents(sessionId: "${bigSession}") { seq data } }`;
    expect(await neverRead('POST', '/graphql', JSON.stringify({ query }))).toBe('cut');
    await waitFor(() => held(app) === 0, { what: 'the stream let go of its place' });
  }, 120_000);

  it('an event page (GET /sessions/<id>/events) of megabytes: cut after the stall bound, or handed whole to the kernel (a page is bounded in bytes), never held', async () => {
    expect(await neverRead('GET', `/sessions/${bigSession}/events?after=-1&first=500`)).not.toBe('held');
  }, 120_000);

  it('a graphql-ws subscriber replaying a log of megabytes: closed for silence (4408) and cut after the close grace; its place let go', async () => {
    // The liveness bounds made short (60 s and 5 minutes by default, docs/api.md): what is held, and for how long, is bounded.
    let unresponsive = 0;
    const live = await startTestApp({
      security: { apiTokens: new Map([[TOKEN, TENANT]]), rateLimit: false },
      wsLiveness: { pingMs: 100, deadAfterMs: STALL_MS, closeGraceMs: STALL_MS, onUnresponsive: () => unresponsive++ },
    });
    const id = (await live.services.store.createSession({ tenant: TENANT }, { title: 'big' })).id;
    for (let n = 1; n <= BIG_TURNS; n++) await live.services.store.append(id, textTurn(n, BIG_TEXT, BIG_TEXT));
    const ws = new WebSocket(live.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    ws.on('error', () => {});
    try {
      await new Promise<void>((resolve) => ws.once('open', () => resolve()));
      ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${TOKEN}` } }));
      await new Promise<void>((resolve) => ws.once('message', () => resolve()));
      ws.pause();
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: `subscription { sessionEvents(sessionId: "${id}") { seq data } }` } }));
      await waitFor(() => held(live) === 1, { what: 'the socket held' });
      await waitFor(() => unresponsive === 1 && held(live) === 0, { timeoutMs: 60_000, what: 'the silent socket closed and cut' });
    } finally {
      ws.terminate();
      await live.close();
    }
  }, 180_000);
});

describe('shutdown', () => {
  it('is not held by a download, a WebSocket or an SSE stream whose clients stopped reading (no stall bound configured)', async () => {
    const other = await startTestApp({ security: { apiTokens: new Map([[TOKEN, TENANT]]), rateLimit: false, timeouts: { responseStallMs: 0 } } });
    const id = (await other.services.store.createSession({ tenant: TENANT }, { title: 'big' })).id;
    for (let n = 1; n <= BIG_TURNS; n++) await other.services.store.append(id, textTurn(n, BIG_TEXT, BIG_TEXT));
    const path = `/recordings?session=${id}`;
    const download = nextResponseTo(other, path);
    const socket = sendAndNeverRead(other, 'GET', path);
    const sse = sendAndNeverRead(other, 'POST', '/graphql', JSON.stringify({ query: `subscription { sessionEvents(sessionId: "${id}") { seq } }` }));
    // A graphql-ws client that stops reading once connected: it never answers the server's close frame.
    const ws = new WebSocket(other.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise<void>((resolve) => ws.once('open', () => resolve()));
    ws.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${TOKEN}` } }));
    await new Promise<void>((resolve) => ws.once('message', () => resolve()));
    (ws as unknown as { _socket: net.Socket })._socket.pause();
    try {
      await waitFor(async () => (await download).headersSent, { what: 'the download begun' });
      await waitFor(() => held(other) === 3, { what: 'the download, the SSE stream and the socket open' });
      const closed = await Promise.race([other.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('hung'), 60_000))]);
      expect(closed).toBe('closed');
    } finally {
      socket.destroy();
      sse.destroy();
      ws.terminate();
    }
  }, 180_000);
});

describe('configuration', () => {
  it('reads the stall bound from the environment (0: never), with its default', () => {
    expect(securityOptions(loadConfig({ FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS: '0' })).timeouts?.responseStallMs).toBe(0);
    expect(securityOptions(loadConfig({})).timeouts?.responseStallMs).toBe(60_000);
    expect(() => loadConfig({ FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS: '10' })).toThrow(/FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS/);
  });

  it('reads how long a silent WebSocket is kept from the environment, with its defaults', () => {
    expect(livenessOptions(loadConfig({}))).toEqual({ deadAfterMs: 60_000, closeGraceMs: 300_000 });
    expect(livenessOptions(loadConfig({ FORKLINE_WS_SILENCE_TIMEOUT_MS: '5000', FORKLINE_WS_CLOSE_GRACE_MS: '0' }))).toEqual({
      deadAfterMs: 5000,
      closeGraceMs: 0,
    });
    expect(() => loadConfig({ FORKLINE_WS_SILENCE_TIMEOUT_MS: '10' })).toThrow(/FORKLINE_WS_SILENCE_TIMEOUT_MS/);
  });
});
