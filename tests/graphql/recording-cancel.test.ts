// An import cancelled while it commits (docs/getting-started.md, POST
// /recordings): the uploader that went is told nothing, so nothing may be kept
// — not even a session whose COMMIT was already on its way when the client
// went. The race is driven, not waited for: a deferred trigger the test adds
// holds every commit of a new session on an advisory lock the test holds, the
// client goes while the import's COMMIT waits there, then the lock is let go.
import http from 'node:http';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
const LOCK = 4242;

beforeAll(async () => {
  app = await startTestApp();
  // Runs at COMMIT (deferred), after the import's last look at its signal.
  await app.db.pool.query(`CREATE FUNCTION test_hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN PERFORM pg_advisory_xact_lock_shared(${LOCK}); RETURN NULL; END $$`);
  await app.db.pool.query(`CREATE CONSTRAINT TRIGGER test_hold_commit AFTER INSERT ON "Session" DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION test_hold_commit()`);
});
afterAll(() => app?.close());

const RECORDING =
  [
    { format: 'forkline.recording', version: 4, session: { id: 'ses_cancelled', title: 'cancelled at commit' } },
    { seq: 0, type: 'session/title', data: { title: 'cancelled at commit' } },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';

const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
const keyCount = async (key: string) =>
  (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "IdempotencyKey" WHERE key = $1', [key])).rows[0].n;

/**
 * Holds every new session's COMMIT until `release()`; `commitWaiting()` resolves
 * once one waits. `release()` returns once the held transaction has ended (its
 * transaction-level lock is gone): before that, "no session" could be a commit
 * not yet made rather than a discard done.
 */
async function holdCommits(): Promise<{ commitWaiting(): Promise<void>; release(): Promise<void> }> {
  const holder: pg.PoolClient = await app.db.pool.connect();
  await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
  return {
    async commitWaiting() {
      const waiting = async () =>
        (await app.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND NOT granted`, [LOCK]))
          .rows[0].n;
      await expect.poll(waiting, { timeout: 15_000, interval: 20 }).toBe(1);
    },
    async release() {
      await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
      holder.release();
      const locks = async () =>
        (await app.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1`, [LOCK])).rows[0].n;
      await expect.poll(locks, { timeout: 15_000, interval: 20 }).toBe(0);
    },
  };
}

describe('an import cancelled while it commits', () => {
  it('is rejected with the cancel and keeps nothing; its idempotency key imports anew', async () => {
    const before = await sessionCount();
    const key = 'cancelled-at-commit';
    const held = await holdCommits();
    const gone = new AbortController();
    const outcome = app.services.controller.importRecording({ tenant: 'local' }, RECORDING, { key }, { signal: gone.signal }).then(
      (s) => `kept ${s.id}`,
      (err: Error) => err.message,
    );
    await held.commitWaiting();
    gone.abort(new Error('the client closed the upload'));
    await held.release();
    expect(await outcome).toBe('the client closed the upload');
    expect(await sessionCount()).toBe(before);
    expect(await keyCount(key)).toBe(0);
    // A retry with the key is not answered with a session that is gone: it imports.
    const again = await app.services.controller.importRecording({ tenant: 'local' }, RECORDING, { key });
    expect(again).toMatchObject({ title: 'cancelled at commit', eventCount: 1 });
    expect(await sessionCount()).toBe(before + 1);
  });

  it('through POST /recordings: the client that went leaves no session behind', async () => {
    const before = await sessionCount();
    const key = 'upload-cancelled-at-commit';
    const held = await holdCommits();
    // The server's side of the request closing: what the upload door listens to.
    const serverSawClose = new Promise<void>((resolve) =>
      app.server.httpServer.on('request', (req, res) => {
        if (req.url === '/recordings') res.once('close', () => resolve());
      }),
    );
    const req = http.request(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      agent: false,
      headers: { 'content-type': 'application/x-ndjson', 'idempotency-key': key, 'content-length': String(Buffer.byteLength(RECORDING)) },
    });
    req.on('error', () => {}); // destroyed on purpose
    const answered = new Promise<number>((resolve) => req.on('response', (res) => resolve(res.statusCode ?? 0)));
    req.end(RECORDING);
    await held.commitWaiting();
    req.destroy();
    await serverSawClose;
    await held.release();
    await expect.poll(async () => ({ sessions: await sessionCount(), keys: await keyCount(key) }), { timeout: 15_000 }).toEqual({ sessions: before, keys: 0 });
    // Still nothing a moment later (the discard is done, not pending), and no answer reached the client.
    expect(await Promise.race([answered, Promise.resolve('none')])).toBe('none');
    expect(await sessionCount()).toBe(before);
  });
});
