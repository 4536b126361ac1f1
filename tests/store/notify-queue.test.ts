// When appends notify (store/notify-queue.ts, append-batcher.ts): an append
// statement sent beside others of the process carries no NOTIFY (its commit
// would take Postgres's notification lock and hold it through the WAL flush,
// one committer at a time); its notification follows the commit, batched with
// others, in order, retried when the database refuses it. A statement alone in
// flight notifies from within (no second round trip), and an append inside a
// transaction at that transaction's commit, not at all when it rolls back.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { EVENTS_CHANNEL } from '../../src/store/channels.ts';
import { NotifyQueue } from '../../src/store/notify-queue.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { waitFor } from '../helpers/wait.ts';

const scope = { tenant: 'local' };
let url: string;
let db: Database;
let store: SessionStore;
let listener: pg.Client;
let reader: pg.Client;
/** Statements the store sent, by text. */
const sent: string[] = [];
/** EVENTS_CHANNEL payloads received, each with whether its last event was readable when it arrived. */
const received: Array<{ s: string; last: number; visible?: boolean }> = [];
let checkVisibility = false;

beforeAll(async () => {
  url = await createTestDatabase();
  db = openDatabase(url, { max: 4 }); // two append statements in flight at most
  const query = db.pool.query.bind(db.pool) as (...a: unknown[]) => unknown;
  (db.pool as { query: unknown }).query = (...a: unknown[]) => {
    const c = a[0] as string | { text: string };
    sent.push(typeof c === 'string' ? c : c.text);
    return query(...a);
  };
  store = new SessionStore(db.pool, toolEffectOf);
  listener = new pg.Client(pgConfigFromUrl(url));
  await listener.connect();
  reader = new pg.Client(pgConfigFromUrl(url));
  await reader.connect();
  listener.on('notification', (n) => {
    const msg = JSON.parse(n.payload!) as { s: string; last: number };
    const entry: (typeof received)[number] = { ...msg };
    received.push(entry);
    if (checkVisibility) {
      void reader.query('SELECT 1 FROM "Event" WHERE "sessionId" = $1 AND seq = $2', [msg.s, msg.last]).then((r) => (entry.visible = r.rowCount === 1));
    }
  });
  await listener.query(`LISTEN ${EVENTS_CHANNEL}`);
});
afterAll(async () => {
  await listener.end();
  await reader.end();
  await db.close();
});

const note = (i: number) => ({ type: 'plugin/test/note', data: { i } });
const lastNotified = (id: string) => Math.max(-1, ...received.filter((r) => r.s === id).map((r) => r.last));

describe('notifications after the commit', () => {
  it('an append alone in flight notifies from its own statement: one round trip', async () => {
    const id = (await store.createSession(scope, {})).id;
    await store.append(id, [note(0)]); // the store now knows the end of its log: the next append reads nothing first
    await store.notifications.drain();
    sent.length = 0;
    const events = await store.append(id, [note(1), note(2)]);
    await store.notifications.drain();
    expect(sent).toHaveLength(1);
    expect(sent[0]).toContain('INSERT INTO "Event"');
    expect(sent[0]).toContain('pg_notify');
    await waitFor(() => lastNotified(id) === events[1].seq);
  });

  it('appends sent beside others carry no NOTIFY: theirs follow the commit, together, each session its last seq', async () => {
    const ids = await Promise.all(Array.from({ length: 12 }, async () => (await store.createSession(scope, {})).id));
    await Promise.all(ids.map((id) => store.append(id, [note(0)])));
    await store.notifications.drain();
    sent.length = 0;
    checkVisibility = true;
    await Promise.all(
      ids.map((id, i) =>
        store.append(
          id,
          Array.from({ length: 1 + (i % 3) }, (_, j) => note(j)),
        ),
      ),
    );
    await store.notifications.drain();
    const appends = sent.filter((t) => t.includes('INSERT INTO "Event"'));
    const queued = sent.filter((t) => /^SELECT pg_notify\(n->>0, n->>1\) FROM json_array_elements/.test(t));
    // The first statement went alone and notified itself; the next went while it ran, and did not.
    expect(appends[0]).toContain('pg_notify');
    expect(appends.filter((t) => !t.includes('pg_notify')).length).toBeGreaterThan(0);
    expect(queued.length).toBeGreaterThan(0);
    expect(queued.length).toBeLessThan(ids.length - 1); // batched
    await waitFor(() => ids.every((id, i) => lastNotified(id) === 1 + (i % 3)));
    await waitFor(() => received.filter((r) => ids.includes(r.s) && r.last > 0).every((r) => r.visible !== undefined));
    // When each arrived, what it announces was already committed.
    expect(received.filter((r) => ids.includes(r.s) && r.last > 0).every((r) => r.visible)).toBe(true);
    checkVisibility = false;
  });

  it('an append inside a transaction notifies at its commit, and not at all when it rolls back', async () => {
    const kept = (await store.createSession(scope, {})).id;
    const undone = (await store.createSession(scope, {})).id;
    await store.notifications.drain();
    await expect(
      store.transaction(async (client) => {
        await store.append(undone, [note(0)], { client });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    await store.transaction(async (client) => {
      await store.append(kept, [note(0), note(1)], { client });
    });
    await waitFor(() => lastNotified(kept) === 1);
    // The LISTEN connection delivers in commit order: nothing of the rolled-back one came before it, or will.
    expect(lastNotified(undone)).toBe(-1);
  });

  it('the queued NOTIFY is a prepared statement: not parsed and planned again for each batch (unless prepared statements are off)', async () => {
    for (const prepare of [true, false]) {
      const pool = new pg.Pool({ ...pgConfigFromUrl(url), max: 1 }); // one connection: the one that sent them
      const queue = new NotifyQueue(pool, undefined, prepare);
      const id = `ses_notify_prepared_${prepare}`;
      await queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 0 }));
      await queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 1 }));
      await waitFor(() => lastNotified(id) === 1);
      const { rows } = await pool.query<{ statement: string }>('SELECT statement FROM pg_prepared_statements');
      expect(rows.some((r) => r.statement.includes('pg_notify'))).toBe(prepare);
      await pool.end();
    }
  });

  it('a notification the database refused is sent again, in order with later ones', async () => {
    const pool = new pg.Pool({ ...pgConfigFromUrl(url), max: 1 });
    let refusals = 1;
    const flaky = new Proxy(pool, {
      get(p, key) {
        if (key !== 'query') return Reflect.get(p, key, p);
        return (...a: unknown[]) => {
          if (refusals > 0) {
            refusals--;
            return Promise.reject(Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' }));
          }
          return (p.query as (...x: unknown[]) => unknown)(...a);
        };
      },
    });
    const logged: string[] = [];
    const queue = new NotifyQueue(flaky, (m) => logged.push(m));
    const id = 'ses_notify_retry';
    const first = queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 1 }));
    await Promise.resolve();
    await Promise.resolve(); // the first batch is on its way (and refused)
    const second = queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 2 }));
    await Promise.all([first, second]);
    await waitFor(() => lastNotified(id) === 2);
    expect(received.filter((r) => r.s === id).map((r) => r.last)).toEqual([1, 2]);
    expect(logged).toEqual([]); // retried, not dropped
    await pool.end();
  });

  it('a payload Postgres would refuse (8,000 bytes or more) is dropped alone, at once: the others of its batch are sent', async () => {
    const logged: string[] = [];
    const queue = new NotifyQueue(db.pool, (m) => logged.push(m));
    const id = 'ses_notify_oversized';
    const posted = [
      queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 1 })),
      queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 2, pad: '\u0001'.repeat(1400) })), // 8,446 bytes as JSON text
      queue.post(EVENTS_CHANNEL, JSON.stringify({ s: id, last: 3 })),
    ];
    await Promise.all(posted);
    await waitFor(() => lastNotified(id) === 3);
    expect(received.filter((r) => r.s === id).map((r) => r.last)).toEqual([1, 3]);
    expect(logged).toEqual([`dropped a notification on ${EVENTS_CHANNEL} of 8446 bytes: Postgres takes under 8000`]);
  });

  it('closing sends what is queued with one attempt, not waiting to retry (shutdown has a deadline)', async () => {
    // A database nobody listens on: every attempt is refused.
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, user: 'nobody', database: 'none', max: 1 });
    let attempts = 0;
    const query = pool.query.bind(pool) as (...a: unknown[]) => unknown;
    (pool as { query: unknown }).query = (...a: unknown[]) => (attempts++, query(...a));
    const down = pool;
    const logged: string[] = [];
    const queue = new NotifyQueue(down, (m) => logged.push(m));
    void queue.post(EVENTS_CHANNEL, JSON.stringify({ s: 'ses_notify_close', last: 0 }));
    await queue.close();
    expect(attempts).toBe(1);
    expect(logged).toEqual([expect.stringMatching(/^dropped 1 notifications/)]);
    await pool.end();
  });
});
