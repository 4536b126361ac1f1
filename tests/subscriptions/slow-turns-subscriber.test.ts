// A sessionTurns subscriber that stops reading is dropped once more updates
// are queued for it than the bound (update-queue.ts): it sees why when it
// reads again — an error for its subscription over graphql-ws, an error event
// before the end of its stream over SSE — with the code SUBSCRIBER_TOO_SLOW.
// (It saw INTERNAL_SERVER_ERROR "Unexpected error.".)
import http from 'node:http';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
const scope = { tenant: 'local' };
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

/** Turn updates for `sessionId` until the server drops its one sessionTurns subscriber (bounded). */
async function outrun(sessionId: string) {
  const reason = 'r'.repeat(500);
  for (let batch = 0; batch < 40 && app.services.live.stats().turns > 0; batch++) {
    for (let i = 0; i < 1000; i++) app.services.live.publishTurnUpdate({ sessionId, kind: 'STEP_ENDED', turn: 1, step: batch * 1000 + i, reason });
    await waitFor(() => app.services.live.stats().turns === 0, { timeoutMs: 250 }).catch(() => {}); // delivered by now, or more is needed
  }
  expect(app.services.live.stats().turns).toBe(0);
}

const TURNS = `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind step reason } }`;

describe('a sessionTurns subscriber that stops reading, dropped past the bound on queued updates', () => {
  it('over graphql-ws gets an error for its subscription that says why, when it reads again', async () => {
    const id = (await app.services.store.createSession(scope, {})).id;
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    const errors: unknown[] = [];
    let nexts = 0;
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data));
      if (msg.type === 'connection_ack') ws.send(JSON.stringify({ id: 't', type: 'subscribe', payload: { query: TURNS, variables: { id } } }));
      else if (msg.type === 'next') nexts++;
      else if (msg.type === 'error') errors.push(msg.payload);
    });
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'registered' });
    const tcp = (ws as unknown as { _socket: import('node:net').Socket })._socket;
    tcp.pause();
    await outrun(id);
    tcp.resume();
    await waitFor(() => errors.length, { what: 'the error', timeoutMs: 20_000 });
    expect(nexts).toBeGreaterThan(0);
    expect(errors).toEqual([
      [
        expect.objectContaining({
          message: expect.stringMatching(/subscriber too slow/),
          extensions: expect.objectContaining({ code: 'SUBSCRIBER_TOO_SLOW' }),
        }),
      ],
    ]);
    ws.close();
  });

  it('over SSE ends its stream with an error event that says why, then complete', async () => {
    const id = (await app.services.store.createSession(scope, {})).id;
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(app.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' } }, resolve);
      req.on('error', reject);
      req.end(JSON.stringify({ query: TURNS, variables: { id } }));
    });
    res.pause();
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'registered' });
    await outrun(id);
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (text += chunk));
    res.resume();
    await new Promise((r) => res.once('end', r));
    const events = text.split('\n\n').filter((e) => e.startsWith('event:'));
    expect(events.at(-1)).toMatch(/^event: complete/);
    const last = events.at(-2)!;
    expect(last).toMatch(/^event: next\ndata: /);
    const payload = JSON.parse(last.slice(last.indexOf('data: ') + 6));
    expect(payload.errors).toEqual([
      expect.objectContaining({ message: expect.stringMatching(/subscriber too slow/), extensions: expect.objectContaining({ code: 'SUBSCRIBER_TOO_SLOW' }) }),
    ]);
  });
});
