// The lease heartbeat (store/leases.ts renew, SessionHost.heartbeat) keeps a
// live process's leases while its pool is busy and while other statements hold
// some of its sessions' rows: a lease lapses only when its holder stops renewing
// (docs/contract.md#crash-recovery), not because request traffic took every
// pool connection or an append held one row longer than the lease lasts.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

// Long enough that a loaded host's pauses (a second or so) do not lapse it; the old heartbeat lost it at any length.
const TTL_MS = 2500;
let app: TestApp;
/** Another process's connections: its claims, and the statements holding rows and connections here. */
let other: pg.Pool;
const scope = { tenant: 'local' };

beforeAll(async () => {
  app = await startTestApp({ leaseTtlMs: TTL_MS, poolMax: 2 });
  other = new pg.Pool({ ...pgConfigFromUrl(app.db.url), max: 4 });
});
afterAll(async () => {
  await other?.end();
  await app?.close();
});

/** A session whose turn is inside a tool call that lasts `ms`, run here under this process's lease. */
async function inToolCall(ms: number): Promise<string> {
  const { id } = await app.services.store.createSession(scope, { title: 'heartbeat' });
  await app.services.controller.sendMessage(scope, id, `!call sleep {"ms": ${ms}}`);
  await waitFor(async () => (await app.services.store.log.page(id, -1, 100)).some((e) => e.type === 'model/message'), { what: 'the tool call' });
  return id;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Another process tries to take `id` over, again and again, for `lifetimes` lease lifetimes; whether it took it. */
async function tryTakeover(id: string, lifetimes: number): Promise<boolean> {
  const rival = new LeaseStore(other, 'another-process', 60_000);
  const until = Date.now() + lifetimes * TTL_MS;
  while (Date.now() < until) {
    const taken = await rival.claim(id);
    if (taken) return true;
    await sleep(100);
  }
  return false;
}

const turnEnds = async (id: string) =>
  (await app.services.store.log.page(id, -1, 100)).filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason);

describe('the lease heartbeat', () => {
  it('keeps the lease while every pool connection is taken for longer than the lease lasts', async () => {
    const id = await inToolCall(3 * TTL_MS + 3000);
    // Request traffic holds the whole pool: the heartbeat's renewal must not wait behind it.
    const busy = await Promise.all([app.db.pool.connect(), app.db.pool.connect()]);
    let taken: boolean;
    try {
      taken = await tryTakeover(id, 3);
    } finally {
      for (const c of busy) c.release();
    }
    expect(taken).toBe(false);
    await waitFor(async () => (await turnEnds(id)).length === 1, { what: 'the turn to end', timeoutMs: 20_000 });
    expect(await turnEnds(id)).toEqual(['completed']);
  });

  it("one session's row locked for longer than the lease lasts does not cost the process's other sessions their leases", async () => {
    const sessions = [await inToolCall(4 * TTL_MS + 3000), await inToolCall(4 * TTL_MS + 3000)];
    // The locked row first in byte order, as a renewal that locks its rows in order meets them: before, it waited
    // there for as long as the row stayed locked, with `free` not renewed.
    const [locked, free] = sessions.sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    // An append (of this process or another) holding `locked`'s row for three lease lifetimes, while
    // another process tries to take `free` over (a while longer: a renewal let through late renews to a past time).
    const holder = await other.connect();
    const held = (async () => {
      try {
        await holder.query('BEGIN');
        await holder.query(`SELECT 1 FROM "Session" WHERE id = $1 FOR NO KEY UPDATE`, [locked]);
        await sleep(3 * TTL_MS);
      } finally {
        await holder.query('ROLLBACK').catch(() => {});
        holder.release();
      }
    })();
    const taken = await tryTakeover(free, 4);
    await held;
    expect(taken).toBe(false);
    await waitFor(async () => (await turnEnds(free)).length === 1, { what: 'the turn to end', timeoutMs: 20_000 });
    expect(await turnEnds(free)).toEqual(['completed']);
  });
});
