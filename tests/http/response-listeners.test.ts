// What a long stream leaves on its response: the listeners each door and
// library adds to a ServerResponse are a few per response, never one per event
// or per wait for a slow reader (a MaxListenersExceededWarning, 11 `close`
// listeners on one response, was reported once from
// tests/security/statement-scopes.test.ts and not found again). Each stream
// below goes to a client that reads slowly, so its buffer fills and its door
// waits for it to drain many times; the most listeners of each kind any of
// its responses held stays small.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
let base: string;
/** Per request (method and path), the most listeners of each event its response held at once. */
const most = new Map<string, Record<string, number>>();
const EVENTS = ['close', 'drain', 'finish', 'error'];

beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
  app.server.httpServer.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const key = `${req.method} ${req.url?.split('?')[0]}`;
    const seen = (most.get(key) ?? most.set(key, {}).get(key))!;
    for (const method of ['on', 'once', 'addListener', 'prependListener', 'prependOnceListener'] as const) {
      const add = res[method].bind(res) as (event: string, fn: (...a: unknown[]) => void) => http.ServerResponse;
      res[method] = ((event: string, fn: (...a: unknown[]) => void) => {
        add(event, fn);
        if (EVENTS.includes(event)) seen[event] = Math.max(seen[event] ?? 0, res.listenerCount(event));
        return res;
      }) as never;
    }
  });
});
afterAll(() => app?.close());

/** Reads `path`'s response a little at a time (its buffer stays full) until `bytes` arrived or it ended. */
function readSlowly(path: string, init: { method?: string; headers?: Record<string, string>; body?: string }, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method: init.method ?? 'GET', headers: init.headers }, (res) => {
      res.pause();
      let got = 0;
      const done = () => (clearInterval(timer), req.destroy(), resolve(got));
      const timer = setInterval(() => {
        for (let chunk = res.read() as Buffer | null, n = 0; chunk && n < 4; chunk = res.read() as Buffer | null, n++) got += chunk.length;
        if (got >= bytes) done();
      }, 20);
      res.on('end', done);
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

describe("a response's listeners on a long stream to a slow reader", () => {
  it('an SSE subscription, a recording download and a /chat answer each hold a few, however many events and waits', async () => {
    const id = (await app.ok('mutation { createSession(input: { title: "long" }) { id } }')).createSession.id as string;
    for (let i = 0; i < 4; i++) {
      await app.services.store.append(
        id,
        Array.from({ length: 100 }, (_, j) => ({ type: 'plugin/test/n', data: { i, j, text: 'x'.repeat(20_000) } })),
      );
    }
    const sse = JSON.stringify({ query: 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq data } }', variables: { id } });
    const streamed = await readSlowly(
      '/graphql',
      { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: sse },
      7_000_000,
    );
    expect(streamed).toBeGreaterThan(7_000_000);
    expect(await readSlowly(`/recordings?session=${id}`, {}, Infinity)).toBeGreaterThan(8_000_000);
    const chat = JSON.stringify({
      id,
      messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: `!slow 1\n${'word '.repeat(2000)}` }] }],
      trigger: 'submit-message',
    });
    expect(await readSlowly('/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat }, Infinity)).toBeGreaterThan(10_000);
    for (const path of ['POST /graphql', 'GET /recordings', 'POST /chat']) {
      const held = most.get(path)!;
      // Today at most 4 (yoga's request signal, a pipe, the stall bound, the door's own): a listener per wait would be hundreds.
      expect(Math.max(...Object.values(held)), `${path}: ${JSON.stringify(held)}`).toBeLessThanOrEqual(5);
    }
  });
});
