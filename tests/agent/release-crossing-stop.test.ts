// The drive's side of a renewal that crosses the append ending a turn
// (SessionHost.drive): the renewal finds the lease given back and stops the
// runner as lease-lost while that append's answer is still on its way (its
// runner has not seen that it released the lease). The runner then ends having
// released its lease, not lost it: input that came meanwhile (the host was
// woken for it) runs at once under a lease claimed anew. Treated as lost, the
// drive ended and the input waited, its session held by nobody, until a
// periodic look for work found it.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { FakeClock } from '../helpers/fake-clock.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { TURNS_CHANNEL } from '../../src/store/channels.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';

/** Longer than the test: the heartbeat runs only when the test moves the clock (no look for work either). */
const TTL_MS = 60_000;
let app: TestApp;
let proxy: TcpProxy;
/** Another process's connections, and its store. */
let other: pg.Pool;
let otherStore: SessionStore;
const clock = new FakeClock();
const scope = { tenant: 'local' };

let directUrl: string;

beforeAll(async () => {
  const databaseUrl = (directUrl = await createTestDatabase());
  proxy = await startTcpProxy(databaseUrl);
  // The pool goes through the proxy (the test holds an append's answer there); the LISTEN connection, where renewals run, does not.
  app = await startTestApp({ databaseUrl: proxy.url, directUrl: databaseUrl, leaseTtlMs: TTL_MS, clock });
  other = new pg.Pool({ ...pgConfigFromUrl(databaseUrl), max: 2 });
  otherStore = new SessionStore(other, toolEffectOf);
});
afterAll(async () => {
  await app?.close();
  await other?.end();
  await proxy?.close();
});

const turnEnds = async (id: string) =>
  (await otherStore.log.page(id, -1, 100)).filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason);
const leaseOwner = async (id: string) =>
  (await other.query<{ owner: string | null }>(`SELECT "leaseOwner" AS owner FROM "Session" WHERE id = $1`, [id])).rows[0].owner;
/** When the heartbeat's renewal (store/leases.ts LEASE_SQL.renew) last finished on any backend. */
const lastRenewal = async () =>
  (
    await other.query<{ at: Date | null }>(
      `SELECT max(state_change) AS at FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle' AND query LIKE '%renewed AS%'`,
    )
  ).rows[0].at?.getTime() ?? 0;

describe("a renewal that stops a runner whose releasing append's answer is on its way", () => {
  it('leaves the drive to run the input that came meanwhile', async () => {
    const { id } = await app.services.store.createSession(scope, { title: 'crossing stop' });
    // The answer's first words, as the runner streams them: past its turn's opening and every read before the model
    // call (held replies before then would stop the turn before its last append, not after it).
    const listener = new pg.Client(pgConfigFromUrl(directUrl));
    await listener.connect();
    let streaming = false;
    listener.on('notification', (n) => (streaming ||= n.channel === TURNS_CHANNEL && !!n.payload?.includes(id)));
    await listener.query(`LISTEN ${TURNS_CHANNEL}`);
    await app.services.controller.sendMessage(scope, id, '!slow 1000\nstreamed slowly');
    await waitFor(async () => streaming, { what: 'the answer to stream' });
    await listener.end();

    // While the answer streams, the pool's answers are held: the turn's last append commits, giving the lease back, unanswered.
    const replies = proxy.holdReplies();
    await waitFor(async () => (await leaseOwner(id)) === null, { what: 'the append that gives the lease back' });

    // The heartbeat renews on the LISTEN connection: the lease is not held, and the runner has not seen its append's answer.
    const before = await lastRenewal();
    await clock.advance(TTL_MS / 3);
    await waitFor(async () => (await lastRenewal()) > before, { what: 'the renewal' });
    await new Promise((r) => setTimeout(r, 200)); // its answer reaches the heartbeat

    // Input comes meanwhile, from another process, and this host is woken for it.
    await otherStore.queueInput(id, 'and again');
    void app.services.host.wake(id, scope.tenant);

    replies.resume();
    await waitFor(async () => (await turnEnds(id)).length === 2, { what: 'the second turn to end', timeoutMs: 15_000 });
    expect(await turnEnds(id)).toEqual(['completed', 'completed']);
  });
});
