// Leases as row state (store/leases.ts): a runner's appends are fenced by its
// lease; a runner whose lease is taken over stops and writes nothing; a
// process runs at most its limit of sessions at once and uses at most its pool.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { SessionLog } from '../../src/store/session-log.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
const scope = { tenant: 'local' };
const updates: TurnUpdate[] = [];

beforeAll(async () => {
  app = await startTestApp({ leaseTtlMs: 1500, maxActiveSessions: 3, poolMax: 4 });
  app.turnUpdates.setMaxListeners(0);
});
afterAll(() => app.close());

const create = async () => (await app.services.store.createSession(scope, { title: 'lease' })).id;
const send = (id: string, text: string) => app.services.controller.sendMessage(scope, id, text);
const types = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => e.type);
const session = async (id: string) => (await app.db.pool.query(`SELECT status, "leaseOwner", "leaseToken" FROM "Session" WHERE id = $1`, [id])).rows[0];

describe('leases', () => {
  it('a runner whose lease is taken over stops at once and writes nothing more; the turn is repaired once', async () => {
    const id = await create();
    app.turnUpdates.on(id, (u: TurnUpdate) => updates.push(u));
    await send(id, '!slow 150\none two three four five six seven eight nine ten eleven twelve');
    await waitFor(() => updates.some((u) => u.sessionId === id && u.kind === 'TEXT_DELTA'), { what: 'streaming' });
    const before = await types(id);
    expect(before.slice(-3)).toEqual(['inbox/remove', 'turn/start', 'step/start']);

    // Another process takes the session over: the lease expired as far as the database knows. This process's
    // heartbeat (every 500 ms here) renews a lease it still holds, expired or not, so on a loaded machine it may come
    // between the two statements: then the lease is expired again and claimed again.
    const other = new LeaseStore(app.db.pool, 'another-process', 60_000);
    let taken: Awaited<ReturnType<LeaseStore['claim']>> = null;
    await waitFor(
      async () => {
        await app.db.pool.query(`UPDATE "Session" SET "leaseExpiresAt" = now() - interval '1 second' WHERE id = $1`, [id]);
        taken = await other.claim(id);
        return taken !== null;
      },
      { what: 'the other process to take the expired lease' },
    );
    // The heartbeat finds the lease gone and stops the runner: no answer, no closers from it.
    await waitFor(() => !app.services.host.isRunningHere(id), { what: 'the runner to stop', timeoutMs: 5000 });
    await app.services.host.idle(); // its drive has ended: whatever it would write is written
    expect(await types(id)).toEqual(before);

    // A stale runner's append is refused by the fence, whatever it tries.
    await expect(
      app.services.store.append(id, [{ type: 'session/title', data: { title: 'stale' } }], { lease: { sessionId: id, token: taken!.token - 1 } }),
    ).rejects.toMatchObject({ code: 'SESSION_BUSY', details: { leaseLost: true } });

    // When the other holder goes away, this process takes the session back and repairs the turn, once.
    await other.release(taken!);
    app.services.host.claimMore();
    await waitFor(async () => (await types(id)).at(-1) === 'turn/end', { what: 'repair' });
    const after = (await app.services.store.log.page(id, -1, 1000)).slice(before.length);
    expect(after.map((e) => [e.type, anyData(e).reason ?? anyData(e).status, e.synthetic])).toEqual([
      ['step/end', 'interrupted', true],
      ['turn/end', 'interrupted', true],
    ]);
    await app.services.host.idle();
    expect(await session(id)).toMatchObject({ status: 'IDLE', leaseOwner: null });
  });

  it('runs at most its limit of sessions at once; the others wait for a slot and all are answered', async () => {
    const ids = await Promise.all(Array.from({ length: 8 }, create));
    let peak = 0;
    const watch = setInterval(() => (peak = Math.max(peak, app.services.host.active)), 5);
    try {
      await Promise.all(ids.map((id) => send(id, '!call sleep {"ms": 150}')));
      await waitFor(
        async () => {
          const { rows } = await app.db.pool.query(`SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1) AND "turnCount" = 1 AND status = 'IDLE'`, [
            ids,
          ]);
          return rows[0].n === ids.length;
        },
        { what: 'all eight turns', timeoutMs: 20_000 },
      );
    } finally {
      clearInterval(watch);
    }
    expect(peak).toBeLessThanOrEqual(3);
    expect(peak).toBeGreaterThan(0);
    for (const id of ids) expect((await types(id)).filter((t) => t === 'turn/end')).toHaveLength(1);
  });

  it('uses at most its pool of connections, whatever the number of running sessions', async () => {
    const ids = await Promise.all(Array.from({ length: 30 }, create));
    let peak = 0;
    const names = new Set<string>();
    const db = (await app.db.pool.query('SELECT current_database() AS d')).rows[0].d;
    const sampling = (async () => {
      const { default: pg } = await import('pg');
      const admin = new pg.Client({ connectionString: app.db.url });
      await admin.connect();
      try {
        for (let i = 0; i < 60; i++) {
          const { rows } = await admin.query(
            `SELECT count(*)::int AS n, array_agg(DISTINCT application_name) AS names FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
            [db],
          );
          peak = Math.max(peak, rows[0].n);
          for (const name of rows[0].names ?? []) names.add(name);
          await new Promise((r) => setTimeout(r, 20));
        }
      } finally {
        await admin.end();
      }
    })();
    await Promise.all(ids.map((id) => send(id, '!call clock')));
    await sampling;
    await app.services.host.idle();
    expect(peak).toBeLessThanOrEqual(4 + 1); // the pool and the LISTEN connection
    expect([...names]).toEqual(['forkline']); // how an operator tells them apart in pg_stat_activity
  });

  it("a runner's appends extend its lease, so a working runner does not depend on the heartbeat", async () => {
    const id = await create();
    const lease = await new LeaseStore(app.db.pool, 'a-runner', 1500).claim(id);
    expect(lease).toMatchObject({ ttlMs: 1500 });
    const expiry = async () => (await app.db.pool.query(`SELECT "leaseExpiresAt" - now() AS left FROM "Session" WHERE id = $1`, [id])).rows[0].left;
    await app.db.pool.query(`UPDATE "Session" SET "leaseExpiresAt" = now() + interval '100 milliseconds' WHERE id = $1`, [id]);
    await app.services.store.append(id, [{ type: 'session/title', data: { title: 'working' } }], { lease: lease! });
    const left = await expiry();
    expect(left.milliseconds + left.seconds * 1000).toBeGreaterThan(1000);
    // An append without a lease (a user's message) leaves the runner's lease as it was.
    await app.db.pool.query(`UPDATE "Session" SET "leaseExpiresAt" = now() + interval '5 seconds' WHERE id = $1`, [id]);
    await app.services.store.append(id, [{ type: 'session/title', data: { title: 'renamed' } }]);
    const unchanged = await expiry();
    expect(unchanged.seconds).toBeGreaterThanOrEqual(4);
  });

  it("a claim brings the session's lineage (a fork's inherited ranges), so the runner's first read needs no lookup", async () => {
    const parent = await create();
    await app.services.store.append(parent, [{ type: 'session/title', data: { title: 'parent' } }]);
    const { session: child } = await app.services.store.fork(scope, parent, 1);
    const claims = new LeaseStore(app.db.pool, 'a-claimer', 60_000);
    const lease = await claims.claim(child.id);
    expect(lease!.lineage).toEqual(await new SessionLog(app.db.pool).lineage(child.id));
    expect(lease!.lineage!.ranges).toEqual([{ sessionId: parent, fromSeq: 0, toSeq: 1 }]);
    await claims.release(lease!);
    // Batch claims too: queued input makes the fork runnable.
    await app.services.store.append(child.id, [{ type: 'inbox/add', data: { inputId: 'in_lineage', text: 'hi' } }]);
    const [batch] = await claims.claimRunnable(1_000).then((ls) => ls.filter((l) => l.sessionId === child.id));
    expect(batch.lineage).toEqual(lease!.lineage);
    await claims.release(batch);
  });
});
