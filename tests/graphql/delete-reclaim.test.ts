// Deletion in two steps (docs/contract.md#deletion): a deleted tree is gone
// from every read, search, fork and write at once; the events it wrote and the
// file contents only it stored are reclaimed after, a bounded chunk per
// transaction, with progress a caller reads (DeleteSessionPayload.deletion,
// Query.sessionDeletion). The state is in Postgres: a server stopped
// mid-reclaim leaves the rest to the next one, and when it is done no table
// holds a row of the tree.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';
import { waitFor } from '../helpers/wait.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';
import { sha256 } from '../../src/store/file-blobs.ts';

const WORD = 'question'; // in REFERENCE_LOG's inputs, not in the survivor's log
const PROGRESS = `sessionCount eventCount reclaimedEventCount remainingEventCount finished`;
const DELETE = `mutation($id: ID!, $key: String) { deleteSession(id: $id, withDescendants: true, idempotencyKey: $key) { deletedSessionIds deletion { ${PROGRESS} } } }`;
const DELETION = `query($id: ID!) { sessionDeletion(sessionId: $id) { ${PROGRESS} } }`;

let databaseUrl: string;
let first: TestApp | undefined;
let second: TestApp | undefined;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
});
afterAll(async () => {
  await first?.close();
  await second?.close();
});

/** Rows in every table of the database (what a finished reclaim must leave as it found it). */
async function rowsPerTable(app: TestApp): Promise<Record<string, number>> {
  const { rows: tables } = await app.db.pool.query<{ t: string }>(
    `SELECT table_name AS t FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> '_prisma_migrations' ORDER BY 1`,
  );
  const counts: Record<string, number> = {};
  for (const { t } of tables) counts[t] = (await app.db.pool.query(`SELECT count(*)::int AS n FROM "${t}"`)).rows[0].n;
  return counts;
}

/** Appends `n` events to a session, in batches. */
async function fill(app: TestApp, id: string, n: number) {
  for (let i = 0; i < n; i += 250)
    await app.services.store.append(
      id,
      Array.from({ length: Math.min(250, n - i) }, (_, k) => ({ type: 'plugin/test/own', data: { i: i + k } })),
    );
}

describe('deleting a tree of a few thousand events with small reclaim chunks', () => {
  it('is invisible at once, reclaims in chunks with visible progress, is finished by another server after the first stops, and orphans nothing', async () => {
    first = await startTestApp({ databaseUrl, reclaim: { chunkEvents: 100, pauseMs: 100 } });
    const app = first;
    // A survivor, before the baseline: its rows stay.
    const survivor = (await app.ok(`mutation { createSession(input: { title: "survivor" }) { id } }`)).createSession.id;
    await fill(app, survivor, 60);
    const survivorRecording = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: survivor })).session.recording;
    const baseline = await rowsPerTable(app);

    // root (1,500 events, a stored file) → 4 forks (300 own each) → one grandchild each (100 own).
    const root = (await app.ok(`mutation { createSession(input: { title: "doomed" }) { id } }`)).createSession.id;
    await app.services.store.append(root, REFERENCE_LOG);
    await fill(app, root, 1500);
    const content = Buffer.from('only the doomed tree stores this\n');
    const hash = sha256(content);
    await app.services.store.files.put(root, [{ hash, content }]);
    await app.services.store.append(root, fileCallEvents(3, [{ path: 'doomed.txt', hash, size: content.byteLength }]));
    const tree = [root];
    for (let f = 0; f < 4; f++) {
      const child = (await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: root })).forkSession.session.id;
      await fill(app, child, 300);
      const grandchild = (await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: child })).forkSession.session
        .id;
      await fill(app, grandchild, 100);
      tree.push(child, grandchild);
    }
    const own = (await app.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = ANY($1)`, [tree])).rows[0].n;
    expect(own).toBeGreaterThan(2900);
    expect((await app.db.pool.query(`SELECT count(*)::int AS n FROM "FileBlob" WHERE hash = $1`, [hash])).rows[0].n).toBe(1);
    const hits = async () =>
      (await app.ok(`query($q: String!) { searchSessions(query: $q, first: 50) { edges { node { session { id } } } } }`, { q: WORD })).searchSessions.edges;
    expect((await hits()).length).toBeGreaterThan(0);

    const r = await app.ok(DELETE, { id: root, key: 'delete-the-tree' });
    expect(new Set(r.deleteSession.deletedSessionIds)).toEqual(new Set(tree));
    // The answer: what is left to reclaim (it starts after the answer).
    expect(r.deleteSession.deletion).toMatchObject({ sessionCount: tree.length, eventCount: own, finished: false });
    expect(r.deleteSession.deletion.remainingEventCount).toBeGreaterThan(0);

    // Gone at once from every read, list, search, fork and write.
    for (const id of tree) {
      expect((await app.ok(`query($id: ID!) { session(id: $id) { id recording } node(id: $id) { id } }`, { id })).session).toBeNull();
      const fork = await app.gql(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id });
      expect(fork.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
      const send = await app.gql(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "x" }) { inputId } }`, { id });
      expect(send.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
    }
    const listed = (await app.ok(`{ sessions(first: 500) { edges { node { id } } } }`)).sessions.edges.map((e: any) => e.node.id);
    expect(listed).toEqual([survivor]);
    expect((await hits()).every((h: any) => h.node.session.id === survivor)).toBe(true);
    expect((await app.gql(`query($id: ID!) { session(id: $id) { file(path: "doomed.txt") { text } } }`, { id: root })).data?.session).toBeNull();

    // Progress moves, a chunk at a time.
    const progress = async (on: TestApp) => (await on.ok(DELETION, { id: root })).sessionDeletion;
    const moving = await waitFor(
      async () => {
        const p = await progress(app);
        return p.reclaimedEventCount > 0 && p.reclaimedEventCount < own ? p : undefined;
      },
      { what: 'reclaim under way' },
    );
    expect(moving.reclaimedEventCount + moving.remainingEventCount).toBe(own);
    expect(moving.finished).toBe(false);

    // The first server stops mid-reclaim: nothing reclaims what it left.
    await app.close();
    first = undefined;
    const state = async () =>
      (await second!.db.pool.query(`SELECT "reclaimedEventCount" AS n, "finishedAt" FROM "Deletion" WHERE "sessionId" = $1`, [root])).rows[0];
    second = await startTestApp({ databaseUrl, reclaim: { chunkEvents: 100, pauseMs: 100 } });
    const stoppedAt = (await state()).n;
    expect(stoppedAt).toBeLessThan(own);

    // Another server, started on the same database, finishes it.
    const done = await waitFor(
      async () => {
        const p = await progress(second!);
        return p.finished ? p : undefined;
      },
      { what: 'reclaim finished', timeoutMs: 120_000 },
    );
    expect(done).toEqual({ sessionCount: tree.length, eventCount: own, reclaimedEventCount: own, remainingEventCount: 0, finished: true });

    // No orphans: every table as before the tree, but the finished deletion's record and the idempotency key (both pruned after a day).
    expect(await rowsPerTable(second)).toEqual({ ...baseline, Deletion: baseline.Deletion + 1, IdempotencyKey: baseline.IdempotencyKey + 1 });
    expect((await second.db.pool.query(`SELECT count(*)::int AS n FROM "FileBlob" WHERE hash = $1`, [hash])).rows[0].n).toBe(0);
    expect((await second.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: survivor })).session.recording).toBe(survivorRecording);
    // A retry with the key answers as the first call did, progress included.
    const again = await second.ok(DELETE, { id: root, key: 'delete-the-tree' });
    expect(again.deleteSession.deletion).toMatchObject({ eventCount: own, finished: true });
  }, 300_000);

  it('a deletion another server is reclaiming (its row locked) is skipped, not reclaimed twice', async () => {
    const app = second!;
    const root = (await app.ok(`mutation { createSession(input: { title: "locked" }) { id } }`)).createSession.id;
    await fill(app, root, 400);
    const written = (await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1`, [root])).rows[0].n;
    // Hold the deletion's row as a reclaiming server does (waiting for a chunk in progress to end).
    const holder = await app.db.pool.connect();
    try {
      await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: root });
      await holder.query('BEGIN');
      const held = await holder.query(`SELECT id FROM "Deletion" WHERE "sessionId" = $1 AND "finishedAt" IS NULL FOR UPDATE`, [root]);
      expect(held.rowCount).toBe(1);
      const before = (await app.ok(DELETION, { id: root })).sessionDeletion.reclaimedEventCount;
      app.reclaimer.wake();
      await app.reclaimer.idle();
      expect((await app.ok(DELETION, { id: root })).sessionDeletion.reclaimedEventCount).toBe(before);
      // A session of the same id (a derived one: the chat door's) is not made among the old one's events until they are gone.
      await expect(app.services.store.createSession({ tenant: 'local' }, { title: 'again' }, { id: root })).rejects.toMatchObject({ code: 'SESSION_BUSY' });
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
    }
    app.reclaimer.wake();
    await waitFor(async () => (await app.ok(DELETION, { id: root })).sessionDeletion.finished, { what: 'finished once released' });
    expect((await app.ok(DELETION, { id: root })).sessionDeletion).toMatchObject({ eventCount: written, reclaimedEventCount: written, remainingEventCount: 0 });
    expect((await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1`, [root])).rows[0].n).toBe(0);
    expect((await app.services.store.createSession({ tenant: 'local' }, { title: 'again' }, { id: root })).eventCount).toBe(1);
  }, 120_000);
});
