// sessionEvents fan-out over graphql-ws (http/graphql/ws-delivery.ts): subscribers
// with the same selection share one payload per event, every subscriber gets
// every event in order from where it asked, and what they get is what an SSE
// subscriber (executed by graphql-js) gets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeSse, subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
const scope = { tenant: 'local' };
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const A = 'subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq type data createdAt } }';
const B =
  'subscription($id: ID!, $after: Int) { ev: sessionEvents(sessionId: $id, afterSeq: $after) { id n: seq ...F } } fragment F on Event { synthetic inherited }';

describe('sessionEvents fan-out', () => {
  it('serialises each event once per selection, however many subscribers, and delivers all of it in order', async () => {
    const id = (await app.services.store.createSession(scope, { title: 'fan' })).id;
    const clients = Array.from({ length: 6 }, () => wsClient(app.url));
    // 24 subscribers of A and 12 of B, several per socket, some from the start and some from the middle.
    const subs = Array.from({ length: 36 }, (_, i) => {
      const after = i % 4 === 3 ? 50 : undefined;
      return { query: i % 3 === 2 ? B : A, after, rec: subscribeWs(app.url, i % 3 === 2 ? B : A, { id, after }, clients[i % clients.length]) };
    });
    const sse = subscribeSse(app.url, A, { id });
    const sseB = subscribeSse(app.url, B, { id });
    await waitFor(() => app.services.live.stats().events === 38, { what: 'all subscribed' });
    for (let i = 0; i < 10; i++) {
      await app.services.store.append(
        id,
        Array.from({ length: 20 }, (_, j) => ({ type: 'plugin/test/n', data: { i: i * 20 + j, text: `x "${j}"` } })),
      );
    }
    const total = 201;
    for (const { rec, after } of subs) await rec.count(total - (after === undefined ? 0 : after + 1));
    await sse.count(total);
    await sseB.count(total);

    for (const { rec, query, after } of subs) {
      const seqs = rec.items.map((d: any) => (query === A ? d.sessionEvents.seq : d.ev.n));
      expect(seqs).toEqual(Array.from({ length: total }, (_, k) => k).filter((k) => after === undefined || k > after));
      // Byte-equal to what graphql-js executes for SSE (same selection, same event).
      const reference = query === A ? sse.items : sseB.items;
      expect(JSON.stringify(rec.items)).toBe(JSON.stringify(reference.slice(after === undefined ? 0 : after + 1)));
    }
    const { payloads: made, frames } = app.server.wsDelivery.counts;
    expect(frames).toBe(subs.reduce((n, s) => n + (total - (s.after === undefined ? 0 : s.after + 1)), 0));
    // Two selections: about two payloads per event (a page re-read after eviction may add a few), not one per subscriber.
    expect(made).toBeLessThanOrEqual(2 * total);
    await Promise.all([...subs.map((s) => s.rec.close()), sse.close(), sseB.close(), ...clients.map((c) => c.dispose())]);
    await waitFor(() => app.services.live.stats().events === 0, { what: 'cleanup' });
  });
});
