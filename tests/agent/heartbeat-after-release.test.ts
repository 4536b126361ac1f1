// A heartbeat's renewal that crosses the append ending a turn: that append
// gave the lease back (the session was left idle), input came meanwhile, and
// the same drive runs it under a lease claimed anew. The renewal, sent under
// the old lease, finds it not held; that is no lost lease, and the runner of the
// new turn must not be stopped for it (SessionHost.heartbeat): before, it was,
// and the new turn waited, its lease held by nobody running it, until the lease
// ran out and a look for work took it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { FakeClock } from '../helpers/fake-clock.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/wait.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';

/** Longer than the test: a lease ends only when given back (appends extend it; the heartbeat runs when the test moves the clock). */
const TTL_MS = 60_000;
let app: TestApp;
let proxy: TcpProxy;
const clock = new FakeClock();
const scope = { tenant: 'local' };

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  proxy = await startTcpProxy(databaseUrl);
  // The LISTEN connection, where renewals run, goes through the proxy: the test holds a renewal there.
  app = await startTestApp({ databaseUrl, directUrl: proxy.url, leaseTtlMs: TTL_MS, clock });
});
afterAll(async () => {
  await app?.close();
  await proxy?.close();
});

const log = (id: string) => app.services.store.log.page(id, -1, 100);
const turnEnds = async (id: string) => (await log(id)).filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason);
const toolCalls = async (id: string) =>
  (await log(id)).filter((e) => e.type === 'model/message' && (e.data as { toolCalls: unknown[] }).toolCalls.length > 0).length;

describe('a renewal crossing the append that gave the lease back', () => {
  it('does not stop the runner of the input that came meanwhile', async () => {
    const { id } = await app.services.store.createSession(scope, { title: 'crossing' });
    await app.services.controller.sendMessage(scope, id, '!call sleep {"ms": 1000}');
    await waitFor(async () => (await toolCalls(id)) === 1, { what: 'the first tool call' });

    // A heartbeat renews the lease the first turn holds; its statement is held on the way.
    const renewal = proxy.hold();
    await clock.advance(TTL_MS / 3);
    await waitFor(() => renewal.heldBytes() > 0, { what: 'the renewal to be sent' });

    // The first turn's last append gives the lease back; a message comes as it lands, while the drive still runs.
    const onUpdate = (u: TurnUpdate) => {
      if (u.kind !== 'TURN_ENDED') return;
      app.turnUpdates.off(id, onUpdate);
      void app.services.controller.sendMessage(scope, id, '!call sleep {"ms": 3000}');
      void app.services.host.wake(id, scope.tenant);
    };
    app.turnUpdates.on(id, onUpdate);
    await waitFor(async () => (await toolCalls(id)) === 2, { what: 'the second tool call' });

    // The renewal, under the lease given back, answers now: it renews nothing.
    renewal.resume();
    await waitFor(async () => (await turnEnds(id)).length === 2, { what: 'the second turn to end', timeoutMs: 15_000 });
    expect(await turnEnds(id)).toEqual(['completed', 'completed']);
  });
});
