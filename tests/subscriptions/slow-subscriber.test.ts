// A subscriber that reads slowly is not dropped while it reads; one that stops
// reading altogether is closed with a code and a reason it can see (it used to
// be terminated after one missed pong: 1006, no reason), even when it reads
// again long after the close (the frame used to be dropped 5 s after it, with
// what was queued ahead of it: 1006 again).
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { UNRESPONSIVE_CLOSE_CODE } from '../../src/http/ws-liveness.ts';
import { FakeClock } from '../helpers/fake-clock.ts';

let app: TestApp;
/** Silence the server tolerates; the slow reader below pauses for a quarter of it (margin for a loaded machine). */
const DEAD_AFTER_MS = 1200;
/** How long the server keeps a socket it closed for silence, for the client to read to the close frame. */
const CLOSE_GRACE_MS = 12_000;
/** Client-side ports of the sockets the server closed for silence (the test waits for its own). */
const closedForSilence = new Set<number>();
const scope = { tenant: 'local' };
/** Liveness runs on this clock: real time moves it (a slow reader is timed as in life), and tests jump it ahead instead of waiting. */
const clock = new FakeClock();
let pump: NodeJS.Timeout;
beforeAll(async () => {
  pump = setInterval(() => void clock.advance(25), 25);
  app = await startTestApp({
    clock,
    wsLiveness: {
      pingMs: 100,
      deadAfterMs: DEAD_AFTER_MS,
      closeGraceMs: CLOSE_GRACE_MS,
      onUnresponsive: (socket) => void closedForSilence.add((socket as unknown as { _socket: import('node:net').Socket })._socket.remotePort!),
    },
  });
});
afterAll(async () => {
  clearInterval(pump);
  await app.close();
});

/** A graphql-ws subscriber on a raw socket, so the test controls when it reads. */
async function rawSubscriber(sessionId: string) {
  const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
  const seqs: number[] = [];
  let closed: { code: number; reason: string } | undefined;
  ws.on('message', (data) => {
    const msg = JSON.parse(String(data));
    if (msg.type === 'connection_ack') {
      ws.send(
        JSON.stringify({
          id: '1',
          type: 'subscribe',
          payload: { query: `subscription($id: ID!) { sessionEvents(sessionId: $id) { seq data } }`, variables: { id: sessionId } },
        }),
      );
    } else if (msg.type === 'next') seqs.push(msg.payload.data.sessionEvents.seq);
  });
  ws.on('close', (code, reason) => (closed = { code, reason: String(reason) }));
  await new Promise((r) => ws.once('open', r));
  ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
  const tcp = (ws as unknown as { _socket: import('node:net').Socket })._socket;
  return { ws, seqs, tcp, closed: () => closed };
}

async function burst(sessionId: string, events: number) {
  const big = 'x'.repeat(20_000); // ~20 kB each: the socket buffers fill quickly
  for (let i = 0; i < events; i += 50) {
    await app.services.store.append(
      sessionId,
      Array.from({ length: 50 }, (_, j) => ({ type: 'plugin/test/big', data: { i: i + j, big } })),
    );
  }
}

/** A subscriber that stopped reading during a burst of `events`, once the server has given up on it. */
async function givenUp(events: number) {
  const id = (await app.services.store.createSession(scope, {})).id;
  const sub = await rawSubscriber(id);
  await waitFor(() => app.services.live.stats().events === 1, { what: 'registered' });
  sub.tcp.pause();
  await burst(id, events);
  // Past deadAfterMs without a pong or a byte read, the server closes it (however long the burst took to write).
  await waitFor(() => closedForSilence.has(sub.tcp.localPort!), { what: 'the server to give up on it', timeoutMs: 20_000 });
  return sub;
}

describe('slow WebSocket subscribers', () => {
  it('one that reads slowly keeps its subscription and gets every event, in order', async () => {
    const id = (await app.services.store.createSession(scope, {})).id;
    const sub = await rawSubscriber(id);
    await waitFor(() => app.services.live.stats().events === 1, { what: 'registered' });
    // Read for 5 ms, stop for 300 ms: it misses several pings in a row, yet keeps reading.
    sub.tcp.pause();
    const slow = setInterval(() => {
      sub.tcp.resume();
      setTimeout(() => sub.tcp.pause(), 5);
    }, 305);
    const started = Date.now();
    try {
      await burst(id, 1500);
      await waitFor(() => sub.seqs.length === 1500 || sub.closed(), { what: 'all events', timeoutMs: 60_000 });
    } finally {
      clearInterval(slow);
      sub.tcp.resume();
    }
    expect(sub.closed()).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThan(DEAD_AFTER_MS); // it really was slow: past the time a silent socket gets
    expect(sub.seqs).toEqual(Array.from({ length: 1500 }, (_, i) => i));
    sub.ws.close();
  });

  it('one that stops reading is closed with 4408 and a reason, which it sees when it reads again', async () => {
    const sub = await givenUp(200);
    sub.tcp.resume();
    await waitFor(() => sub.closed(), { what: 'the close', timeoutMs: 10_000 });
    expect(sub.closed()).toMatchObject({ code: UNRESPONSIVE_CLOSE_CODE });
    expect(sub.closed()!.reason).toMatch(/no answer to pings and nothing read/);
    await waitFor(() => app.services.live.stats().events === 0, { what: 'cleanup' });
  });

  it('one that stays stalled well past the close still sees the code and the reason when it reads again', async () => {
    const sub = await givenUp(400); // more than the socket buffers take: the close frame waits behind what it has not read
    // Stalled on: the server used to terminate it 5 s after the close, dropping the frame with what was queued ahead of it (1006, no reason).
    await clock.advance(7000);
    sub.tcp.resume();
    await waitFor(() => sub.closed(), { what: 'the close', timeoutMs: 20_000 });
    expect(sub.closed()).toMatchObject({ code: UNRESPONSIVE_CLOSE_CODE });
    expect(sub.closed()!.reason).toMatch(/no answer to pings and nothing read/);
    expect(sub.seqs).toEqual(Array.from({ length: sub.seqs.length }, (_, i) => i)); // what it read before, in order
  });

  it('one that never reads again is let go once the grace after its close is over', async () => {
    const sub = await givenUp(400);
    // Its subscription and what was queued for it are released without the client doing anything.
    await clock.advance(CLOSE_GRACE_MS);
    await waitFor(() => app.services.live.stats().events === 0, { what: 'the socket to be let go' });
    sub.ws.terminate();
  });
});
