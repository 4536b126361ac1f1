// Direct WebSocket delivery (http/graphql/ws-delivery.ts) corks the TCP socket
// ws writes to, which it takes from graphql-ws's public `extra.request` (ws
// keeps its own reference private). This fence fails when graphql-ws or ws
// stop making the upgrade request's socket the one a WebSocket's frames go
// to: a control frame sent while that socket is corked must wait in it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Plugin } from 'graphql-yoga';
import { startTestApp, type TestApp } from '../../helpers/app.ts';
import { subscribeWs } from '../../helpers/subscribe.ts';
import type { WsOperation } from '../../../src/http/graphql/ws-delivery.ts';

let app: TestApp;
const seen: Array<{ corkedBefore: number; corkedAfter: number; queuedWhileCorked: number; open: boolean }> = [];

/** At each graphql-ws operation: cork the socket delivery would cork, ping through ws's public API, and see where the bytes wait. */
const probe: Plugin = {
  onSubscribe({ args }) {
    const ws = (args.contextValue as { ws?: WsOperation }).ws;
    if (!ws) return;
    const { socket, raw } = ws;
    const before = raw.writableLength;
    raw.cork();
    const corkedBefore = raw.writableCorked;
    socket.ping(); // a control frame: the client answers it, the protocol is untouched
    const queuedWhileCorked = raw.writableLength - before;
    raw.uncork();
    seen.push({ corkedBefore, corkedAfter: raw.writableCorked, queuedWhileCorked, open: socket.readyState === socket.OPEN });
  },
};

beforeAll(async () => {
  app = await startTestApp({ yogaPlugins: [probe] });
});
afterAll(() => app.close());

describe('the socket ws-delivery corks', () => {
  it("is the one ws writes the WebSocket's frames to", async () => {
    const id = (await app.services.store.createSession({ tenant: 'local' }, { title: 'cork' })).id;
    await app.services.store.append(id, [{ type: 'plugin/test/n', data: { n: 1 } }]);
    const sub = subscribeWs(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq type } }', { id });
    // Delivered through the corked socket all the same.
    const items = await sub.count(2);
    expect(items.map((i) => i.sessionEvents)).toEqual([
      { seq: 0, type: 'session/title' },
      { seq: 1, type: 'plugin/test/n' },
    ]);
    await sub.close();
    expect(seen).toHaveLength(1);
    const [s] = seen;
    expect(s.open).toBe(true);
    expect(s.corkedBefore).toBe(1);
    // A ping frame is 2 bytes (no payload): they waited in the corked socket.
    expect(s.queuedWhileCorked).toBe(2);
    expect(s.corkedAfter).toBe(0);
  });
});
