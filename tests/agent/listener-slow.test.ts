// A LISTEN connection that is only slow — its statement waits behind a lock or runs long,
// or Postgres is busy — is no silent one: it is kept (docs/operations.md "The
// LISTEN connection"). A renewal on it that misses its deadline still goes to
// the pool (the lease is kept either way), but the connection is not made
// again: a reconnect drops what was notified to it meanwhile, and a cancel
// dropped that way is made up by nothing. Before, it was destroyed at the
// renewal's deadline, and a cancel sent while its renewal waited never reached
// the turn.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { CONTROL_CHANNEL, encodeCancel } from '../../src/store/channels.ts';
import { PgListener } from '../../src/store/pg-listener.ts';

// A renewal every 2 s with a 2 s deadline; a lock taken right after a renewal leaves the lease 2 s to spare.
const TTL_MS = 6000;
let app: TestApp;
/** Another process's connections. */
let other: pg.Pool;
let databaseUrl: string;
const scope = { tenant: 'local' };

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  app = await startTestApp({ databaseUrl, leaseTtlMs: TTL_MS });
  other = new pg.Pool({ ...pgConfigFromUrl(databaseUrl), max: 3 });
});
afterAll(async () => {
  await other?.end();
  await app?.close();
});

const turnEnds = async (id: string) =>
  (await app.services.store.log.page(id, -1, 100)).filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason);
const expiry = async (id: string) =>
  (await other.query<{ at: Date }>(`SELECT "leaseExpiresAt" AS at FROM "Session" WHERE id = $1`, [id])).rows[0].at?.getTime();
/** Backends whose heartbeat renewal (store/leases.ts LEASE_SQL.renew) waits for a lock, first sent first. */
const waitingRenewals = async () =>
  (
    await other.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%renewed AS%' ORDER BY query_start`,
    )
  ).rows.map((r) => r.pid);
const stateOf = async (pid: number) =>
  (await other.query<{ state: string; wait: string | null }>(`SELECT state, wait_event_type AS wait FROM pg_stat_activity WHERE pid = $1`, [pid])).rows[0];

describe('a LISTEN connection whose renewal waits behind a lock', () => {
  it('is kept, and a cancel sent while the renewal waits reaches the turn', async () => {
    const { id } = await app.services.store.createSession(scope, { title: 'slow listener' });
    await app.services.controller.sendMessage(scope, id, '!call sleep {"ms": 60000}');
    await waitFor(async () => (await app.services.store.log.page(id, -1, 100)).some((e) => e.type === 'model/message'), { what: 'the tool call' });

    // Right after a renewal, another process holds "Session" locked: the next renewal waits on the LISTEN connection.
    const renewed = await expiry(id);
    await waitFor(async () => (await expiry(id)) !== renewed, { what: 'a renewal' });
    const locker = await other.connect();
    let listenerPid: number;
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE "Session" IN ACCESS EXCLUSIVE MODE');
      [listenerPid] = await waitFor(async () => ((await waitingRenewals()).length > 0 ? await waitingRenewals() : undefined), {
        what: 'the renewal to wait for the lock',
      });

      // A cancel announced now is the listener's to deliver once its statement ends.
      await other.query('SELECT pg_notify($1, $2)', [CONTROL_CHANNEL, encodeCancel(id)]);

      // Past the renewal's deadline the pool renews instead.
      await waitFor(async () => (await waitingRenewals()).some((pid) => pid !== listenerPid), { what: 'the renewal on the pool' });
      // The listener's statement is cancelled (it answers: the connection is alive), and the connection kept.
      await waitFor(async () => (await stateOf(listenerPid))?.state === 'idle', { what: "the listener's renewal to be cancelled", timeoutMs: 10_000 });
      await locker.query('COMMIT');
    } finally {
      await locker.query('ROLLBACK').catch(() => {});
      locker.release();
    }

    // The cancel was delivered: the turn ends cancelled, by this process (its lease was never lost).
    await waitFor(async () => (await turnEnds(id)).length === 1, { what: 'the turn to end', timeoutMs: 15_000 });
    expect(await turnEnds(id)).toEqual(['cancelled']);
    // The same connection still serves the listener.
    expect((await stateOf(listenerPid!))?.state).toBe('idle');
  });
});

describe('a LISTEN connection whose statement runs past its deadline', () => {
  it('is kept, and what was notified meanwhile arrives', async () => {
    const listener = new PgListener(pgConfigFromUrl(databaseUrl), [CONTROL_CHANNEL]);
    await listener.start();
    try {
      let reconnects = 0;
      listener.on('reconnect', () => reconnects++);
      const heard: string[] = [];
      listener.on(CONTROL_CHANNEL, (p: string) => heard.push(p));

      // A statement that takes longer than its deadline on a connection that is fine: its caller goes elsewhere.
      const slow = listener.query({ text: 'SELECT pg_sleep(2)' }, 300);
      await other.query('SELECT pg_notify($1, $2)', [CONTROL_CHANNEL, 'sent while it ran']);
      await expect(slow).rejects.toThrow(/no answer within 300 ms/);

      await waitFor(() => heard.length > 0, { what: 'the notification' });
      expect(heard).toEqual(['sent while it ran']);
      // The same connection serves on.
      await waitFor(() => listener.query({ text: 'SELECT 1' }, 5000), { what: 'the check to end' });
      expect(reconnects).toBe(0);
    } finally {
      await listener.close();
    }
  });
});
